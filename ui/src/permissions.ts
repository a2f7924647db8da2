// The Permissions page: every live grant, under the agent run it was given to (by the agent's
// own name and working directory), with Revoke and "Revoke all for this agent"; and the
// every-use rules ("ask on every use" for a tool, a server or a credential) with add and
// remove. Also the one line a session card says about what its agent may do. Pure DOM
// construction: src/live.ts reads the page and wires the controls.

import type { EveryUseTarget, GrantEndView, GrantTools, GrantView, Permissions, RunGrants, RunKey, SessionStatus } from "./bindings";
import { h } from "./dom";
import { ago, clock, count, launchLine } from "./format";

/** What the page's controls do (src/live.ts wires them to the app). */
export interface PermissionControls {
  /** Ends one grant now. */
  revoke(id: string): Promise<void>;
  /** Ends every grant of one agent run now; `agent` names it for messages. */
  revokeRun(run: RunKey, agent: string): Promise<void>;
  /** Turns "ask on every use" on; resolves with the engine's warning, if any. */
  addEveryUse(target: EveryUseTarget): Promise<string | null>;
  /** Turns it off (a widening: the person's proof is asked first). */
  removeEveryUse(target: EveryUseTarget): Promise<void>;
}

/** What the add form offers: servers, their known tools, credential names. */
export interface Known {
  servers: string[];
  /** Tools per server, from the connected sessions' catalogs. */
  tools: Record<string, string[]>;
  credentials: string[];
}

/** The page: `page` is `null` while it is read. */
export function permissionsPanel(page: Permissions | null, known: Known, controls: PermissionControls, nowMs: number, error: string | null = null): HTMLElement {
  const grants = page?.runs.reduce((n, r) => n + r.grants.length, 0) ?? 0;
  return h(
    "div",
    "permissions-view",
    h(
      "section",
      { class: "panel grants-panel", "aria-labelledby": "grants-h" },
      h("div", "panel-head", h("h2", { id: "grants-h" }, "Granted"), h("span", "muted", page === null ? "" : count(grants, "grant"))),
      h(
        "p",
        "panel-note muted",
        "What agents may do without asking you. A grant covers one launch of a server: when the server starts again, its next call asks. Revoking takes effect at the agent's next call.",
      ),
      error === null ? null : h("p", { class: "action-error", role: "alert" }, `Cannot read the permissions: ${error}`),
      page === null
        ? h("p", "empty-line muted", "Reading…")
        : page.runs.length === 0
          ? h("p", "empty-line nothing-granted", "Nothing is granted: each call asks you.")
          : h("ul", "grant-runs", ...page.runs.map((run) => runView(run, controls, nowMs))),
    ),
    everyUsePanel(page?.everyUse ?? null, known, controls),
  );
}

/** "this call", "until 21:40 (12 min left)", "until the agent run ends". */
export function endWords(end: GrantEndView, nowMs: number): string {
  switch (end.kind) {
    case "thisCall":
      return "this call";
    case "until":
      return `until ${clock(end.unixMs, nowMs)} (${left(end.unixMs - nowMs)})`;
    case "runEnds":
      return "until the agent run ends";
  }
}

/**
 * What a session's agent may do, in one line: "allowed: deploy on ci-server until 21:40", or
 * "nothing granted; each call asks" (in observe mode: calls go through, journaled).
 */
export function allowedLine(s: SessionStatus, nowMs: number, mode: "prompt" | "observe" = "prompt"): string {
  const grants = s.grants ?? [];
  if (grants.length === 0) {
    return mode === "observe" ? "nothing granted; observe mode lets its calls through, journaled" : "nothing granted; each call asks";
  }
  return `allowed: ${grants.map((g) => `${toolsShort(g.tools)} on ${g.server} ${endShort(g.end, nowMs)}`).join("; ")}`;
}

/** An every-use rule as a person reads it (as `postern every-use list` says it). */
export function targetText(t: EveryUseTarget): string {
  switch (t.on) {
    case "tool":
      return `tool ${t.tool} of ${t.server}`;
    case "server":
      return `every tool of ${t.server}`;
    case "credential":
      return `every call using credential ${t.name}`;
  }
}

/** The agent run by its own name ("claude-code 2.1.3"), else by its process. */
export function agentName(run: RunGrants): string {
  return run.client ?? `agent pid ${run.run.pid}`;
}

// --- grants ----------------------------------------------------------------------------------

function runView(run: RunGrants, controls: PermissionControls, nowMs: number): HTMLElement {
  const name = agentName(run);
  const all = button("revoke-run danger", "Revoke all for this agent", `End every grant of ${name} now: its next calls ask you`, () => controls.revokeRun(run.run, name));
  return h(
    "li",
    { class: "grant-run", "data-pid": String(run.run.pid) },
    h(
      "div",
      "grant-run-head",
      h("span", { class: "run-agent", title: run.client === null ? "The agent did not say its name" : "The agent's own name and version, as it said in its initialize" }, name),
      run.cwd === null ? null : h("span", "run-cwd muted", "in ", h("code", {}, run.cwd)),
      h("span", "run-pid muted", `pid ${run.run.pid}`),
      run.connected ? null : h("span", { class: "badge badge-idle run-gone", title: "No session of this agent is connected; its grants last while its process runs" }, "not connected"),
      all,
    ),
    h("ul", "grant-list", ...run.grants.map((g) => grantView(g, controls, nowMs))),
  );
}

function grantView(g: GrantView, controls: PermissionControls, nowMs: number): HTMLElement {
  const revoke = button("revoke", "Revoke", "End this grant now: the next such call asks you", () => controls.revoke(g.id));
  return h(
    "li",
    { class: `grant${g.launchRunning ? "" : " grant-stale"}`, "data-grant": g.id },
    h(
      "div",
      "grant-main",
      h("div", "grant-what", toolsView(g.tools), h("span", "muted", " on "), h("span", "grant-server", g.server), " ", h("span", "grant-end", endWords(g.end, nowMs))),
      h(
        "div",
        "grant-facts muted",
        h(
          "span",
          { class: "grant-launch", title: `execution epoch ${g.epoch}` },
          launchLine(g.launch, g.epoch, g.launchedAtMs, nowMs),
          g.launchRunning ? null : h("span", "launch-ended", " · ended: covers nothing now"),
        ),
        g.credentials.length === 0 ? null : h("span", "grant-credentials", "credentials ", ...g.credentials.map((c) => h("code", "chip", c))),
        h("span", { class: "grant-given", title: new Date(g.issuedAtMs).toISOString() }, `given ${clock(g.issuedAtMs, nowMs)} · ${ago(g.issuedAtMs, nowMs)}`),
      ),
    ),
    revoke,
  );
}

function toolsView(tools: GrantTools): HTMLElement {
  if (tools.kind === "named") return h("span", "grant-tools", ...tools.names.flatMap((n, i) => [i === 0 ? "" : ", ", h("code", "tool", n)]));
  return h(
    "span",
    { class: "grant-tools every-tool", title: `catalog revision ${tools.revision}${tools.names.length === 0 ? "" : `\n${tools.names.join("\n")}`}` },
    "every tool of this catalog",
    tools.names.length === 0 ? null : h("span", "muted", ` (${tools.names.join(", ")})`),
  );
}

function toolsShort(tools: GrantTools): string {
  return tools.kind === "named" ? tools.names.join(", ") : "every tool";
}

function endShort(end: GrantEndView, nowMs: number): string {
  switch (end.kind) {
    case "thisCall":
      return "for one call";
    case "until":
      return `until ${clock(end.unixMs, nowMs)}`;
    case "runEnds":
      return "until the agent run ends";
  }
}

/** "12 min left", "1 h 5 min left", "less than a minute left". */
function left(ms: number): string {
  const minutes = Math.ceil(ms / 60_000);
  if (ms < 60_000) return "less than a minute left";
  if (minutes < 60) return `${minutes} min left`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h left` : `${hours} h ${minutes % 60} min left`;
}

// --- every use -------------------------------------------------------------------------------

function everyUsePanel(rules: EveryUseTarget[] | null, known: Known, controls: PermissionControls): HTMLElement {
  return h(
    "section",
    { class: "panel every-use-panel", "aria-labelledby": "every-use-h" },
    h("div", "panel-head", h("h2", { id: "every-use-h" }, "Ask on every use"), h("span", "muted", rules === null ? "" : count(rules.length, "rule"))),
    h(
      "p",
      "panel-note muted",
      "Each call these rules match asks you, whatever was granted. Adding a rule needs nothing; removing one lets grants count again, so it asks for your passphrase.",
    ),
    rules === null
      ? null
      : rules.length === 0
        ? h("p", "empty-line muted", "No rules: grants and approvals decide.")
        : h(
            "ul",
            "every-use-list",
            ...rules.map((t) =>
              h(
                "li",
                { class: "every-use-rule", "data-target": JSON.stringify(t) },
                h("span", "rule-text", targetText(t)),
                button("remove-every-use", "Remove", "Stop asking on every use here (asks for your passphrase)", () => controls.removeEveryUse(t)),
              ),
            ),
          ),
    addForm(known, controls.addEveryUse),
  );
}

/** The form that adds a rule: on a tool of a server, a whole server, or a credential. */
function addForm(known: Known, add: PermissionControls["addEveryUse"]): HTMLElement {
  const on = h(
    "select",
    { name: "on", "aria-label": "Ask on every use of" },
    h("option", { value: "tool" }, "a tool"),
    h("option", { value: "server" }, "every tool of a server"),
    h("option", { value: "credential" }, "a credential"),
  ) as HTMLSelectElement;
  const server = h("select", { name: "server", "aria-label": "Server" }, ...known.servers.map((s) => h("option", { value: s }, s))) as HTMLSelectElement;
  const toolList = h("datalist", { id: "every-use-tools" });
  const tool = h("input", { name: "tool", type: "text", placeholder: "tool name", list: "every-use-tools", autocomplete: "off", spellcheck: "false", "aria-label": "Tool" }) as HTMLInputElement;
  const credentialList = h("datalist", { id: "every-use-credentials" }, ...known.credentials.map((c) => h("option", { value: c })));
  const credential = h("input", { name: "credential", type: "text", placeholder: "credential name", list: "every-use-credentials", autocomplete: "off", spellcheck: "false", "aria-label": "Credential" }) as HTMLInputElement;
  const submit = h("button", { type: "submit", class: "primary add-every-use" }, "Add") as HTMLButtonElement;
  const status = h("p", { class: "form-status", role: "status" }, "");
  const form = h(
    "form",
    { class: "every-use-form", "data-form": "every-use", autocomplete: "off", novalidate: "" },
    h("span", "field-title", "Ask on every use of"),
    on,
    server,
    tool,
    toolList,
    credential,
    credentialList,
    submit,
    status,
  ) as HTMLFormElement;
  const show = (): void => {
    server.hidden = on.value === "credential";
    tool.hidden = on.value !== "tool";
    credential.hidden = on.value !== "credential";
    toolList.replaceChildren(...(known.tools[server.value] ?? []).map((t) => h("option", { value: t })));
  };
  show();
  on.addEventListener("change", show);
  server.addEventListener("change", show);
  form.addEventListener("input", () => {
    form.dataset.dirty = "true";
    setStatus(status, "", false);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const target = readTarget(on.value, server.value, tool.value, credential.value);
    if (typeof target === "string") {
      setStatus(status, target, true);
      return;
    }
    submit.disabled = true;
    add(target).then(
      (warning) => {
        tool.value = "";
        credential.value = "";
        delete form.dataset.dirty;
        setStatus(status, warning ?? `Added: ${targetText(target)} asks you on every use.`, warning !== null);
      },
      (err: unknown) => setStatus(status, err instanceof Error ? err.message : String(err), true),
    ).finally(() => (submit.disabled = false));
  });
  return form;
}

/** The rule the form describes, or why it cannot be added. */
export function readTarget(on: string, server: string, tool: string, credential: string): EveryUseTarget | string {
  switch (on) {
    case "credential":
      return credential.trim() === "" ? "Name the credential." : { on: "credential", name: credential.trim() };
    case "server":
      return server === "" ? "Add a server first." : { on: "server", server };
    default:
      if (server === "") return "Add a server first.";
      return tool.trim() === "" ? "Name the tool." : { on: "tool", server, tool: tool.trim() };
  }
}

// --- pieces ----------------------------------------------------------------------------------

/** A button that runs `act` once per click, disabled while it runs. */
function button(cls: string, text: string, title: string, act: () => Promise<unknown>): HTMLButtonElement {
  const el = h("button", { type: "button", class: cls, title }, text) as HTMLButtonElement;
  el.addEventListener("click", () => {
    el.disabled = true;
    void act().finally(() => (el.disabled = false));
  });
  return el;
}

function setStatus(el: HTMLElement, text: string, bad: boolean): void {
  el.textContent = text;
  el.classList.toggle("bad", bad);
  el.setAttribute("role", bad ? "alert" : "status");
}
