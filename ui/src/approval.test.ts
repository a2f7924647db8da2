import { beforeEach, describe, expect, it, vi } from "vitest";

import type { AgentIdentity, ApprovalCard, Argument, EpochView, IdentitySince, ToolView, RiskLine, UntrustedHints } from "./approval-card";
import { allowWith, argumentName, calmLine, cardView, countdown, coverage, lifetimeLabel, narrowest, renderApprovals, RISKS_SHOWN, tick, type ApprovalHandlers, type ApprovalsState } from "./approval";
import type { Approval } from "./bindings";
import { clock, shortEpoch } from "./format";
import cardJson from "./fixtures/approval-card.json";
import approvalJson from "./fixtures/approval.json";

// The committed sample (crates/desk/src/sample.rs): a real card built by the domain.
const card = cardJson as unknown as ApprovalCard;
const sample = approvalJson as unknown as Approval;

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

/** Every key of `T`, listed once: the compiler checks the list against the hand-written type. */
const keys = <T>(record: Record<keyof T, true>): string[] => Object.keys(record).sort();

function show(approval: Approval, nowMs = approval.card.askedAt): HTMLElement {
  const root = cardView(approval, nowMs);
  document.body.replaceChildren(root);
  return root;
}

const handlers = () => ({
  answer: vi.fn<ApprovalHandlers["answer"]>(),
  move: vi.fn<ApprovalHandlers["move"]>(),
  choose: vi.fn<ApprovalHandlers["choose"]>(),
  details: vi.fn<ApprovalHandlers["details"]>(),
  lock: vi.fn<ApprovalHandlers["lock"]>(),
});

const state = (fields: Partial<ApprovalsState> = {}): ApprovalsState => ({
  queue: [sample],
  index: 0,
  armed: true,
  busy: false,
  error: null,
  choice: 0,
  details: false,
  ...fields,
});

/** The whole window for one approval, its details folded or open. */
function showWindow(approval: Approval, details = true): HTMLElement {
  const root = renderApprovals(state({ queue: [approval], details }), approval.card.askedAt, handlers());
  document.body.replaceChildren(root);
  return root;
}

function withCard(fields: Partial<ApprovalCard>, rest: Partial<Approval> = {}): Approval {
  return { ...sample, ...rest, card: { ...sample.card, ...fields } };
}

beforeEach(() => document.body.replaceChildren());

describe("the committed sample card", () => {
  it("is the same card inside the approval the app sends", () => {
    expect(sample.card).toEqual(card);
  });

  it("has exactly the fields the hand-written type declares, at every level", () => {
    expect(Object.keys(card).sort()).toEqual(
      keys<ApprovalCard>({
        id: true, askedAt: true, expiresAt: true, what: true, everyUse: true, agent: true, server: true, epoch: true,
        catalog: true, tool: true, arguments: true, annotations: true, credentials: true, withheldCredentials: true, choices: true,
        agentStoppedWaiting: true, risks: true, agentName: true, client: true, choiceLabels: true,
      }),
    );
    expect(Object.keys(card.agent).sort()).toEqual(keys<AgentIdentity>({ pid: true, startTime: true, executable: true, chain: true, cwd: true }));
    expect(Object.keys(card.epoch).sort()).toEqual(keys<EpochView>({ epoch: true, identity: true, launchCommand: true, startedAtMs: true, launch: true, pinning: true, sandbox: true, since: true }));
    expect(Object.keys(card.tool).sort()).toEqual(keys<ToolView>({ name: true, title: true, description: true }));
    expect(Object.keys(card.annotations ?? {}).sort()).toEqual(keys<UntrustedHints>({ note: true, hints: true }));
    for (const arg of card.arguments) {
      expect(Object.keys(arg).sort()).toEqual(keys<Argument>({ pointer: true, value: true, source: true }));
      expect(["sent", "default"]).toContain(arg.source);
    }
    expect(card.what).toBe("sessionAndCall");
    expect(card.epoch.since.kind).toBe("changed");
    expect(card.catalog.kind).toBe("changed");
    expect(card.choices.map((c) => c.end)).toEqual(["thisCall", "forMinutes", "forMinutes", "untilRunEnds"]);
  });
});

describe("an approval card", () => {
  it("shows control and bidirectional characters from the agent as escapes, never obeying them", () => {
    const agent = { ...sample.card.agent, chain: ["zsh", "claude\u202eedualc", "postern"] };
    const root = showWindow(withCard({ agent, agentName: "claude\u202eedualc" }));
    const chain = text(root.querySelector(".agent-chain"));
    expect(chain).toBe("zsh → claude\\u202eedualc → postern");
    expect(chain).not.toMatch(/[\u202e\u001b]/);
    expect(text(root.querySelector(".headline .agent-name"))).toBe("claude\\u202eedualc");
  });

  it("leads with one sentence: the agent by its own name, the tool, the server, and where the agent runs", () => {
    const root = show(sample);

    expect(text(root.querySelector(".headline"))).toBe("claude-code 2.1.3 wants to call deploy on deployer");
    expect(text(root.querySelector(".agent-cwd"))).toBe("/home/ada/src/shop");
    expect(text(root.querySelector(".tool-description"))).toBe("Deploy a branch. Safe: only reads.");
    const session = show(withCard({ what: "session", choices: [] }));
    expect(text(session.querySelector(".headline"))).toBe("claude-code 2.1.3 wants to start using deployer");
  });

  it("keeps the verified process as evidence in the folded details", () => {
    const root = showWindow(sample);

    expect(root.querySelector(".approval .agent-chain")).toBeNull();
    expect(text(root.querySelector(".forensics summary"))).toBe("Details: process, code, catalog");
    expect(text(root.querySelector(".agent-client"))).toBe("claude-code 2.1.3 (its own word)");
    expect(text(root.querySelector(".agent-chain"))).toBe("zsh → claude → postern");
    expect(text(root.querySelector(".agent-pid"))).toBe("· pid 48211");
    expect(text(root.querySelector(".agent-exe .path"))).toBe("/home/ada/.local/bin/claude");
    expect(root.querySelector(".agent-exe .digest")?.getAttribute("title")).toBe(card.agent.executable?.digest);
  });

  it("opens the details as the window last left them, and says when they are toggled", () => {
    const on = handlers();
    const folded = renderApprovals(state(), card.askedAt, on);
    expect(folded.querySelector<HTMLDetailsElement>(".forensics")?.open).toBe(false);
    expect(renderApprovals(state({ details: true }), card.askedAt, on).querySelector<HTMLDetailsElement>(".forensics")?.open).toBe(true);
    const details = folded.querySelector<HTMLDetailsElement>(".forensics")!;
    details.open = true;
    details.dispatchEvent(new Event("toggle"));
    expect(on.details).toHaveBeenCalledWith(true);
  });

  it("puts at most four risk lines on the card, most severe first, the rest in the details", () => {
    const root = showWindow(sample);
    const strip = [...root.querySelectorAll(".approval .risks .risk")];

    expect(card.risks.length).toBeGreaterThan(RISKS_SHOWN);
    expect(strip).toHaveLength(RISKS_SHOWN);
    expect(strip.map((li) => li.getAttribute("data-kind"))).toEqual(card.risks.slice(0, RISKS_SHOWN).map((r) => r.kind));
    expect(strip[0]?.classList.contains("risk-danger")).toBe(true);
    expect(text(strip[0]!)).toBe(card.risks[0]!.text);
    expect(text(root.querySelector(".risk-more"))).toBe(`and ${card.risks.length - RISKS_SHOWN} more in the details`);
    expect(all(root, ".section-all-risks li")).toEqual(card.risks.map((r) => r.text));
  });

  it("says one calm line when nothing is to weigh", () => {
    const calm = show(withCard({ risks: [], epoch: { ...card.epoch, since: { kind: "unchanged", approvedEpoch: card.epoch.epoch } } }));
    expect(calm.querySelector(".risks")).toBeNull();
    expect(text(calm.querySelector(".calm"))).toBe("The same code and tools you approved before.");
    expect(calmLine({ kind: "firstApproval" }, "deployer")).toBe("Your first approval for deployer: nothing earlier to compare with. Its code is in the details.");
  });

  it("says a new working directory as a change of context, not of code", () => {
    const since: IdentitySince = { kind: "changed", approvedEpoch: card.epoch.epoch, changedArtifacts: [], changedFacts: ["workingDirectory"] };
    // The domain's risk lines say what kind of change it is (crates/domain/src/decision/risk.rs).
    const context: RiskLine = { kind: "contextChanged", severity: "caution", text: "It was started in another working directory than last time.", facts: ["workingDirectory"] };
    const root = showWindow(withCard({ epoch: { ...card.epoch, since }, risks: [context] }));

    expect(text(root.querySelector(".since-changed .callout-title"))).toContain("The same code, started in another context");
    expect(root.querySelector(".since-changed")?.classList.contains("callout-warn")).toBe(false);
    expect(text(root.querySelector(".changed-facts"))).toBe("Changed: the working directory.");
  });

  it("shows the server and its launch by number, the epoch in full, and exactly which artifacts changed since the approved epoch", () => {
    const root = showWindow(sample);

    expect(text(root.querySelector(".server-name"))).toBe("deployer");
    // The sample was launched at 14:30 UTC on the day it asks (15:30 UTC).
    const started = clock(card.epoch.startedAtMs, card.askedAt);
    expect(started).toMatch(/^\d\d:30$/);
    expect(text(root.querySelector(".section-server .launch"))).toBe(`launch 7 · started ${started}`);
    expect(root.querySelector(".section-server .launch")?.getAttribute("title")).toBe(`execution epoch ${card.epoch.epoch}`);
    expect(text(root.querySelector(".section-server .epoch"))).toBe(card.epoch.epoch);
    expect(text(root.querySelector(".section-server .pin"))).toBe("PINNED");
    expect(root.querySelector(".section-server .pin-note, .section-server .unpinned-reason")).toBeNull();
    expect(text(root.querySelector(".since-changed .callout-title"))).toContain("The code changed since the last approval");
    expect(all(root, ".changed-artifacts li")).toEqual(["/srv/deployer/dist/server.js", "/usr/bin/node"]);
    expect(text(root.querySelector(".changed-facts"))).toBe("Also changed: the runtime version.");
  });

  it("says a launch it cannot number by its epoch, and a partly pinned one calmly, with what is and is not covered", () => {
    const pinning = { state: "partly", covered: "the entry file server.js", uncovered: "the code it loads: there is no lockfile" } as const;
    const root = showWindow(withCard({ epoch: { ...card.epoch, launch: null, pinning } }));

    expect(text(root.querySelector(".section-server .launch"))).toBe(`launch ${shortEpoch(card.epoch.epoch)} · started ${clock(card.epoch.startedAtMs, card.askedAt)}`);
    expect(text(root.querySelector(".section-server .pin"))).toBe("partly pinned");
    expect(root.querySelector(".section-server .pin")?.classList).not.toContain("unpinned");
    expect(text(root.querySelector(".section-server .pin-note"))).toBe(
      "Partly pinned: the digests cover the entry file server.js, not the code it loads: there is no lockfile.",
    );
    expect(root.querySelector(".section-server .unpinned-reason")).toBeNull();
  });

  it.each([
    [{ kind: "firstApproval" } as const, ".since-first", "No launch of this server was approved before."],
    [{ kind: "sameEpoch" } as const, ".since-same", "The same launch you approved before."],
    [{ kind: "unchanged", approvedEpoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD" } as const, ".since-unchanged", "A new launch of the same code as the approved epoch 01JQ7R…XWQD."],
  ])("says when the identity did not change (%o)", (since, selector, said) => {
    const root = showWindow(withCard({ epoch: { ...card.epoch, since } }));

    expect(text(root.querySelector(selector))).toBe(said);
    expect(root.querySelector(".changed-artifacts")).toBeNull();
  });

  it("shows the catalog diff since the last approval, escalations flagged", () => {
    const root = showWindow(sample);

    expect(root.querySelector(".catalog-changed")?.classList.contains("escalation")).toBe(true);
    expect(all(root, ".catalog-changes li")).toEqual([
      "added tool rollback",
      'deploy: description: "Deploy a branch to an environment." -> "Deploy a branch. Safe: only reads."',
      "deploy: annotation readOnlyHint: false -> true",
      "deploy: annotation destructiveHint: true -> false",
    ]);
    expect(root.querySelectorAll(".catalog-changes .change-escalation")).toHaveLength(2);

    const unchanged = showWindow(withCard({ catalog: { kind: "unchanged", revision: "sha256:" + "ab".repeat(32) } }, { catalogChanges: [], escalation: false }));
    expect(text(unchanged.querySelector(".catalog-since"))).toBe("Unchanged since the last approval (revision abababababab).");
  });

  it("lists the arguments by name with the schema's defaults visibly marked, long values folded", () => {
    const root = show(sample);

    const rows = [...root.querySelectorAll(".args tr")];
    expect(rows.map((r) => r.getAttribute("data-pointer"))).toEqual(["/branch", "/options", "/target", "/options/dryRun"]);
    expect(all(root, ".args .arg-pointer")).toEqual(["branch", "options", "target", "options.dryRun"]);
    expect(all(root, ".args .arg-value")).toEqual(['"main"', "{}", '"preview"', "false"]);
    const marked = rows.filter((r) => r.querySelector(".arg-default") !== null).map((r) => r.getAttribute("data-pointer"));
    expect(marked).toEqual(["/target", "/options/dryRun"]);
    expect(all(root, ".arg-default")).toEqual(["default", "default"]);
    expect(root.querySelector(".arg-default")?.getAttribute("title")).toContain("did not send");

    const long = "x".repeat(300);
    const folded = show(withCard({ arguments: [{ pointer: "/body", value: long, source: "sent" }] }));
    expect(folded.querySelector(".arg-value details.folded-value")).not.toBeNull();
    expect(text(folded.querySelector(".folded-value summary"))).toContain("302 characters");
    expect(text(folded.querySelector(".folded-value pre"))).toBe(JSON.stringify(long));
    expect(argumentName("/a~1b/c~0d")).toBe("a/b.c~d");
  });

  it("labels the annotations as untrusted hints", () => {
    const root = showWindow(sample);

    expect(text(root.querySelector(".section-hints h2"))).toBe("Untrusted hints");
    expect(text(root.querySelector(".hints-label"))).toBe("untrusted");
    expect(text(root.querySelector(".hints-note"))).toContain("untrusted hints from the server: they describe what it claims, and decide nothing");
    expect(all(root, ".hint-list li")).toEqual(["readOnlyHint: true", "destructiveHint: false", 'title: "Deploy"']);

    expect(showWindow(withCard({ annotations: null })).querySelector(".section-hints")).toBeNull();
  });

  it("shows the credential scope", () => {
    expect(all(showWindow(sample), ".credential-list li")).toEqual(["github-deploy"]);
    const none = showWindow(withCard({ credentials: [] }));
    expect(text(none.querySelector(".credentials-none"))).toBe("This call uses no credential.");
    const withheld = showWindow(withCard({ withheldCredentials: ["github-deploy"] }));
    expect(text(withheld.querySelector(".withheld"))).toContain("Withheld from the running launch: github-deploy");
  });

  it("says when the agent stopped waiting, and only then", () => {
    expect(show(sample).querySelector(".stopped-waiting")).toBeNull();
    const gaveUp = show(withCard({ agentStoppedWaiting: true }));
    expect(text(gaveUp.querySelector(".stopped-waiting"))).toContain("The agent stopped waiting for this call");
  });

  it("counts down to the timeout", () => {
    expect(countdown(card.expiresAt, card.askedAt)).toBe("2:00");
    expect(countdown(card.expiresAt, card.expiresAt - 54_200)).toBe("0:55");
    expect(countdown(card.expiresAt, card.expiresAt + 5000)).toBe("0:00");

    const root = show(sample, card.askedAt + 6_000);
    expect(text(root.querySelector(".countdown-text"))).toBe("expires in 1:54");
    expect(root.querySelector<HTMLElement>(".countdown-bar")?.style.width).toBe("95%");

    tick(root, [sample], card.expiresAt - 10_000);
    expect(text(root.querySelector(".countdown-text"))).toBe("expires in 0:10");
    expect(root.querySelector(".countdown")?.classList.contains("urgent")).toBe(true);
    tick(root, [sample], card.expiresAt);
    expect(text(root.querySelector(".countdown-text"))).toBe("timed out");
  });

  it("renders the server's text as text, never as markup", () => {
    const root = show(withCard({ tool: { name: "x", title: null, description: "<img src=x onerror=alert(1)>" } }));

    expect(root.querySelector("img")).toBeNull();
    expect(text(root.querySelector(".tool-description"))).toBe("<img src=x onerror=alert(1)>");
  });
});

describe("the approval window", () => {
  it("offers one Allow, one Deny and the lifetimes, narrowest chosen, keys 1–4", () => {
    const on = handlers();
    const root = renderApprovals(state(), card.askedAt, on);

    expect(all(root, ".lifetime")).toEqual(["1This call", "215 min", "31 hour", "4This agent run"]);
    expect(root.querySelector(".lifetimes")?.getAttribute("role")).toBe("radiogroup");
    expect([...root.querySelectorAll(".lifetime")].map((b) => b.getAttribute("aria-checked"))).toEqual(["true", "false", "false", "false"]);
    expect(all(root, ".decide-buttons button")).toEqual(["Deny", "Allow"]);
    root.querySelectorAll<HTMLButtonElement>(".lifetime")[1]!.click();
    expect(on.choose).toHaveBeenCalledWith(1);
    root.querySelector<HTMLButtonElement>(".allow")!.click();
    expect(on.answer).toHaveBeenCalledWith({ reply: "approve", choice: { end: "thisCall" } });
    root.querySelector<HTMLButtonElement>(".deny")!.click();
    expect(on.answer).toHaveBeenLastCalledWith({ reply: "deny" });
    expect(text(root.querySelector(".keys"))).toBe("1–4 how long · Enter allows · Esc denies · ← → other requests");
  });

  it("allows with the lifetime chosen, and says in words what it covers", () => {
    const on = handlers();
    const root = renderApprovals(state({ choice: 2 }), card.askedAt, on);

    expect(root.querySelector(".lifetime.checked")?.getAttribute("data-choice")).toBe("forMinutes:60");
    expect(text(root.querySelector(".covers"))).toBe(
      "For 1 hour, claude-code 2.1.3 may call deploy on deployer with any arguments, acting with github-deploy, while this launch of deployer runs. It also lets claude-code 2.1.3 use deployer; other tools still ask.",
    );
    root.querySelector<HTMLButtonElement>(".allow")!.click();
    expect(on.answer).toHaveBeenCalledWith({ reply: "approve", choice: { end: "forMinutes", minutes: 60 } });
    expect(coverage({ ...card, what: "call" }, { end: "thisCall" })).toBe("Allows this one call, with these arguments, acting with github-deploy. The next call asks again.");
    expect(coverage({ ...card, what: "call", credentials: [] }, { end: "untilRunEnds" })).toBe(
      "Until this agent run ends, claude-code 2.1.3 may call deploy on deployer with any arguments, while this launch of deployer runs.",
    );
  });

  it("has a passphrase field for the approval's proof, never remembered, and mounts the one it is given", () => {
    const root = renderApprovals(state(), card.askedAt, handlers());
    const field = root.querySelector<HTMLInputElement>(".decide input.passphrase")!;
    expect(field.type).toBe("password");
    expect(field.getAttribute("autocomplete")).toBe("current-password");
    expect(text(root.querySelector(".prove-field"))).toBe("Postern passphrase");

    const kept = document.createElement("input");
    expect(renderApprovals(state(), card.askedAt, handlers(), kept).querySelector(".prove-field input")).toBe(kept);
    expect(renderApprovals(state({ queue: [] }), card.askedAt, handlers()).querySelector(".passphrase")).toBeNull();
  });

  it("approves with the narrowest choice by default", () => {
    expect(narrowest(card)).toEqual({ reply: "approve", choice: { end: "thisCall" } });
    expect(narrowest({ ...card, choices: [] })).toEqual({ reply: "approve", choice: null });
    expect(allowWith(card, 3)).toEqual({ reply: "approve", choice: { end: "untilRunEnds" } });
    expect(allowWith(card, 9)).toEqual({ reply: "approve", choice: { end: "thisCall" } });
  });

  it("asks about the agent run alone when the card offers no choice", () => {
    const on = handlers();
    const session = withCard({ what: "session", choices: [] });
    const root = renderApprovals(state({ queue: [session] }), card.askedAt, on);

    expect(root.querySelector(".lifetimes")).toBeNull();
    expect(all(root, ".decide-buttons button")).toEqual(["Deny", "Allow this agent run"]);
    root.querySelector<HTMLButtonElement>(".allow")!.click();
    expect(on.answer).toHaveBeenCalledWith({ reply: "approve", choice: null });
    expect(text(root.querySelector(".covers"))).toBe("Lets claude-code 2.1.3 use deployer in this agent run. Each tool call still follows your rules.");
  });

  it("says where it is in the queue and disables its buttons until armed", () => {
    const second = withCard({ id: "01M8KYTT6000000000000C1ZZF" });
    const root = renderApprovals(state({ queue: [sample, second], index: 1, armed: false }), card.askedAt, handlers());

    expect(text(root.querySelector(".queue-pos"))).toBe("2 of 2");
    expect(root.querySelector(".approval")?.getAttribute("data-approval")).toBe(second.card.id);
    expect([...root.querySelectorAll<HTMLButtonElement>(".allow, .deny")].every((b) => b.disabled)).toBe(true);
    expect(root.querySelector<HTMLButtonElement>(".prev")?.disabled).toBe(false);
    expect(root.querySelector<HTMLButtonElement>(".next")?.disabled).toBe(true);
  });

  it("shows the engine's refusal of an answer", () => {
    const root = renderApprovals(state({ error: "no open approval request X: it was answered, timed out or withdrawn" }), card.askedAt, handlers());

    expect(text(root.querySelector(".answer-error"))).toContain("timed out or withdrawn");
  });

  it("names every lifetime as the engine does", () => {
    expect(card.choices.map((c) => lifetimeLabel(card, c))).toEqual(card.choiceLabels);
    expect(card.choiceLabels[0]).toBe("this call");
    const root = renderApprovals(state(), card.askedAt, handlers());
    expect(root.querySelector(".lifetime")?.getAttribute("title")).toBe("This call (1)");
  });
});
