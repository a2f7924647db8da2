// The screen the status window shows while the vault is not ready: locked (with Unlock),
// unlocking, or the audit log quarantined. It is drawn from the vault state alone, so nothing
// from the vault (servers, sessions, agents, paths) can appear on it.

import type { GateStatus } from "./bindings";
import { h, icon } from "./dom";

type Vault = GateStatus["vault"];

/** The locked screen for `vault` (anything but `ready`); `unlock` runs on the Unlock button. */
export function lockScreen(vault: Vault, unlock: () => void): HTMLElement {
  if (vault === "quarantined") {
    return h(
      "section",
      { class: "locked quarantined", role: "alert", "aria-labelledby": "locked-h" },
      h("div", "locked-icon", icon("alert")),
      h("h2", { id: "locked-h" }, "The audit log failed verification"),
      h("p", {}, "Postern refuses every tool call until a human resolves it. Nothing from the vault is shown meanwhile."),
      h("p", "muted", "Check the log from a terminal with ", h("code", {}, "postern audit verify"), "."),
    );
  }
  const unlocking = vault === "unlocking";
  const button = h("button", { type: "button", class: "unlock primary" }, icon("unlock"), unlocking ? "Unlocking…" : "Unlock") as HTMLButtonElement;
  button.disabled = unlocking;
  button.addEventListener("click", unlock);
  return h(
    "section",
    { class: "locked", role: "status", "aria-labelledby": "locked-h" },
    h("div", "locked-icon", icon("lock")),
    h("h2", { id: "locked-h" }, "Postern is locked"),
    h("p", {}, "Every tool call is refused (", h("code", {}, "vault_locked"), ") until you unlock. Nothing from the vault is shown while it is locked."),
    button,
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
