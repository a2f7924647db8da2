import { beforeEach, describe, expect, it, vi } from "vitest";

import type { AgentIdentity, ApprovalCard, Argument, EpochView, ToolView, UntrustedHints } from "./approval-card";
import { cardView, choiceLabel, countdown, narrowest, renderApprovals, tick, type ApprovalHandlers, type ApprovalsState } from "./approval";
import type { Approval } from "./bindings";
import cardJson from "./fixtures/approval-card.json";
import approvalJson from "./fixtures/approval.json";

// The committed sample (src-tauri/src/sample.rs): a real card built by the domain.
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
        agentStoppedWaiting: true,
      }),
    );
    expect(Object.keys(card.agent).sort()).toEqual(keys<AgentIdentity>({ pid: true, startTime: true, executable: true, chain: true, cwd: true }));
    expect(Object.keys(card.epoch).sort()).toEqual(keys<EpochView>({ epoch: true, identity: true, launchCommand: true, pinning: true, since: true }));
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
    const root = show(withCard({ agent }));
    const chain = text(root.querySelector(".agent-chain"));
    expect(chain).toBe("zsh → claude\\u202eedualc → postern");
    expect(chain).not.toMatch(/[\u202e\u001b]/);
  });

  it("names the agent process: chain, pid, executable and digest, directory", () => {
    const root = show(sample);

    expect(text(root.querySelector(".asks-line"))).toBe(
      "claude asks to call deploy on deployer (approving also admits this agent run for deployer)",
    );
    expect(text(root.querySelector(".agent-chain"))).toBe("zsh → claude → postern");
    expect(text(root.querySelector(".agent-pid"))).toBe("· pid 48211");
    expect(text(root.querySelector(".agent-exe .path"))).toBe("/home/ada/.local/bin/claude");
    expect(root.querySelector(".agent-exe .digest")?.getAttribute("title")).toBe(card.agent.executable?.digest);
    expect(text(root.querySelector(".agent-cwd"))).toBe("/home/ada/src/shop");
  });

  it("shows the server and its epoch, and exactly which artifacts changed since the approved epoch", () => {
    const root = show(sample);

    expect(text(root.querySelector(".server-name"))).toBe("deployer");
    expect(root.querySelector(".section-server .epoch")?.getAttribute("title")).toBe(`execution epoch ${card.epoch.epoch}`);
    expect(text(root.querySelector(".section-server .pin"))).toBe("PINNED");
    expect(text(root.querySelector(".since-changed .callout-title"))).toContain("The code changed since the last approval");
    expect(all(root, ".changed-artifacts li")).toEqual(["/srv/deployer/dist/server.js", "/usr/bin/node"]);
    expect(text(root.querySelector(".changed-facts"))).toBe("Also changed: the runtime version.");
  });

  it.each([
    [{ kind: "firstApproval" } as const, ".since-first", "No launch of this server was approved before."],
    [{ kind: "sameEpoch" } as const, ".since-same", "The same launch you approved before."],
    [{ kind: "unchanged", approvedEpoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD" } as const, ".since-unchanged", "A new launch of the same code as the approved epoch 01JQ7R…XWQD."],
  ])("says when the identity did not change (%o)", (since, selector, said) => {
    const root = show(withCard({ epoch: { ...card.epoch, since } }));

    expect(text(root.querySelector(selector))).toBe(said);
    expect(root.querySelector(".changed-artifacts")).toBeNull();
  });

  it("shows the catalog diff since the last approval, escalations flagged", () => {
    const root = show(sample);

    expect(root.querySelector(".catalog-changed")?.classList.contains("escalation")).toBe(true);
    expect(all(root, ".catalog-changes li")).toEqual([
      "added tool rollback",
      'deploy: description: "Deploy a branch to an environment." -> "Deploy a branch. Safe: only reads."',
      "deploy: annotation readOnlyHint: false -> true",
      "deploy: annotation destructiveHint: true -> false",
    ]);
    expect(root.querySelectorAll(".catalog-changes .change-escalation")).toHaveLength(2);

    const unchanged = show(withCard({ catalog: { kind: "unchanged", revision: "sha256:" + "ab".repeat(32) } }, { catalogChanges: [], escalation: false }));
    expect(text(unchanged.querySelector(".catalog-since"))).toBe("Unchanged since the last approval (revision abababababab).");
  });

  it("lists the arguments with the schema's defaults visibly marked", () => {
    const root = show(sample);

    const rows = [...root.querySelectorAll(".args tr")];
    expect(rows.map((r) => r.getAttribute("data-pointer"))).toEqual(["/branch", "/options", "/target", "/options/dryRun"]);
    expect(all(root, ".args .arg-value")).toEqual(['"main"', "{}", '"preview"', "false"]);
    const marked = rows.filter((r) => r.querySelector(".arg-default") !== null).map((r) => r.getAttribute("data-pointer"));
    expect(marked).toEqual(["/target", "/options/dryRun"]);
    expect(all(root, ".arg-default")).toEqual(["default", "default"]);
    expect(root.querySelector(".arg-default")?.getAttribute("title")).toContain("did not send");
  });

  it("labels the annotations as untrusted hints", () => {
    const root = show(sample);

    expect(text(root.querySelector(".section-hints h2"))).toBe("Untrusted hints");
    expect(text(root.querySelector(".hints-label"))).toBe("untrusted");
    expect(text(root.querySelector(".hints-note"))).toContain("untrusted hints from the server: they describe what it claims, and decide nothing");
    expect(all(root, ".hint-list li")).toEqual(["readOnlyHint: true", "destructiveHint: false", 'title: "Deploy"']);

    expect(show(withCard({ annotations: null })).querySelector(".section-hints")).toBeNull();
  });

  it("shows the credential scope", () => {
    expect(all(show(sample), ".credential-list li")).toEqual(["github-deploy"]);
    const none = show(withCard({ credentials: [] }));
    expect(text(none.querySelector(".credentials-none"))).toBe("This call uses no credential.");
    const withheld = show(withCard({ withheldCredentials: ["github-deploy"] }));
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
  const handlers = () => ({
    answer: vi.fn<ApprovalHandlers["answer"]>(),
    move: vi.fn<ApprovalHandlers["move"]>(),
    lock: vi.fn<ApprovalHandlers["lock"]>(),
  });
  const state = (fields: Partial<ApprovalsState> = {}): ApprovalsState => ({
    queue: [sample],
    index: 0,
    armed: true,
    busy: false,
    error: null,
    ...fields,
  });

  it("offers the card's grant choices, narrowest first, and Deny", () => {
    const on = handlers();
    const root = renderApprovals(state(), card.askedAt, on);

    expect(all(root, ".choice")).toEqual(["Approve this call", "Approve for 15 min", "Approve for 60 min", "Approve until the agent run ends"]);
    root.querySelectorAll<HTMLButtonElement>(".choice")[1]!.click();
    expect(on.answer).toHaveBeenCalledWith({ reply: "approve", choice: { end: "forMinutes", minutes: 15 } });
    root.querySelector<HTMLButtonElement>(".deny")!.click();
    expect(on.answer).toHaveBeenLastCalledWith({ reply: "deny" });
    expect(text(root.querySelector(".keys"))).toBe("Enter in the passphrase approves the narrowest choice, or the focused one · Esc denies · ← → switch requests");
  });

  it("has a passphrase field for the approval's proof, never remembered, and mounts the one it is given", () => {
    const root = renderApprovals(state(), card.askedAt, handlers());
    const field = root.querySelector<HTMLInputElement>(".decide input.passphrase")!;
    expect(field.type).toBe("password");
    expect(field.getAttribute("autocomplete")).toBe("current-password");
    expect(text(root.querySelector(".prove-field"))).toContain("Approving needs it; denying does not.");

    const kept = document.createElement("input");
    expect(renderApprovals(state(), card.askedAt, handlers(), kept).querySelector(".prove-field input")).toBe(kept);
    expect(renderApprovals(state({ queue: [] }), card.askedAt, handlers()).querySelector(".passphrase")).toBeNull();
  });

  it("approves with the narrowest choice by default", () => {
    expect(narrowest(card)).toEqual({ reply: "approve", choice: { end: "thisCall" } });
    expect(narrowest({ ...card, choices: [] })).toEqual({ reply: "approve", choice: null });
  });

  it("asks about the agent run alone when the card offers no choice", () => {
    const on = handlers();
    const session = withCard({ what: "session", choices: [] });
    const root = renderApprovals(state({ queue: [session] }), card.askedAt, on);

    expect(all(root, ".choice")).toEqual(["Admit this agent run"]);
    root.querySelector<HTMLButtonElement>(".choice")!.click();
    expect(on.answer).toHaveBeenCalledWith({ reply: "approve", choice: null });
  });

  it("says where it is in the queue and disables its buttons until armed", () => {
    const second = withCard({ id: "01M8KYTT6000000000000C1ZZF" });
    const root = renderApprovals(state({ queue: [sample, second], index: 1, armed: false }), card.askedAt, handlers());

    expect(text(root.querySelector(".queue-pos"))).toBe("2 of 2");
    expect(root.querySelector(".approval")?.getAttribute("data-approval")).toBe(second.card.id);
    expect([...root.querySelectorAll<HTMLButtonElement>(".choice, .deny")].every((b) => b.disabled)).toBe(true);
    expect(root.querySelector<HTMLButtonElement>(".prev")?.disabled).toBe(false);
    expect(root.querySelector<HTMLButtonElement>(".next")?.disabled).toBe(true);
  });

  it("shows the engine's refusal of an answer", () => {
    const root = renderApprovals(state({ error: "no open approval request X: it was answered, timed out or withdrawn" }), card.askedAt, handlers());

    expect(text(root.querySelector(".answer-error"))).toContain("timed out or withdrawn");
  });

  it("names every grant choice", () => {
    expect(choiceLabel({ end: "thisCall" })).toBe("Approve this call");
    expect(choiceLabel({ end: "forMinutes", minutes: 5 })).toBe("Approve for 5 min");
    expect(choiceLabel({ end: "untilRunEnds" })).toBe("Approve until the agent run ends");
  });
});
