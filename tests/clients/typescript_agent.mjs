// An application built on the official TypeScript MCP SDK, the way applications use it: one
// Client over stdio, tools listed once at start and again only when the server says
// `notifications/tools/list_changed`, each tool call given a timeout. Its "model" is the tests'
// scripted stand-in (tests/src/model.rs), asked over its Anthropic-style API without streaming.
//
//   node typescript_agent.mjs <sdk dir> <model base url> <prompt> <tool timeout ms> -- <server command...>
//
// Prints the model's last words on stdout. Used by tests/tests/real_agents.rs.

import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdk, base, prompt, timeoutMs] = process.argv.slice(2, 6);
const command = process.argv.slice(process.argv.indexOf("--") + 1);
const load = (path) => import(pathToFileURL(join(sdk, "dist/esm", path)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { ToolListChangedNotificationSchema } = await load("types.js");

const client = new Client({ name: "typescript-sdk-agent", version: "1.0.0" });
let relist = false;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  relist = true;
});
await client.connect(new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" }));
let tools = (await client.listTools()).tools;
const messages = [{ role: "user", content: prompt }];
for (;;) {
  if (relist) {
    relist = false;
    tools = (await client.listTools()).tools;
  }
  const answer = await fetch(`${base}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "stand-in",
      max_tokens: 1024,
      stream: false,
      tools: tools.map((t) => ({ name: t.name, description: t.description ?? "", input_schema: t.inputSchema })),
      messages,
    }),
  });
  const { content } = await answer.json();
  messages.push({ role: "assistant", content });
  const uses = content.filter((c) => c.type === "tool_use");
  if (uses.length === 0) {
    console.log(content.map((c) => c.text ?? "").join(" "));
    break;
  }
  const results = [];
  for (const use of uses) {
    let text;
    let error;
    try {
      const result = await client.callTool({ name: use.name, arguments: use.input }, undefined, { timeout: Number(timeoutMs) });
      text = result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
      error = Boolean(result.isError);
    } catch (e) {
      text = `the tool call failed: ${e.message}`;
      error = true;
    }
    results.push({ type: "tool_result", tool_use_id: use.id, content: text, is_error: error });
  }
  messages.push({ role: "user", content: results });
}
await client.close();
