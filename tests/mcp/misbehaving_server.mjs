// A tiny MCP server over stdio that misbehaves on purpose, for ullm's fault tests.
// Usage: node misbehaving_server.mjs <mode>. Plain node, no dependencies.
//
// Modes:
//   exit-mid-call   tools/call: writes to stderr, then exits with status 3
//   non-json        tools/call: writes a line that is not JSON to stdout
//   silent          never answers anything (not even initialize)
//   huge            tools/call: answers with a text of 10 MB on one line
//   ignore-cancel   tools/call "slow" answers after 1.5 s whatever it was told; others at once
//   old-version     initialize: answers with protocol version 2024-11-05
//   bad-tools       tools/list: two pages of tools, some breaking ullm's rules
//   pinging         after initialized: sends ping and an unknown request, and reports the answers
//                   in the result of the next tools/call; answers tools/call with a batch
//   stubborn        ignores end of input and SIGTERM, and has a child process (a grandchild)
//   many-tools      tools/list: 10,000 tools in 100 pages of 100
//   loop-cursor     tools/list: every page names the same nextCursor
//   changing        tools/list: sends notifications/tools/list_changed before its first answer,
//                   and from then on lists a third tool, "added"
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const mode = process.argv[2] ?? "";
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const answers = [];
let listed = 0;

if (mode === "stubborn") {
  process.on("SIGTERM", () => {});
  spawn("sleep", ["60"], { stdio: "ignore" });
  setInterval(() => {}, 1000);
}

const manyTools = Array.from({ length: 100 }, (_, page) =>
  Array.from({ length: 100 }, (_, i) => ({
    name: `tool_${page * 100 + i}`,
    description: `Tool number ${page * 100 + i}`,
    inputSchema: { type: "object", properties: { value: { type: "string", maxLength: 100 } }, required: ["value"] },
  })));

const tools = {
  "many-tools": manyTools,
  "loop-cursor": [manyTools[0], manyTools[1]],
  "bad-tools": [
    [
      { name: "good", description: "A good tool", inputSchema: { type: "object", properties: { x: { type: "integer" } }, required: ["x"] } },
      { name: "records", description: "Uses propertyNames", inputSchema: { type: "object", properties: { m: { type: "object", propertyNames: { pattern: "^a" } } } } },
      { name: "untyped", description: "An untyped property", inputSchema: { type: "object", properties: { v: {} } } },
    ],
    [
      { name: "a.b", description: "A dotted name", inputSchema: { type: "object", properties: {} } },
      { name: "n".repeat(100), inputSchema: { type: "object", properties: {} } },
      { name: "needs-task", description: "Needs tasks", inputSchema: { type: "object" }, execution: { taskSupport: "required" } },
    ],
  ],
};

function onRequest(message) {
  const { id, method, params } = message;
  if (method === "initialize") {
    if (mode === "silent") return;
    const version = mode === "old-version" ? "2024-11-05" : params.protocolVersion;
    send({ jsonrpc: "2.0", id, result: { protocolVersion: version, capabilities: { tools: { listChanged: true } }, serverInfo: { name: "misbehaving/" + mode, version: "1.0.0" } } });
    return;
  }
  if (mode === "silent") return;
  if (method === "tools/list") {
    const pages = tools[mode] ?? [[{ name: "slow", description: "Answers late", inputSchema: { type: "object" } }, { name: "fast", description: "Answers at once", inputSchema: { type: "object" } }]];
    const page = params?.cursor ? Number(params.cursor) : 0;
    const result = { tools: pages[page] };
    if (page + 1 < pages.length) result.nextCursor = String(page + 1);
    if (mode === "loop-cursor") result.nextCursor = "1";
    if (mode === "changing" && listed > 0) {
      result.tools = [...result.tools, { name: "added", description: "Added later", inputSchema: { type: "object" } }];
    }
    // The change is announced before the first answer, so it is known once that answer is.
    if (mode === "changing" && listed++ === 0) {
      send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
    }
    send({ jsonrpc: "2.0", id, result });
    return;
  }
  if (method === "tools/call") {
    const text = (t) => ({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: t }] } });
    if (mode === "exit-mid-call") {
      process.stderr.write("crashing on purpose in the middle of a call\n", () => process.exit(3));
    } else if (mode === "non-json") {
      process.stdout.write("this is not JSON\n");
    } else if (mode === "huge") {
      send(text("x".repeat(10 * 1024 * 1024)));
    } else if (mode === "ignore-cancel" && params.name === "slow") {
      setTimeout(() => send(text("late answer")), 1500);
    } else if (mode === "pinging") {
      process.stdout.write(JSON.stringify([text(JSON.stringify(answers))]) + "\n");
    } else {
      send(text("answer of " + params.name));
    }
    return;
  }
  send({ jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } });
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.method === undefined) {
    answers.push(message);  // an answer to one of our requests
  } else if (message.id !== undefined) {
    onRequest(message);
  } else if (message.method === "notifications/initialized" && mode === "pinging") {
    send({ jsonrpc: "2.0", id: "p1", method: "ping" });
    send({ jsonrpc: "2.0", id: "p2", method: "sampling/createMessage", params: {} });
  }
}).on("close", () => {
  if (mode !== "stubborn") process.exit(0);
});
