// The settings a human controls: session approval (prompt or observe), the approval timeout,
// the idle auto-lock, and plain clicks after the passphrase; and the Postern passphrase. The form keeps what the user typed across
// status refreshes while it is being edited (`data-dirty`; src/live.ts carries such a form
// over), and saves through the engine, which checks the values (an approval timeout under 1 s
// is refused). A save sends only what changed, so that a change which needs the person's proof
// (turning observe mode on, any auto-lock, plain clicks on) asks for it only when it is made
// (`needsProof`).

import type { Settings, SettingsChange } from "./bindings";
import { h } from "./dom";
import { newPassphraseForm } from "./proof";

/**
 * The settings form for `settings`; `save` sends a change to the engine. `note` is said under
 * it ("Saved" after a save: the form is drawn again from the engine's settings then).
 */
export function settingsPanel(settings: Settings, save: (change: SettingsChange) => Promise<void>, note: string | null = null): HTMLElement {
  const mode = (value: Settings["sessionMode"], title: string, hint: string): HTMLElement =>
    h(
      "label",
      "radio",
      radio("sessionMode", value, settings.sessionMode === value),
      h("span", {}, h("span", "radio-title", title), h("span", "radio-hint muted", hint)),
    );
  const timeout = number("approvalTimeout", settings.approvalTimeoutMs / 1000, "1");
  const autoLock = number("autoLock", settings.autoLockMs / 60_000, "0");
  const clicks = number("clickWindow", settings.clickWindowMs / 60_000, "0");
  clicks.max = "15";
  const status = h("p", { class: "form-status", role: "status" }, note ?? "");
  const submit = h("button", { type: "submit", class: "primary save" }, "Save") as HTMLButtonElement;
  submit.disabled = true;

  const form = h(
    "form",
    { class: "panel settings-form", "aria-labelledby": "settings-h", novalidate: "" },
    h("div", "panel-head", h("h2", { id: "settings-h" }, "Settings")),
    h(
      "fieldset",
      "field",
      h("legend", {}, "Session approval"),
      mode("prompt", "Prompt", "A human admits each new agent run, on its first call (the default)."),
      mode("observe", "Observe", "Every identified agent run is admitted without asking, and journaled. Turning it on asks for your passphrase."),
    ),
    h(
      "label",
      "field",
      h("span", "field-title", "Approval timeout"),
      h("span", "field-input", timeout, h("span", "unit", "seconds")),
      h("span", "field-hint muted", "How long a request waits for an answer before the call is refused (approval_timeout). At least 1 second."),
    ),
    h(
      "label",
      "field",
      h("span", "field-title", "Auto-lock"),
      h("span", "field-input", autoLock, h("span", "unit", "minutes")),
      h("span", "field-hint muted", "Lock the vault after this long without a call or an answer. 0 never locks. Changing it asks for your passphrase."),
    ),
    h(
      "label",
      "field",
      h("span", "field-title", "Plain clicks after your passphrase"),
      h("span", "field-input", clicks, h("span", "unit", "minutes")),
      h(
        "span",
        "field-hint muted",
        "For this long after you type your passphrase, Allow in the approval window needs no passphrase. 0 (the default) asks every time; at most 15. Risk: meanwhile any program that can send input to your desktop can click Allow for you (every program on X11; on macOS, those with Accessibility access). Turning it on asks for your passphrase.",
      ),
    ),
    h("div", "form-actions", submit, status),
  ) as HTMLFormElement;

  form.addEventListener("input", () => {
    form.dataset.dirty = "true";
    submit.disabled = false;
    setStatus(status, "", false);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = read(form);
    if (typeof wanted === "string") {
      setStatus(status, wanted, true);
      return;
    }
    const change = changed(settings, wanted);
    if (change === null) {
      delete form.dataset.dirty;
      submit.disabled = true;
      setStatus(status, "Nothing to save: these are the settings already.", false);
      return;
    }
    submit.disabled = true;
    setStatus(status, "Saving…", false);
    save(change).then(
      () => {
        delete form.dataset.dirty;
        setStatus(status, "Saved", false);
      },
      (err: unknown) => {
        submit.disabled = false;
        setStatus(status, err instanceof Error ? err.message : String(err), true);
      },
    );
  });
  return form;
}

/** Whether the engine asks the person's proof for `change`: observe mode turned on, any auto-lock, or plain clicks on. */
export function needsProof(change: SettingsChange): boolean {
  return change.sessionMode === "observe" || change.autoLockMs !== null || (change.clickWindowMs !== null && change.clickWindowMs > 0);
}

/** `wanted` without what `settings` already says (`null`: keep), or `null` when nothing changes. */
export function changed(settings: Settings, wanted: SettingsChange): SettingsChange | null {
  const change: SettingsChange = {
    sessionMode: wanted.sessionMode !== null && wanted.sessionMode !== settings.sessionMode ? wanted.sessionMode : null,
    approvalTimeoutMs: wanted.approvalTimeoutMs !== null && wanted.approvalTimeoutMs !== settings.approvalTimeoutMs ? wanted.approvalTimeoutMs : null,
    autoLockMs: wanted.autoLockMs !== null && wanted.autoLockMs !== settings.autoLockMs ? wanted.autoLockMs : null,
    clickWindowMs: wanted.clickWindowMs !== null && wanted.clickWindowMs !== settings.clickWindowMs ? wanted.clickWindowMs : null,
  };
  const none = change.sessionMode === null && change.approvalTimeoutMs === null && change.autoLockMs === null && change.clickWindowMs === null;
  return none ? null : change;
}

/**
 * The form that changes the Postern passphrase: the new one twice; `change` then asks for the
 * current one (src/live.ts, through the proof dialog).
 */
export function passphrasePanel(change: (passphrase: string) => Promise<void>): HTMLElement {
  return h(
    "section",
    { class: "panel passphrase-panel", "aria-labelledby": "passphrase-h" },
    h("div", "panel-head", h("h2", { id: "passphrase-h" }, "Postern passphrase")),
    h(
      "p",
      "panel-note muted",
      "It proves that a person, not an agent, approves, unlocks and widens what agents may do. Changing it asks for the current one first.",
    ),
    newPassphraseForm({ form: "change-passphrase", submit: "Change passphrase", send: change, done: "Changed" }),
  );
}

/** Everything the form asks for, or why it cannot be sent (`changed` keeps only what differs). */
export function read(form: HTMLFormElement): SettingsChange | string {
  const field = (name: string): string => (form.elements.namedItem(name) as HTMLInputElement | null)?.value.trim() ?? "";
  const checked = form.querySelector<HTMLInputElement>('input[name="sessionMode"]:checked')?.value;
  const timeout = Number(field("approvalTimeout"));
  const autoLock = Number(field("autoLock"));
  const clicks = Number(field("clickWindow"));
  if (field("approvalTimeout") === "" || !Number.isFinite(timeout) || timeout < 1) {
    return "The approval timeout must be a number of seconds, at least 1.";
  }
  if (field("autoLock") === "" || !Number.isFinite(autoLock) || autoLock < 0) {
    return "Auto-lock must be a number of minutes, 0 or more.";
  }
  if (field("clickWindow") === "" || !Number.isFinite(clicks) || clicks < 0 || clicks > 15) {
    return "Plain clicks must be a number of minutes from 0 to 15.";
  }
  return {
    sessionMode: checked === "observe" ? "observe" : checked === "prompt" ? "prompt" : null,
    approvalTimeoutMs: Math.round(timeout * 1000),
    autoLockMs: Math.round(autoLock * 60_000),
    clickWindowMs: Math.round(clicks * 60_000),
  };
}

function radio(name: string, value: string, checked: boolean): HTMLElement {
  const input = h("input", { type: "radio", name, value }) as HTMLInputElement;
  input.checked = checked;
  input.defaultChecked = checked;
  return input;
}

function number(name: string, value: number, min: string): HTMLInputElement {
  const input = h("input", { type: "number", name, min, step: "any", inputmode: "decimal" }) as HTMLInputElement;
  input.defaultValue = String(value);
  input.value = String(value);
  return input;
}

function setStatus(el: HTMLElement, text: string, bad: boolean): void {
  el.textContent = text;
  el.classList.toggle("bad", bad);
  el.setAttribute("role", bad ? "alert" : "status");
}
