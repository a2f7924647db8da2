// First run. Before anything else, while the engine has no passphrase: choose the Postern
// passphrase (setting it also unlocks the vault). Then the guide, shown on an empty home (and
// until the newcomer says they are done):
//
//   1. add a server: a form (label, command, arguments, directory, environment), or the servers
//      of an existing Claude Desktop, Claude Code or Cursor configuration;
//   2. point the agent at Postern: the snippet, with the absolute path of the `postern` CLI;
//   3. see the first gated call arrive: it opens the approval window.
//
// And, for the curious, the demo: `postern demo` plays an agent and a rebuild against this app.
// Pure DOM construction; src/live.ts holds the guide's state and runs its controls.

import type { AgentSnippet, ImportSource, NewServer, Plan, Rewired, Status } from "./bindings";
import { h } from "./dom";
import { agentSnippet, commandLine, splitWords } from "./format";
import { newPassphraseForm } from "./proof";

/** What the guide knows beyond the engine's status. */
export interface Guide {
  /** Agent configurations found on this machine, and files the user named (`null`: not looked yet). */
  sources: ImportSource[] | null;
  /** Labels added through the guide. */
  added: string[];
  /** The snippet for the labels shown in step 2, with the CLI's absolute path. */
  snippet: AgentSnippet | null;
  /** What the last add or import said. */
  note: { text: string; bad: boolean } | null;
  /** The newcomer closed the guide. */
  finished: boolean;
  /** A rewire being previewed or just done, by the agent configuration's path. */
  rewire: Rewiring | null;
  /** Secret-looking variables an import stored in plain text, as the file had them. */
  plainSecrets: PlainSecret[];
}

/** A variable of an imported server whose name says it holds a secret. */
export type PlainSecret = { server: string; name: string };

/** Rewiring one agent configuration: its preview, then what was done, or why not. */
export type Rewiring = { path: string; plan: Plan | null; done: Rewired | null; error: string | null };

export const NEW_GUIDE: Guide = { sources: null, added: [], snippet: null, note: null, finished: false, rewire: null, plainSecrets: [] };

/** What the guide's controls do. */
export interface GuideControls {
  /** Adds a server; rejects with the engine's sentence. */
  addServer(server: NewServer): Promise<void>;
  /** Reads the configuration file at `path` too. */
  readFile(path: string): void;
  /** Imports the entries `names` of the file at `path`. */
  importServers(path: string, names: string[]): void;
  /** Copies `text` to the clipboard. */
  copy(text: string): void;
  /** Shows what rewiring the agent configuration at `path` would change. */
  previewRewire(path: string): void;
  /** Rewires it as previewed (`names`: the entries the preview listed), with a backup. */
  rewire(path: string, names: string[]): void;
  /** Closes the preview. */
  cancelRewire(): void;
  /** Moves an imported server's plain variable into the keychain (asks for the proof). */
  moveToKeychain(secret: PlainSecret): void;
  showApprovals(): void;
  finish(): void;
  /** Sets the first passphrase (which unlocks the vault); rejects with the engine's sentence. */
  setPassphrase(passphrase: string): Promise<void>;
}

/** Whether the window shows the passphrase step: an engine runs, and no passphrase is set yet. */
export function passphraseStepShown(status: Status): boolean {
  return status.gate.passphraseSet === false;
}

/** "Choose a Postern passphrase": what it is for, and the two fields that set it. */
export function passphraseStep(controls: Pick<GuideControls, "setPassphrase">): HTMLElement {
  return h(
    "section",
    { class: "panel choose-passphrase", "aria-labelledby": "choose-passphrase-h" },
    h("div", "panel-head", h("h2", { id: "choose-passphrase-h" }, "Choose a Postern passphrase")),
    h(
      "p",
      "lede passphrase-why",
      "Your passphrase is what proves that a person, not an agent, approves. Postern asks for it for every approval, every unlock and every change that widens what agents may do. It is never stored in the clear, and nobody can recover it: if you forget it, you start a new Postern home.",
    ),
    newPassphraseForm({ form: "choose-passphrase", submit: "Set passphrase and unlock", send: controls.setPassphrase, autofocus: true }),
  );
}

/** Whether the Overview shows the guide. */
export function guideShown(status: Status, guide: Guide): boolean {
  if (guide.finished) return false;
  return (status.servers.length === 0 && status.sessions.length === 0) || guide.added.length > 0;
}

/** The labels step 2 is about: those added through the guide, else every configured one. */
export function snippetLabels(status: Status, guide: Guide): string[] {
  if (guide.added.length > 0) return guide.added;
  return status.servers.map((s) => s.label);
}

/** The guide for `status`. */
export function guideView(status: Status, guide: Guide, controls: GuideControls): HTMLElement {
  const hasServers = status.servers.length > 0;
  return h(
    "section",
    { class: "panel welcome", "aria-labelledby": "welcome-h" },
    h("div", "panel-head", h("h2", { id: "welcome-h" }, "Welcome to Postern"), hasServers ? finishButton(controls) : null),
    h(
      "p",
      "lede",
      "Postern stands between your AI agents and the MCP servers on this machine: it runs each server, records exactly which code is running, and asks you before an agent's call goes through. Three steps connect an agent.",
    ),
    h(
      "ol",
      "steps",
      h(
        "li",
        { class: `step step-add${hasServers ? " done" : ""}` },
        h("div", "step-title", "Add a server"),
        h("div", "add-options", addServerForm(controls), importBox(guide, controls)),
        guide.note === null ? null : h("p", { class: `form-status guide-note${guide.note.bad ? " bad" : ""}`, role: guide.note.bad ? "alert" : "status" }, guide.note.text),
        plainSecretsView(guide.plainSecrets, controls),
        h("p", "muted small", "From a terminal: ", h("code", {}, "postern server add <label> -- <command> [args...]")),
      ),
      h(
        "li",
        { class: `step step-snippet${hasServers ? "" : " later"}` },
        h("div", "step-title", "Point your agent at Postern"),
        rewireBox(guide, controls),
        snippetBox(status, guide, controls),
      ),
      h("li", { class: `step step-call${status.sessions.length > 0 ? " done" : ""}` }, h("div", "step-title", "See the first gated call"), callStep(status, controls)),
    ),
    demoHint(status.home),
  );
}

/**
 * Add and import for the Servers view, after the guide is gone: the same form and import box
 * as step 1, the secrets an import left in plain text, and each agent configuration's coverage
 * with Rewire, folded under one summary (kept open across re-renders).
 */
export function addServersPanel(status: Status, guide: Guide, controls: GuideControls): HTMLElement {
  return h(
    "details",
    { class: "panel add-servers", "data-keep": "add-servers" },
    h("summary", {}, "Add or import a server"),
    h("div", "add-options", addServerForm(controls), importBox(guide, controls)),
    guide.note === null ? null : h("p", { class: `form-status guide-note${guide.note.bad ? " bad" : ""}`, role: guide.note.bad ? "alert" : "status" }, guide.note.text),
    plainSecretsView(guide.plainSecrets, controls),
    status.servers.length === 0 ? null : rewireBox(guide, controls),
  );
}

function finishButton(controls: GuideControls): HTMLElement {
  const el = h("button", { type: "button", class: "finish-guide" }, "Done");
  el.addEventListener("click", () => controls.finish());
  return el;
}

// --- step 1 ---------------------------------------------------------------------------------------

function addServerForm(controls: GuideControls): HTMLElement {
  const input = (name: string, placeholder: string, extra: Record<string, string> = {}): HTMLElement =>
    h("input", { name, type: "text", placeholder, autocomplete: "off", spellcheck: "false", ...extra });
  const field = (title: string, control: HTMLElement, hint?: string): HTMLElement =>
    h("label", "field", h("span", "field-title", title), control, hint === undefined ? null : h("span", "field-hint muted", hint));
  const status = h("p", { class: "form-status", role: "status" }, "");
  const submit = h("button", { type: "submit", class: "primary add-server" }, "Add server") as HTMLButtonElement;
  const form = h(
    "form",
    { class: "add-server-form", "data-form": "add-server", novalidate: "" },
    h("div", "option-title", "Configure one"),
    field("Label", input("label", "time"), "What agents will ask for: postern mcp <label>"),
    field("Command", input("command", "uvx"), "The program that runs the server."),
    field("Arguments", input("args", "mcp-server-time --local-timezone UTC"), "Quoted like a shell."),
    field("Directory", input("cwd", "/home/you/work/server"), "Optional: where it runs (absolute)."),
    field("Environment", h("textarea", { name: "env", rows: "2", placeholder: "LOG_LEVEL=debug", spellcheck: "false" }), "Optional: NAME=value, one a line. For secrets, use Credentials."),
    h("div", "form-actions", submit, status),
  ) as HTMLFormElement;
  form.addEventListener("input", () => (form.dataset.dirty = "true"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const read = readServer(form);
    if (typeof read === "string") {
      status.textContent = read;
      status.classList.add("bad");
      return;
    }
    submit.disabled = true;
    status.textContent = "Adding…";
    status.classList.remove("bad");
    controls.addServer(read).then(
      () => {
        form.reset();
        delete form.dataset.dirty;
        status.textContent = "";
      },
      (err: unknown) => {
        status.textContent = err instanceof Error ? err.message : String(err);
        status.classList.add("bad");
      },
    ).finally(() => (submit.disabled = false));
  });
  return form;
}

/** The server the form describes, or why it cannot be sent. */
export function readServer(form: HTMLFormElement): NewServer | string {
  const field = (name: string): string => (form.elements.namedItem(name) as HTMLInputElement | null)?.value ?? "";
  const label = field("label").trim();
  if (label === "") return "Give the server a label.";
  const program = field("command").trim();
  if (program === "") return "Say which program runs the server.";
  const args = splitWords(field("args"));
  if (typeof args === "string") return args;
  const cwd = field("cwd").trim();
  const env = field("env")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const bad = env.find((line) => !/^[^=\s]+=/.test(line));
  if (bad !== undefined) return `Each environment line is NAME=value; got ${JSON.stringify(bad)}.`;
  return { label, command: [program, ...args], cwd: cwd === "" ? null : cwd, env };
}

const CLIENTS: Record<string, string> = { claudeDesktop: "Claude Desktop", claudeCode: "Claude Code", cursor: "Cursor" };

function importBox(guide: Guide, controls: GuideControls): HTMLElement {
  const path = h("input", { name: "path", type: "text", placeholder: "/path/to/mcp.json", spellcheck: "false", autocomplete: "off" }) as HTMLInputElement;
  const read = h("form", { class: "import-path", "data-form": "import-path" }, path, h("button", { type: "submit" }, "Read")) as HTMLFormElement;
  read.addEventListener("input", () => (read.dataset.dirty = "true"));
  read.addEventListener("submit", (event) => {
    event.preventDefault();
    if (path.value.trim() !== "") controls.readFile(path.value.trim());
    delete read.dataset.dirty;
  });
  const sources = guide.sources;
  return h(
    "div",
    "import-box",
    h("div", "option-title", "Or import from your agent"),
    sources === null
      ? h("p", "muted small", "Looking for Claude Desktop, Claude Code and Cursor configurations…")
      : sources.length === 0
        ? h("p", "muted small import-none", "No Claude Desktop, Claude Code or Cursor configuration was found in your home directory. Name a file:")
        : h("div", "import-sources", ...sources.map((s) => sourceForm(s, controls))),
    read,
  );
}

function sourceForm(source: ImportSource, controls: GuideControls): HTMLElement {
  const client = source.found === null ? "File" : (CLIENTS[source.found.client] ?? source.found.client);
  if (source.error !== null) {
    return h("div", "import-source", h("div", "import-title", client, " ", h("code", {}, source.path)), h("p", { class: "form-status bad", role: "alert" }, source.error));
  }
  const boxes = source.entries.map((e) => {
    const box = h("input", { type: "checkbox", name: "entry", value: e.name }) as HTMLInputElement;
    box.checked = e.skipped === null;
    box.disabled = e.skipped !== null;
    return h(
      "label",
      `import-entry${e.skipped === null ? "" : " skipped"}`,
      box,
      h("span", "entry-name", e.name),
      e.skipped === null ? h("code", "entry-cmd", commandLine(e.command)) : h("span", "entry-skip muted", e.skipped),
    );
  });
  const importable = source.entries.some((e) => e.skipped === null);
  const form = h(
    "form",
    { class: "import-source", "data-path": source.path, "data-form": `import:${source.path}` },
    h("div", "import-title", client, " ", h("code", {}, source.path)),
    source.entries.length === 0 ? h("p", "muted small", "No servers in it.") : h("div", "import-entries", ...boxes),
    importable ? h("button", { type: "submit", class: "import" }, "Import selected") : null,
  ) as HTMLFormElement;
  form.addEventListener("change", () => (form.dataset.dirty = "true"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const names = [...form.querySelectorAll<HTMLInputElement>('input[name="entry"]:checked')].map((b) => b.value);
    delete form.dataset.dirty;
    if (names.length > 0) controls.importServers(source.path, names);
  });
  return form;
}

/** The imported variables that look like secrets, each with Move to keychain. */
function plainSecretsView(secrets: PlainSecret[], controls: GuideControls): HTMLElement | null {
  if (secrets.length === 0) return null;
  return h(
    "div",
    { class: "callout callout-warn plain-secrets", role: "note" },
    h("div", "callout-title", "Stored in plain text, as the file had them"),
    h("p", "small", "These look like secrets. In the keychain, a server gets them only when you approve its code for them."),
    h(
      "ul",
      "plain-secret-list",
      ...secrets.map((s) =>
        h("li", { "data-secret": `${s.server}/${s.name}` }, h("code", {}, s.name), " of ", h("span", "strong", s.server), " ", button("move-to-keychain", "Move to keychain", () => controls.moveToKeychain(s))),
      ),
    ),
  );
}

// --- step 2 ---------------------------------------------------------------------------------------

function snippetBox(status: Status, guide: Guide, controls: GuideControls): HTMLElement {
  const labels = snippetLabels(status, guide);
  if (labels.length === 0) {
    return h("div", "snippet-box", h("p", "muted small", "Once a server is added, this is what goes into your agent's MCP configuration:"), pre(agentSnippet("<label>")));
  }
  const snippet = guide.snippet;
  const json = snippet?.json ?? agentSnippet(labels[0]!);
  const copy = h("button", { type: "button", class: "copy" }, "Copy");
  copy.addEventListener("click", () => controls.copy(json));
  return h(
    "div",
    "snippet-box",
    h("p", "small", "Replace the server's entry in your agent's MCP configuration (Claude Desktop, Cursor: ", h("code", {}, "mcpServers"), ") with:"),
    h("div", "snippet-copy", pre(json, "agent-snippet"), copy),
    snippet === null || snippet.claudeCode.length === 0
      ? null
      : h("p", "small", "Claude Code: ", ...snippet.claudeCode.flatMap((c, i) => [i === 0 ? "" : " ; ", h("code", "claude-code", c)])),
    h("p", "muted small", "Then restart the agent, or reload its MCP servers."),
  );
}

/** Each known agent's configuration: how many of its servers go through Postern, and Rewire. */
function rewireBox(guide: Guide, controls: GuideControls): HTMLElement | null {
  const known = (guide.sources ?? []).filter((s) => s.found !== null && s.coverage !== null);
  if (known.length === 0) return null;
  return h("div", "rewire-box", ...known.map((source) => rewireSource(source, guide.rewire?.path === source.path ? guide.rewire : null, controls)));
}

function rewireSource(source: ImportSource, rewiring: Rewiring | null, controls: GuideControls): HTMLElement {
  const client = CLIENTS[source.found!.client] ?? source.found!.client;
  const coverage = rewiring?.done?.coverage ?? source.coverage!;
  const direct = coverage.direct.length > 0;
  const preview = button("rewire-preview", `Rewire ${client}…`, () => controls.previewRewire(source.path));
  return h(
    "div",
    { class: "rewire-source", "data-path": source.path },
    h("div", "import-title", client, " ", h("code", {}, source.path)),
    h("p", { class: `coverage${direct ? "" : " covered"}` }, coverage.sentence, "."),
    rewiring === null || rewiring.done !== null ? (direct ? preview : null) : null,
    rewiring?.error == null ? null : h("p", { class: "form-status bad", role: "alert" }, rewiring.error),
    rewiring?.plan == null || rewiring.done !== null ? null : planView(client, rewiring.plan, controls),
    rewiring?.done == null
      ? null
      : h("p", { class: "rewired form-status", role: "status" }, `Rewired. The file as it was is kept at `, h("code", {}, rewiring.done.backup), `. Restart ${client}, or reload its MCP servers.`),
  );
}

/** The preview: each entry's command now and after, the variables Postern takes over. */
function planView(client: string, plan: Plan, controls: GuideControls): HTMLElement {
  if (plan.changes.length === 0) {
    return h(
      "div",
      "rewire-plan",
      h("p", "small", `Nothing to rewire yet: no entry of this file runs a server Postern has. Import its servers first (step 1).`),
      button("rewire-cancel", "Close", () => controls.cancelRewire()),
    );
  }
  return h(
    "div",
    "rewire-plan",
    h("p", "small", `${client}'s configuration would change like this (its other settings stay as they are):`),
    h(
      "ul",
      "rewire-changes",
      ...plan.changes.map((c) =>
        h(
          "li",
          { "data-entry": c.name },
          h("span", "entry-name", c.name),
          h("del", {}, h("code", {}, commandLine(c.before))),
          h("ins", {}, h("code", {}, commandLine(c.after))),
          c.envNames.length === 0 ? null : h("span", "muted small", `${c.envNames.join(", ")} now ${c.envNames.length === 1 ? "comes" : "come"} from Postern.`),
        ),
      ),
    ),
    h(
      "div",
      "form-actions",
      button("primary rewire-apply", "Rewire and keep a backup", () => controls.rewire(plan.path, plan.changes.map((c) => c.name))),
      button("rewire-cancel", "Cancel", () => controls.cancelRewire()),
    ),
  );
}

function button(cls: string, text: string, onClick: () => void): HTMLElement {
  const el = h("button", { type: "button", class: cls }, text);
  el.addEventListener("click", onClick);
  return el;
}

// --- step 3 ---------------------------------------------------------------------------------------

function callStep(status: Status, controls: GuideControls): HTMLElement {
  if (status.gate.approvals > 0) {
    const review = h("button", { type: "button", class: "primary review" }, "Review");
    review.addEventListener("click", () => controls.showApprovals());
    return h("div", "call-state call-waiting", h("p", {}, "A call is waiting for your answer in the approval window. Approve it, and it goes through; deny it, and the agent is told approval_denied."), review);
  }
  const session = status.sessions[0];
  if (session !== undefined) {
    return h(
      "p",
      "call-state call-connected",
      `An agent is connected to ${session.server}${session.client === null ? "" : ` (${session.client})`}. Its first tool call opens the approval window.`,
    );
  }
  return h("p", "call-state call-idle muted", "Waiting for an agent to connect through Postern… When its first tool call arrives, the approval window opens and asks you.");
}

function demoHint(home: string): HTMLElement {
  return h(
    "aside",
    "demo-hint",
    h("div", "option-title", "Just looking? Run the demo"),
    h(
      "p",
      "small",
      "It configures a bundled example server, plays an agent whose call you approve, rebuilds the server (a new execution epoch) and calls again: the approval window, the timeline and the audit log then have something to show.",
    ),
    pre(commandLine(["postern", "--home", home, "demo"]), "demo-command"),
    h("p", "muted small", "From a checkout, ", h("code", {}, "./scripts/run-app.sh --demo"), " starts the app on a throwaway home and runs it."),
  );
}

function pre(text: string, cls = ""): HTMLElement {
  return h("pre", `snippet ${cls}`.trim(), h("code", {}, text));
}
