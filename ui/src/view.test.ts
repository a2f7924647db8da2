import { beforeEach, describe, expect, it } from "vitest";

import type { EngineView } from "./bindings";
import { server, session, status } from "./fixtures";
import { render, type Shown } from "./view";

const NOW = new Date(2026, 10, 29, 15, 30).getTime();

function show(view: EngineView | Shown): HTMLElement {
  const shown: Shown = "kind" in view ? view : { kind: "view", view };
  const root = render(shown, NOW);
  document.body.replaceChildren(root);
  return root;
}

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

beforeEach(() => document.body.replaceChildren());

describe("a running engine", () => {
  const twoServers = status({
    servers: [
      server({ label: "everything", command: ["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"], cwd: "/srv/mcp", running: 2 }),
      server({ label: "time", command: ["uvx", "mcp-server-time"] }),
    ],
  });

  it("lists every configured server with its command, directory and running count", () => {
    const root = show({ state: "running", status: twoServers });

    expect(all(root, ".server-label")).toEqual(["everything", "time"]);
    expect(all(root, ".server-cmd")).toEqual(["npx -y @modelcontextprotocol/server-everything stdio", "uvx mcp-server-time"]);
    expect(text(root.querySelector('[data-label="everything"] .server-cwd'))).toBe("in /srv/mcp");
    expect(root.querySelector('[data-label="time"] .server-cwd')).toBeNull();
    expect(all(root, ".server .running")).toEqual(["2 running", "idle"]);
    expect(all(root, ".panel-servers .panel-head > *")).toEqual(["Servers", "2 servers"]);
  });

  it("says the engine runs and where its home and socket are", () => {
    const root = show({ state: "running", status: twoServers });

    expect(text(root.querySelector(".pill"))).toBe("Engine running");
    expect(text(root.querySelector(".home"))).toBe("Home /home/ada/.local/share/postern");
    expect(text(root.querySelector(".foot"))).toContain("/home/ada/.local/share/postern/run/engine.sock");
  });

  it("shows connected agent sessions, one card each, with the state by the contract's name", () => {
    const connected = new Date(2026, 10, 29, 15, 18).getTime();
    const root = show({
      state: "running",
      status: {
        ...twoServers,
        sessions: [
          session({ id: "#1", server: "time", client: "claude-code 2.1.0", connectedAtMs: connected, serverPid: 4242 }),
          session({ id: "#2", server: "everything", connectedAtMs: connected, state: "starting" }),
          session({ id: "#3", server: "time", connectedAtMs: connected, state: "identityPending", serverPid: 4300 }),
          session({ id: "#4", server: "time", connectedAtMs: connected, state: "stopped", lastExit: "exit status 1" }),
        ],
      },
    });

    const cards = [...root.querySelectorAll("ul.sessions > li.session")];
    expect(cards.map((li) => li.getAttribute("data-session"))).toEqual(["#1", "#2", "#3", "#4"]);
    expect(all(root, ".session-server")).toEqual(["time", "everything", "time", "time"]);
    expect(all(root, ".session-agent")).toEqual(["claude-code 2.1.0", "unnamed agent", "unnamed agent", "unnamed agent"]);
    expect(all(root, ".session .state")).toEqual(["catalog-ready", "starting", "identity-pending", "stopped"]);
    expect(all(root, ".session .pid")).toEqual(["4242", "—", "4300", "—"]);
    expect(all(root, ".session-since")).toEqual(Array(4).fill("15:18 · 12 min ago"));
    expect(root.querySelector('[data-session="#4"] .state')?.getAttribute("title")).toBe("last exit: exit status 1");
    expect(all(root, ".panel-sessions .panel-head > *")).toEqual(["Agent sessions", "4 connected"]);
  });

  it("without sessions, shows how to connect an agent to the first server", () => {
    const root = show({ state: "running", status: twoServers });

    expect(root.querySelector("ul.sessions")).toBeNull();
    expect(text(root.querySelector(".empty-sessions"))).toContain("No agent is connected");
    expect(JSON.parse(text(root.querySelector(".empty-sessions .snippet")))).toEqual({
      mcpServers: { everything: { command: "postern", args: ["mcp", "everything"] } },
    });
  });

  it("renders labels and commands as text, never as markup", () => {
    const root = show({
      state: "running",
      status: status({ servers: [server({ label: "x", command: ["<img src=x onerror=alert(1)>"] })] }),
    });

    expect(root.querySelector("img")).toBeNull();
    expect(text(root.querySelector(".server-cmd"))).toBe("'<img src=x onerror=alert(1)>'");
  });
});

describe("a new user", () => {
  it("is told how to add a server and how to point an agent at it", () => {
    const root = show({ state: "running", status: status() });

    expect(text(root.querySelector(".welcome h2"))).toBe("No servers yet");
    const snippets = all(root, ".welcome .snippet");
    expect(snippets[0]).toBe("postern server add <label> -- <command>");
    expect(JSON.parse(snippets[1] ?? "")).toEqual({
      mcpServers: { "<label>": { command: "postern", args: ["mcp", "<label>"] } },
    });
    expect(root.querySelector(".panel-servers")).toBeNull();
  });
});

describe("no engine here", () => {
  it("says clearly that another engine owns the home", () => {
    const root = show({
      state: "unavailable",
      home: "/home/ada/.local/share/postern",
      reason: "already_running",
      message: "another Postern engine is already running for /home/ada/.local/share/postern",
    });

    expect(text(root.querySelector(".pill"))).toBe("Engine unavailable");
    expect(text(root.querySelector(".notice h2"))).toBe("Another Postern engine owns this home");
    expect(text(root.querySelector(".notice"))).toContain("postern daemon");
    expect(all(root, ".details dd")).toEqual([
      "/home/ada/.local/share/postern",
      "another Postern engine is already running for /home/ada/.local/share/postern",
    ]);
    expect(root.querySelector(".panel-servers")).toBeNull();
  });

  it.each([
    ["no_home", "No Postern home"],
    ["start_failed", "The engine could not start"],
    ["status_failed", "Cannot read the engine's status"],
  ] as const)("explains %s", (reason, title) => {
    const root = show({ state: "unavailable", home: null, reason, message: "boom" });

    expect(text(root.querySelector(".notice h2"))).toBe(title);
    expect(text(root.querySelector(".notice .message"))).toBe("boom");
    expect(root.querySelector(".notice")?.getAttribute("role")).toBe("alert");
  });

  it("shows starting, stopped, loading and IPC failures", () => {
    expect(text(show({ state: "starting", home: "/h" }).querySelector(".pill"))).toBe("Starting…");
    expect(text(show({ state: "stopped", home: "/h" }).querySelector(".notice h2"))).toBe("The engine has stopped");
    expect(text(show({ kind: "loading" }).querySelector(".pill"))).toBe("Connecting…");
    const failed = show({ kind: "ipcError", message: "command status not found" });
    expect(text(failed.querySelector(".notice"))).toContain("command status not found");
  });
});
