// Renders what the status window shows from one value: the engine's view (or why there is none).
// Pure DOM construction, no I/O: src/live.ts decides when to call it and what the controls do.

import type { CredentialItem, EngineView, GateStatus, Permissions, Proof, ServerStatus, SettingsChange, Status } from "./bindings";
import { BUILTIN, credentialsPanel, type CredentialControls } from "./credentials";
import { confinementBadge } from "./confinement";
import { h, icon, mark } from "./dom";
import { addServersPanel, guideShown, guideView, NEW_GUIDE, passphraseStep, passphraseStepShown, type Guide, type GuideControls } from "./firstrun";
import { addCommand, agentSnippet, clock, commandLine, count } from "./format";
import { integrityPanel, type VerifyState } from "./integrity";
import { lockedPill, lockScreen, type LockNote } from "./lock";
import { permissionsPanel, type PermissionControls } from "./permissions";
import { serversView } from "./servers";
import { sessionCard } from "./session";
import { passphrasePanel, settingsPanel } from "./settings";

/** What there is to show: nothing yet, the engine's view, or an IPC failure. */
export type Shown =
  | { kind: "loading" }
  | { kind: "view"; view: EngineView }
  | { kind: "ipcError"; message: string };

/** The status window's pages, in the order of their tabs. */
export const TABS = [
  ["overview", "Overview"],
  ["servers", "Servers"],
  ["timeline", "Timeline"],
  ["activity", "Activity"],
  ["permissions", "Permissions"],
  ["credentials", "Credentials"],
  ["integrity", "Integrity"],
  ["settings", "Settings"],
] as const;

export type Tab = (typeof TABS)[number][0];

/** What the window's controls do (src/live.ts wires them to the app). */
export interface Controls {
  tab(tab: Tab): void;
  lock(): void;
  /** Clears the notices of requests the egress broker refused (the person saw them). */
  dismissLeaks(): void;
  /** Unlocks with the proof typed on the locked screen. */
  unlock(proof: Proof): void;
  /** Saves a change to the settings; asks for proof first when the change needs it. */
  saveSettings(change: SettingsChange): Promise<void>;
  /** Changes the passphrase to `passphrase`; asks for the current one first. */
  changePassphrase(passphrase: string): Promise<void>;
  showApprovals(): void;
  restart(label: string): void;
  verify(openBodies: boolean): void;
  credentials: CredentialControls;
  permissions: PermissionControls;
  guide: GuideControls;
}

/** The page shown, the controls, and what the window knows beyond the engine's status. */
export type Ui = {
  tab: Tab;
  controls: Controls;
  /** The last action's failure. */
  actionError?: string | null;
  /** What the settings form says. */
  settingsNote?: string | null;
  /** What the locked screen says: the last unlock's refusal, an unlock on its way. */
  lockNote?: LockNote;
  /** What the last restart of each server did. */
  serverNotes?: Record<string, string>;
  /** The credentials (`list: null` while they are read). */
  credentials?: { list: CredentialItem[] | null; error: string | null };
  /** The Permissions page (`page: null` while it is read). */
  permissions?: { page: Permissions | null; error: string | null };
  /** A verification of the audit log asked for from the Integrity view. */
  verification?: VerifyState;
  /** The first-run guide. */
  guide?: Guide;
  /** Views that keep their own state (src/timeline.ts, src/activity.ts), mounted as they are. */
  panes?: Partial<Record<"timeline" | "activity", HTMLElement>>;
};

const nothing = async (): Promise<void> => {};

/** Controls that do nothing (tests override the ones they watch). */
export function inertControls(): Controls {
  return {
    tab() {},
    lock() {},
    dismissLeaks() {},
    unlock() {},
    saveSettings: nothing,
    changePassphrase: nothing,
    showApprovals() {},
    restart() {},
    verify() {},
    credentials: { add: nothing, rotate: nothing, remove: nothing, bind: nothing, unbind: nothing },
    permissions: { revoke: nothing, revokeRun: nothing, addEveryUse: async () => null, removeEveryUse: nothing },
    guide: { addServer: nothing, readFile() {}, importServers() {}, copy() {}, previewRewire() {}, rewire() {}, cancelRewire() {}, moveToKeychain() {}, showApprovals() {}, finish() {}, setPassphrase: nothing },
  };
}

const INERT: Ui = { tab: "overview", controls: inertControls() };

/** The whole window for `shown`, as of `nowMs`. */
export function render(shown: Shown, nowMs: number, ui: Ui = INERT): HTMLElement {
  const { pill, home, actions, nav, body } = parts(shown, nowMs, ui);
  return h(
    "div",
    `window page-${ui.tab}`,
    h(
      "header",
      "top",
      h("div", "brand", mark(), h("div", "brand-text", h("h1", {}, "Postern"), homeLine(home))),
      h("div", "top-actions", ...actions, pill),
    ),
    nav,
    ui.actionError ? h("p", { class: "action-error", role: "alert" }, ui.actionError) : null,
    h("main", "content", ...body),
  );
}

type Parts = { pill: HTMLElement; home: string | null; actions: HTMLElement[]; nav: HTMLElement | null; body: HTMLElement[] };

function parts(shown: Shown, nowMs: number, ui: Ui): Parts {
  const plain = { actions: [], nav: null };
  if (shown.kind === "loading") {
    return { ...plain, pill: pill("idle", "Connecting…"), home: null, body: [] };
  }
  if (shown.kind === "ipcError") {
    return {
      ...plain,
      pill: pill("bad", "No connection"),
      home: null,
      body: [notice("bad", "Cannot reach the Postern app", [shown.message])],
    };
  }
  const view = shown.view;
  switch (view.state) {
    case "starting":
      return {
        ...plain,
        pill: pill("idle", "Starting…"),
        home: view.home || null,
        body: [notice("idle", "Starting the engine", ["This takes a moment."])],
      };
    case "running": {
      const gate = view.status.gate;
      const warning = configBanner(gate);
      if (gate.vault === "quarantined") {
        // Only the audit log's own state: where its chain failed, nothing from the vault.
        return {
          ...plain,
          pill: pill("bad", lockedPill(gate.vault)),
          home: null,
          body: [warning, lockScreen(gate.vault, ui.controls.unlock), integrityPanel(view.status.audit, ui.verification ?? { kind: "idle" }, ui.controls.verify)].filter(
            (el): el is HTMLElement => el !== null,
          ),
        };
      }
      if (passphraseStepShown(view.status)) {
        // First run: the passphrase before anything else (the vault is locked until it is set).
        return { ...plain, pill: pill("warn", "No passphrase yet"), home: null, body: [warning, passphraseStep(ui.controls.guide)].filter((el): el is HTMLElement => el !== null) };
      }
      if (gate.vault !== "ready") {
        // Only the lock state: nothing from the vault, not even the home's path.
        return {
          ...plain,
          pill: pill("warn", lockedPill(gate.vault)),
          home: null,
          body: [warning, lockScreen(gate.vault, ui.controls.unlock, ui.lockNote)].filter((el): el is HTMLElement => el !== null),
        };
      }
      return {
        pill: pill("ok", "Engine running"),
        home: view.status.home,
        actions: [waiting(gate.approvals, ui.controls), lockButton(ui.controls)].filter((el): el is HTMLElement => el !== null),
        nav: tabs(ui),
        body: [warning, leakBanner(gate, nowMs, ui.controls), auditBanner(view.status, ui), ...page(view.status, nowMs, ui)].filter((el): el is HTMLElement => el !== null),
      };
    }
    case "stopped":
      return {
        ...plain,
        pill: pill("idle", "Stopped"),
        home: view.home,
        body: [notice("idle", "The engine has stopped", ["Postern is quitting."])],
      };
    case "unavailable":
      return { ...plain, pill: pill("warn", "Engine unavailable"), home: view.home, body: [unavailable(view)] };
  }
}

function homeLine(home: string | null): HTMLElement {
  if (home === null) return h("p", "home muted", "");
  return h("p", { class: "home", title: home }, h("span", "muted", "Home "), h("code", {}, home));
}

function pill(tone: "ok" | "warn" | "bad" | "idle", text: string): HTMLElement {
  return h("span", `pill pill-${tone}`, h("span", "dot"), text);
}

function tabs(ui: Ui): HTMLElement {
  const tab = (id: Tab, text: string): HTMLElement => {
    const el = h("button", { type: "button", role: "tab", class: `tab tab-${id}`, "aria-selected": String(ui.tab === id) }, text);
    el.addEventListener("click", () => ui.controls.tab(id));
    return el;
  };
  return h("nav", { class: "tabs", role: "tablist" }, ...TABS.map(([id, text]) => tab(id, text)));
}

/** The page of the tab shown. */
function page(status: Status, nowMs: number, ui: Ui): HTMLElement[] {
  const c = ui.controls;
  switch (ui.tab) {
    case "overview":
      return running(status, nowMs, ui);
    case "servers":
      return [serversView(status, nowMs, c.restart, ui.serverNotes, ui.guide === undefined ? null : addServersPanel(status, ui.guide, c.guide))];
    case "timeline":
    case "activity":
      return [ui.panes?.[ui.tab] ?? h("p", "empty-line muted", "Not available in this window.")];
    case "credentials":
      return [
        credentialsPanel(
          ui.credentials?.list ?? null,
          status.servers.map((s) => s.label),
          c.credentials,
          nowMs,
          ui.credentials?.error ?? null,
        ),
      ];
    case "permissions":
      return [permissionsPanel(ui.permissions?.page ?? null, known(status, ui), c.permissions, nowMs, ui.permissions?.error ?? null)];
    case "integrity":
      return [integrityPanel(status.audit, ui.verification ?? { kind: "idle" }, c.verify)];
    case "settings":
      return [settingsPanel(status.gate.settings, c.saveSettings, ui.settingsNote ?? null), passphrasePanel(c.changePassphrase)];
  }
}

/** What the every-use form offers: the servers (and the built-in one), their tools as the sessions know them, the credentials. */
function known(status: Status, ui: Ui): { servers: string[]; tools: Record<string, string[]>; credentials: string[] } {
  const tools: Record<string, string[]> = {};
  for (const s of status.sessions) {
    if (s.catalog !== null) tools[s.server] = [...new Set([...(tools[s.server] ?? []), ...s.catalog.tools])].sort();
  }
  const servers = status.servers.map((s) => s.label);
  return {
    servers: servers.includes(BUILTIN) ? servers : [...servers, BUILTIN],
    tools,
    credentials: (ui.credentials?.list ?? []).map((c) => c.name),
  };
}

/**
 * On every screen while the engine reports settings edited in its database behind its back
 * (detected, and not applied): someone, or something, tried to change them without a person.
 */
function configBanner(gate: GateStatus): HTMLElement | null {
  // (Absent from an engine older than the field: no banner.)
  if (gate.configWarning === null || gate.configWarning === undefined || gate.configWarning === "") return null;
  return h("p", "config-warning", icon("alert"), h("span", {}, h("span", "strong", "Settings not applied. "), gate.configWarning));
}

/**
 * On every page until the person dismisses it: requests the egress broker refused because they
 * carried a credential's placeholder toward a host it may not go to. The server's launch got no
 * value, and its next launch gets the credential only after the person approves again.
 */
function leakBanner(gate: GateStatus, nowMs: number, controls: Controls): HTMLElement | null {
  const leaks = gate.leaks ?? [];
  if (leaks.length === 0) return null;
  const seen = h("button", { type: "button", class: "dismiss-leaks" }, "Seen");
  seen.addEventListener("click", () => controls.dismissLeaks());
  return h(
    "div",
    // No live region: the window is drawn again every minute (the notification told at once).
    { class: "leak-banner" },
    icon("alert"),
    h(
      "div",
      {},
      h("p", "strong", leaks.length === 1 ? "Postern refused a request that tried to take a credential elsewhere" : `Postern refused ${leaks.length} requests that tried to take credentials elsewhere`),
      h(
        "ul",
        "leak-list",
        ...leaks.map((l) =>
          h(
            "li",
            { "data-server": l.server },
            h("code", "chip", l.server),
            ` sent the placeholder of ${l.credentials.join(", ")} toward `,
            h("code", {}, l.host),
            l.count > 1 ? ` (${l.count} requests)` : "",
            h("span", "muted", ` · ${clock(l.atMs, nowMs)}`),
          ),
        ),
      ),
      h("p", "muted", "Nothing reached that host. The server gets these credentials again only when you approve its next launch."),
    ),
    seen,
  );
}

/** On every page while the audit log cannot record: every call is refused meanwhile. */
function auditBanner(status: Status, ui: Ui): HTMLElement | null {
  const state = status.audit.state;
  if (state.state !== "unavailable" || ui.tab === "integrity") return null;
  const more = h("button", { type: "button", class: "link" }, "Integrity");
  more.addEventListener("click", () => ui.controls.tab("integrity"));
  return h("p", "action-error audit-banner", "The audit log is unavailable, so every tool call is refused: ", state.reason, " ", more);
}

function lockButton(controls: Controls): HTMLElement {
  const el = h("button", { type: "button", class: "lock-button", title: "Lock the vault: every tool call is refused until you unlock" }, icon("lock"), "Lock");
  el.addEventListener("click", () => controls.lock());
  return el;
}

function waiting(n: number, controls: Controls): HTMLElement | null {
  if (n === 0) return null;
  const el = h("button", { type: "button", class: "waiting", title: "Open the approval window" }, `${n} waiting`);
  el.addEventListener("click", () => controls.showApprovals());
  return el;
}

// --- running -------------------------------------------------------------------------------

function running(status: Status, nowMs: number, ui: Ui): HTMLElement[] {
  const guide = ui.guide ?? NEW_GUIDE;
  if (guideShown(status, guide)) {
    const view = guideView(status, guide, ui.controls.guide);
    if (status.servers.length === 0 && status.sessions.length === 0) return [view];
    return [view, servers(status.servers), sessions(status, nowMs), footer(status)];
  }
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
      confinementBadge(s.confinement),
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
  return panel("sessions", "Agent sessions", `${list.length} connected`, h("ul", "sessions", ...list.map((s) => sessionCard(s, nowMs, status.gate.settings.sessionMode))));
}

function footer(status: Status): HTMLElement {
  return h("p", "foot muted", "Agents reach this engine through ", h("code", {}, status.socket));
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
    `notice notice-${tone}`,
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
