// One agent session's server process, as the refresh contract (docs/refresh-contract.md) names
// its parts: state, execution epoch, pinning, identity, catalog revision, what changed, files
// newer than the process, and the execution record on demand. Pure DOM construction.

import type { AgentView, ArtifactView, CatalogView, CredentialsView, ExecutionView, SessionState, SessionStatus } from "./bindings";
import { h, icon, type Child } from "./dom";
import { ago, clock, clockSeconds, commandLine, count, shortDigest, shortEpoch } from "./format";
import { sessionName } from "./journal-words";
import { allowedLine } from "./permissions";
import { sandboxBadge, sandboxSentence } from "./confinement";
import { pinBadge, pinNote } from "./pinning";

type Tone = "ok" | "warn" | "bad" | "idle";

/** Each state: its tone, its name in the contract (§7, kept as `data-state` and in the tooltip),
 * and what it means, for the tooltip. The words a person reads are `stateWords`. */
const STATES: Record<SessionState, [Tone, string, string]> = {
  catalogReady: ["ok", "catalog-ready", "running, its tools known: calls go to the gate"],
  catalogRefreshing: ["warn", "catalog-refreshing", "the server said its tools changed: requests are held until Postern has checked the new catalog"],
  identityPending: ["warn", "identity-pending", "a new launch: requests are held until Postern has read its tools"],
  starting: ["warn", "starting", "launching: Postern hashes its code and starts it"],
  stopped: ["idle", "stopped", "not running: an agent's next call starts it, as a new launch"],
};

/** The state in words: "Ready · 3 tools", "Reading its tools…", "Starting…", "Stopped". */
export function stateWords(s: SessionStatus): string {
  switch (s.state) {
    case "catalogReady":
      return s.catalog === null ? "Ready" : `Ready · ${count(s.catalog.tools.length, "tool")}`;
    case "catalogRefreshing":
      return "Checking its new tools…";
    case "identityPending":
      return "Reading its tools…";
    case "starting":
      return "Starting…";
    case "stopped":
      return "Stopped";
    default:
      // A state this UI does not know yet (a newer engine) still shows, by its own name.
      return String(s.state);
  }
}

/** What a catalog change line ends with when it makes a tool look safer (crates/domain/src/catalog/diff.rs). */
const ESCALATION = " [escalation]";

/**
 * A session and its server process, as one card of the sessions list; `mode` is the session
 * approval setting, for what the card says its agent may do.
 */
export function sessionCard(s: SessionStatus, nowMs: number, mode: "prompt" | "observe" = "prompt"): HTMLElement {
  // A state this UI does not know yet (a newer engine) still shows, by its own name.
  const [tone, stateName] = STATES[s.state] ?? ["idle", String(s.state)];
  return h(
    "li",
    { class: `session tone-${tone}`, "data-session": s.id, "data-server": s.server, "data-state": s.state },
    h(
      "div",
      "session-head",
      ...spaced([
        h("span", "session-server", s.server),
        s.journal === null ? null : h("span", { class: "session-number muted", title: "Its number in Activity and on the timeline" }, sessionName(s.journal)),
        s.client === null ? h("span", "session-agent muted", "unnamed agent") : h("span", "session-agent", s.client),
        agentChain(s.agent),
        h("span", { class: `badge badge-${tone} state`, "data-state": stateName, title: stateTitle(s, stateName) }, stateWords(s)),
        s.execution === null ? null : pinBadge(s.execution.pinning),
        s.execution === null ? null : sandboxBadge(s.execution.sandbox),
        staleBadge(s.catalog),
        h("span", { class: "session-since muted", title: new Date(s.connectedAtMs).toISOString() }, `${clock(s.connectedAtMs, nowMs)} · ${ago(s.connectedAtMs, nowMs)}`),
      ]),
    ),
    facts(s, nowMs),
    h("p", { class: `allowed${(s.grants ?? []).length > 0 ? " has-grants" : ""}` }, allowedLine(s, nowMs, mode)),
    credentials(s.credentials),
    s.execution === null ? null : pinNote(s.execution.pinning),
    s.artifactsNewer.length > 0 ? newer(s) : null,
    s.catalog !== null && s.catalog.changes.length > 0 ? changes(s.catalog) : null,
    exitLine(s, nowMs),
    s.execution === null ? null : record(s.id, s.execution, nowMs),
  );
}

/** The agent process as the process table says, unlike the self-reported client name. */
function agentChain(agent: AgentView | null): HTMLElement {
  if (agent === null) return h("span", { class: "session-chain muted", title: "the process behind this session could not be identified" }, "unidentified process");
  const exe = agent.executable === null ? "" : ` · ${agent.executable.path} ${agent.executable.digest}`;
  return h("span", { class: "session-chain muted", title: `pid ${agent.pid}${exe}` }, agent.chain.join(" → "));
}

/** The raw state and what it means; why it stopped, when it did. */
function stateTitle(s: SessionStatus, stateName: string): string {
  const meaning = STATES[s.state]?.[2];
  const exit = s.state === "stopped" && s.lastExit !== null ? ` (last exit: ${s.lastExit})` : "";
  return meaning === undefined ? stateName : `${stateName}: ${meaning}${exit}`;
}

// --- the one-line summary: launch, pid, identity, catalog -------------------------------------

function facts(s: SessionStatus, nowMs: number): HTMLElement {
  const e = s.execution;
  const live = s.serverPid !== null;
  return h(
    "div",
    "facts",
    e === null
      ? fact("launch", "none yet", "muted")
      : fact(
          live ? "launch" : "last launch",
          `${e.launch ?? shortEpoch(e.epoch)} · started ${clock(e.startedAtMs, nowMs)}`,
          "launch",
          `execution epoch ${e.epoch}`,
        ),
    fact("pid", live ? String(s.serverPid) : "—", "pid"),
    e === null ? null : fact("identity", shortDigest(e.identity), "identity", `identity digest ${e.identity}`),
    catalogFact(s),
  );
}

function fact(key: string, value: string, cls: string, title?: string): HTMLElement {
  return h("span", "fact", h("span", "fact-k", key), " ", h("code", { class: `fact-v ${cls}`, title }, value));
}

function catalogFact(s: SessionStatus): HTMLElement {
  const c = s.catalog;
  if (c === null) {
    const fetching = s.state === "identityPending" || s.state === "starting";
    return h("span", "fact", h("span", "fact-k", "catalog"), " ", h("span", "fact-v muted", fetching ? "fetching…" : "—"));
  }
  return h(
    "span",
    "fact",
    h("span", "fact-k", "catalog"),
    " ",
    h("code", { class: "fact-v revision", title: `catalog revision ${c.revision}` }, shortDigest(c.revision)),
    " ",
    h("span", { class: "tool-count muted", title: c.tools.join("\n") || "no tools" }, count(c.tools.length, "tool")),
  );
}

/** When the agent was last shown an older revision than the current one (refresh-contract §3). */
function staleBadge(c: CatalogView | null): HTMLElement | null {
  if (c === null || c.presentedRevision === null || c.presentedRevision === c.revision) return null;
  return h(
    "span",
    {
      class: "badge badge-warn stale",
      title: `The agent was shown ${c.presentedRevision}. Its calls to tools that changed since are refused until it lists tools again.`,
    },
    "agent has a stale tool list",
  );
}

// --- what needs attention ----------------------------------------------------------------------

/** The bound credentials this launch holds, and those withheld from it, and why (refresh-contract §9). */
function credentials(c: CredentialsView): HTMLElement | null {
  if (c.released.length === 0 && c.withheld.length === 0) return null;
  return h(
    "div",
    "credentials-line",
    c.released.length === 0
      ? null
      : h("span", { class: "released", title: "Released to this launch: a human approved this identity for them" }, h("span", "fact-k", "credentials held "), ...c.released.map((n) => heldChip(n, c.brokered.includes(n)))),
    c.withheld.length === 0
      ? null
      : h(
          "span",
          { class: "withheld", role: "note" },
          h("span", "fact-k", "withheld "),
          ...c.withheld.map((n) => h("code", "chip", n)),
          h("span", "withheld-reason", ` ${c.reason ?? "not approved for this identity"}`),
        ),
  );
}

/**
 * A credential this launch holds: a placeholder the egress broker swaps for the value toward the
 * credential's hosts only, or the value itself in the server's environment, where its code can
 * send it anywhere.
 */
function heldChip(name: string, brokered: boolean): HTMLElement {
  return brokered
    ? h("code", { class: "chip held-placeholder", title: "The server holds a placeholder; Postern's egress broker puts the value in requests to the credential's hosts only." }, name, h("span", "held-how", " · placeholder"))
    : h("code", { class: "chip held-value", title: "The value itself is in the server's environment: its code can read it and send it anywhere." }, name, h("span", "held-how", " · value, exposed to its code"));
}

function newer(s: SessionStatus): HTMLElement {
  return h(
    "div",
    "callout callout-warn newer",
    h("div", "callout-title", icon("files"), "Files newer than the running process — restart to use them"),
    h("ul", "paths", ...s.artifactsNewer.map((path) => h("li", {}, h("code", {}, path)))),
    h("p", "callout-hint", "Restart with ", h("code", {}, `postern server restart ${s.server}`)),
  );
}

function changes(c: CatalogView): HTMLElement {
  return h(
    "div",
    { class: `callout changes${c.escalation ? " callout-bad escalation" : ""}` },
    h(
      "div",
      "callout-title",
      "Catalog changed from the previous revision",
      c.escalation
        ? h("span", { class: "badge badge-bad flag", title: "A change makes a tool look safer than before (an annotation hint flip)" }, icon("alert"), "escalation")
        : null,
    ),
    h("ul", "change-list", ...c.changes.map(changeLine)),
  );
}

function changeLine(line: string): HTMLElement {
  if (!line.endsWith(ESCALATION)) return h("li", {}, h("code", {}, line));
  return h(
    "li",
    "change-escalation",
    h("span", { class: "flag-icon", title: "escalation: this change makes the tool look safer than before" }, icon("alert")),
    h("code", {}, line.slice(0, -ESCALATION.length)),
  );
}

function exitLine(s: SessionStatus, nowMs: number): HTMLElement | null {
  const backoff = s.backoffUntilMs !== null && s.backoffUntilMs > nowMs ? s.backoffUntilMs : null;
  if (s.lastExit === null && backoff === null) return null;
  return h(
    "div",
    "exit",
    backoff === null
      ? null
      : h(
          "span",
          { class: "badge badge-bad backoff", title: new Date(backoff).toISOString() },
          `crash back-off · no launch before ${clockSeconds(backoff)}`,
        ),
    s.lastExit === null ? null : h("span", "last-exit", h("span", "muted", "last exit "), h("code", {}, s.lastExit)),
  );
}

// --- the execution record, on demand -----------------------------------------------------------

function record(sessionId: string, e: ExecutionView, nowMs: number): HTMLElement {
  const rows: [string, Child, string?][] = [
    ["epoch", h("code", "epoch-full", e.epoch)],
    ["identity", h("code", "digest-full", e.identity)],
    ["launched", h("span", { title: new Date(e.startedAtMs).toISOString() }, `${clock(e.startedAtMs, nowMs)} · ${ago(e.startedAtMs, nowMs)}`, h("span", "muted", ` · pid ${e.pid}`))],
    ["command", h("code", "command", commandLine(e.launchCommand))],
    ["executable", artifacts([e.executable])],
  ];
  if (e.wrappers.length > 0) rows.push(["wrappers", artifacts(e.wrappers)]);
  rows.push(["entry", e.entry === null ? none("no entry file") : artifacts([e.entry])]);
  rows.push(["lockfiles", e.lockfiles.length === 0 ? none("none in the working directory") : artifacts(e.lockfiles)]);
  if (e.extraPaths.length > 0) rows.push(["identity paths", artifacts(e.extraPaths)]);
  rows.push(["runtime", e.runtime === null ? none("—") : h("code", {}, e.runtime)]);
  rows.push(["directory", h("code", "path", e.workingDirectory)]);
  rows.push([
    "environment",
    e.envNames.length === 0 ? none("no variables") : h("div", "chips", ...spaced(e.envNames.map((n) => h("code", "chip", n)))),
    "names only, never values",
  ]);
  rows.push(["sandbox", e.sandbox === null ? h("span", "strong", "none: it can read every file you can and connect anywhere") : h("span", {}, sandboxSentence(e.sandbox))]);
  if (e.loaderEnv.length > 0) {
    rows.push(["loads with", h("div", "chips", ...spaced(e.loaderEnv.map((v) => h("code", "chip", v)))), "values that change what it loads: part of its identity"]);
  }
  return h(
    "details",
    { class: "record", "data-keep": `record:${sessionId}` },
    h("summary", {}, "Execution record"),
    h("dl", "record-grid", ...rows.flatMap(([k, v, title]) => [h("dt", { title }, k), h("dd", {}, v)])),
  );
}

function artifacts(list: ArtifactView[]): HTMLElement {
  return h(
    "div",
    "artifacts",
    ...list.map((a) => h("div", "artifact", h("code", { class: "digest", title: a.digest }, shortDigest(a.digest)), " ", h("code", "path", a.path))),
  );
}

/** `items` with a space between each two, so copied text reads as words (flex layout ignores it). */
function spaced(items: (HTMLElement | null)[]): Child[] {
  return items.filter((item) => item !== null).flatMap((item, i) => (i === 0 ? [item] : [" ", item]));
}

function none(text: string): HTMLElement {
  return h("span", "muted", text);
}
