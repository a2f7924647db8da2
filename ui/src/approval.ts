// The approval window's content: one approval card (the agent, the server and its epoch, what
// changed since the last approval, the catalog diff, the tool and its arguments with defaults
// marked, the annotations as untrusted hints, the credential scope, the time left) and the
// choices a reviewer has, with the passphrase field that proves a person approves. Pure DOM
// construction: src/approvals-live.ts owns the queue, the clock, the keyboard and the field.

import type { Argument, ApprovalCard, GrantChoice, IdentitySince, Json, Reply } from "./approval-card";
import type { Approval } from "./bindings";
import { h, icon, mark, type Child } from "./dom";
import { commandLine, shortDigest, shortEpoch } from "./format";
import { passphraseField } from "./proof";

/** What the approval window shows. */
export type ApprovalsState = {
  /** The open requests, oldest first. */
  queue: Approval[];
  /** The one shown (an index into `queue`). */
  index: number;
  /** Whether its buttons take clicks yet (they wait a moment after a card appears). */
  armed: boolean;
  /** Whether an answer is on its way to the engine. */
  busy: boolean;
  /** The engine's refusal of the last answer, if any. */
  error: string | null;
};

/** What the window's controls do. */
export interface ApprovalHandlers {
  answer(reply: Reply): void;
  /** Shows the previous (-1) or next (+1) request. */
  move(delta: number): void;
  lock(): void;
}

/** What a line ending like this in `catalogChanges` means (crates/domain/src/catalog/diff.rs). */
const ESCALATION = " [escalation]";

/**
 * The whole approval window. `passphrase` is the window's one passphrase field, mounted as it
 * is (src/approvals-live.ts keeps it across re-renders, so what is typed in it stays).
 */
export function renderApprovals(state: ApprovalsState, nowMs: number, on: ApprovalHandlers, passphrase: HTMLInputElement = passphraseField()): HTMLElement {
  const current = state.queue[state.index];
  const n = state.queue.length;
  return h(
    "div",
    "window approvals-window",
    h(
      "header",
      "top approvals-top",
      h("div", "brand", mark(), h("div", "brand-text", h("h1", {}, "Approval requested"), h("p", "queue-pos muted", n === 0 ? "none waiting" : `${state.index + 1} of ${n}`))),
      h(
        "div",
        "top-actions",
        n > 1 ? button("nav prev", "‹ Previous", () => on.move(-1), { disabled: state.index === 0, title: "Previous request (←)" }) : null,
        n > 1 ? button("nav next", "Next ›", () => on.move(1), { disabled: state.index === n - 1, title: "Next request (→)" }) : null,
        button("lock-button", "Lock", () => on.lock(), { title: "Lock the vault: every waiting and future call is refused until you unlock" }, icon("lock")),
      ),
    ),
    current === undefined
      ? h("main", "content", h("p", "empty-line", "No request is waiting. This window closes by itself."))
      : h("main", "content", cardView(current, nowMs), choices(current.card, state, on, passphrase)),
  );
}

/** One card, read top to bottom the way a reviewer decides. */
export function cardView(approval: Approval, nowMs: number): HTMLElement {
  const card = approval.card;
  return h(
    "article",
    { class: "approval", "data-approval": card.id },
    h("div", "asks", h("p", "asks-line", h("span", "strong agent-name", agentName(card)), ` asks to ${whatText(card)}`), countdownView(card, nowMs)),
    card.agentStoppedWaiting
      ? h(
          "p",
          "stopped-waiting",
          "The agent stopped waiting for this call (its own time ran out). Your answer decides the same call when it tries again in the next 10 minutes; nothing runs before that.",
        )
      : null,
    section("Agent", "agent", agentFacts(card)),
    section("Server and code", "server", serverFacts(card)),
    section("Catalog", "catalog", catalogFacts(approval)),
    section("Tool", "tool", toolFacts(card)),
    section("Arguments", "arguments", argumentsView(card.arguments)),
    card.annotations === null ? null : section("Untrusted hints", "hints", hintsView(card)),
    section("Credentials", "credentials", credentialsView(card)),
    card.everyUse.length === 0 ? null : section("Every use", "every-use", everyUseView(card)),
  );
}

/** "1:54" left until `expiresAt`; "0:00" once it passed. */
export function countdown(expiresAt: number, nowMs: number): string {
  const left = Math.max(0, Math.ceil((expiresAt - nowMs) / 1000));
  return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
}

/** How much of the answering time is left, 0..1. */
export function timeLeft(card: ApprovalCard, nowMs: number): number {
  const total = card.expiresAt - card.askedAt;
  return total <= 0 ? 0 : Math.min(1, Math.max(0, (card.expiresAt - nowMs) / total));
}

/** Updates the countdowns under `root` in place (no re-render: focus and selection stay). */
export function tick(root: ParentNode, queue: Approval[], nowMs: number): void {
  for (const el of root.querySelectorAll<HTMLElement>(".countdown[data-expires]")) {
    const card = queue.find((a) => a.card.id === el.dataset.approval)?.card;
    if (card !== undefined) fillCountdown(el, card, nowMs);
  }
}

/** The button text for a grant choice. */
export function choiceLabel(choice: GrantChoice): string {
  switch (choice.end) {
    case "thisCall":
      return "Approve this call";
    case "forMinutes":
      return `Approve for ${choice.minutes} min`;
    case "untilRunEnds":
      return "Approve until the agent run ends";
  }
}

/** The agent as one short name: its executable's file name, else its process name. */
export function agentName(card: ApprovalCard): string {
  const exe = card.agent.executable?.path.split("/").pop();
  return exe || card.agent.chain.at(-2) || `pid ${card.agent.pid}`;
}

// --- the parts ---------------------------------------------------------------------------------

function whatText(card: ApprovalCard): string {
  const call = `call ${card.tool.name} on ${card.server}`;
  switch (card.what) {
    case "session":
      return `use ${card.server} (a grant already covers ${card.tool.name}: this admits the agent run)`;
    case "call":
      return call;
    case "sessionAndCall":
      return `${call} (approving also admits this agent run for ${card.server})`;
  }
}

function countdownView(card: ApprovalCard, nowMs: number): HTMLElement {
  const el = h(
    "div",
    { class: "countdown", "data-approval": card.id, "data-expires": String(card.expiresAt), title: `times out at ${new Date(card.expiresAt).toLocaleTimeString()}: the call is then refused (approval_timeout)` },
    h("span", "countdown-text", ""),
    h("span", "countdown-track", h("span", "countdown-bar", "")),
  );
  fillCountdown(el, card, nowMs);
  return el;
}

function fillCountdown(el: HTMLElement, card: ApprovalCard, nowMs: number): void {
  const left = card.expiresAt - nowMs;
  const text = el.querySelector(".countdown-text");
  if (text !== null) text.textContent = left > 0 ? `expires in ${countdown(card.expiresAt, nowMs)}` : "timed out";
  const bar = el.querySelector<HTMLElement>(".countdown-bar");
  if (bar !== null) bar.style.width = `${Math.round(timeLeft(card, nowMs) * 100)}%`;
  el.classList.toggle("urgent", left <= 15_000);
}

function agentFacts(card: ApprovalCard): HTMLElement {
  const a = card.agent;
  return grid([
    ["process", h("span", {}, h("code", "agent-chain", a.chain.join(" → ")), h("span", "muted agent-pid", ` · pid ${a.pid}`))],
    ["executable", a.executable === null ? none("not readable") : h("span", "agent-exe", h("code", "path", a.executable.path), " ", h("code", { class: "digest", title: a.executable.digest }, shortDigest(a.executable.digest)))],
    ["directory", a.cwd === null ? none("unknown") : h("code", "path agent-cwd", a.cwd)],
  ]);
}

function serverFacts(card: ApprovalCard): HTMLElement {
  const e = card.epoch;
  return h(
    "div",
    {},
    grid([
      ["server", h("span", "server-name strong", card.server)],
      [
        "epoch",
        h(
          "span",
          {},
          h("code", { class: "epoch", title: `execution epoch ${e.epoch}` }, shortEpoch(e.epoch)),
          " ",
          e.pinning.state === "pinned"
            ? h("span", { class: "badge badge-ok pin pinned", title: "The digests pin the code that runs" }, icon("lock"), "PINNED")
            : h("span", { class: "badge pin unpinned", title: e.pinning.reason }, icon("unlock"), "UNPINNED"),
        ),
      ],
      ["identity", h("code", { class: "identity", title: `identity digest ${e.identity}` }, shortDigest(e.identity))],
      ["command", h("code", "command", commandLine(e.launchCommand))],
    ]),
    e.pinning.state === "unpinned" ? h("p", "unpinned-reason", h("span", "strong", "Unpinned: "), e.pinning.reason) : null,
    sinceView(e.since),
  );
}

/** Names of the identity facts a changed launch may differ in (crates/domain/src/decision/card.rs). */
const FACTS: Record<string, string> = {
  launchCommand: "the launch command",
  runtime: "the runtime version",
  workingDirectory: "the working directory",
  envNames: "the environment's variable names",
};

function sinceView(since: IdentitySince): HTMLElement {
  switch (since.kind) {
    case "firstApproval":
      return h("p", "since since-first muted", "No launch of this server was approved before.");
    case "sameEpoch":
      return h("p", "since since-same muted", "The same launch you approved before.");
    case "unchanged":
      return h("p", "since since-unchanged muted", "A new launch of the same code as the approved epoch ", h("code", { title: since.approvedEpoch }, shortEpoch(since.approvedEpoch)), ".");
    case "changed":
      return h(
        "div",
        { class: "callout callout-warn since since-changed", role: "note" },
        h("div", "callout-title", icon("files"), "The code changed since the last approval (epoch ", h("code", { title: since.approvedEpoch }, shortEpoch(since.approvedEpoch)), ")"),
        since.changedArtifacts.length === 0 ? null : h("ul", "paths changed-artifacts", ...since.changedArtifacts.map((p) => h("li", {}, h("code", {}, p)))),
        since.changedFacts.length === 0 ? null : h("p", "changed-facts", "Also changed: ", since.changedFacts.map((f) => FACTS[f] ?? f).join(", "), "."),
      );
  }
}

function catalogFacts(approval: Approval): HTMLElement {
  const c = approval.card.catalog;
  switch (c.kind) {
    case "firstApproval":
      return h("p", "catalog-since muted", "First approval for this server: revision ", h("code", { title: c.revision }, shortDigest(c.revision)), ".");
    case "unchanged":
      return h("p", "catalog-since muted", "Unchanged since the last approval (revision ", h("code", { title: c.revision }, shortDigest(c.revision)), ").");
    case "changed":
      return h(
        "div",
        { class: `callout catalog-since catalog-changed${approval.escalation ? " callout-bad escalation" : ""}` },
        h(
          "div",
          "callout-title",
          "Changed since the last approval",
          approval.escalation
            ? h("span", { class: "badge badge-bad flag", title: "A change makes a tool look safer than before (an annotation hint flip)" }, icon("alert"), "escalation")
            : null,
        ),
        approval.catalogChanges.length === 0
          ? h("p", "muted", "The revision moved, with no change a line can describe.")
          : h("ul", "change-list catalog-changes", ...approval.catalogChanges.map(changeLine)),
      );
  }
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

function toolFacts(card: ApprovalCard): HTMLElement {
  const t = card.tool;
  return h(
    "div",
    {},
    h("p", "tool-head", h("code", "tool-name strong", t.name), t.title === null ? null : h("span", "tool-title muted", ` ${t.title}`)),
    t.description === null ? null : h("p", "tool-description", t.description),
  );
}

function argumentsView(args: Argument[]): HTMLElement {
  if (args.length === 0) return h("p", "muted args-none", "No arguments.");
  return h(
    "table",
    "args",
    h("tbody", {}, ...args.map((a) =>
      h(
        "tr",
        { class: `arg from-${a.source}`, "data-pointer": a.pointer },
        h("td", "arg-pointer", h("code", {}, a.pointer)),
        h("td", "arg-value", h("code", {}, json(a.value))),
        h(
          "td",
          "arg-source",
          a.source === "default"
            ? h("span", { class: "badge badge-warn arg-default", title: "The agent did not send this: the tool's schema default applies, if the server honours it" }, "default")
            : h("span", "muted", "sent"),
        ),
      ),
    )),
  );
}

function hintsView(card: ApprovalCard): HTMLElement {
  const hints = card.annotations!;
  return h(
    "div",
    "hints",
    h("p", "hints-note", h("span", "badge badge-outline hints-label", "untrusted"), " ", hints.note),
    h("ul", "hint-list chips", ...Object.entries(hints.hints).map(([k, v]) => h("li", "chip", h("code", {}, `${k}: ${json(v)}`)))),
  );
}

function credentialsView(card: ApprovalCard): HTMLElement {
  const withheld = card.withheldCredentials ?? [];
  return h(
    "div",
    {},
    card.credentials.length === 0
      ? h("p", "muted credentials-none", "This call uses no credential.")
      : h("ul", "chips credential-list", ...card.credentials.map((c) => h("li", "chip", h("code", {}, c)))),
    withheld.length === 0
      ? null
      : h("p", "withheld", "Withheld from the running launch: ", withheld.join(", "), ". Approving releases them, and the server restarts with them."),
  );
}

function everyUseView(card: ApprovalCard): HTMLElement {
  const target = (t: ApprovalCard["everyUse"][number]): string => {
    switch (t.on) {
      case "tool":
        return `the tool ${t.tool} of ${t.server}`;
      case "server":
        return `every tool of ${t.server}`;
      case "credential":
        return `every call using ${t.name}`;
    }
  };
  return h("p", "every-use-line", "Per-call approval is set on ", card.everyUse.map(target).join("; "), ": a grant covers this call only.");
}

/** The narrowest answer that approves `card`: its first grant choice (none: the run alone). */
export function narrowest(card: ApprovalCard): Reply {
  return { reply: "approve", choice: card.choices[0] ?? null };
}

function choices(card: ApprovalCard, state: ApprovalsState, on: ApprovalHandlers, passphrase: HTMLInputElement): HTMLElement {
  const disabled = !state.armed || state.busy;
  const approvals: HTMLElement[] =
    card.choices.length === 0
      ? [button("choice primary", card.what === "session" ? "Admit this agent run" : "Approve", () => on.answer({ reply: "approve", choice: null }), { disabled, "data-focus": "choice-0" })]
      : card.choices.map((choice, i) =>
          button(`choice${i === 0 ? " primary" : ""}`, choiceLabel(choice), () => on.answer({ reply: "approve", choice }), {
            disabled,
            "data-focus": `choice-${i}`,
            "data-choice": choice.end === "forMinutes" ? `forMinutes:${choice.minutes}` : choice.end,
            title: choice.end === "thisCall" ? "Only this call" : "For this server's current epoch only: a new launch asks again",
          }),
        );
  passphrase.dataset.focus = "passphrase";
  return h(
    "div",
    "decide",
    // Next to the field: a refused passphrase is said where the person types it again.
    state.error === null ? null : h("p", { class: "answer-error", role: "alert" }, state.error),
    h("label", "prove-field", h("span", "field-title", "Postern passphrase"), passphrase, h("span", "muted small", "Approving needs it; denying does not.")),
    h("div", "choices", ...approvals),
    button("deny", "Deny", () => on.answer({ reply: "deny" }), { disabled, "data-focus": "deny", title: "The agent gets approval_denied (Esc)" }),
    h("p", "keys muted small", "Enter in the passphrase approves the narrowest choice, or the focused one · Esc denies · ← → switch requests"),
  );
}

// --- pieces -------------------------------------------------------------------------------------

function section(title: string, id: string, body: HTMLElement): HTMLElement {
  return h("section", `card-section section-${id}`, h("h2", {}, title), body);
}

function grid(rows: [string, Child][]): HTMLElement {
  return h("dl", "card-grid", ...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function button(cls: string, text: string, onClick: () => void, attrs: Record<string, string | boolean | undefined> = {}, ...lead: Child[]): HTMLElement {
  const el = h("button", { type: "button", class: cls }, ...lead, text) as HTMLButtonElement;
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "disabled") el.disabled = value === true;
    else if (typeof value === "string") el.setAttribute(name, value);
  }
  el.addEventListener("click", onClick);
  return el;
}

function none(text: string): HTMLElement {
  return h("span", "muted", text);
}

function json(value: Json): string {
  return JSON.stringify(value);
}
