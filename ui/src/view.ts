// Renders what the window shows from one value: the engine's view (or why there is none).
// Pure DOM construction, no I/O: src/live.ts decides when to call it.

import type { EngineView, ServerStatus, Status } from "./bindings";
import { h, mark } from "./dom";
import { addCommand, agentSnippet, commandLine, count } from "./format";
import { sessionCard } from "./session";

/** What there is to show: nothing yet, the engine's view, or an IPC failure. */
export type Shown =
  | { kind: "loading" }
  | { kind: "view"; view: EngineView }
  | { kind: "ipcError"; message: string };

/** The whole window for `shown`, as of `nowMs`. */
export function render(shown: Shown, nowMs: number): HTMLElement {
  const { pill, home, body } = parts(shown, nowMs);
  return h(
    "div",
    "window",
    h(
      "header",
      "top",
      h("div", "brand", mark(), h("div", "brand-text", h("h1", {}, "Postern"), homeLine(home))),
      pill,
    ),
    h("main", "content", ...body),
  );
}

type Parts = { pill: HTMLElement; home: string | null; body: HTMLElement[] };

function parts(shown: Shown, nowMs: number): Parts {
  if (shown.kind === "loading") {
    return { pill: pill("idle", "Connecting…"), home: null, body: [] };
  }
  if (shown.kind === "ipcError") {
    return {
      pill: pill("bad", "No connection"),
      home: null,
      body: [notice("bad", "Cannot reach the Postern app", [shown.message])],
    };
  }
  const view = shown.view;
  switch (view.state) {
    case "starting":
      return {
        pill: pill("idle", "Starting…"),
        home: view.home || null,
        body: [notice("idle", "Starting the engine", ["This takes a moment."])],
      };
    case "running":
      return { pill: pill("ok", "Engine running"), home: view.status.home, body: running(view.status, nowMs) };
    case "stopped":
      return {
        pill: pill("idle", "Stopped"),
        home: view.home,
        body: [notice("idle", "The engine has stopped", ["Postern is quitting."])],
      };
    case "unavailable":
      return { pill: pill("warn", "Engine unavailable"), home: view.home, body: [unavailable(view)] };
  }
}

function homeLine(home: string | null): HTMLElement {
  if (home === null) return h("p", "home muted", "");
  return h("p", { class: "home", title: home }, h("span", "muted", "Home "), h("code", {}, home));
}

function pill(tone: "ok" | "warn" | "bad" | "idle", text: string): HTMLElement {
  return h("span", { class: `pill pill-${tone}`, role: "status" }, h("span", "dot"), text);
}

// --- running -------------------------------------------------------------------------------

function running(status: Status, nowMs: number): HTMLElement[] {
  if (status.servers.length === 0 && status.sessions.length === 0) return [welcome()];
  return [servers(status.servers), sessions(status, nowMs), footer(status)];
}

function servers(list: ServerStatus[]): HTMLElement {
  return panel(
    "servers",
    "Servers",
    count(list.length, "server"),
    list.length === 0
      ? h("p", "empty-line", "No servers configured. Add one with ", h("code", {}, addCommand("<label>", "<command>")), ".")
      : h("ul", "servers", ...list.map(server)),
  );
}

function server(s: ServerStatus): HTMLElement {
  return h(
    "li",
    { class: "server", "data-label": s.label },
    h(
      "div",
      "server-main",
      h("div", "server-label", s.label),
      h("code", { class: "server-cmd", title: commandLine(s.command) }, commandLine(s.command)),
      s.cwd === null ? null : h("div", "server-sub server-cwd muted", "in ", h("code", {}, s.cwd)),
      s.identityPaths.length === 0
        ? null
        : h("div", "server-sub server-identity muted", "identity ", ...s.identityPaths.map((p) => h("code", {}, p))),
    ),
    h(
      "div",
      "server-badges",
      h("span", { class: "badge badge-outline restart", title: RESTART_TITLES[s.restart] }, h("span", "badge-k", "restart "), s.restart),
      s.selfReloading
        ? h("span", { class: "badge badge-outline self-reloading", title: "Reloads its own code: a change to its files ends its epoch at once" }, "self-reloading")
        : null,
      s.running > 0
        ? h("span", "badge badge-ok running", `${s.running} running`)
        : h("span", "badge badge-idle running", "idle"),
    ),
  );
}

/** What each restart policy does when the server's files change (refresh-contract §6). */
const RESTART_TITLES: Record<string, string> = {
  manual: "When its files change it keeps running, and the window says they are newer",
  "on-change": "When its files change it restarts: a new execution epoch",
};

function sessions(status: Status, nowMs: number): HTMLElement {
  const list = status.sessions;
  if (list.length === 0) {
    const label = status.servers[0]?.label ?? "<label>";
    return panel(
      "sessions",
      "Agent sessions",
      "none connected",
      h(
        "div",
        "empty-sessions",
        h("p", {}, "No agent is connected. Point an agent's MCP configuration at Postern:"),
        snippet(agentSnippet(label)),
      ),
    );
  }
  return panel("sessions", "Agent sessions", `${list.length} connected`, h("ul", "sessions", ...list.map((s) => sessionCard(s, nowMs))));
}

function footer(status: Status): HTMLElement {
  return h("p", "foot muted", "Agents reach this engine through ", h("code", {}, status.socket));
}

// --- first run -----------------------------------------------------------------------------

function welcome(): HTMLElement {
  return h(
    "section",
    { class: "panel welcome", "aria-labelledby": "welcome-h" },
    h("h2", { id: "welcome-h" }, "No servers yet"),
    h("p", "lede", "Postern stands between your AI agents and the MCP servers on this machine. Two steps connect an agent to a server through it."),
    h(
      "ol",
      "steps",
      h(
        "li",
        {},
        h("div", "step-title", "Add a server from a terminal"),
        snippet(addCommand("<label>", "<command>")),
        h("p", "muted small", "For example: ", h("code", {}, addCommand("time", "uvx mcp-server-time"))),
      ),
      h(
        "li",
        {},
        h("div", "step-title", "Point your agent at Postern instead of the server"),
        snippet(agentSnippet("<label>")),
        h("p", "muted small", "In Claude Code, Claude Desktop or Cursor, this goes where MCP servers are configured."),
      ),
    ),
    h("p", "muted small", "Servers you add show up here within a couple of seconds."),
  );
}

// --- no engine -----------------------------------------------------------------------------

function unavailable(view: Extract<EngineView, { state: "unavailable" }>): HTMLElement {
  switch (view.reason) {
    case "already_running":
      return notice(
        "warn",
        "Another Postern engine owns this home",
        [
          "`postern daemon` or another Postern app is already running for this home. There is one engine per home, and it got here first: agents keep working through it.",
          "To manage it from this window, stop that engine and open Postern again.",
        ],
        details(view.home, view.message),
      );
    case "no_home":
      return notice(
        "bad",
        "No Postern home",
        ["Postern could not choose a directory for its data. Set POSTERN_HOME to a directory and open Postern again."],
        details(null, view.message),
      );
    case "status_failed":
      return notice(
        "bad",
        "Cannot read the engine's status",
        ["The engine is running, but its status could not be read. Postern tries again every few seconds."],
        details(view.home, view.message),
      );
    case "start_failed":
      return notice("bad", "The engine could not start", [], details(view.home, view.message));
  }
}

function details(home: string | null, message: string): HTMLElement {
  return h(
    "dl",
    "details",
    home === null ? null : h("dt", {}, "Home"),
    home === null ? null : h("dd", {}, h("code", {}, home)),
    h("dt", {}, "Details"),
    h("dd", "message", message),
  );
}

// --- pieces --------------------------------------------------------------------------------

function panel(id: string, title: string, meta: string, body: HTMLElement): HTMLElement {
  return h(
    "section",
    { class: `panel panel-${id}`, "aria-labelledby": `${id}-h` },
    h("div", "panel-head", h("h2", { id: `${id}-h` }, title), h("span", "muted", meta)),
    body,
  );
}

function notice(tone: "warn" | "bad" | "idle", title: string, paragraphs: string[], extra?: HTMLElement): HTMLElement {
  return h(
    "section",
    { class: `notice notice-${tone}`, role: tone === "idle" ? "status" : "alert" },
    h("h2", {}, title),
    ...paragraphs.map((p) => h("p", {}, ...inlineCode(p))),
    extra,
  );
}

/** Splits "use `x` here" into text and <code> nodes. */
function inlineCode(text: string): (string | HTMLElement)[] {
  return text.split("`").map((part, i) => (i % 2 === 1 ? h("code", {}, part) : part));
}

function snippet(text: string): HTMLElement {
  return h("pre", "snippet", h("code", {}, text));
}
