// The screen the status window shows while the vault is not ready: locked (with the passphrase
// field and Unlock), unlocking, or the audit log quarantined. It is drawn from the vault state
// alone, so nothing from the vault (servers, sessions, agents, paths) can appear on it.

import type { GateStatus, Proof } from "./bindings";
import { h, icon } from "./dom";
import { passphraseField, takeProof } from "./proof";

type Vault = GateStatus["vault"];

/** What the locked screen says beyond the vault state. */
export interface LockNote {
  /** The engine's refusal of the last unlock (a wrong passphrase says when to try again). */
  error: string | null;
  /** An unlock is on its way to the engine. */
  busy: boolean;
}

const QUIET: LockNote = { error: null, busy: false };

/**
 * The locked screen for `vault` (anything but `ready`). Unlock (or Enter in the passphrase
 * field) hands `unlock` the proof typed, and empties the field.
 */
export function lockScreen(vault: Vault, unlock: (proof: Proof) => void, note: LockNote = QUIET): HTMLElement {
  if (vault === "quarantined") {
    return h(
      "section",
      { class: "locked quarantined", "aria-labelledby": "locked-h" },
      h("div", "locked-icon", icon("alert")),
      h("h2", { id: "locked-h" }, "The audit log failed verification"),
      h("p", {}, "Postern refuses every tool call until a human resolves it. Nothing from the vault is shown meanwhile."),
      h("p", "muted", "Check the log from a terminal with ", h("code", {}, "postern audit verify"), "."),
    );
  }
  const unlocking = vault === "unlocking" || note.busy;
  const field = passphraseField();
  field.dataset.autofocus = "true";
  const button = h("button", { type: "submit", class: "unlock primary" }, icon("unlock"), unlocking ? "Unlocking…" : "Unlock") as HTMLButtonElement;
  button.disabled = unlocking;
  const said = h("p", { class: "unlock-error", role: "alert" }, note.error ?? "");
  said.hidden = note.error === null;
  // A form, so Enter in the field unlocks; `data-form` keeps what is typed across a refresh.
  const form = h("form", { class: "unlock-form", "data-form": "unlock", autocomplete: "off" }, field, button) as HTMLFormElement;
  form.addEventListener("input", () => (form.dataset.dirty = "true"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    delete form.dataset.dirty;
    if (button.disabled) return;
    const proof = takeProof(field);
    if (proof === null) {
      said.textContent = "Type your Postern passphrase to unlock.";
      said.hidden = false;
      field.focus();
      return;
    }
    unlock(proof);
  });
  return h(
    "section",
    { class: "locked", "aria-labelledby": "locked-h" },
    h("div", "locked-icon", icon("lock")),
    h("h2", { id: "locked-h" }, "Postern is locked"),
    h("p", {}, "Every tool call is refused (", h("code", {}, "vault_locked"), ") until you unlock. Nothing from the vault is shown while it is locked."),
    h("p", "muted small", "Type your Postern passphrase: it proves a person is here."),
    form,
    said,
  );
}

/** The status pill's text for a vault that is not ready. */
export function lockedPill(vault: Vault): string {
  switch (vault) {
    case "quarantined":
      return "Audit log quarantined";
    case "unlocking":
      return "Unlocking…";
    default:
      return "Locked";
  }
}
