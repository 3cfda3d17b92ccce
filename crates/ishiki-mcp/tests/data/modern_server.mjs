// A server of the official TypeScript SDK v2 (`@modelcontextprotocol/server`, pinned by the
// tests), served by `serveStdio`, which speaks both revisions: `initialize` (2025-11-25) and
// the stateless `server/discover` (2026-07-28). `echo` answers with its text; `grow` adds the
// tool `late`, which the server announces as a tool list change.
// MODERN_ONLY_2026=1 makes it refuse `initialize`: it then speaks only the 2026-07-28 revision.
// MODERN_DROPPABLE=1 adds `drop-listen`, which ends the client's latest `subscriptions/listen`
// stream as the SDK ends one when it closes (a `complete` result carrying the subscription
// id), while the server goes on: the client has to open a new stream to hear of changes again.
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

let grown = false;
// The id of the latest listen request, read from what the server writes: the SDK keeps its
// subscriptions to itself, so the stream is ended here, on the wire.
const SUBSCRIPTION = 'io.modelcontextprotocol/subscriptionId';
let listening;
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
  for (const line of String(chunk).split('\n')) {
    try {
      const message = JSON.parse(line);
      if (message.method === 'notifications/subscriptions/acknowledged') listening = message.params._meta[SUBSCRIPTION];
    } catch {}
  }
  return write(chunk, ...rest);
};
serveStdio(() => {
  // MODERN_TTL_MS: the cache hint its `tools/list` answers carry (2026-07-28 only).
  const ttl = process.env.MODERN_TTL_MS;
  const cacheHints = ttl ? { 'tools/list': { ttlMs: Number(ttl), cacheScope: 'private' } } : undefined;
  const server = new McpServer({ name: 'modern', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } }, cacheHints });
  server.registerTool('echo', { description: 'Echoes its text', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text: `echo ${text}` }] }));
  server.registerTool('grow', { description: 'Adds the tool late' }, async () => {
    if (!grown) {
      grown = true;
      server.registerTool('late', { description: 'Added later' }, async () => ({ content: [{ type: 'text', text: 'late' }] }));
    }
    return { content: [{ type: 'text', text: 'grown' }] };
  });
  if (process.env.MODERN_DROPPABLE) server.registerTool('drop-listen', { description: 'Ends the listen stream' }, async () => {
    if (listening !== undefined) {
      write(JSON.stringify({ jsonrpc: '2.0', id: listening, result: { resultType: 'complete', _meta: { [SUBSCRIPTION]: listening } } }) + '\n');
    }
    return { content: [{ type: 'text', text: listening === undefined ? 'no stream' : 'dropped' }] };
  });
  return server;
}, { legacy: process.env.MODERN_ONLY_2026 ? 'reject' : 'serve' });
