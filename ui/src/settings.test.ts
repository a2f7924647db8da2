import { beforeEach, describe, expect, it, vi } from "vitest";

import type { Settings, SettingsChange } from "./bindings";
import { changed, needsProof, settingsPanel } from "./settings";

const DEFAULTS: Settings = { sessionMode: "prompt", approvalTimeoutMs: 120_000, autoLockMs: 28_800_000, clickWindowMs: 0 };

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();

function form(settings: Settings = DEFAULTS, save: (change: SettingsChange) => Promise<void> = async () => {}) {
  const el = settingsPanel(settings, save) as HTMLFormElement;
  document.body.replaceChildren(el);
  const input = (name: string) => el.querySelector<HTMLInputElement>(`input[name="${name}"]${name === "sessionMode" ? ":checked" : ""}`)!;
  const set = (name: string, value: string) => {
    const field = el.querySelector<HTMLInputElement>(`input[name="${name}"]`)!;
    field.value = value;
    field.dispatchEvent(new Event("input", { bubbles: true }));
  };
  const choose = (mode: string) => {
    const radio = el.querySelector<HTMLInputElement>(`input[name="sessionMode"][value="${mode}"]`)!;
    radio.checked = true;
    radio.dispatchEvent(new Event("input", { bubbles: true }));
  };
  const submit = () => el.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
  return { el, input, set, choose, submit, status: () => text(el.querySelector(".form-status")), saveButton: () => el.querySelector<HTMLButtonElement>(".save")! };
}

beforeEach(() => document.body.replaceChildren());

/** Lets the save's promise settle. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("the settings form", () => {
  it("shows the session mode, the approval timeout in seconds and the auto-lock in minutes", () => {
    const f = form({ sessionMode: "observe", approvalTimeoutMs: 45_000, autoLockMs: 0, clickWindowMs: 0 });

    expect(f.input("sessionMode").value).toBe("observe");
    expect(f.input("approvalTimeout").value).toBe("45");
    expect(f.input("autoLock").value).toBe("0");
    expect(f.saveButton().disabled).toBe(true);
    expect(f.el.dataset.dirty).toBeUndefined();
  });

  it("saves what the user changed, in the engine's units", async () => {
    const save = vi.fn(async () => {});
    const f = form(DEFAULTS, save);

    f.choose("observe");
    f.set("approvalTimeout", "30");
    f.set("autoLock", "15");
    f.set("clickWindow", "5");
    expect(f.el.dataset.dirty).toBe("true");
    expect(f.saveButton().disabled).toBe(false);
    f.submit();
    await settled();

    expect(save).toHaveBeenCalledWith({ sessionMode: "observe", approvalTimeoutMs: 30_000, autoLockMs: 900_000, clickWindowMs: 300_000 });
    expect(f.status()).toBe("Saved");
    expect(f.el.dataset.dirty).toBeUndefined();
  });

  it("refuses a timeout under a second or a negative auto-lock without asking the engine", () => {
    const save = vi.fn(async () => {});
    const f = form(DEFAULTS, save);

    f.set("approvalTimeout", "0.5");
    f.submit();
    expect(f.status()).toBe("The approval timeout must be a number of seconds, at least 1.");
    f.set("approvalTimeout", "10");
    f.set("autoLock", "-1");
    f.submit();
    expect(f.status()).toBe("Auto-lock must be a number of minutes, 0 or more.");
    expect(f.el.querySelector(".form-status")?.getAttribute("role")).toBe("alert");
    expect(save).not.toHaveBeenCalled();
  });

  it("shows the engine's refusal and keeps the edit", async () => {
    const f = form(DEFAULTS, async () => Promise.reject(new Error("store unavailable")));

    f.set("approvalTimeout", "20");
    f.submit();
    await settled();

    expect(f.status()).toBe("store unavailable");
    expect(f.el.dataset.dirty).toBe("true");
    expect(f.saveButton().disabled).toBe(false);
  });
});

describe("what a save sends", () => {
  it("only what changed, and nothing when nothing did", async () => {
    const save = vi.fn(async () => {});
    const f = form(DEFAULTS, save);

    f.set("approvalTimeout", "120");
    f.submit();
    await settled();
    expect(save).not.toHaveBeenCalled();
    expect(f.status()).toBe("Nothing to save: these are the settings already.");

    f.set("approvalTimeout", "60");
    f.submit();
    await settled();
    expect(save).toHaveBeenCalledExactlyOnceWith({ sessionMode: null, approvalTimeoutMs: 60_000, autoLockMs: null, clickWindowMs: null });
  });

  it("needs the person's proof to turn on observe mode or to change the auto-lock, not otherwise", () => {
    const none = { sessionMode: null, approvalTimeoutMs: null, autoLockMs: null, clickWindowMs: null };
    expect(needsProof({ ...none, sessionMode: "observe" })).toBe(true);
    expect(needsProof({ ...none, autoLockMs: 0 })).toBe(true);
    expect(needsProof({ ...none, autoLockMs: 3_600_000 })).toBe(true);
    expect(needsProof({ ...none, clickWindowMs: 300_000 })).toBe(true);
    expect(needsProof({ ...none, clickWindowMs: 0 })).toBe(false);
    expect(needsProof({ ...none, sessionMode: "prompt" })).toBe(false);
    expect(needsProof({ ...none, approvalTimeoutMs: 5_000 })).toBe(false);
    expect(changed(DEFAULTS, { sessionMode: "prompt", approvalTimeoutMs: 120_000, autoLockMs: 28_800_000, clickWindowMs: 0 })).toBeNull();
    expect(changed(DEFAULTS, { sessionMode: "observe", approvalTimeoutMs: 120_000, autoLockMs: 0, clickWindowMs: 0 })).toEqual({ sessionMode: "observe", approvalTimeoutMs: null, autoLockMs: 0, clickWindowMs: null });
  });

  it("refuses plain clicks longer than 15 minutes, and says the risk where they are set", () => {
    const save = vi.fn(async () => {});
    const f = form(DEFAULTS, save);
    const hint = text(f.el.querySelector('input[name="clickWindow"]')!.closest("label"));
    expect(hint).toContain("0 (the default) asks every time");
    expect(hint).toContain("every program on X11");
    f.set("clickWindow", "16");
    f.submit();
    expect(save).not.toHaveBeenCalled();
    expect(f.status()).toBe("Plain clicks must be a number of minutes from 0 to 15.");
  });

  it("says which changes ask for the passphrase", () => {
    const f = form();
    expect(text(f.el.querySelector('input[value="observe"]')!.closest("label"))).toContain("Turning it on asks for your passphrase.");
    expect(text(f.el)).toContain("Changing it asks for your passphrase.");
  });
});
