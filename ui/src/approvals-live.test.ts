import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { Reply } from "./approval-card";
import { approvalsWindow, fittedHeight, type ApprovalSource } from "./approvals-live";
import type { Approval, Chosen, Proof } from "./bindings";
import approvalJson from "./fixtures/approval.json";

const sample = approvalJson as unknown as Approval;
const ASKED = sample.card.askedAt;
const PASSPHRASE = "correct horse battery";

function request(id: string, tool = "deploy"): Approval {
  return { ...sample, card: { ...sample.card, id, tool: { ...sample.card.tool, name: tool } } };
}

function fakeSource(first: Approval[]) {
  let queue = first;
  let push: ((list: Approval[]) => void) | undefined;
  const answers: [string, Reply, Proof | null][] = [];
  let refuse: Error | null = null;
  const source: ApprovalSource = {
    fetch: vi.fn(async () => queue),
    subscribe: async (onList) => {
      push = onList;
      return () => {};
    },
    answer: vi.fn(async (id: string, reply: Reply, proof: Proof | null) => {
      if (refuse !== null) {
        const err = refuse;
        refuse = null;
        throw err;
      }
      answers.push([id, reply, proof]);
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
    /** The next answer is refused with `message` (and the engine's `code`, if given). */
    refuse: (message: string, code?: string) => (refuse = Object.assign(new Error(message), code === undefined ? {} : { code })),
    push: (list: Approval[]) => {
      queue = list;
      push?.(list);
    },
  };
}

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const key = (k: string) => document.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
const shownId = (root: HTMLElement) => root.querySelector(".approval")?.getAttribute("data-approval");
const field = (root: HTMLElement) => root.querySelector<HTMLInputElement>("input.passphrase")!;
/** Types into the passphrase field, and presses Enter in it when asked. */
function typePassphrase(root: HTMLElement, passphrase: string, enter = false): void {
  field(root).value = passphrase;
  if (enter) field(root).dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
}

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

  it("paints the card it was opened with at once, then shows the one chosen in the tray and follows the queue", async () => {
    vi.setSystemTime(ASKED);
    const fake = fakeSource([request("A"), request("B"), request("C")]);
    fake.source.systemAuth = vi.fn(async () => "polkit");
    fake.source.focus = vi.fn(async () => ({ id: "B", review: false }));
    fake.source.initial = vi.fn(() => ({ approvals: [request("A"), request("B")], clicksUntil: null }));
    open(fake.source);
    // Before any call returns: a card is there.
    expect(shownId(root)).toBe("A");
    expect(fake.source.initial).toHaveBeenCalledTimes(1);
    // The window still asks: the tray's choice, the system authentication and a request that
    // arrived since come in.
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.source.fetch).toHaveBeenCalled();
    expect(shownId(root)).toBe("B");
    expect(root.querySelector(".system-auth")).not.toBeNull();
    key("ArrowRight");
    expect(shownId(root)).toBe("C");
  });

  it("offers system authentication only when the engine has it, and sends that proof instead of what is typed", async () => {
    vi.setSystemTime(ASKED);
    const plain = fakeSource([request("A")]);
    open(plain.source);
    await vi.advanceTimersByTimeAsync(600);
    expect(root.querySelector(".system-auth")).toBeNull();
    stop();

    const fake = fakeSource([request("A")]);
    fake.source.systemAuth = vi.fn(async () => "polkit");
    open(fake.source);
    await vi.advanceTimersByTimeAsync(0);
    const system = () => root.querySelector<HTMLButtonElement>(".system-auth")!;
    expect(text(system())).toBe("Use system authentication");
    expect(system().disabled).toBe(true);
    await vi.advanceTimersByTimeAsync(600);

    fake.refuse("system authentication failed; the next try is allowed in 1 s", "os_auth_denied");
    typePassphrase(root, "typed, then not sent");
    system().click();
    await vi.advanceTimersByTimeAsync(0);
    expect(text(root.querySelector(".answer-error"))).toBe("system authentication failed; the next try is allowed in 1 s");
    expect(field(root).value).toBe("");
    expect(document.body.innerHTML).not.toContain("typed, then not sent");

    system().click();
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "thisCall" } }, { system: true }]]);
  });

  it("focuses the narrowest lifetime, arms the card after a moment, and Enter takes the person to the passphrase, then allows", async () => {
    vi.setSystemTime(ASKED);
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(0);

    expect(text(root.querySelector(".queue-pos"))).toBe("1 of 1");
    expect(root.querySelector<HTMLButtonElement>(".allow")?.disabled).toBe(true);
    expect((document.activeElement as HTMLElement).dataset.choice).toBe("thisCall");
    // Enter before the card is armed answers nothing.
    typePassphrase(root, PASSPHRASE, true);
    expect(fake.answers).toEqual([]);
    typePassphrase(root, "");
    await vi.advanceTimersByTimeAsync(600);
    expect(root.querySelector<HTMLButtonElement>(".allow")!.disabled).toBe(false);

    // Enter on the lifetime with nothing typed: the field takes the focus, and says why.
    key("Enter");
    expect(fake.answers).toEqual([]);
    expect(document.activeElement).toBe(field(root));
    expect(text(root.querySelector(".answer-error"))).toBe("Type your Postern passphrase, then Enter, to allow.");

    typePassphrase(root, PASSPHRASE, true);
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "thisCall" } }, { passphrase: PASSPHRASE }]]);
    expect(text(root.querySelector(".empty-line"))).toContain("No request is waiting");
    expect(document.body.innerHTML).not.toContain(PASSPHRASE);
  });

  it("chooses the lifetime with keys 1–4, types other keys into the passphrase field, and allows with what was chosen", async () => {
    const fake = fakeSource([request("A"), request("B")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);

    key("3");
    expect(root.querySelector(".lifetime.checked")?.getAttribute("data-choice")).toBe("forMinutes:60");
    expect((document.activeElement as HTMLElement).dataset.choice).toBe("forMinutes:60");
    expect(text(root.querySelector(".covers"))).toContain("For 1 hour");
    key("9"); // no ninth lifetime: nothing changes
    expect(root.querySelector(".lifetime.checked")?.getAttribute("data-choice")).toBe("forMinutes:60");
    key("2");
    // A letter typed outside the field starts the passphrase there.
    key("c");
    expect(field(root).value).toBe("c");
    expect(document.activeElement).toBe(field(root));
    typePassphrase(root, PASSPHRASE, true);
    await vi.advanceTimersByTimeAsync(0);

    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "forMinutes", minutes: 15 } }, { passphrase: PASSPHRASE }]]);
    expect(shownId(root)).toBe("B");
    expect(field(root).value).toBe("");
    // The next card starts from the narrowest again.
    expect(root.querySelector(".lifetime.checked")?.getAttribute("data-choice")).toBe("thisCall");
  });

  it("remembers whether the details are open, across cards and windows", async () => {
    localStorage.removeItem("postern.approvals.details");
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    const details = root.querySelector<HTMLDetailsElement>(".forensics")!;
    expect(details.open).toBe(false);

    details.open = true;
    details.dispatchEvent(new Event("toggle"));
    stop();
    open(fakeSource([request("B")]).source);
    await vi.advanceTimersByTimeAsync(0);

    expect(root.querySelector<HTMLDetailsElement>(".forensics")?.open).toBe(true);
    localStorage.removeItem("postern.approvals.details");
  });

  it("shows first the request a person chose in the tray, and follows later choices", async () => {
    const fake = fakeSource([request("A"), request("B", "status"), request("C", "rollback")]);
    let chose: ((chosen: Chosen) => void) | undefined;
    const source: ApprovalSource = {
      ...fake.source,
      focus: vi.fn(async () => ({ id: "C", review: false })),
      onFocus: async (onId) => {
        chose = onId;
        return () => {};
      },
    };
    open(source);
    await vi.advanceTimersByTimeAsync(0);

    expect(shownId(root)).toBe("C");
    expect(text(root.querySelector(".queue-pos"))).toBe("3 of 3");
    expect(root.querySelector<HTMLDetailsElement>(".forensics")?.open).toBe(false);
    // Review… of a flagged request: shown with its details open.
    chose?.({ id: "B", review: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(shownId(root)).toBe("B");
    expect(root.querySelector<HTMLDetailsElement>(".forensics")?.open).toBe(true);
    chose?.({ id: "gone", review: false });
    await vi.advanceTimersByTimeAsync(0);
    expect(shownId(root)).toBe("B");
  });

  it("asks for the passphrase before it approves, and sends nothing without it", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);

    root.querySelector<HTMLButtonElement>(".allow")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(fake.source.answer).not.toHaveBeenCalled();
    expect(text(root.querySelector(".answer-error"))).toBe("Type your Postern passphrase to approve.");
    expect(shownId(root)).toBe("A");
    expect(document.activeElement).toBe(field(root));

    typePassphrase(root, PASSPHRASE, true);
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "thisCall" } }, { passphrase: PASSPHRASE }]]);
  });

  it("allows with a plain click only while the engine says the plain-click window is open", async () => {
    vi.setSystemTime(ASKED);
    const fake = fakeSource([request("A"), request("B")]);
    fake.source.clicksUntil = vi.fn(async () => ASKED + 60_000);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);

    expect(text(root.querySelector(".clicks"))).toContain("You typed your passphrase a moment ago: Allow needs it again from");
    root.querySelector<HTMLButtonElement>(".allow")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "thisCall" } }, null]]);

    // The window closes: the next Allow asks for the passphrase again, and sends nothing.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(root.querySelector(".clicks")).toBeNull();
    root.querySelector<HTMLButtonElement>(".allow")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toHaveLength(1);
    expect(text(root.querySelector(".answer-error"))).toBe("Type your Postern passphrase to approve.");
  });

  it("denies with no proof, and leaves nothing typed behind", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);

    typePassphrase(root, PASSPHRASE);
    root.querySelector<HTMLButtonElement>(".deny")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(fake.source.answer).toHaveBeenCalledExactlyOnceWith("A", { reply: "deny" }, null);
    expect(root.querySelector("input.passphrase")).toBeNull();
  });

  it("keeps the card open on a wrong passphrase, with the engine's message, ready for another try", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    fake.refuse("wrong passphrase: the next try is allowed in 1 second", "passphrase_wrong");

    typePassphrase(root, "not it", true);
    await vi.advanceTimersByTimeAsync(0);

    expect(shownId(root)).toBe("A");
    expect(text(root.querySelector(".answer-error"))).toBe("wrong passphrase: the next try is allowed in 1 second");
    expect(field(root).value).toBe("");
    expect(document.activeElement).toBe(field(root));
    expect(root.querySelector<HTMLButtonElement>(".allow")!.disabled).toBe(false);

    typePassphrase(root, PASSPHRASE, true);
    await vi.advanceTimersByTimeAsync(0);
    expect(fake.answers).toEqual([["A", { reply: "approve", choice: { end: "thisCall" } }, { passphrase: PASSPHRASE }]]);
  });

  it("keeps what is typed in the passphrase field, and its focus, when the window redraws", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    field(root).focus();
    typePassphrase(root, "half typ");

    fake.push([request("A"), request("B")]);

    expect(text(root.querySelector(".queue-pos"))).toBe("1 of 2");
    expect(field(root).value).toBe("half typ");
    expect(document.activeElement).toBe(field(root));
    // The arrows move the caret in a passphrase being typed, not to another request...
    field(root).dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
    expect(shownId(root)).toBe("A");
    // ...and switch requests from an empty field.
    typePassphrase(root, "");
    field(root).dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
    expect(shownId(root)).toBe("B");
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
    expect(fake.answers).toEqual([["A", { reply: "deny" }, null]]);
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
    expect(fake.answers).toEqual([["B", { reply: "deny" }, null]]);
    expect(shownId(root)).toBe("C");
    expect(text(root.querySelector(".queue-pos"))).toBe("2 of 2");
    expect(root.querySelector<HTMLButtonElement>(".allow")?.disabled).toBe(true);
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

  it("holds the redraw while Deny is pressed when another request arrives, so the click denies the card pressed", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    const deny = root.querySelector<HTMLButtonElement>(".deny")!;

    deny.dispatchEvent(new Event("pointerdown", { bubbles: true }));
    fake.push([request("A"), request("B")]);
    expect(root.contains(deny)).toBe(true);
    deny.dispatchEvent(new Event("pointerup", { bubbles: true }));
    deny.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(fake.source.answer).toHaveBeenCalledExactlyOnceWith("A", { reply: "deny" }, null);
    // Then the window shows what came meanwhile: B, which the answer left alone.
    expect(shownId(root)).toBe("B");
  });

  it("shows why an answer was not taken", async () => {
    const fake = fakeSource([request("A")]);
    open(fake.source);
    await vi.advanceTimersByTimeAsync(600);
    fake.refuse("no open approval request A: it was answered, timed out or withdrawn", "not_open");

    typePassphrase(root, PASSPHRASE);
    root.querySelector<HTMLButtonElement>(".allow")!.click();
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

  it("fits the window to each new card and to its details, up to the screen", async () => {
    const fake = fakeSource([request("A"), request("B")]);
    const sizes: [number, number][] = [];
    open({ ...fake.source, fit: vi.fn(async (w: number, h: number) => void sizes.push([w, h])) });
    await vi.advanceTimersByTimeAsync(600);
    const first = sizes.length;
    expect(first).toBeGreaterThan(0);

    fake.push([request("A"), request("B")]); // the same card again: no resize
    expect(sizes).toHaveLength(first);
    key("ArrowRight"); // another card
    expect(sizes.length).toBeGreaterThan(first);
    expect(fittedHeight(300, 900)).toBe(480);
    expect(fittedHeight(700, 900)).toBe(700);
    expect(fittedHeight(2000, 900)).toBe(852);
    expect(fittedHeight(2000, 0)).toBe(2000);
  });
});
