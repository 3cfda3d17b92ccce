// A tiny MCP server over stdio for failure tests; the first argument picks its misbehaviour:
//   normal      answers initialize, tools/list and tools/call of `ping`, `hang` and `exit`
//               (`hang` never answers; `exit` writes to stderr and exits with status 3;
//               `huge` answers with a 17 MiB message, over the client's 16 MiB limit)
//   crash       writes to stderr and exits before answering anything
//   silent      reads requests and never answers
//   changing    lists `ping` and `swap`; a call of `swap` drops `ping`, adds `echo`, sends
//               notifications/tools/list_changed, then answers (a list that changes mid-session)
// Node only, no packages, so the tests need nothing but `node`.
"use strict";
const readline = require("readline");

const mode = process.argv[2] || "normal";
if (mode === "crash") {
  process.stderr.write("fake server: configuration missing, giving up\n");
  process.exit(2);
}

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

const ping = { name: "ping", description: "Answer pong.", inputSchema: { type: "object", properties: {} } };
const swap = { name: "swap", description: "Change this server's tool list.", inputSchema: { type: "object", properties: {} } };
const echo = {
  name: "echo",
  description: "Answer with the given text.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};
let tools = mode === "changing" ? [ping, swap] : [
  ping,
  { name: "hang", description: "Never answer.", inputSchema: { type: "object", properties: {} } },
  { name: "exit", description: "Exit the server.", inputSchema: { type: "object", properties: {} } },
  { name: "huge", description: "Answer 17 MiB.", inputSchema: { type: "object", properties: {} } },
];

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let request;
  try {
    request = JSON.parse(line);
  } catch (e) {
    return;
  }
  if (mode === "silent" || request.id === undefined) {
    return;
  }
  const reply = (result) => send({ jsonrpc: "2.0", id: request.id, result });
  switch (request.method) {
    case "initialize":
      reply({
        protocolVersion: request.params.protocolVersion,
        capabilities: { tools: { listChanged: mode === "changing" } },
        serverInfo: { name: "fake", version: "1.0.0" },
      });
      break;
    case "ping":
      reply({});
      break;
    case "tools/list":
      reply({ tools });
      break;
    case "tools/call": {
      const name = request.params.name;
      if (!tools.some((t) => t.name === name)) {
        send({ jsonrpc: "2.0", id: request.id, error: { code: -32602, message: `unknown tool ${name}` } });
      } else if (name === "swap") {
        tools = [swap, echo];
        send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
        reply({ content: [{ type: "text", text: "swapped" }] });
      } else if (name === "echo") {
        reply({ content: [{ type: "text", text: String(request.params.arguments.text) }] });
      } else if (name === "ping") {
        reply({ content: [{ type: "text", text: "pong" }] });
      } else if (name === "exit") {
        process.stderr.write("fake server: exiting on request\n");
        process.exit(3);
      } else if (name === "huge") {
        reply({ content: [{ type: "text", text: "x".repeat(17 * 1024 * 1024) }] });
      } else if (name === "hang") {
        // Never answer.
      } else {
        send({ jsonrpc: "2.0", id: request.id, error: { code: -32602, message: `unknown tool ${name}` } });
      }
      break;
    }
    default:
      send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "method not found" } });
  }
});
