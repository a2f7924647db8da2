// A stand-in agent: an MCP client session through `postern mcp <label>`, as Claude Code or
// Cursor would open one. It initializes, lists tools (which starts the server) and stays
// connected until its stdin is ended. `client` also reads the answers, for agents that call
// tools.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** A stdio MCP server with one tool (fixtures/clock.py), for sessions with real processes. */
export const CLOCK = fileURLToPath(new URL("./fixtures/clock.py", import.meta.url));

/** Connects an agent named `name` to `label` on `home`; end it with `child.stdin.end()`. */
export function agent(cli, home, label, name, version = "1.0.0") {
  const child = spawn(cli, ["--home", home, "mcp", label], { stdio: ["pipe", "ignore", "ignore"] });
  const send = (msg) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
  send({
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name, version } },
  });
  send({ method: "notifications/initialized" });
  send({ id: 2, method: "tools/list" });
  return child;
}

/**
 * An agent that reads its answers: `await request(method, params)` resolves with the whole
 * JSON-RPC response, `call(tool, args)` with the `tools/call` response. It has initialized and
 * listed tools when the promise resolves. End it with `close()`.
 */
export async function client(cli, home, label, name, version = "1.0.0") {
  const child = spawn(cli, ["--home", home, "mcp", label], { stdio: ["pipe", "pipe", "ignore"] });
  const waiting = new Map();
  let nextId = 1;
  createInterface({ input: child.stdout }).on("line", (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    const done = waiting.get(msg.id);
    if (done !== undefined) {
      waiting.delete(msg.id);
      done(msg);
    }
  });
  const send = (msg) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
  const request = (method, params, timeoutMs = 60_000) => {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`no answer to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, (msg) => {
        clearTimeout(timer);
        resolve(msg);
      });
      send({ id, method, params });
    });
  };
  await request("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name, version } });
  send({ method: "notifications/initialized" });
  await request("tools/list", {});
  return {
    child,
    request,
    call: (tool, args = {}, timeoutMs) => request("tools/call", { name: tool, arguments: args }, timeoutMs),
    close: () => child.stdin.end(),
  };
}
