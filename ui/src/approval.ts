// The approval window's content, read top to bottom the way a person decides (issue 18): a
// headline sentence (the agent by its own name, the tool, the server, the agent's directory),
// the tool's description, the arguments (defaults marked, long values folded), the risk strip
// (at most four plain sentences, most severe first, or one calm line), then the decision: one
// Allow and one Deny, a lifetime (keys 1–4, the narrowest chosen), a line saying in words what
// the choice covers, and the passphrase that proves a person allows. The forensic facts
// (process chain, pid, digests, epoch, identity, command, catalog revision, raw annotations)
// come last, folded, and the window remembers whether the person keeps them open. Pure DOM
// construction: src/approvals-live.ts owns the queue, the clock, the keyboard and the field.

import type { Argument, ApprovalCard, GrantChoice, IdentitySince, Json, Reply, RiskLine } from "./approval-card";
import type { Approval } from "./bindings";
import { h, icon, mark, type Child } from "./dom";
import { clock, commandLine, launchLine, shortDigest, shortEpoch } from "./format";
import { sandboxBadge } from "./confinement";
import { pinBadge, pinNote } from "./pinning";
import { passphraseField, systemAuthButton } from "./proof";

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
  /** The lifetime chosen: an index into the shown card's `choices` (0, the narrowest, first). */
  choice: number;
  /** Whether the forensic details are open. */
  details: boolean;
  /** The OS authentication the engine can ask instead of the passphrase, or `null`. */
  systemAuth?: string | null;
  /**
   * Until when (unix ms) a plain Allow needs no passphrase: the person typed it a moment ago and
   * the plain-click setting is on. `null` (or absent, or past): every Allow needs it.
   */
  clicksUntil?: number | null;
};

/** What the window's controls do. */
export interface ApprovalHandlers {
  /** `system`: prove with the OS's own authentication instead of the passphrase. */
  answer(reply: Reply, system?: boolean): void;
  /** Shows the previous (-1) or next (+1) request. */
  move(delta: number): void;
  /** Chooses the lifetime at `index` of the card's choices. */
  choose(index: number): void;
  /** Opens or folds the details. */
  details(open: boolean): void;
  lock(): void;
}

/** How many risk lines the strip shows before "and N more in the details". */
export const RISKS_SHOWN = 4;

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
      : h(
          "main",
          "content",
          cardView(current, nowMs),
          decide(current.card, state, on, passphrase, nowMs),
          detailsView(current, state.details, on, nowMs),
        ),
  );
}

/** The decision half of one card: headline, description, arguments, risks. */
export function cardView(approval: Approval, nowMs: number): HTMLElement {
  const card = approval.card;
  return h(
    "article",
    { class: "approval", "data-approval": card.id },
    h(
      "header",
      "card-head",
      h("h2", "headline", ...headline(card)),
      h(
        "p",
        "context muted",
        card.agent.cwd === null ? "directory unknown" : h("span", {}, "in ", h("code", { class: "agent-cwd", title: card.agent.cwd }, card.agent.cwd)),
        countdownView(card, nowMs),
      ),
    ),
    card.tool.description === null ? null : h("p", { class: "tool-description", title: card.tool.description }, card.tool.description),
    h("section", "card-section section-arguments", h("h3", {}, "Arguments"), argumentsView(card.arguments)),
    risksView(card),
    card.agentStoppedWaiting
      ? h(
          "p",
          "stopped-waiting",
          "The agent stopped waiting for this call (its own time ran out). Your answer decides the same call when it tries again in the next 10 minutes; nothing runs before that.",
        )
      : null,
  );
}

/** "claude-code 2.1.3 wants to call deploy on ci": who, what, where. */
function headline(card: ApprovalCard): Child[] {
  const agent = h("span", "agent-name", card.agentName);
  const tool = h("code", "tool-name", card.tool.name);
  const server = h("span", "server-name", card.server);
  return card.what === "session" ? [agent, " wants to start using ", server] : [agent, " wants to call ", tool, " on ", server];
}

/** The strip: at most RISKS_SHOWN lines, most severe first, or one calm line. */
function risksView(card: ApprovalCard): HTMLElement {
  const risks = card.risks ?? [];
  if (risks.length === 0) return h("p", "calm", icon("check"), calmLine(card.epoch.since, card.server));
  const more = risks.length - RISKS_SHOWN;
  return h(
    "ul",
    { class: "risks", "aria-label": "What to weigh" },
    ...risks.slice(0, RISKS_SHOWN).map(riskLine),
    more > 0 ? h("li", "risk-more muted", `and ${more} more in the details`) : null,
  );
}

function riskLine(line: RiskLine): HTMLElement {
  return h("li", { class: `risk risk-${line.severity}`, "data-kind": line.kind }, icon(line.severity === "danger" ? "alert" : "info"), h("span", {}, line.text));
}

/** What a card with nothing to weigh says. */
export function calmLine(since: IdentitySince, server: string): string {
  switch (since.kind) {
    case "firstApproval":
      return `Your first approval for ${server}: nothing earlier to compare with. Its code is in the details.`;
    case "sameEpoch":
    case "unchanged":
      return "The same code and tools you approved before.";
    case "changed":
      return "Nothing to weigh.";
  }
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

/** A lifetime's short name, as the engine names it on the card (`choiceLabels`). */
export function lifetimeLabel(card: ApprovalCard, choice: GrantChoice): string {
  const i = card.choices.indexOf(choice);
  return card.choiceLabels?.[i] ?? choice.end;
}

/** The same, starting with a capital, as its button shows it. */
function lifetimeButton(card: ApprovalCard, choice: GrantChoice): string {
  const label = lifetimeLabel(card, choice);
  return label.charAt(0).toUpperCase() + label.slice(1);
}

/** What allowing with `choice` (`null`: the card has no lifetime, it admits the run) covers, in words. */
export function coverage(card: ApprovalCard, choice: GrantChoice | null): string {
  const creds = card.credentials.length === 0 ? "" : `, acting with ${card.credentials.join(", ")}`;
  const admits = card.what === "sessionAndCall" ? ` It also lets ${card.agentName} use ${card.server}; other tools still ask.` : "";
  if (choice === null) return `Lets ${card.agentName} use ${card.server} in this agent run. Each tool call still follows your rules.`;
  const scope = `${card.agentName} may call ${card.tool.name} on ${card.server} with any arguments${creds}`;
  switch (choice.end) {
    case "thisCall":
      return `Allows this one call, with these arguments${creds}. The next call asks again.${admits}`;
    case "forMinutes":
      return `For ${lifetimeLabel(card, choice)}, ${scope}, while this launch of ${card.server} runs.${admits}`;
    case "untilRunEnds":
      return `Until this agent run ends, ${scope}, while this launch of ${card.server} runs.${admits}`;
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
    ["says it is", card.client === null ? none("said no name") : h("span", "agent-client", card.client, h("span", "muted", " (its own word)"))],
    ["process", h("span", {}, h("code", "agent-chain", a.chain.join(" → ")), h("span", "muted agent-pid", ` · pid ${a.pid}`))],
    ["executable", a.executable === null ? none("not readable") : h("span", "agent-exe", h("code", "path", a.executable.path), " ", h("code", { class: "digest", title: a.executable.digest }, shortDigest(a.executable.digest)))],
    ["directory", a.cwd === null ? none("unknown") : h("code", "path", a.cwd)],
  ]);
}

function serverFacts(card: ApprovalCard, nowMs: number): HTMLElement {
  const e = card.epoch;
  return h(
    "div",
    {},
    grid([
      ["server", h("span", "server-name strong", card.server)],
      [
        "launch",
        h(
          "span",
          {},
          h("span", { class: "launch", title: `execution epoch ${e.epoch}` }, launchLine(e.launch, e.epoch, e.startedAtMs, nowMs)),
          " ",
          pinBadge(e.pinning),
          " ",
          sandboxBadge(e.sandbox),
        ),
      ],
      ["epoch", h("code", { class: "epoch", title: "execution epoch: this launch's own id" }, e.epoch)],
      ["identity", h("code", { class: "identity", title: `identity digest ${e.identity}` }, shortDigest(e.identity))],
      ["command", h("code", "command", commandLine(e.launchCommand))],
    ]),
    pinNote(e.pinning),
    sinceView(e.since, card.risks),
  );
}

/** Names of the identity facts a changed launch may differ in (crates/domain/src/decision/card.rs). */
const FACTS: Record<string, string> = {
  launchCommand: "the launch command",
  runtime: "the runtime version",
  workingDirectory: "the working directory",
  envNames: "the environment's variable names",
  loaderEnv: "what NODE_OPTIONS, PYTHONPATH and the like say",
  sandbox: "the sandbox it runs in",
};

/**
 * What changed in the launch since the approved one. Whether it is a change of code or only of
 * context is the domain's call (its risk lines: `codeChanged` or only `contextChanged`, from
 * crates/domain/src/decision/risk.rs), never a list of facts kept here as well.
 */
function sinceView(since: IdentitySince, risks: readonly RiskLine[]): HTMLElement {
  switch (since.kind) {
    case "firstApproval":
      return h("p", "since since-first muted", "No launch of this server was approved before.");
    case "sameEpoch":
      return h("p", "since since-same muted", "The same launch you approved before.");
    case "unchanged":
      return h("p", "since since-unchanged muted", "A new launch of the same code as the approved epoch ", h("code", { title: since.approvedEpoch }, shortEpoch(since.approvedEpoch)), ".");
    case "changed": {
      const code = risks.some((r) => r.kind === "codeChanged");
      return h(
        "div",
        { class: `callout since since-changed${code ? " callout-warn" : ""}`, role: "note" },
        h(
          "div",
          "callout-title",
          icon("files"),
          code ? "The code changed since the last approval (epoch " : "The same code, started in another context than the last approval (epoch ",
          h("code", { title: since.approvedEpoch }, shortEpoch(since.approvedEpoch)),
          ")",
        ),
        since.changedArtifacts.length === 0 ? null : h("ul", "paths changed-artifacts", ...since.changedArtifacts.map((p) => h("li", {}, h("code", {}, p)))),
        since.changedFacts.length === 0 ? null : h("p", "changed-facts", code ? "Also changed: " : "Changed: ", since.changedFacts.map((f) => FACTS[f] ?? f).join(", "), "."),
      );
    }
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

/** A value longer than this (as JSON) is folded to its start. */
const FOLD_AT = 80;

function argumentsView(args: Argument[]): HTMLElement {
  if (args.length === 0) return h("p", "muted args-none", "No arguments.");
  return h(
    "table",
    "args",
    h("tbody", {}, ...args.map((a) =>
      h(
        "tr",
        { class: `arg from-${a.source}`, "data-pointer": a.pointer },
        h("th", { class: "arg-pointer", scope: "row" }, h("code", {}, argumentName(a.pointer))),
        h("td", "arg-value", valueView(a.value)),
        h(
          "td",
          "arg-source",
          a.source === "default"
            ? h("span", { class: "badge badge-warn arg-default", title: "The agent did not send this: the tool's schema default applies, if the server honours it" }, "default")
            : null,
        ),
      ),
    )),
  );
}

/** An argument's name from its pointer: "/opts/dry" reads "opts.dry" (RFC 6901 escapes undone). */
export function argumentName(pointer: string): string {
  return pointer
    .split("/")
    .slice(1)
    .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"))
    .join(".");
}

/** A value as JSON; a long one folded to its start, the whole of it a click away. */
function valueView(value: Json): HTMLElement {
  const compact = JSON.stringify(value);
  if (compact.length <= FOLD_AT) return h("code", {}, compact);
  return h(
    "details",
    "folded-value",
    h("summary", {}, h("code", {}, `${compact.slice(0, FOLD_AT - 20)}…`), h("span", "muted small", ` ${compact.length} characters`)),
    h("pre", {}, JSON.stringify(value, null, 2)),
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

/** The answer allowing `card` with the lifetime at `index` (out of range: the narrowest). */
export function allowWith(card: ApprovalCard, index: number): Reply {
  return { reply: "approve", choice: card.choices[index] ?? card.choices[0] ?? null };
}

function decide(card: ApprovalCard, state: ApprovalsState, on: ApprovalHandlers, passphrase: HTMLInputElement, nowMs: number): HTMLElement {
  const disabled = !state.armed || state.busy;
  const clicksUntil = state.clicksUntil ?? null;
  const clicks = clicksUntil !== null && nowMs < clicksUntil;
  const chosen = card.choices[state.choice] ?? card.choices[0] ?? null;
  passphrase.dataset.focus = "passphrase";
  return h(
    "section",
    { class: "decide", "aria-label": "Your decision" },
    card.choices.length === 0
      ? null
      : h(
          "div",
          { class: "lifetimes", role: "radiogroup", "aria-label": "How long" },
          ...card.choices.map((choice, i) => {
            const checked = chosen === choice;
            return button(`lifetime${checked ? " checked" : ""}`, lifetimeButton(card, choice), () => on.choose(i), {
              role: "radio",
              "aria-checked": checked ? "true" : "false",
              "data-focus": `lifetime-${i}`,
              "data-choice": choice.end === "forMinutes" ? `forMinutes:${choice.minutes}` : choice.end,
              tabindex: checked ? "0" : "-1",
              title: `${lifetimeButton(card, choice)} (${i + 1})`,
            }, i < 9 ? h("kbd", {}, String(i + 1)) : null);
          }),
        ),
    h("p", { class: "covers", "aria-live": "polite" }, coverage(card, chosen)),
    // Next to the field: a refused passphrase is said where the person types it again.
    state.error === null ? null : h("p", { class: "answer-error", role: "alert" }, state.error),
    clicks
      ? h("p", "clicks muted small", `You typed your passphrase a moment ago: Allow needs it again from ${clock(clicksUntil, nowMs)} (Settings, plain clicks).`)
      : null,
    h(
      "div",
      "decide-row",
      h("label", "prove-field", h("span", "field-title", clicks ? "Postern passphrase (not needed now)" : "Postern passphrase"), passphrase),
      h(
        "div",
        "decide-buttons",
        button("deny", "Deny", () => on.answer({ reply: "deny" }), { disabled, "data-focus": "deny", title: "The agent gets approval_denied (Esc)" }),
        button("allow primary", card.what === "session" ? "Allow this agent run" : "Allow", () => on.answer(allowWith(card, state.choice)), {
          disabled,
          "data-focus": "allow",
          title: clicks ? "Allow (Enter)" : "Allow with the passphrase (Enter)",
        }),
      ),
    ),
    state.systemAuth === null || state.systemAuth === undefined
      ? null
      : h("div", "decide-system", systemAuthButton(() => on.answer(allowWith(card, state.choice), true), disabled)),
    h("p", "keys muted small", card.choices.length === 0 ? "Enter allows · Esc denies" : `1–${card.choices.length} how long · Enter allows · Esc denies`, " · ← → other requests"),
  );
}

/** The forensic facts, folded (the window remembers whether the person keeps them open). */
function detailsView(approval: Approval, open: boolean, on: ApprovalHandlers, nowMs: number): HTMLElement {
  const card = approval.card;
  const details = h(
    "details",
    "forensics",
    h("summary", {}, "Details: process, code, catalog"),
    section("Agent", "agent", agentFacts(card)),
    section("Server and code", "server", serverFacts(card, nowMs)),
    section("Catalog", "catalog", catalogFacts(approval)),
    card.annotations === null ? null : section("Untrusted hints", "hints", hintsView(card)),
    section("Credentials", "credentials", credentialsView(card)),
    card.everyUse.length === 0 ? null : section("Every use", "every-use", everyUseView(card)),
    card.risks.length > RISKS_SHOWN ? section("Everything to weigh", "all-risks", h("ul", "risks", ...card.risks.map(riskLine))) : null,
  ) as HTMLDetailsElement;
  details.open = open;
  details.addEventListener("toggle", () => on.details(details.open));
  return details;
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
