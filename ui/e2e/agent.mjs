// A stand-in agent: an MCP client session through `postern mcp <label>`, as Claude Code or
// Cursor would open one. It initializes, lists tools (which starts the server) and stays
// connected until its stdin is ended.

import { spawn } from "node:child_process";
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
