// A tiny MCP server over stdio for failure tests; the first argument picks its misbehaviour:
//   normal      answers initialize, tools/list and tools/call of `ping`, `hang` and `exit`
//               (`hang` never answers; `exit` writes to stderr and exits with status 3;
//               `huge` answers with a 17 MiB message, over the client's 16 MiB limit)
//   crash       writes to stderr and exits before answering anything
//   silent      reads requests and never answers
//   changing    lists `ping` and `swap`; a call of `swap` drops `ping`, adds `echo`, sends
//               notifications/tools/list_changed, then answers (a list that changes mid-session)
//   stderr-flood  like normal, but first writes 64 MiB to stderr without a newline
//   pages-endless  tools/list pages for ever, one new tool and a new cursor per page
//   pages-repeat   tools/list gives the same cursor again and again
//   deep-schema    tools/list holds a tool whose input schema is nested 70 levels
//   bad-schema     lists `ping` and `broken`, whose input schema does not compile (`type: 7`)
//   changing-bad   like changing, but `swap` keeps `ping` with an input schema that does not
//                  compile
//   named NAMES    lists the comma-separated NAMES (each answers with its own name)
//   hostile     lists `ping` and tools with odd results: `deep` (300-deep structuredContent),
//               `widget` (a content block of unknown type), `media` (an image beside
//               structuredContent, with an output schema), `audience` (a block for the user
//               only), `textblob` (a text/plain blob resource); and `dup` twice, `bad name`
//               and `` (bad names)
//   odd-results  hostile without the bad names
//   tasks       lists `slow`, which refuses a plain call with -32601 (it needs a task) and as a
//               task never ends; and `cancelled`, which answers with the ids of the tasks
//               `tasks/cancel` named so far (a task's `tasks/result` waits for ever)
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
const object = { type: "object", properties: {} };
const simple = (name, description) => ({ name, description, inputSchema: object });
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
let deepSchema = { type: "string" };
for (let i = 0; i < 70; i++) {
  deepSchema = { type: "object", properties: { x: deepSchema } };
}
let deepValue = 1;
for (let i = 0; i < 300; i++) {
  deepValue = [deepValue];
}
const cancelled = [];
let taskCount = 0;
let tools = mode === "tasks" ? [simple("slow", "Run for ever, as a task."), simple("cancelled", "The cancelled task ids.")] : mode === "changing" || mode === "changing-bad" ? [ping, swap] : mode === "named" ? (process.argv[3] || "").split(",").map((n) => simple(n, `The tool ${n}.`)) : mode === "deep-schema" ? [ping, { name: "deep", description: "Deep.", inputSchema: deepSchema }] : mode === "bad-schema" ? [ping, { name: "broken", description: "A schema that does not compile.", inputSchema: { type: "object", properties: { x: { type: 7 } } } }] : mode === "hostile" || mode === "odd-results" ? [
  ping,
  simple("deep", "Answer a 300-deep structuredContent."),
  simple("widget", "Answer with a content block of an unknown type."),
  {
    name: "media",
    description: "Answer an image and structured content.",
    inputSchema: object,
    outputSchema: { type: "object", properties: { width: { type: "number" } } },
  },
  simple("audience", "Answer one block for the model and one for the user."),
  simple("textblob", "Answer a text/plain blob resource."),
].concat(mode === "hostile" ? [
  simple("dup", "The first dup."),
  simple("dup", "The second dup."),
  simple("bad name", "A name with a space."),
  simple("", "An empty name."),
] : []) : [
  ping,
  { name: "hang", description: "Never answer.", inputSchema: { type: "object", properties: {} } },
  { name: "exit", description: "Exit the server.", inputSchema: { type: "object", properties: {} } },
  { name: "huge", description: "Answer 17 MiB.", inputSchema: { type: "object", properties: {} } },
];

function floodStderr(left, done) {
  const chunk = "x".repeat(1024 * 1024);
  while (left > 0) {
    left -= 1;
    if (!process.stderr.write(chunk)) {
      process.stderr.once("drain", () => floodStderr(left, done));
      return;
    }
  }
  done();
}

const rl = readline.createInterface({ input: process.stdin });
if (mode === "stderr-flood") {
  rl.pause();
  floodStderr(64, () => rl.resume());
}
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
        capabilities: { tools: { listChanged: mode === "changing" || mode === "changing-bad" } },
        serverInfo: { name: "fake", version: "1.0.0" },
      });
      break;
    case "ping":
      reply({});
      break;
    case "tools/list": {
      const cursor = request.params && request.params.cursor;
      if (mode === "pages-endless") {
        const n = cursor ? Number(cursor.slice(1)) : 0;
        reply({ tools: [simple(`t${n}`, `Tool ${n}.`)], nextCursor: `c${n + 1}` });
      } else if (mode === "pages-repeat") {
        reply({ tools: cursor ? [] : [ping], nextCursor: "again" });
      } else {
        reply({ tools });
      }
      break;
    }
    case "tools/call": {
      const name = request.params.name;
      if (!tools.some((t) => t.name === name)) {
        send({ jsonrpc: "2.0", id: request.id, error: { code: -32602, message: `unknown tool ${name}` } });
      } else if (mode === "tasks" && name === "slow") {
        if (request.params.task) {
          taskCount += 1;
          reply({ task: { taskId: `task-${taskCount}`, status: "working", ttl: request.params.task.ttl } });
        } else {
          send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "slow requires task augmentation" } });
        }
      } else if (mode === "tasks" && name === "cancelled") {
        reply({ content: [{ type: "text", text: JSON.stringify(cancelled) }] });
      } else if (name === "swap") {
        tools = mode === "changing-bad" ? [swap, { ...ping, inputSchema: { type: "object", properties: { x: { type: 7 } } } }] : [swap, echo];
        send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
        reply({ content: [{ type: "text", text: "swapped" }] });
      } else if (name === "echo") {
        reply({ content: [{ type: "text", text: String(request.params.arguments.text) }] });
      } else if (name === "ping") {
        reply({ content: [{ type: "text", text: "pong" }] });
      } else if (mode === "named" || name === "dup" || name === "bad name") {
        reply({ content: [{ type: "text", text: name }] });
      } else if (name === "deep") {
        reply({ content: [{ type: "text", text: "deep" }], structuredContent: { deep: deepValue } });
      } else if (name === "widget") {
        reply({
          content: [
            { type: "text", text: "before" },
            { type: "widget", html: "<b>hi</b>" },
            { type: "text", text: "after" },
          ],
        });
      } else if (name === "media") {
        reply({
          content: [
            { type: "text", text: "a 1x1 image" },
            { type: "image", mimeType: "image/png", data: PNG },
          ],
          structuredContent: { width: 1 },
        });
      } else if (name === "audience") {
        reply({
          content: [
            { type: "text", text: "for the model", annotations: { audience: ["assistant"] } },
            { type: "text", text: "for the user only", annotations: { audience: ["user"] } },
            { type: "text", text: "for both", annotations: { audience: ["user", "assistant"] } },
          ],
        });
      } else if (name === "textblob") {
        reply({
          content: [
            {
              type: "resource",
              resource: {
                uri: "file:///notes.txt",
                mimeType: "text/plain",
                blob: Buffer.from("plain notes, héllo").toString("base64"),
              },
            },
          ],
        });
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
    case "tasks/result":
      if (mode !== "tasks") {
        send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "method not found" } });
      }
      // Never answers: the task runs for ever.
      break;
    case "tasks/cancel":
      if (mode === "tasks") {
        cancelled.push(request.params.taskId);
        reply({ taskId: request.params.taskId, status: "cancelled" });
        break;
      }
      send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "method not found" } });
      break;
    default:
      send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "method not found" } });
  }
});
