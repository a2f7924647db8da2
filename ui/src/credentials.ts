// The Credentials view: names, how each is injected, its hosts, the servers it is bound to,
// every-use, version and rotation time, where it went through the egress broker (and where its
// placeholder was refused); and the forms that add, rotate, remove, bind and unbind.
//
// A value is typed into a password field and read from it only when the form is submitted;
// it goes straight to the app (src/ipc.ts) and the field is emptied at once, whatever the
// answer. Nothing here keeps it, and no answer carries one back.

import type { CredentialItem, CredentialKind, CredentialUseItem, NewCredential } from "./bindings";
import { h } from "./dom";
import { ago, clock, count } from "./format";

/** The built-in server's label: header credentials bind to it only. */
export const BUILTIN = "postern";

/** What the credential controls do (src/live.ts wires them to the app). */
export interface CredentialControls {
  add(credential: NewCredential): Promise<void>;
  rotate(name: string, value: string): Promise<void>;
  remove(name: string): Promise<void>;
  bind(server: string, name: string): Promise<void>;
  unbind(server: string, name: string): Promise<void>;
}

/** The view: `list` is `null` while it is read; `servers` are the configured labels. */
export function credentialsPanel(list: CredentialItem[] | null, servers: string[], controls: CredentialControls, nowMs: number, error: string | null = null): HTMLElement {
  return h(
    "div",
    "credentials-view",
    h(
      "section",
      { class: "panel credentials", "aria-labelledby": "credentials-h" },
      h(
        "div",
        "panel-head",
        h("h2", { id: "credentials-h" }, "Credentials"),
        h("span", "muted", list === null ? "" : count(list.length, "credential")),
      ),
      h("p", "panel-note muted", "Values live in the OS keychain. A server gets a bound credential only when you approve its current code for it; nothing here ever shows a value."),
      error === null ? null : h("p", { class: "action-error", role: "alert" }, `Cannot read the credentials: ${error}`),
      list === null
        ? h("p", "empty-line muted", "Reading…")
        : list.length === 0
          ? h("p", "empty-line", "No credentials yet. Add one below; then bind it to the server that needs it.")
          : h("ul", "credential-list", ...list.map((c) => credentialRow(c, servers, controls, nowMs))),
    ),
    addForm(controls.add),
  );
}

function credentialRow(c: CredentialItem, servers: string[], controls: CredentialControls, nowMs: number): HTMLElement {
  const rotated = c.rotatedAtMs;
  return h(
    "li",
    { class: "credential", "data-name": c.name },
    h(
      "div",
      "credential-head",
      h("span", "credential-name", c.name),
      h("span", "badge badge-outline kind", kindText(c.injection)),
      c.everyUse ? h("span", { class: "badge badge-warn every-use", title: "Every call that would use it asks a human" }, "every use") : null,
      h(
        "span",
        { class: "credential-version muted", title: `added ${new Date(c.createdAtMs).toISOString()}` },
        rotated === null ? `v${c.version} · added ${clock(c.createdAtMs, nowMs)}` : `v${c.version} · rotated ${clock(rotated, nowMs)} · ${ago(rotated, nowMs)}`,
      ),
    ),
    c.hosts.length === 0 ? null : h("div", "credential-hosts", h("span", "fact-k", "hosts "), ...c.hosts.map((host) => h("code", "chip host", host))),
    looselyHere(c),
    exposure(c),
    uses(c.uses, nowMs),
    bindings(c, servers, controls),
    actions(c, controls),
  );
}

/**
 * Its hosts that name this machine loosely (without a port, or as localhost: two addresses),
 * kept from before an address and port were required: any program of the user's listening where
 * a request for one connects receives the value.
 */
function looselyHere(c: CredentialItem): HTMLElement | null {
  if (c.looselyHere.length === 0) return null;
  return h(
    "p",
    "credential-any-port",
    `${c.looselyHere.join(", ")}: not one address and port of this machine, so any program of yours listening where a request connects receives it. Add the credential again as the address and port your service listens on (e.g. 127.0.0.1:8080).`,
  );
}

/**
 * How a stdio server holds it: a credential with hosts reaches the server as a placeholder that
 * Postern's egress broker swaps for the value toward those hosts only; one without hosts is the
 * value itself in the server's environment.
 */
function exposure(c: CredentialItem): HTMLElement | null {
  if (c.injection.kind !== "env") return null;
  return c.hosts.length === 0
    ? h("p", "credential-exposure exposed", "Servers get the value itself in their environment: their code can send it anywhere. Add a host to hand them a placeholder instead.")
    : h("p", "credential-exposure brokered muted", `Servers get a placeholder; Postern puts the value in their requests to ${c.hosts.join(", ")} only.`);
}

/** Where it went through the egress broker, the most recent first; refused requests flagged. */
function uses(list: CredentialUseItem[], nowMs: number): HTMLElement | null {
  if (list.length === 0) return null;
  return h(
    "ul",
    { class: "credential-uses", "aria-label": "Where it was used" },
    ...list.map((u) =>
      h(
        "li",
        { class: u.leaks > 0 ? "use use-refused" : "use", "data-host": u.host },
        h("code", "chip", u.server),
        u.uses > 0 ? ` sent it to ${u.host} in ${count(u.uses, "request")}` : ` headed to ${u.host}`,
        u.leaks > 0 ? h("span", { class: "leak", role: "note" }, ` · ${count(u.leaks, "request")} refused: not a host of this credential`) : null,
        h("span", "muted", ` · last ${clock(u.lastMs, nowMs)} · ${ago(u.lastMs, nowMs)}`),
      ),
    ),
  );
}

/** The servers it is bound to, each with Unbind, and Bind to another eligible one. */
function bindings(c: CredentialItem, servers: string[], controls: CredentialControls): HTMLElement {
  const env = c.injection.kind === "env";
  const eligible = (env ? servers.filter((s) => s !== BUILTIN) : [BUILTIN]).filter((s) => !c.servers.includes(s));
  const bound = c.servers.map((server) => {
    const unbind = h("button", { type: "button", class: "unbind link", title: `Unbind from ${server}: its processes holding it restart without it`, "aria-label": `Unbind ${c.name} from ${server}` }, "×") as HTMLButtonElement;
    unbind.addEventListener("click", () => {
      unbind.disabled = true;
      void controls.unbind(server, c.name).finally(() => (unbind.disabled = false));
    });
    return h("span", { class: "chip bound", "data-server": server }, h("code", {}, server), unbind);
  });
  const select = h("select", { name: "server", "aria-label": `Server to bind ${c.name} to` }, ...eligible.map((s) => h("option", { value: s }, s))) as HTMLSelectElement;
  const bind = h("button", { type: "submit", class: "bind" }, "Bind") as HTMLButtonElement;
  const form = h("form", { class: "bind-form", "data-form": `bind:${c.name}` }, select, bind) as HTMLFormElement;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (select.value === "") return;
    bind.disabled = true;
    void controls.bind(select.value, c.name).finally(() => (bind.disabled = false));
  });
  return h(
    "div",
    "credential-bindings",
    h("span", "fact-k", "bound to "),
    bound.length === 0 ? h("span", "muted unbound", "no server") : null,
    ...bound,
    eligible.length === 0 ? null : form,
  );
}

/** Rotate (a new value typed in) and Remove (asked twice). */
function actions(c: CredentialItem, controls: CredentialControls): HTMLElement {
  const value = secretInput("value", `New value for ${c.name}`);
  const status = h("span", { class: "form-status", role: "status" }, "");
  const save = h("button", { type: "submit", class: "primary rotate-save" }, "Rotate") as HTMLButtonElement;
  const rotate = h(
    "form",
    { class: "rotate-form", "data-form": `rotate:${c.name}`, autocomplete: "off" },
    h("label", "rotate-field", h("span", "sr-only", `New value for ${c.name}`), value),
    save,
    status,
  ) as HTMLFormElement;
  rotate.addEventListener("input", () => (rotate.dataset.dirty = "true"));
  rotate.addEventListener("submit", (event) => {
    event.preventDefault();
    const typed = value.value;
    value.value = "";
    delete rotate.dataset.dirty;
    if (typed === "") {
      setStatus(status, "Type the new value first.", true);
      return;
    }
    save.disabled = true;
    setStatus(status, "Rotating…", false);
    controls.rotate(c.name, typed).then(
      () => setStatus(status, "Rotated: servers holding it restart with the new value", false),
      (err: unknown) => setStatus(status, err instanceof Error ? err.message : String(err), true),
    ).finally(() => (save.disabled = false));
  });

  const remove = h("button", { type: "button", class: "remove danger" }, "Remove") as HTMLButtonElement;
  remove.addEventListener("click", () => {
    if (remove.dataset.confirm !== "true") {
      remove.dataset.confirm = "true";
      remove.textContent = `Remove ${c.name}? Click again`;
      return;
    }
    remove.disabled = true;
    void controls.remove(c.name).finally(() => (remove.disabled = false));
  });
  return h("div", "credential-actions", rotate, remove);
}

/** The form that adds a credential. Kind-specific fields show for their kind only. */
function addForm(add: CredentialControls["add"]): HTMLElement {
  const kind = h(
    "select",
    { name: "kind" },
    h("option", { value: "env" }, "environment variable (stdio servers)"),
    h("option", { value: "bearer" }, "Authorization: Bearer (built-in http_request)"),
    h("option", { value: "header" }, "a named header (built-in http_request)"),
    h("option", { value: "basic" }, "Authorization: Basic user:password (built-in http_request)"),
  ) as HTMLSelectElement;
  const field = (cls: string, title: string, input: HTMLElement, hint?: string): HTMLElement =>
    h("label", `field ${cls}`, h("span", "field-title", title), input, hint === undefined ? null : h("span", "field-hint muted", hint));
  const text = (name: string, placeholder: string): HTMLInputElement =>
    h("input", { name, type: "text", placeholder, autocomplete: "off", spellcheck: "false" }) as HTMLInputElement;
  const everyUse = h("input", { name: "everyUse", type: "checkbox" }) as HTMLInputElement;
  const value = secretInput("value", "The value");
  const status = h("p", { class: "form-status", role: "status" }, "");
  const submit = h("button", { type: "submit", class: "primary add-credential" }, "Add credential") as HTMLButtonElement;
  const envField = field("only-env", "Variable", text("envVar", "INVENTORY_TOKEN"), "The environment variable the server reads.");
  const headerField = field("only-header", "Header", text("header", "X-Api-Key"));
  const hostsField = field("only-http", "Hosts", text("hosts", "api.example.com, api2.example.com"), "The hosts a request may carry it to (comma-separated); this machine as its address and port, e.g. 127.0.0.1:8080.");
  const form = h(
    "form",
    { class: "panel add-credential-form", "data-form": "add-credential", "aria-labelledby": "add-credential-h", novalidate: "", autocomplete: "off" },
    h("div", "panel-head", h("h2", { id: "add-credential-h" }, "Add a credential")),
    field("", "Name", text("name", "inventory-api"), "a-z, 0-9, - _ . (up to 48)"),
    field("", "Injected as", kind),
    envField,
    headerField,
    hostsField,
    h("label", "field check", h("span", "field-title", "Every use"), h("span", "field-input", everyUse, h("span", {}, "Ask a human for every call that would use it"))),
    field("", "Value", value, "Typed here once; stored in the OS keychain; never shown again."),
    h("div", "form-actions", submit, status),
  ) as HTMLFormElement;
  const showKind = (): void => {
    const k = kind.value;
    envField.hidden = k !== "env";
    headerField.hidden = k !== "header";
    hostsField.hidden = k === "env";
  };
  showKind();
  kind.addEventListener("change", showKind);
  form.addEventListener("input", () => {
    form.dataset.dirty = "true";
    setStatus(status, "", false);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    // Read the value and empty its field before anything else can fail.
    const typed = value.value;
    value.value = "";
    const read = readAdd(form, kind.value, typed);
    if (typeof read === "string") {
      setStatus(status, read, true);
      return;
    }
    submit.disabled = true;
    setStatus(status, "Adding…", false);
    add(read).then(
      () => {
        form.reset();
        showKind();
        delete form.dataset.dirty;
        setStatus(status, `Added ${read.name}`, false);
      },
      (err: unknown) => setStatus(status, `${err instanceof Error ? err.message : String(err)} (type the value again)`, true),
    ).finally(() => (submit.disabled = false));
  });
  return form;
}

/** The credential the add form describes, with `value`, or why it cannot be sent. */
export function readAdd(form: HTMLFormElement, kind: string, value: string): NewCredential | string {
  const field = (name: string): string => (form.elements.namedItem(name) as HTMLInputElement | null)?.value.trim() ?? "";
  const name = field("name");
  if (name === "") return "Give the credential a name.";
  let injection: CredentialKind;
  switch (kind) {
    case "env":
      if (field("envVar") === "") return "Name the environment variable the server reads.";
      injection = { kind: "env", var: field("envVar") };
      break;
    case "header":
      if (field("header") === "") return "Name the header.";
      injection = { kind: "header", name: field("header") };
      break;
    case "basic":
      injection = { kind: "basic" };
      break;
    default:
      injection = { kind: "bearer" };
  }
  const hosts = kind === "env" ? [] : field("hosts").split(/[\s,]+/).filter((host) => host !== "");
  if (kind !== "env" && hosts.length === 0) return "Name at least one host a request may carry it to.";
  if (value === "") return "Type the value.";
  const everyUse = (form.elements.namedItem("everyUse") as HTMLInputElement | null)?.checked ?? false;
  return { name, injection, hosts, everyUse, value };
}

function kindText(k: CredentialKind): string {
  switch (k.kind) {
    case "env":
      return `env ${k.var}`;
    case "header":
      return `header ${k.name}`;
    case "bearer":
      return "bearer";
    case "basic":
      return "basic";
  }
}

function secretInput(name: string, label: string): HTMLInputElement {
  // A password field: the browser never echoes it, and autocomplete never remembers it.
  return h("input", { name, type: "password", autocomplete: "new-password", spellcheck: "false", "aria-label": label, placeholder: "••••••••" }) as HTMLInputElement;
}

function setStatus(el: HTMLElement, text: string, bad: boolean): void {
  el.textContent = text;
  el.classList.toggle("bad", bad);
  el.setAttribute("role", bad ? "alert" : "status");
}

