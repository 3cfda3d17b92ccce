// Lists an MCP server's tools over stdio with raw JSON-RPC (initialize, initialized, tools/list
// with pagination). Usage: node list.js TIMEOUT_MS -- command args...
const { spawn } = require('child_process');
const timeout = Number(process.argv[2]);
const [cmd, ...args] = process.argv.slice(4);
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env: process.env, cwd: process.env.LIST_CWD || process.cwd() });
let buf = '', id = 0, pending = {}, tools = [], serverInfo = null, stderr = '';
child.stderr.on('data', d => { stderr += d; if (stderr.length > 20000) stderr = stderr.slice(-20000); });
child.stdout.on('data', d => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i).trim(); buf = buf.slice(i + 1);
    if (!line) continue;
    let msg; try { msg = JSON.parse(line); } catch { continue; }
    if (msg.id !== undefined && pending[msg.id]) { pending[msg.id](msg); delete pending[msg.id]; }
  }
});
function req(method, params) {
  const myId = ++id;
  return new Promise(res => { pending[myId] = res; child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: myId, method, params }) + '\n'); });
}
const timer = setTimeout(() => { console.error('timeout; stderr:\n' + stderr); child.kill('SIGKILL'); process.exit(3); }, timeout);
child.on('exit', c => { console.error('server exited ' + c + '; stderr:\n' + stderr.slice(-3000)); process.exit(4); });
(async () => {
  const init = await req('initialize', { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'ishiki-corpus', version: '0' } });
  if (init.error) { console.error(JSON.stringify(init.error)); process.exit(5); }
  serverInfo = init.result.serverInfo;
  child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  let cursor;
  do {
    const r = await req('tools/list', cursor ? { cursor } : {});
    if (r.error) { console.error(JSON.stringify(r.error)); process.exit(6); }
    tools.push(...r.result.tools);
    cursor = r.result.nextCursor;
  } while (cursor);
  clearTimeout(timer);
  process.stdout.write(JSON.stringify({ serverInfo, tools }, null, 1));
  child.removeAllListeners('exit'); child.kill('SIGKILL'); process.exit(0);
})();
