import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { EngineView } from "./bindings";
import { execution, server, session, status } from "./fixtures";
import { live, type StatusSource } from "./live";

const running = (labels: string[]): EngineView => ({
  state: "running",
  status: status({ servers: labels.map((label) => server({ label })) }),
});

function fakeSource(first: EngineView) {
  let current = first;
  let push: ((view: EngineView) => void) | undefined;
  const unsubscribe = vi.fn();
  const source: StatusSource = {
    fetch: vi.fn(async () => current),
    subscribe: async (onView) => {
      push = onView;
      return unsubscribe;
    },
  };
  return {
    source,
    unsubscribe,
    set: (view: EngineView) => (current = view),
    push: (view: EngineView) => push?.(view),
  };
}

const labels = (root: HTMLElement) => [...root.querySelectorAll(".server-label")].map((e) => e.textContent);

describe("live", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("renders the fetched status, then follows pushes and polls", async () => {
    const root = document.createElement("div");
    const fake = fakeSource(running(["time"]));
    const stop = live(root, fake.source, { intervalMs: 2000 });

    expect(root.textContent).toContain("Connecting…");
    await vi.advanceTimersByTimeAsync(0);
    expect(labels(root)).toEqual(["time"]);

    fake.push(running(["time", "everything"]));
    expect(labels(root)).toEqual(["time", "everything"]);

    // A server added with the CLI shows up on the next poll.
    fake.set(running(["a", "b", "c"]));
    await vi.advanceTimersByTimeAsync(2000);
    expect(labels(root)).toEqual(["a", "b", "c"]);

    stop();
    expect(fake.unsubscribe).toHaveBeenCalled();
    fake.set(running(["gone"]));
    await vi.advanceTimersByTimeAsync(4000);
    expect(labels(root)).toEqual(["a", "b", "c"]);
  });

  it("does not rebuild the DOM when nothing changed", async () => {
    const root = document.createElement("div");
    const fake = fakeSource(running(["time"]));
    live(root, fake.source, { intervalMs: 2000, now: () => 0 });
    await vi.advanceTimersByTimeAsync(0);
    const first = root.firstElementChild;

    await vi.advanceTimersByTimeAsync(6000);

    expect(fake.source.fetch).toHaveBeenCalledTimes(4);
    expect(root.firstElementChild).toBe(first);
  });

  it("keeps an execution record the user opened open when the status changes", async () => {
    const root = document.createElement("div");
    const withSession = (pid: number): EngineView => ({
      state: "running",
      status: status({
        servers: [server({ label: "time", running: 1 })],
        sessions: [session({ id: "#1", server: "time", serverPid: pid, execution: execution({ pid }) })],
      }),
    });
    const fake = fakeSource(withSession(1));
    live(root, fake.source, { intervalMs: 2000 });
    await vi.advanceTimersByTimeAsync(0);
    const record = () => root.querySelector<HTMLDetailsElement>('[data-session="#1"] details.record');
    record()!.open = true;

    fake.push(withSession(2));

    expect(root.querySelector('[data-session="#1"] .pid')?.textContent).toBe("2");
    expect(record()?.open).toBe(true);
  });

  it("shows an IPC failure instead of a blank window", async () => {
    const root = document.createElement("div");
    const source: StatusSource = {
      fetch: async () => Promise.reject(new Error("command status not allowed")),
      subscribe: async () => () => {},
    };
    live(root, source);
    await vi.advanceTimersByTimeAsync(0);

    expect(root.textContent).toContain("Cannot reach the Postern app");
    expect(root.textContent).toContain("command status not allowed");
  });
});
