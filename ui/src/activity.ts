// The Activity feed: one row per call (the intent or the refusal), newest first: when, which
// session, which agent (by its own name), server, launch, tool, and how it was allowed ("your
// grant · 15 min", "observe mode") or why it was refused, in words. Filtered by session, server,
// epoch, tool, decision and time, a page at a time (`before` the last row's seq); quick filters
// above the table set the form in one click. Clicking a row opens its audit record.

import type { JournalApi } from "./api";
import { message } from "./api";
import type { ActivityFilter, ActivityRow } from "./bindings";
import { h } from "./dom";
import type { EntryPanel } from "./entry";
import { launchName } from "./format";
import { agentWords, allowedHow, askedWords, dirWords, sessionName } from "./journal-words";
import { stamp } from "./timeline-layout";

/** Rows per page. */
export const PAGE = 50;

/** The decisions the filter offers: the engine also takes any one refusal code. */
export const DECISIONS: [string, string][] = [
  ["", "any decision"],
  ["allowed", "allowed"],
  ["observed", "observed"],
  ["denied", "refused (any code)"],
  ["asked", "asked you"],
  ["approval_denied", "approval_denied"],
  ["approval_timeout", "approval_timeout"],
  ["authorization_stale", "authorization_stale"],
  ["catalog_stale", "catalog_stale"],
  ["unknown_tool", "unknown_tool"],
  ["vault_locked", "vault_locked"],
  ["audit_unavailable", "audit_unavailable"],
];

export interface ActivityView {
  el: HTMLElement;
  /** Shows the newest page for `filter` (the timeline's lane labels use it). */
  show(filter: Partial<ActivityFilter>): void;
  /** The engine reports a change: on the newest page, read it again. */
  poke(): void;
  /** The tab was opened. */
  shown(): void;
  /** The server labels the filter suggests. */
  servers(labels: string[]): void;
  /** The vault locked: drop what was read (the next opening reads again). */
  forget(): void;
}

/** What the filter form says, as the engine's filter (first page). */
export function readFilter(form: HTMLFormElement): ActivityFilter | string {
  const field = (name: string): string => (form.elements.namedItem(name) as HTMLInputElement | null)?.value.trim() ?? "";
  const text = (name: string): string | null => (field(name) === "" ? null : field(name));
  const session = field("session");
  if (session !== "" && !/^\d+$/.test(session)) return "The session is a number (a lane's id).";
  const time = (name: string): number | null | string => {
    const v = field(name);
    if (v === "") return null;
    const t = new Date(v).getTime();
    return Number.isNaN(t) ? `Cannot read the time ${JSON.stringify(v)}.` : t;
  };
  const since = time("since");
  const until = time("until");
  if (typeof since === "string") return since;
  if (typeof until === "string") return until;
  return {
    session: session === "" ? null : Number(session),
    server: text("server"),
    epoch: text("epoch"),
    tool: text("tool"),
    decision: text("decision"),
    since,
    until,
    before: null,
    limit: PAGE,
  };
}

/** The Activity pane, reading from `api`. */
export function activityView(api: Pick<JournalApi, "activity">, entry: EntryPanel): ActivityView {
  let filter: ActivityFilter = blank();
  /** The `before` of each page shown so far: [null, seqA, seqB, ...]. */
  let pages: (number | null)[] = [null];
  let rows: ActivityRow[] | null = null;
  let error: string | null = null;
  let asked = 0;

  const serverList = h("datalist", { id: "activity-servers" });
  const form = filterForm(serverList);
  const note = h("p", { class: "form-status", role: "status" }, "");
  const table = h("div", "activity-rows");
  /** The row last opened: what "this agent" and "this server" mean. */
  let focus: ActivityRow | null = null;
  const chips = h("div", { class: "quick-filters", role: "group", "aria-label": "Quick filters" });
  const older = pager("older", "Older →", () => {
    const last = rows?.[rows.length - 1];
    if (last === undefined) return;
    pages.push(last.seq);
    load();
  });
  const newer = pager("newer", "← Newer", () => {
    pages.pop();
    load();
  });
  const newest = pager("newest", "Newest", () => {
    pages = [null];
    load();
  });
  const el = h(
    "section",
    { class: "panel activity", "aria-labelledby": "activity-h" },
    h("div", "panel-head", h("h2", { id: "activity-h" }, "Activity"), h("span", "muted", "every call, newest first")),
    form,
    chips,
    note,
    table,
    h("div", "pager", newest, newer, older),
    entry.el,
  );

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const read = readFilter(form);
    if (typeof read === "string") {
      note.textContent = read;
      note.classList.add("bad");
      return;
    }
    note.textContent = "";
    note.classList.remove("bad");
    filter = read;
    pages = [null];
    load();
  });
  form.addEventListener("reset", () => {
    filter = blank();
    pages = [null];
    // The form's fields clear after this event.
    setTimeout(load, 0);
  });

  const load = (): void => {
    const ticket = ++asked;
    const before = pages[pages.length - 1] ?? null;
    api.activity({ ...filter, before, limit: PAGE }).then(
      (page) => {
        if (ticket !== asked) return;
        rows = page;
        error = null;
        paint();
      },
      (err: unknown) => {
        if (ticket !== asked) return;
        error = message(err);
        paint();
      },
    );
  };

  /** Sets the form's fields (the others as they are) and applies it, or clears them when the filter already says so. */
  const quick = (fields: Record<string, string>): void => {
    const on = Object.entries(fields).every(([name, value]) => field(form, name) === value);
    for (const [name, value] of Object.entries(fields)) setField(form, name, on ? "" : value);
    form.requestSubmit();
  };

  const paintChips = (): void => {
    const chip = (cls: string, text: string, title: string, fields: Record<string, string>): HTMLElement => {
      const on = Object.entries(fields).every(([name, value]) => filterField(filter, name) === value);
      const b = h("button", { type: "button", class: `chip-filter ${cls}`, title, "aria-pressed": on ? "true" : "false" }, text);
      b.addEventListener("click", () => quick(fields));
      return b;
    };
    chips.replaceChildren(
      chip("quick-refused", "Refused", "Only calls Postern refused (any code)", { decision: "denied" }),
      chip("quick-asked", "Asked you", "Only calls a person was asked about: approved, denied or left unanswered", { decision: "asked" }),
      chip("quick-observed", "Observe mode", "Only calls that went through in observe mode, without a grant", { decision: "observed" }),
      ...(focus === null
        ? [h("span", "muted quick-hint", "Open a row to filter by its agent or server.")]
        : [
            chip("quick-agent", `This agent: ${agentWords(focus.agent)} (${sessionName(focus.session)})`, `Only the calls of ${sessionName(focus.session)}`, { session: String(focus.session) }),
            chip("quick-server", `This server: ${focus.server}`, `Only calls to ${focus.server}`, { server: focus.server }),
          ]),
    );
  };

  const openRow = (row: ActivityRow): void => {
    focus = row;
    paintChips();
    entry.show(row.seq);
  };

  const paint = (): void => {
    paintChips();
    (newer as HTMLButtonElement).disabled = pages.length <= 1;
    (newest as HTMLButtonElement).disabled = pages.length <= 1;
    (older as HTMLButtonElement).disabled = rows === null || rows.length < PAGE;
    if (error !== null) {
      table.replaceChildren(h("p", { class: "action-error", role: "alert" }, `Cannot read the Activity journal: ${error}`));
      return;
    }
    if (rows === null) return;
    table.replaceChildren(rows.length === 0 ? h("p", "empty-line", pages.length > 1 ? "No older calls." : "No call matches.") : rowsTable(rows, openRow));
  };

  return {
    el,
    show(partial) {
      filter = { ...blank(), ...partial, before: null, limit: PAGE };
      pages = [null];
      fill(form, filter);
      load();
    },
    poke() {
      if (pages.length === 1) load();
    },
    shown() {
      load();
    },
    forget() {
      asked++;
      rows = null;
      pages = [null];
      table.replaceChildren();
      entry.hide();
    },
    servers(labels) {
      const now = JSON.stringify(labels);
      if (serverList.dataset.labels === now) return;
      serverList.dataset.labels = now;
      serverList.replaceChildren(...labels.map((l) => h("option", { value: l })));
    },
  };
}

/**
 * The rows as a table (pure, apart from the click handler): the time of day (the date too when
 * it is not `nowMs`'s day), launches by number (the epoch in the title). The table scrolls
 * sideways inside its own box, its time column kept in view.
 */
export function rowsTable(rows: ActivityRow[], open: (row: ActivityRow) => void = () => {}, nowMs: number = Date.now()): HTMLElement {
  const head = h("tr", {}, ...["time", "session", "agent", "server", "launch", "tool", "decision", "allowed how", "outcome", "took"].map((t) => h("th", { scope: "col" }, t)));
  const body = rows.map((r) => {
    const tone = decisionTone(r.decision);
    const dir = dirWords(r.agent.cwd);
    const asked = askedWords(r.asked);
    const tr = h(
      "tr",
      { class: `activity-row tone-${tone}`, "data-seq": String(r.seq), tabindex: "0", title: `Open audit record #${r.seq}` },
      h("td", "col-when", h("code", { title: stamp(r.time) }, whenWords(r.time, nowMs))),
      h("td", { class: "col-session", title: sessionName(r.session) }, String(r.session)),
      h(
        "td",
        { class: "col-agent", title: [r.agent.client, r.agent.process, r.agent.cwd].filter((s) => s !== null).join(" · ") },
        agentWords(r.agent),
        dir === null ? null : h("span", "agent-dir muted", ` in ${dir}`),
      ),
      h("td", "col-server", r.server),
      h("td", "col-epoch", r.epoch === null ? h("span", "muted", "—") : h("span", { class: "launch", title: r.epoch, "data-epoch": r.epoch }, launchName(r.launch, r.epoch))),
      h("td", "col-tool", h("code", {}, r.tool)),
      h("td", "col-decision", h("span", `badge badge-${tone}`, r.decision)),
      h("td", { class: "col-how", title: r.grant === null ? "" : `grant ${r.grant.grant}` }, allowedHow(r), asked === null || r.decision === "approval_denied" ? null : h("span", "how-asked muted", ` · ${asked}`)),
      h("td", "col-outcome", r.outcome ?? h("span", "muted", "pending")),
      h("td", "col-took", r.durationMs === null ? "" : `${r.durationMs} ms`),
    );
    tr.addEventListener("click", () => open(r));
    tr.addEventListener("keydown", (event) => {
      if (event.key === "Enter") open(r);
    });
    return tr;
  });
  return h("table", "activity-table", h("thead", {}, head), h("tbody", {}, ...body));
}

/** "17:25:47" today, "2026-12-01 17:25:47" another day. */
function whenWords(t: number, nowMs: number): string {
  const full = stamp(t).slice(0, 19);
  return new Date(t).toDateString() === new Date(nowMs).toDateString() ? full.slice(11) : full;
}

function decisionTone(decision: string): "ok" | "warn" | "bad" | "idle" {
  if (decision === "allowed") return "ok";
  if (decision === "observed") return "idle";
  if (decision === "no_intent") return "warn";
  return "bad";
}

function filterForm(servers: HTMLElement): HTMLFormElement {
  const input = (name: string, label: string, attrs: Record<string, string> = {}): HTMLElement =>
    h("label", "filter", h("span", "filter-k", label), h("input", { name, type: "text", autocomplete: "off", spellcheck: "false", ...attrs }));
  const decision = h("select", { name: "decision" }, ...DECISIONS.map(([value, text]) => h("option", { value }, text)));
  return h(
    "form",
    { class: "activity-filter", novalidate: "" },
    input("session", "session", { inputmode: "numeric", placeholder: "id", size: "5" }),
    input("server", "server", { list: "activity-servers", placeholder: "any" }),
    servers,
    input("epoch", "epoch", { placeholder: "any" }),
    input("tool", "tool", { placeholder: "any" }),
    h("label", "filter", h("span", "filter-k", "decision"), decision),
    input("since", "since", { type: "datetime-local", step: "1" }),
    input("until", "until", { type: "datetime-local", step: "1" }),
    h("div", "filter-actions", h("button", { type: "submit", class: "primary apply" }, "Apply"), h("button", { type: "reset", class: "clear" }, "Clear")),
  ) as HTMLFormElement;
}

function field(form: HTMLFormElement, name: string): string {
  return (form.elements.namedItem(name) as HTMLInputElement | null)?.value.trim() ?? "";
}

function setField(form: HTMLFormElement, name: string, value: string): void {
  const el = form.elements.namedItem(name) as HTMLInputElement | null;
  if (el) el.value = value;
}

/** A filter's field as the form would say it. */
function filterField(f: ActivityFilter, name: string): string {
  const value = (f as unknown as Record<string, unknown>)[name];
  return value === null || value === undefined ? "" : String(value);
}

function fill(form: HTMLFormElement, f: ActivityFilter): void {
  const set = (name: string, value: string): void => setField(form, name, value);
  set("session", f.session === null ? "" : String(f.session));
  set("server", f.server ?? "");
  set("epoch", f.epoch ?? "");
  set("tool", f.tool ?? "");
  set("decision", f.decision ?? "");
  set("since", "");
  set("until", "");
}

function pager(cls: string, text: string, run: () => void): HTMLElement {
  const el = h("button", { type: "button", class: `page-${cls}` }, text);
  el.addEventListener("click", run);
  return el;
}

function blank(): ActivityFilter {
  return { session: null, server: null, epoch: null, tool: null, decision: null, since: null, until: null, before: null, limit: PAGE };
}
