import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { Reply } from "./approval-card";
import { approvalsWindow, type ApprovalSource } from "./approvals-live";
import type { Approval } from "./bindings";
import approvalJson from "./fixtures/approval.json";

const sample = approvalJson as unknown as Approval;
const ASKED = sample.card.askedAt;

function request(id: string, tool = "deploy"): Approval {
  return { ...sample, card: { ...sample.card, id, tool: { ...sample.card.tool, name: tool } } };
}

function fakeSource(first: Approval[]) {
  let queue = first;
  let push: ((list: Approval[]) => void) | undefined;
  const answers: [string, Reply][] = [];
  let refuse: string | null = null;
  const source: ApprovalSource = {
    fetch: vi.fn(async () => queue),
    subscribe: async (onList) => {
      push = onList;
      return () => {};
    },
    answer: vi.fn(async (id: string, reply: Reply) => {
      if (refuse !== null) throw new Error(refuse);
      answers.push([id, reply]);
      queue = queue.filter((a) => a.card.id !== id);
      push?.(queue);
    }),
    lock: vi.fn(async () => {
      queue = [];
      push?.(queue);
    }),
  };
  return {
    source,
    answers,
    refuse: (message: string) => (refuse = message),
    push: (list: Approval[]) => {
      queue = list;
      push?.(list);
    },
  };
}

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const key = (k: string) => document.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
const shownId = (root: HTMLElement) => root.querySelector(".approval")?.getAttribute("data-approval");

describe("the approval window", () => {
  let root: HTMLElement;
  let stop: () => void = () => {};

  beforeEach(() => {
    vi.useFakeTimers();
    root = document.createElement("div");
    document.body.replaceChildren(root);
  });
  afterEach(() => {
    stop();
    vi.useRealTimers();
  });

  const open = (source: ApprovalSource) => {
    stop = approvalsWindow(root, source, { armMs: 600, now: () => Date.now() });
  };

  it("arms a new card after a moment, focuses its narrowest choice, and Enter on it approves this call", async () => {
    vi.setSystemTime(ASKED);
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(0);

    expect(text(root.querySelector(".queue-pos"))).toBe("1 of 1");
    expect(root.querySelector<HTMLButtonElement>(".choice")?.disabled).toBe(true);
    await vi.advanceTimersByTimeAsync(600);
    const first = root.querySelector<HTMLButtonElement>(".choice")!;
    expect(first.disabled).toBe(false);
    expect(document.activeElement).toBe(first);

    // Enter on a focused button is a click.
    first.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "thisCall" } }]]);
    expect(text(root.querySelector(".empty-line"))).toContain("No request is waiting");
  });

  it("denies the shown request on Escape, and ignores keys before the card is armed", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(0);

    key("Escape");
    expect(fake.answers).toEqual([]);
    await vi.advanceTimersByTimeAsync(600);
    key("Escape");
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "deny" }]]);
  });

  it("queues requests, moves with the arrow keys, and disarms the card that takes an answered one's place", async () => {
    const fake = fakeSource([request("A"), request("B", "status"), request("C", "rollback")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    expect(text(root.querySelector(".queue-pos"))).toBe("1 of 3");

    key("ArrowRight");
    expect(shownId(root)).toBe("B");
    expect(text(root.querySelector(".queue-pos"))).toBe("2 of 3");
    await vi.advanceTimersByTimeAsync(600);
    key("ArrowLeft");
    key("ArrowRight");
    await vi.advanceTimersByTimeAsync(600);
    root.querySelector<HTMLButtonElement>(".deny")!.click();
    await vi.advanceTimersByTimeAsync(0);

    // B was answered: C takes its place, and waits before it takes input.
    expect(fake.answers).toEqual([["B", { reply: "deny" }]]);
    expect(shownId(root)).toBe("C");
    expect(text(root.querySelector(".queue-pos"))).toBe("2 of 2");
    expect(root.querySelector<HTMLButtonElement>(".choice")?.disabled).toBe(true);
    key("Escape");
    expect(fake.answers).toHaveLength(1);
  });

  it("keeps the card shown, and its focused choice, when another request arrives", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    const fifteen = root.querySelector<HTMLButtonElement>('[data-choice="forMinutes:15"]')!;
    fifteen.focus();

    fake.push([request("A"), request("B")]);

    expect(shownId(root)).toBe("A");
    expect(text(root.querySelector(".queue-pos"))).toBe("1 of 2");
    expect((document.activeElement as HTMLElement).dataset.choice).toBe("forMinutes:15");
  });

  it("shows why an answer was not taken", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    fake.refuse("no open approval request A: it was answered, timed out or withdrawn");

    root.querySelector<HTMLButtonElement>(".choice")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(text(root.querySelector(".answer-error"))).toContain("timed out or withdrawn");
  });

  it("counts down without re-rendering, and locks from its Lock button", async () => {
    vi.setSystemTime(ASKED);
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    const before = root.firstElementChild;

    await vi.advanceTimersByTimeAsync(10_000);

    expect(text(root.querySelector(".countdown-text"))).toBe("expires in 1:50");
    expect(root.firstElementChild).toBe(before);
    root.querySelector<HTMLButtonElement>(".lock-button")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.source.lock).toHaveBeenCalled();
    expect(root.querySelector(".approval")).toBeNull();
  });
});
