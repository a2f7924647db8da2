// The Servers view: each configured server, how it is launched, and each of its running
// processes (one per agent session) as the refresh contract names their parts: state (stopped,
// starting, identity-pending, catalog-ready), execution epoch and record (artifacts with their
// digests, runtime, directory, pinning), files newer than the process, credentials held or
// withheld and why, the catalog revision and its diff from the previous one (escalations
// flagged). Restart gives every running process a new epoch. Pure DOM construction.

import type { ServerStatus, SessionStatus, Status } from "./bindings";
import { confinementBadge } from "./confinement";
import { h } from "./dom";
import { commandLine, count } from "./format";
import { sessionCard } from "./session";

/** What the Restart buttons do. */
export type Restart = (label: string) => void;

/** Each server with its processes; `notes` says what the last restart of a label did. */
export function serversView(status: Status, nowMs: number, restart: Restart, notes: Record<string, string> = {}, add: HTMLElement | null = null): HTMLElement {
  if (status.servers.length === 0) {
    return h(
      "div",
      "servers-view",
      h(
        "section",
        { class: "panel", "aria-labelledby": "servers-view-h" },
        h("div", "panel-head", h("h2", { id: "servers-view-h" }, "Servers")),
        h("p", "empty-line", "No servers configured yet: add one below, or import your agent's."),
      ),
      add,
    );
  }
  return h(
    "div",
    "servers-view",
    add,
    ...status.servers.map((s) =>
      serverCard(
        s,
        status.sessions.filter((x) => x.server === s.label),
        nowMs,
        restart,
        notes[s.label] ?? null,
        status.gate.settings.sessionMode,
      ),
    ),
  );
}

function serverCard(s: ServerStatus, processes: SessionStatus[], nowMs: number, restart: Restart, note: string | null, mode: "prompt" | "observe"): HTMLElement {
  const button = h(
    "button",
    {
      type: "button",
      class: "restart-button",
      title: "Stop every running process of this server and start it again: each gets a new execution epoch; calls in flight fail, never retried",
    },
    "Restart",
  );
  button.addEventListener("click", () => restart(s.label));
  return h(
    "section",
    { class: "panel server-card", "data-label": s.label, "aria-labelledby": `server-${s.label}-h` },
    h(
      "div",
      "panel-head server-card-head",
      h("h2", { id: `server-${s.label}-h`, class: "server-card-label" }, s.label),
      h("span", { class: `badge ${processes.length === 0 ? "badge-idle" : "badge-ok"} server-state` }, summary(processes)),
      h("span", { class: "badge badge-outline restart" }, h("span", "badge-k", "restart "), s.restart),
      s.selfReloading ? h("span", "badge badge-outline self-reloading", "self-reloading") : null,
      confinementBadge(s.confinement),
      h("span", "spacer"),
      button,
    ),
    note === null ? null : h("p", { class: "restart-note", role: "status" }, note),
    h(
      "dl",
      "server-config",
      h("dt", {}, "command"),
      h("dd", {}, h("code", "server-cmd", commandLine(s.command))),
      h("dt", {}, "directory"),
      h("dd", {}, s.cwd === null ? h("span", "muted", "the engine's") : h("code", {}, s.cwd)),
      s.identityPaths.length === 0 ? null : h("dt", {}, "identity"),
      s.identityPaths.length === 0 ? null : h("dd", {}, ...s.identityPaths.map((p) => h("code", "chip", p))),
      s.writable.length === 0 ? null : h("dt", { title: "Where its confined launches may write besides its directory and a private /tmp" }, "may write"),
      s.writable.length === 0 ? null : h("dd", {}, ...s.writable.map((p) => h("code", "chip", p))),
      s.passMethods.length === 0 ? null : h("dt", { title: "Methods Postern does not know, passed to this server: each is decided and journaled" }, "passes"),
      s.passMethods.length === 0 ? null : h("dd", { class: "pass-methods" }, ...s.passMethods.map((m) => h("code", "chip", m))),
    ),
    processes.length === 0
      ? h("p", "empty-line process-none muted", "Stopped: no agent session runs it now. An agent's next call starts it, with a new execution epoch.")
      : h("ul", "sessions processes", ...processes.map((p) => sessionCard(p, nowMs, mode))),
  );
}

/** "stopped", "1 running", "2 running · 1 identity-pending". */
function summary(processes: SessionStatus[]): string {
  if (processes.length === 0) return "stopped";
  const live = processes.filter((p) => p.serverPid !== null).length;
  const pending = processes.filter((p) => p.state === "identityPending" || p.state === "starting").length;
  const parts = [live > 0 ? `${live} running` : count(processes.length, "session")];
  if (pending > 0) parts.push(`${pending} starting`);
  return parts.join(" · ");
}
