// A tiny MCP server over Streamable HTTP (POST /mcp; no GET stream) for failure tests.
// Usage: node fake_http_server.js PORT [TOKEN]
//   PORT 0 picks a free port; the server prints `listening PORT` on stdout once it listens.
//   TOKEN, when given, is the bearer token every request must carry (else 401, whose body
//   repeats the Authorization header it got, as a careless server would).
// Tools:
//   ping     answers `pong` as plain JSON
//   headers  answers the value of the `x-trace` header it got
//   split    answers `pong` as an SSE stream written a few bytes at a time (split frames)
//   huge     answers an SSE event whose one data line is 17 MiB (over the client's limit)
//   endless  answers an SSE stream of progress notifications that never ends, and no reply
//   leak     fails with a JSON-RPC error whose message repeats the Authorization header
// Node only, no packages, so the tests need nothing but `node`.
"use strict";
const http = require("http");

const port = Number(process.argv[2] || 0);
const token = process.argv[3];
const object = { type: "object", properties: {} };
const tools = ["ping", "headers", "split", "huge", "endless", "leak"].map((name) => ({
  name,
  description: `The ${name} tool.`,
  inputSchema: object,
}));
const text = (t) => ({ content: [{ type: "text", text: t }] });

function json(res, status, body, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function sse(res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function call(req, res, message) {
  const name = message.params && message.params.name;
  const reply = (result) => ({ jsonrpc: "2.0", id: message.id, result });
  switch (name) {
    case "ping":
      return json(res, 200, reply(text("pong")));
    case "headers":
      return json(res, 200, reply(text(String(req.headers["x-trace"]))));
    case "split": {
      sse(res);
      const frame = `event: message\ndata: ${JSON.stringify(reply(text("pong")))}\n\n`;
      for (let i = 0; i < frame.length; i += 7) {
        res.write(frame.slice(i, i + 7));
        await sleep(2);
      }
      return res.end();
    }
    case "huge": {
      sse(res);
      res.write("event: message\ndata: ");
      const chunk = "x".repeat(1024 * 1024);
      for (let i = 0; i < 17 && !res.destroyed; i++) {
        res.write(chunk);
        await sleep(1);
      }
      return res.end("\n\n");
    }
    case "endless": {
      sse(res);
      let n = 0;
      while (!res.destroyed) {
        const note = { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: `tick ${n++}` } };
        res.write(`event: message\ndata: ${JSON.stringify(note)}\n\n`);
        await sleep(5);
      }
      return;
    }
    case "leak":
      return json(res, 200, {
        jsonrpc: "2.0",
        id: message.id,
        error: { code: -32000, message: `denied for ${req.headers["authorization"]}` },
      });
    default:
      return json(res, 200, { jsonrpc: "2.0", id: message.id, error: { code: -32602, message: `unknown tool ${name}` } });
  }
}

const server = http.createServer((req, res) => {
  if (token !== undefined && req.headers["authorization"] !== `Bearer ${token}`) {
    return json(res, 401, { error: `unauthorized: ${req.headers["authorization"]}` });
  }
  if (req.method !== "POST") {
    res.writeHead(405);
    return res.end();
  }
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    let message;
    try {
      message = JSON.parse(body);
    } catch (e) {
      return json(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "parse error" } });
    }
    if (message.id === undefined) {
      res.writeHead(202);
      return res.end();
    }
    const reply = (result) => json(res, 200, { jsonrpc: "2.0", id: message.id, result }, { "mcp-session-id": "s1" });
    switch (message.method) {
      case "initialize":
        return reply({
          protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "fake-http", version: "1.0.0" },
        });
      case "tools/list":
        return reply({ tools });
      case "tools/call":
        return call(req, res, message);
      default:
        return json(res, 200, { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } });
    }
  });
});
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
