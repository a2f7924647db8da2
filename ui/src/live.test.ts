import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { Apis } from "./api";
import type { CredentialItem, EngineView, Permissions } from "./bindings";
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

  it("paints the view the window was opened with at once, then what the engine says", async () => {
    const root = document.createElement("div");
    const fake = fakeSource(running(["clock", "notes"]));
    const opened = vi.fn(() => running(["clock"]));
    const stop = live(root, { ...fake.source, initial: opened }, { intervalMs: 2000 });

    // No "Connecting…" screen: the first paint is the state handed over with the window.
    expect(root.textContent).not.toContain("Connecting…");
    expect(labels(root)).toEqual(["clock"]);
    expect(opened).toHaveBeenCalledTimes(1);
    // And the window asks all the same: a server added since shows up with the first reply.
    await vi.advanceTimersByTimeAsync(0);
    expect(labels(root)).toEqual(["clock", "notes"]);
    stop();
  });

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
      status: status({ gate: { ...status().gate, settings: { sessionMode: "prompt", approvalTimeoutMs: ms, autoLockMs: 0, clickWindowMs: 0 } } }),
    });
    const fake = fakeSource(withTimeout(120_000));
    const actions = fakeActions();
    actions.updateSettings.mockImplementation(async () => {
      fake.set(withTimeout(30_000));
      return { sessionMode: "prompt", approvalTimeoutMs: 30_000, autoLockMs: 0, clickWindowMs: 0 };
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
    // Only what changed, and a shorter approval timeout needs no proof.
    expect(actions.updateSettings).toHaveBeenCalledWith({ sessionMode: null, approvalTimeoutMs: 30_000, autoLockMs: null, clickWindowMs: null }, null);
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
    dismissLeaks: vi.fn<Actions["dismissLeaks"]>(async () => {}),
    unlock: vi.fn<Actions["unlock"]>(async () => {}),
    updateSettings: vi.fn<Actions["updateSettings"]>(async () => ({ sessionMode: "prompt", approvalTimeoutMs: 120_000, autoLockMs: 0, clickWindowMs: 0 })),
    setPassphrase: vi.fn<Actions["setPassphrase"]>(async () => {}),
    showApprovals: vi.fn<Actions["showApprovals"]>(async () => {}),
  };
}

const PASSPHRASE = "correct horse battery";

/** The proof dialog's text, if one is open. */
const dialogText = (): string => (document.querySelector(".proof-dialog")?.textContent ?? "").replace(/\s+/g, " ").trim();

/** Types `passphrase` into the open proof dialog and confirms. */
async function confirm(passphrase: string): Promise<void> {
  document.querySelector<HTMLInputElement>(".proof-dialog input.passphrase")!.value = passphrase;
  document.querySelector<HTMLButtonElement>(".proof-dialog .prove")!.click();
  await vi.advanceTimersByTimeAsync(0);
}

const refusal = (code: string, text: string) => Object.assign(new Error(text), { code });

describe("proof of presence in the status window", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    document.body.replaceChildren();
  });
  afterEach(() => vi.useRealTimers());

  const withSettings = (sessionMode: "prompt" | "observe", autoLockMs = 0): EngineView => ({
    state: "running",
    status: status({ gate: { ...status().gate, settings: { sessionMode, approvalTimeoutMs: 120_000, autoLockMs, clickWindowMs: 0 } } }),
  });

  async function settingsPage(fake = fakeSource(withSettings("prompt")), actions = fakeActions()) {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    live(root, fake.source, { actions });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-settings")!.click();
    const choose = (mode: string) => {
      const radio = root.querySelector<HTMLInputElement>(`input[name="sessionMode"][value="${mode}"]`)!;
      radio.checked = true;
      radio.dispatchEvent(new Event("input", { bubbles: true }));
    };
    const save = async () => {
      root.querySelector("form.settings-form")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
      await vi.advanceTimersByTimeAsync(0);
    };
    return { root, fake, actions, choose, save, status: () => root.querySelector(".settings-form .form-status")?.textContent };
  }

  it("shows the passphrase step first on a fresh home, then the guide once it is set", async () => {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    const fresh: EngineView = { state: "running", status: status({ gate: { ...status().gate, vault: "locked", passphraseSet: false } }) };
    const fake = fakeSource(fresh);
    const actions = fakeActions();
    actions.setPassphrase.mockImplementation(async () => void fake.set({ state: "running", status: status() }));
    live(root, fake.source, { actions, apis: fakeApis() });
    await vi.advanceTimersByTimeAsync(0);
    expect(root.querySelector(".choose-passphrase h2")?.textContent).toBe("Choose a Postern passphrase");
    expect(root.querySelector(".welcome")).toBeNull();
    expect(document.activeElement).toBe(root.querySelector(".passphrase-new"));

    root.querySelector<HTMLInputElement>(".passphrase-new")!.value = PASSPHRASE;
    root.querySelector<HTMLInputElement>(".passphrase-again")!.value = PASSPHRASE;
    root.querySelector<HTMLButtonElement>(".set-passphrase")!.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(actions.setPassphrase).toHaveBeenCalledExactlyOnceWith(PASSPHRASE, null);
    expect(root.querySelector(".choose-passphrase")).toBeNull();
    expect(root.querySelector(".welcome h2")?.textContent).toBe("Welcome to Postern");
  });

  it("asks for the passphrase before turning on observe mode, and sends it with the change", async () => {
    const page = await settingsPage();
    page.choose("observe");
    await page.save();

    expect(page.actions.updateSettings).not.toHaveBeenCalled();
    expect(dialogText()).toContain("Confirm it's you");
    expect(dialogText()).toContain("Turn on observe mode");
    const field = document.querySelector<HTMLInputElement>(".proof-dialog input.passphrase")!;
    expect(field.type).toBe("password");
    expect(field.getAttribute("autocomplete")).toBe("current-password");
    expect(document.activeElement).toBe(field);
    await confirm(PASSPHRASE);

    expect(page.actions.updateSettings).toHaveBeenCalledExactlyOnceWith({ sessionMode: "observe", approvalTimeoutMs: null, autoLockMs: null, clickWindowMs: null }, { passphrase: PASSPHRASE });
    expect(document.querySelector(".proof-dialog")).toBeNull();
    expect(page.status()).toBe("Saved");
  });

  it("keeps the dialog open on a wrong passphrase, with the engine's message, the field emptied, until the right one", async () => {
    const page = await settingsPage();
    page.actions.updateSettings
      .mockRejectedValueOnce(refusal("passphrase_wrong", "wrong passphrase: the next try is allowed in 1 second"))
      .mockRejectedValueOnce(refusal("proof_backoff", "too many wrong passphrases: wait 30 seconds"));
    page.choose("observe");
    await page.save();

    await confirm("not it");
    expect(document.querySelector(".proof-error")?.textContent).toBe("wrong passphrase: the next try is allowed in 1 second");
    expect(document.querySelector<HTMLInputElement>(".proof-dialog .passphrase")!.value).toBe("");
    await confirm("not it either");
    expect(document.querySelector(".proof-error")?.textContent).toBe("too many wrong passphrases: wait 30 seconds");
    await confirm(PASSPHRASE);

    expect(page.actions.updateSettings).toHaveBeenCalledTimes(3);
    expect(page.actions.updateSettings).toHaveBeenLastCalledWith(expect.anything(), { passphrase: PASSPHRASE });
    expect(document.querySelector(".proof-dialog")).toBeNull();
    expect(page.status()).toBe("Saved");
  });

  it("sends nothing when the person cancels, and says so", async () => {
    const page = await settingsPage();
    page.choose("observe");
    await page.save();
    document.querySelector<HTMLInputElement>(".proof-dialog .passphrase")!.value = PASSPHRASE;
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    await vi.advanceTimersByTimeAsync(0);

    expect(document.querySelector(".proof-dialog")).toBeNull();
    expect(page.actions.updateSettings).not.toHaveBeenCalled();
    expect(page.status()).toBe("Not confirmed: nothing was changed.");
    expect(document.body.innerHTML).not.toContain(PASSPHRASE);
  });

  it("asks for it for any auto-lock change, and not for a change that widens nothing", async () => {
    const page = await settingsPage(fakeSource(withSettings("observe", 60_000)));
    page.choose("prompt");
    await page.save();
    expect(page.actions.updateSettings).toHaveBeenCalledExactlyOnceWith({ sessionMode: "prompt", approvalTimeoutMs: null, autoLockMs: null, clickWindowMs: null }, null);
    expect(document.querySelector(".proof-dialog")).toBeNull();

    const autoLock = page.root.querySelector<HTMLInputElement>('input[name="autoLock"]')!;
    autoLock.value = "5";
    autoLock.dispatchEvent(new Event("input", { bubbles: true }));
    await page.save();
    expect(dialogText()).toContain("Change the auto-lock.");
    document.querySelector<HTMLButtonElement>(".proof-dialog .cancel-proof")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(page.status()).toBe("Not confirmed: nothing was changed.");
  });

  it("changes the passphrase from Settings with the current one as proof", async () => {
    const page = await settingsPage();
    page.root.querySelector<HTMLInputElement>(".passphrase-panel .passphrase-new")!.value = "a brand new passphrase";
    page.root.querySelector<HTMLInputElement>(".passphrase-panel .passphrase-again")!.value = "a brand new passphrase";
    page.root.querySelector<HTMLButtonElement>(".passphrase-panel .set-passphrase")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(dialogText()).toContain("Change the Postern passphrase.");
    await confirm(PASSPHRASE);

    expect(page.actions.setPassphrase).toHaveBeenCalledExactlyOnceWith("a brand new passphrase", { passphrase: PASSPHRASE });
  });

  it("shows why an unlock was refused on the locked screen, and unlocks with the right passphrase", async () => {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    const locked: EngineView = { state: "running", status: status({ servers: [server({ label: "time" })], gate: { ...status().gate, vault: "locked" } }) };
    const fake = fakeSource(locked);
    const actions = fakeActions();
    actions.unlock.mockRejectedValueOnce(refusal("passphrase_wrong", "wrong passphrase: the next try is allowed in 1 second"));
    actions.unlock.mockImplementation(async () => void fake.set(running(["time"])));
    live(root, fake.source, { actions });
    await vi.advanceTimersByTimeAsync(0);
    const field = () => root.querySelector<HTMLInputElement>(".locked .passphrase")!;
    expect(document.activeElement).toBe(field());

    field().value = "not it";
    root.querySelector<HTMLFormElement>(".unlock-form")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(root.querySelector(".unlock-error")?.textContent).toBe("wrong passphrase: the next try is allowed in 1 second");
    expect(field().value).toBe("");
    expect(labels(root)).toEqual([]);

    field().value = PASSPHRASE;
    root.querySelector<HTMLButtonElement>(".unlock")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(actions.unlock).toHaveBeenLastCalledWith({ passphrase: PASSPHRASE });
    expect(labels(root)).toEqual(["time"]);
  });

  it("asks for proof to remove and to bind a credential, not to unbind one", async () => {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    const apis = fakeApis();
    const item: CredentialItem = { name: "api", injection: { kind: "env", var: "API_TOKEN" }, hosts: [], looselyHere: [], everyUse: false, version: 1, createdAtMs: 0, rotatedAtMs: null, servers: ["time"], uses: [] };
    apis.credentials.list.mockResolvedValue([item]);
    live(root, fakeSource(running(["time", "notes"])).source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-credentials")!.click();
    await vi.advanceTimersByTimeAsync(0);

    root.querySelector<HTMLButtonElement>('.credential[data-name="api"] .unbind')!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.credentials.unbind).toHaveBeenCalledWith("time", "api");
    expect(document.querySelector(".proof-dialog")).toBeNull();

    root.querySelector('.credential[data-name="api"] .bind-form')!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(dialogText()).toContain("Bind the credential api to notes.");
    await confirm(PASSPHRASE);
    expect(apis.credentials.bind).toHaveBeenCalledWith("notes", "api", { passphrase: PASSPHRASE });

    const remove = () => root.querySelector<HTMLButtonElement>('.credential[data-name="api"] .remove')!;
    remove().click();
    remove().click();
    await vi.advanceTimersByTimeAsync(0);
    await confirm(PASSPHRASE);
    expect(apis.credentials.remove).toHaveBeenCalledWith("api", { passphrase: PASSPHRASE });
    expect(root.querySelector(".action-error")).toBeNull();
  });
});

describe("the Permissions page", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const granted: Permissions = {
    runs: [
      {
        run: { pid: 4242, startTime: 99 },
        client: "claude-code 2.1.3",
        cwd: "/home/ada/shop",
        connected: true,
        grants: [
          {
            id: "01GRANT",
            server: "time",
            epoch: "01EPOCH00000000000000000000",
            launch: null,
            launchedAtMs: 0,
            launchRunning: true,
            tools: { kind: "named", names: ["now"] },
            credentials: [],
            issuedAtMs: 0,
            end: { kind: "runEnds" },
          },
        ],
      },
    ],
    everyUse: [{ on: "server", server: "time" }],
  };

  it("follows the engine's pushes: a grant given elsewhere shows, a revoke goes to the app", async () => {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    const apis = fakeApis();
    const fake = fakeSource(running(["time"]));
    live(root, fake.source, { apis, intervalMs: 60_000 });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-permissions")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(root.querySelector(".nothing-granted")?.textContent).toBe("Nothing is granted: each call asks you.");

    // Approved in the approval window: the engine pushes a status, and the page reads itself again.
    apis.permissions.list.mockResolvedValue(granted);
    fake.push(running(["time"]));
    await vi.advanceTimersByTimeAsync(0);
    expect(root.querySelector(".run-agent")?.textContent).toBe("claude-code 2.1.3");

    root.querySelector<HTMLButtonElement>('.grant[data-grant="01GRANT"] .revoke')!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.permissions.revoke).toHaveBeenCalledWith("01GRANT");
    expect(document.querySelector(".proof-dialog")).toBeNull();
    root.querySelector<HTMLButtonElement>(".revoke-run")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.permissions.revokeRun).toHaveBeenCalledWith({ pid: 4242, startTime: 99 });

    // Removing a rule widens: the passphrase first.
    root.querySelector<HTMLButtonElement>(".every-use-rule .remove-every-use")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(dialogText()).toContain("Stop asking on every use: every tool of time.");
    expect(apis.permissions.setEveryUse).not.toHaveBeenCalled();
    await confirm(PASSPHRASE);
    expect(apis.permissions.setEveryUse).toHaveBeenCalledWith({ on: "server", server: "time" }, false, { passphrase: PASSPHRASE });
    expect(root.querySelector(".action-error")).toBeNull();
  });
});

describe("the main window's views", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const SECRET = "live-canary-value";

  it("adds a credential through the app once the person confirms, keeps no copy of its value, and lists it", async () => {
    const root = document.createElement("div");
    document.body.replaceChildren(root);
    const apis = fakeApis();
    const listed: CredentialItem = { name: "api", injection: { kind: "env", var: "API_TOKEN" }, hosts: [], looselyHere: [], everyUse: false, version: 1, createdAtMs: 0, rotatedAtMs: null, servers: [], uses: [] };
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
    expect(apis.credentials.add).not.toHaveBeenCalled();
    expect(dialogText()).toContain("Add the credential api.");
    await confirm(PASSPHRASE);

    expect(apis.credentials.add).toHaveBeenCalledWith(expect.objectContaining({ name: "api", value: SECRET }), { passphrase: PASSPHRASE });
    expect(document.querySelector(".proof-dialog")).toBeNull();
    expect([...root.querySelectorAll(".credential-name")].map((e) => e.textContent)).toEqual(["api"]);
    // Re-rendered after the answer and on the next refreshes: the value never comes back.
    await vi.advanceTimersByTimeAsync(4000);
    const values = [...document.querySelectorAll<HTMLInputElement>("input")].map((i) => i.value);
    for (const value of [SECRET, PASSPHRASE]) {
      expect(document.body.innerHTML.includes(value) || values.some((v) => v.includes(value))).toBe(false);
    }
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

  it("keeps the field the user clicked in the add-server form, and what they type, when a push lands first", async () => {
    const root = document.createElement("div");
    document.body.appendChild(root);
    const fake = fakeSource(running(["time"]));
    live(root, fake.source, { apis: fakeApis() });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-servers")!.click();
    const label = () => root.querySelector<HTMLInputElement>('.add-servers input[name="label"]')!;
    label().focus();
    const clicked = label();

    // The engine's push lands after the click, before the first keystroke.
    fake.push(running(["time", "clock"]));
    const cards = () => [...root.querySelectorAll<HTMLElement>(".server-card")].map((c) => c.dataset.label);
    expect(cards()).toEqual(["time", "clock"]);
    expect(label()).toBe(clicked);
    expect(document.activeElement).toBe(clicked);
    // The keystrokes reach the field, and the next push keeps them (the form is edited now).
    clicked.value = "notes";
    clicked.dispatchEvent(new Event("input", { bubbles: true }));
    clicked.blur();
    fake.push(running(["time", "clock", "more"]));
    expect(label().value).toBe("notes");
    root.remove();
  });

  it("holds a repaint while a button is pressed, so the click lands, then paints what came", async () => {
    const root = document.createElement("div");
    document.body.appendChild(root);
    const apis = fakeApis();
    apis.servers.restart.mockResolvedValue(1);
    const fake = fakeSource(running(["time"]));
    const stop = live(root, fake.source, { apis });
    await vi.advanceTimersByTimeAsync(0);
    root.querySelector<HTMLButtonElement>(".tab-servers")!.click();
    const cards = () => [...root.querySelectorAll<HTMLElement>(".server-card")].map((c) => c.dataset.label);
    const restart = root.querySelector<HTMLButtonElement>('.server-card[data-label="time"] .restart-button')!;

    restart.dispatchEvent(new Event("pointerdown", { bubbles: true }));
    fake.set(running(["time", "clock"]));
    fake.push(running(["time", "clock"]));
    // Pressed: the button stays the one under the pointer, and its release clicks it.
    expect(cards()).toEqual(["time"]);
    expect(root.contains(restart)).toBe(true);
    restart.dispatchEvent(new Event("pointerup", { bubbles: true }));
    restart.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(apis.servers.restart).toHaveBeenCalledWith("time");
    // Released: what the engine said meanwhile is painted.
    expect(cards()).toEqual(["time", "clock"]);
    expect(root.querySelector(".restart-note")?.textContent).toBe("Restarting 1 process of time: each gets a new execution epoch.");

    // A press whose release the page never hears of (a select's menu took it) holds the
    // window for two seconds at most.
    root.querySelector(".server-card")!.dispatchEvent(new Event("pointerdown", { bubbles: true }));
    fake.set(running(["time", "clock", "late"]));
    fake.push(running(["time", "clock", "late"]));
    expect(cards()).toEqual(["time", "clock"]);
    await vi.advanceTimersByTimeAsync(1900);
    expect(cards()).toEqual(["time", "clock"]);
    await vi.advanceTimersByTimeAsync(200);
    expect(cards()).toEqual(["time", "clock", "late"]);
    stop();
    root.remove();
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
    // In the document: a form submits only from there.
    document.body.replaceChildren(root);
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

    root.querySelector<HTMLInputElement>(".passphrase")!.value = PASSPHRASE;
    root.querySelector<HTMLButtonElement>(".unlock")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(actions.unlock).toHaveBeenCalledWith({ passphrase: PASSPHRASE });
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
      rewirePreview: vi.fn<Apis["servers"]["rewirePreview"]>(async (path) => ({ path, changes: [] })),
      rewire: vi.fn<Apis["servers"]["rewire"]>(async () => ({ backup: "/b", coverage: { servers: 0, throughPostern: 0, remote: [], direct: [], sentence: "" } })),
    },
    credentials: {
      list: vi.fn<Apis["credentials"]["list"]>(async () => []),
      add: vi.fn<Apis["credentials"]["add"]>(async () => {}),
      rotate: vi.fn<Apis["credentials"]["rotate"]>(async () => {}),
      remove: vi.fn<Apis["credentials"]["remove"]>(async () => {}),
      bind: vi.fn<Apis["credentials"]["bind"]>(async () => true),
      unbind: vi.fn<Apis["credentials"]["unbind"]>(async () => true),
      moveToKeychain: vi.fn<Apis["credentials"]["moveToKeychain"]>(async (server, name) => `${server}-${name.toLowerCase()}`),
    },
    journal: {
      timeline: vi.fn<Apis["journal"]["timeline"]>(async () => timeline),
      activity: vi.fn<Apis["journal"]["activity"]>(async () => []),
      auditEntry: vi.fn<Apis["journal"]["auditEntry"]>(async () => null),
      verify: vi.fn<Apis["journal"]["verify"]>(async () => ({ state: "verified", records: 9, head: "9:ab", anchor: { state: "empty" }, bodiesOpened: false, keyNote: null })),
    },
    permissions: {
      list: vi.fn<Apis["permissions"]["list"]>(async () => ({ runs: [], everyUse: [] })),
      revoke: vi.fn<Apis["permissions"]["revoke"]>(async () => true),
      revokeRun: vi.fn<Apis["permissions"]["revokeRun"]>(async () => []),
      setEveryUse: vi.fn<Apis["permissions"]["setEveryUse"]>(async () => null),
    },
  };
}
