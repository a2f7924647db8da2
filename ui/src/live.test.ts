import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { Apis } from "./api";
import type { CredentialItem, EngineView } from "./bindings";
import { execution, server, session, status } from "./fixtures/status";
import { timeline } from "./fixtures/timeline";
import { live, type Actions, type StatusSource } from "./live";

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

  it("keeps settings the user is editing while the status changes, and shows the saved ones after", async () => {
    const root = document.createElement("div");
    const withTimeout = (ms: number): EngineView => ({
      state: "running",
      status: status({ gate: { ...status().gate, settings: { sessionMode: "prompt", approvalTimeoutMs: ms, autoLockMs: 0 } } }),
    });
    const fake = fakeSource(withTimeout(120_000));
    const actions = fakeActions();
    actions.updateSettings.mockImplementation(async () => {
      fake.set(withTimeout(30_000));
      return { sessionMode: "prompt", approvalTimeoutMs: 30_000, autoLockMs: 0 };
    });
    live(root, fake.source, { intervalMs: 2000, actions });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-settings")!.click();
    const timeout = () => root.querySelector<HTMLInputElement>('input[name="approvalTimeout"]')!;
    timeout().value = "30";
    timeout().dispatchEvent(new Event("input", { bubbles: true }));

    fake.push({ ...withTimeout(120_000), status: { ...status(), servers: [server({ label: "new" })] } } as EngineView);
    expect(timeout().value).toBe("30");

    root.querySelector("form")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(actions.updateSettings).toHaveBeenCalledWith({ sessionMode: "prompt", approvalTimeoutMs: 30_000, autoLockMs: 0 });
    await vi.advanceTimersByTimeAsync(2000);
    expect(timeout().value).toBe("30");
    expect(root.querySelector("form")?.hasAttribute("data-dirty")).toBe(false);
    // The engine's change event may come after the save returned: the fresh form says so too.
    const saved = withTimeout(30_000) as Extract<EngineView, { state: "running" }>;
    fake.push({ ...saved, status: { ...saved.status, servers: [server({ label: "late" })] } });
    expect(root.querySelector(".form-status")?.textContent).toBe("Saved");
    expect(timeout().value).toBe("30");
  });

  it("locks through the app and shows the locked screen the engine then reports", async () => {
    const root = document.createElement("div");
    const fake = fakeSource(running(["time"]));
    const actions = fakeActions();
    actions.lock.mockImplementation(async () => {
      fake.set({ state: "running", status: status({ servers: [server({ label: "time" })], gate: { ...status().gate, vault: "locked" } }) });
    });
    live(root, fake.source, { actions });
    await vi.advanceTimersByTimeAsync(0);

    root.querySelector<HTMLButtonElement>(".lock-button")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(actions.lock).toHaveBeenCalledOnce();
    expect(root.querySelector(".locked h2")?.textContent).toBe("Postern is locked");
    expect(labels(root)).toEqual([]);
  });

  it("says when an action failed", async () => {
    const root = document.createElement("div");
    const actions = fakeActions();
    actions.lock.mockRejectedValue(new Error("no Postern engine runs in this app"));
    live(root, fakeSource(running(["time"])).source, { actions });
    await vi.advanceTimersByTimeAsync(0);

    root.querySelector<HTMLButtonElement>(".lock-button")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(root.querySelector(".action-error")?.textContent).toBe("Cannot lock: no Postern engine runs in this app");
  });
});

function fakeActions() {
  return {
    lock: vi.fn<Actions["lock"]>(async () => {}),
    unlock: vi.fn<Actions["unlock"]>(async () => {}),
    updateSettings: vi.fn<Actions["updateSettings"]>(async () => ({ sessionMode: "prompt", approvalTimeoutMs: 120_000, autoLockMs: 0 })),
    showApprovals: vi.fn<Actions["showApprovals"]>(async () => {}),
  };
}

describe("the main window's views", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const SECRET = "live-canary-value";

  it("adds a credential through the app, keeps no copy of its value, and lists it", async () => {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    const apis = fakeApis();
    const listed: CredentialItem = { name: "api", injection: { kind: "env", var: "API_TOKEN" }, hosts: [], everyUse: false, version: 1, createdAtMs: 0, rotatedAtMs: null, servers: [] };
    apis.credentials.add.mockImplementation(async () => {
      apis.credentials.list.mockResolvedValue([listed]);
    });
    live(root, fakeSource(running(["time"])).source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-credentials")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.credentials.list).toHaveBeenCalledOnce();

    const form = root.querySelector<HTMLFormElement>(".add-credential-form")!;
    (form.elements.namedItem("name") as HTMLInputElement).value = "api";
    (form.elements.namedItem("envVar") as HTMLInputElement).value = "API_TOKEN";
    (form.elements.namedItem("value") as HTMLInputElement).value = SECRET;
    form.dispatchEvent(new Event("input", { bubbles: true }));
    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);

    expect(apis.credentials.add).toHaveBeenCalledWith(expect.objectContaining({ name: "api", value: SECRET }));
    expect([...root.querySelectorAll(".credential-name")].map((e) => e.textContent)).toEqual(["api"]);
    // Re-rendered after the answer and on the next refreshes: the value never comes back.
    await vi.advanceTimersByTimeAsync(4000);
    const values = [...root.querySelectorAll<HTMLInputElement>("input")].map((i) => i.value);
    expect(root.innerHTML.includes(SECRET) || values.some((v) => v.includes(SECRET))).toBe(false);
  });

  it("restarts a server from the Servers view and says what happened", async () => {
    const root = document.createElement("div");
    const apis = fakeApis();
    apis.servers.restart.mockResolvedValue(1);
    live(root, fakeSource(running(["time"])).source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-servers")!.click();

    root.querySelector<HTMLButtonElement>('.server-card[data-label="time"] .restart-button')!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(apis.servers.restart).toHaveBeenCalledWith("time");
    expect(root.querySelector(".restart-note")?.textContent).toBe("Restarting 1 process of time: each gets a new execution epoch.");
  });

  it("runs the first-run guide: looks for agent configurations, adds a server, asks for its snippet", async () => {
    const root = document.createElement("div");
    const apis = fakeApis();
    const fake = fakeSource({ state: "running", status: status() });
    apis.servers.addServer.mockImplementation(async (s) => {
      fake.set(running([s.label]));
      return s.label;
    });
    live(root, fake.source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.servers.importSources).toHaveBeenCalledOnce();
    expect(root.querySelector(".welcome")).not.toBeNull();

    const form = root.querySelector<HTMLFormElement>(".add-server-form")!;
    (form.elements.namedItem("label") as HTMLInputElement).value = "time";
    (form.elements.namedItem("command") as HTMLInputElement).value = "uvx";
    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);

    expect(root.querySelector(".guide-note")?.textContent).toBe("Added time. Now point your agent at it (step 2).");
    expect(apis.servers.agentSnippet).toHaveBeenCalledWith(["time"]);
    expect(root.querySelector(".agent-snippet")?.textContent).toContain("/abs/postern");
    // The guide stays until the newcomer is done, above the usual overview.
    expect([...root.querySelectorAll(".server-label")].map((e) => e.textContent)).toEqual(["time"]);
    root.querySelector<HTMLButtonElement>(".finish-guide")!.click();
    expect(root.querySelector(".welcome")).toBeNull();
  });

  it("mounts the timeline and Activity panes and keeps them across refreshes", async () => {
    const root = document.createElement("div");
    const apis = fakeApis();
    const fake = fakeSource(running(["time"]));
    live(root, fake.source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-timeline")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.journal.timeline).toHaveBeenCalledOnce();
    const pane = root.querySelector(".timeline");
    expect(pane?.querySelectorAll(".lane").length).toBe(2);

    fake.push(running(["time", "notes"]));
    expect(root.querySelector(".timeline")).toBe(pane);

    root.querySelector<HTMLButtonElement>(".tab-activity")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.journal.activity).toHaveBeenCalled();
    expect(root.querySelector(".activity-filter")).not.toBeNull();
  });

  it("forgets what it read from the vault when it locks, and reads it again after unlocking", async () => {
    const root = document.createElement("div");
    const apis = fakeApis();
    const fake = fakeSource(running(["time"]));
    const actions = fakeActions();
    const locked = (): EngineView => ({ state: "running", status: status({ servers: [server({ label: "time" })], gate: { ...status().gate, vault: "locked" } }) });
    actions.lock.mockImplementation(async () => void fake.set(locked()));
    actions.unlock.mockImplementation(async () => void fake.set(running(["time"])));
    live(root, fake.source, { apis, actions });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-timeline")!.click();
    await vi.advanceTimersByTimeAsync(0);
    const pane = root.querySelector(".timeline")!;
    expect(pane.querySelectorAll(".lane").length).toBe(2);

    root.querySelector<HTMLButtonElement>(".lock-button")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(root.querySelector(".locked")).not.toBeNull();
    expect(pane.querySelectorAll(".lane").length).toBe(0);

    root.querySelector<HTMLButtonElement>(".unlock")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.journal.timeline).toHaveBeenCalledTimes(2);
    expect(root.querySelectorAll(".timeline .lane").length).toBe(2);
  });

  it("verifies the audit log from the Integrity view", async () => {
    const root = document.createElement("div");
    const apis = fakeApis();
    live(root, fakeSource(running(["time"])).source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-integrity")!.click();
    root.querySelector<HTMLButtonElement>(".verify")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(apis.journal.verify).toHaveBeenCalledWith(false);
    expect(root.querySelector(".verify-ok .callout-title")?.textContent).toBe("Verified up to sequence 9");
  });
});

function fakeApis() {
  return {
    servers: {
      restart: vi.fn<Apis["servers"]["restart"]>(async () => 0),
      addServer: vi.fn<Apis["servers"]["addServer"]>(async (s) => s.label),
      importSources: vi.fn<Apis["servers"]["importSources"]>(async () => []),
      importServers: vi.fn<Apis["servers"]["importServers"]>(async () => []),
      agentSnippet: vi.fn<Apis["servers"]["agentSnippet"]>(async (labels) => ({
        postern: "/abs/postern",
        json: JSON.stringify({ mcpServers: Object.fromEntries(labels.map((l) => [l, { command: "/abs/postern", args: ["mcp", l] }])) }),
        claudeCode: [],
      })),
    },
    credentials: {
      list: vi.fn<Apis["credentials"]["list"]>(async () => []),
      add: vi.fn<Apis["credentials"]["add"]>(async () => {}),
      rotate: vi.fn<Apis["credentials"]["rotate"]>(async () => {}),
      remove: vi.fn<Apis["credentials"]["remove"]>(async () => {}),
      bind: vi.fn<Apis["credentials"]["bind"]>(async () => true),
      unbind: vi.fn<Apis["credentials"]["unbind"]>(async () => true),
    },
    journal: {
      timeline: vi.fn<Apis["journal"]["timeline"]>(async () => timeline),
      activity: vi.fn<Apis["journal"]["activity"]>(async () => []),
      auditEntry: vi.fn<Apis["journal"]["auditEntry"]>(async () => null),
      verify: vi.fn<Apis["journal"]["verify"]>(async () => ({ state: "verified", records: 9, head: "9:ab", anchor: { state: "empty" }, bodiesOpened: false, keyNote: null })),
    },
  };
}
