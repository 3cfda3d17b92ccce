// Runs list.js for every installed package with its bin, a bounded time, and dummy env.
const fs = require('fs'), path = require('path'), { spawnSync } = require('child_process');
const servers = [
  ['filesystem', '@modelcontextprotocol/server-filesystem', ['/tmp/mcpcorpus/ws'], {}],
  ['memory', '@modelcontextprotocol/server-memory', [], {MEMORY_FILE_PATH: '/tmp/mcpcorpus/mem.json'}],
  ['everything', '@modelcontextprotocol/server-everything', ['stdio'], {}],
  ['sequentialthinking', '@modelcontextprotocol/server-sequential-thinking', [], {}],
  ['github', '@modelcontextprotocol/server-github', [], {GITHUB_PERSONAL_ACCESS_TOKEN: 'dummy'}],
  ['gitlab', '@modelcontextprotocol/server-gitlab', [], {GITLAB_PERSONAL_ACCESS_TOKEN: 'dummy', GITLAB_API_URL: 'http://127.0.0.1:9/api/v4'}],
  ['slack', '@modelcontextprotocol/server-slack', [], {SLACK_BOT_TOKEN: 'dummy', SLACK_TEAM_ID: 'T0'}],
  ['maps', '@modelcontextprotocol/server-google-maps', [], {GOOGLE_MAPS_API_KEY: 'dummy'}],
  ['brave', '@modelcontextprotocol/server-brave-search', [], {BRAVE_API_KEY: 'dummy'}],
  ['puppeteer', '@modelcontextprotocol/server-puppeteer', [], {}],
  ['redis', '@modelcontextprotocol/server-redis', ['redis://127.0.0.1:9'], {}],
  ['postgres', '@modelcontextprotocol/server-postgres', ['postgresql://127.0.0.1:9/x'], {}],
  ['everart', '@modelcontextprotocol/server-everart', [], {EVERART_API_KEY: 'dummy'}],
  ['awskb', '@modelcontextprotocol/server-aws-kb-retrieval', [], {AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x', AWS_REGION: 'us-east-1'}],
  ['gdrive', '@modelcontextprotocol/server-gdrive', [], {}],
  ['playwright', '@playwright/mcp', [], {}],
  ['desktop', '@wonderwhy-er/desktop-commander', [], {}],
  ['kubernetes', 'mcp-server-kubernetes', [], {}],
  ['notion', '@notionhq/notion-mcp-server', [], {NOTION_TOKEN: 'dummy'}],
  ['chromedevtools', 'chrome-devtools-mcp', [], {}],
  ['mongodb', 'mongodb-mcp-server', [], {MDB_MCP_TELEMETRY: 'disabled', DO_NOT_TRACK: '1'}],
  ['firecrawl', 'firecrawl-mcp', [], {FIRECRAWL_API_KEY: 'fc-dummy'}],
  ['context7', '@upstash/context7-mcp', [], {}],
  ['tavily', 'tavily-mcp', [], {TAVILY_API_KEY: 'tvly-dummy'}],
  ['eaplaywright', '@executeautomation/playwright-mcp-server', [], {}],
  ['azuredevops', '@azure-devops/mcp', ['contoso'], {}],
  ['taskmanager', '@kazuph/mcp-taskmanager', [], {TASK_MANAGER_FILE_PATH: '/tmp/mcpcorpus/tasks.json'}],
  ['heroku', '@heroku/mcp-server', [], {HEROKU_API_KEY: 'dummy'}],
  ['sentry', '@sentry/mcp-server', ['--access-token=dummy'], {SENTRY_ACCESS_TOKEN: 'dummy'}],
  ['hubspot', '@hubspot/mcp-server', [], {PRIVATE_APP_ACCESS_TOKEN: 'dummy'}],
  ['supabase', '@supabase/mcp-server-supabase', ['--access-token=dummy'], {SUPABASE_ACCESS_TOKEN: 'dummy'}],
  ['browsermcp', '@browsermcp/mcp', [], {}],
  ['linear', 'mcp-server-linear', [], {LINEAR_API_KEY: 'dummy', LINEAR_ACCESS_TOKEN: 'dummy'}],
];
const only = process.argv.slice(2);
fs.mkdirSync('/tmp/mcpcorpus/ws', { recursive: true });
fs.mkdirSync('/tmp/mcpcorpus/out', { recursive: true });
for (const [short, pkg, args, env] of servers) {
  if (only.length && !only.includes(short)) continue;
  const dir = '/tmp/mcpcorpus/pkg/' + pkg.replace(/[\/@]/g, '_');
  const pdir = path.join(dir, 'node_modules', pkg);
  let pj; try { pj = JSON.parse(fs.readFileSync(path.join(pdir, 'package.json'))); } catch { console.log(short, 'NOT INSTALLED'); continue; }
  let bin = pj.bin; if (typeof bin === 'object') bin = Object.values(bin)[0];
  if (!bin) { console.log(short, 'NO BIN'); continue; }
  const r = spawnSync('node', ['/tmp/mcpcorpus/list.js', '30000', '--', 'node', path.join(pdir, bin), ...args],
    { env: { ...process.env, ...env, HOME: '/tmp/mcpcorpus/home', NO_PROXY: '*', LIST_CWD: '/tmp/mcpcorpus/ws' }, maxBuffer: 64 << 20, timeout: 40000 });
  if (r.status !== 0) { console.log(short, 'FAIL', r.status, String(r.stderr).slice(-600)); continue; }
  const out = JSON.parse(r.stdout);
  out.package = pkg; out.version = pj.version; out.server = short;
  fs.writeFileSync(`/tmp/mcpcorpus/out/${short}.json`, JSON.stringify(out, null, 1));
  console.log(short, pj.version, out.tools.length, 'tools');
}
