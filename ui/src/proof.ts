// Proof of presence: the engine refuses every act that widens authority (an approval, an
// unlock, observe mode, the auto-lock, a credential added, rotated, removed or bound) unless a
// person types the Postern passphrase. This module is the one place the windows ask for it:
//
//   - `passphraseField`: the password field, wherever one sits in a view (the lock screen, the
//     approval window);
//   - `takeProof`: reads such a field into a `Proof` and empties it at once, so the passphrase
//     lives only in the one invoke that carries it;
//   - `proofDialog`: the "Confirm it's you" dialog the status window opens before a command
//     that needs proof; a wrong passphrase (or a back-off) is said in it, and the person tries
//     again there;
//   - `newPassphraseForm`: the two fields that choose a passphrase (first run) or a new one.
//
// Where the engine says the OS can authenticate the person (status `systemAuth`: polkit on
// Linux, LocalAuthentication on macOS), the dialog and the approval window also offer **Use
// system authentication**: the proof `{ system: true }`, which the engine checks by asking the
// OS's own dialog. It stands in for the passphrase only while the vault is unlocked.
//
// Nothing here keeps a passphrase: not in a variable beyond the call, not in storage, not in
// the DOM (a field's value is never rendered as an attribute or text), not in a log.

import type { Proof } from "./bindings";
import { h, icon } from "./dom";

/** The engine refuses a passphrase shorter than this (characters). */
export const MIN_PASSPHRASE = 8;

/** The refusals after which the person tries again (the message says when, or what instead). */
const RETRY_CODES = new Set([
  "passphrase_wrong",
  "proof_backoff",
  "os_auth_denied",
  "os_auth_dismissed",
  "os_auth_no_agent",
  "os_auth_unavailable",
  "os_auth_needs_passphrase",
]);

/** The proof that asks the OS to authenticate the person instead of a passphrase. */
export const SYSTEM_PROOF: Proof = { system: true };

/** The button that proves with the OS's own authentication. */
export function systemAuthButton(onClick: () => void, disabled = false): HTMLButtonElement {
  const b = h("button", { type: "button", class: "system-auth", title: "Your login password or fingerprint, asked by the system" }, "Use system authentication") as HTMLButtonElement;
  b.disabled = disabled;
  b.addEventListener("click", onClick);
  return b;
}

/** The stable code of a failed call (src/ipc.ts puts the engine's `CommandError.code` on it). */
export function errorCode(err: unknown): string | undefined {
  const code = err !== null && typeof err === "object" ? (err as { code?: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
}

/** Whether the engine refused the passphrase given (wrong, or too many wrong tries): ask again. */
export function isProofRefusal(err: unknown): boolean {
  return RETRY_CODES.has(errorCode(err) ?? "");
}

/** The person closed the dialog without confirming: nothing was sent. */
export class ProofCancelled extends Error {
  constructor() {
    super("Not confirmed: nothing was changed.");
    this.name = "ProofCancelled";
  }
}

/** A password field for the current Postern passphrase. */
export function passphraseField(label = "Postern passphrase", cls = "passphrase"): HTMLInputElement {
  return h("input", {
    type: "password",
    class: cls,
    name: "passphrase",
    autocomplete: "current-password",
    spellcheck: "false",
    "aria-label": label,
    placeholder: "Postern passphrase",
  }) as HTMLInputElement;
}

/** The proof `field` holds, or `null` when it is empty; the field is emptied either way. */
export function takeProof(field: HTMLInputElement): Proof | null {
  const passphrase = field.value;
  field.value = "";
  return passphrase === "" ? null : { passphrase };
}

/** What a dialog asks proof for: a short line ("Turn on observe mode") and, maybe, why. */
export interface ProofAsk {
  action: string;
  detail?: string;
}

/**
 * Asks the person for proof, then runs `run` with it; resolves with what `run` resolved. A
 * refused passphrase keeps the dialog open with the engine's message; closing it rejects with
 * `ProofCancelled`; any other failure of `run` closes it and rejects with that failure.
 */
export type Prove = <T>(ask: ProofAsk, run: (proof: Proof) => Promise<T>) => Promise<T>;

/**
 * The "Confirm it's you" dialog, mounted on `doc`'s body while it asks (one at a time).
 * `systemAuth` says, when the dialog opens, whether the OS can authenticate the person
 * (a name, or `null`): then the dialog offers that beside the passphrase.
 */
export function proofDialog(doc: Document = document, systemAuth: () => string | null = () => null): Prove {
  let closeOpen: (() => void) | null = null;
  return <T>(ask: ProofAsk, run: (proof: Proof) => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      // A second request replaces the first, which is cancelled.
      closeOpen?.();
      const field = passphraseField();
      const status = h("p", { class: "proof-error", role: "alert", "aria-live": "assertive" }, "");
      status.hidden = true;
      const prove = h("button", { type: "submit", class: "prove primary" }, "Confirm") as HTMLButtonElement;
      const cancel = h("button", { type: "button", class: "cancel-proof" }, "Cancel") as HTMLButtonElement;
      const system = systemAuth() === null ? null : systemAuthButton(() => send(SYSTEM_PROOF));
      const form = h(
        "form",
        { class: "proof-form", autocomplete: "off" },
        h("label", "field proof-field", h("span", "field-title", "Postern passphrase"), field),
        status,
        h("div", "proof-actions", system, cancel, prove),
      ) as HTMLFormElement;
      const dialog = h(
        "div",
        { class: "proof-dialog", role: "dialog", "aria-modal": "true", "aria-labelledby": "proof-h", "aria-describedby": "proof-action" },
        h("div", "proof-head", icon("lock"), h("h2", { id: "proof-h" }, "Confirm it's you")),
        h("p", { id: "proof-action", class: "proof-action" }, ask.action),
        ask.detail === undefined ? null : h("p", "proof-detail muted", ask.detail),
        form,
      );
      const backdrop = h("div", "proof-backdrop", dialog);
      let busy = false;

      const say = (text: string): void => {
        status.textContent = text;
        status.hidden = text === "";
      };
      const close = (): void => {
        field.value = "";
        backdrop.remove();
        doc.removeEventListener("keydown", onKey, true);
        if (closeOpen === cancelIt) closeOpen = null;
      };
      const cancelIt = (): void => {
        close();
        reject(new ProofCancelled());
      };
      const onKey = (event: KeyboardEvent): void => {
        if (event.key !== "Escape") return;
        // The dialog's Escape: it must not also reach a window's own Escape (a deny).
        event.preventDefault();
        event.stopPropagation();
        if (!busy) cancelIt();
      };

      const send = (proof: Proof): void => {
        if (busy) return;
        field.value = "";
        busy = true;
        prove.disabled = true;
        cancel.disabled = true;
        if (system !== null) system.disabled = true;
        say("");
        run(proof).then(
          (value) => {
            close();
            resolve(value);
          },
          (err: unknown) => {
            busy = false;
            prove.disabled = false;
            cancel.disabled = false;
            if (system !== null) system.disabled = false;
            if (isProofRefusal(err)) {
              say(err instanceof Error ? err.message : String(err));
              field.focus();
              return;
            }
            close();
            reject(err);
          },
        );
      };
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        if (busy) return;
        const proof = takeProof(field);
        if (proof === null) {
          say("Type your Postern passphrase.");
          field.focus();
          return;
        }
        send(proof);
      });
      cancel.addEventListener("click", () => {
        if (!busy) cancelIt();
      });
      doc.addEventListener("keydown", onKey, true);
      closeOpen = cancelIt;
      doc.body.appendChild(backdrop);
      field.focus();
    });
}

/** Why a new passphrase cannot be taken (typed twice), or `null` when it can. */
export function checkNewPassphrase(first: string, again: string): string | null {
  if (first === "") return "Type a passphrase.";
  if ([...first].length < MIN_PASSPHRASE) return `A passphrase has at least ${MIN_PASSPHRASE} characters.`;
  if (first !== again) return "The two passphrases differ: type the same one twice.";
  return null;
}

export interface NewPassphraseOptions {
  /** The `data-form` key that keeps the form across a re-render while it is being typed in. */
  form: string;
  /** The button's text. */
  submit: string;
  /** Sends the passphrase; rejects with the engine's sentence. */
  send(passphrase: string): Promise<void>;
  /** What the form says once it is sent. */
  done?: string;
  /** Whether the first field takes the focus when the window draws it. */
  autofocus?: boolean;
}

/**
 * Two password fields (`passphrase-new`, `passphrase-again`) and a button (`set-passphrase`).
 * On submit both fields are read and emptied before anything else; a mismatch or a passphrase
 * too short is said without asking the engine.
 */
export function newPassphraseForm(options: NewPassphraseOptions): HTMLFormElement {
  const input = (cls: string, label: string): HTMLInputElement =>
    h("input", { type: "password", class: cls, name: cls, autocomplete: "new-password", spellcheck: "false", "aria-label": label, minlength: String(MIN_PASSPHRASE) }) as HTMLInputElement;
  const first = input("passphrase-new", "New passphrase");
  const again = input("passphrase-again", "The same passphrase again");
  if (options.autofocus === true) first.dataset.autofocus = "true";
  const status = h("p", { class: "form-status", role: "status" }, "");
  const submit = h("button", { type: "submit", class: "primary set-passphrase" }, options.submit) as HTMLButtonElement;
  const field = (title: string, control: HTMLElement, hint?: string): HTMLElement =>
    h("label", "field", h("span", "field-title", title), control, hint === undefined ? null : h("span", "field-hint muted", hint));
  const form = h(
    "form",
    { class: "new-passphrase-form", "data-form": options.form, novalidate: "", autocomplete: "off" },
    field("Passphrase", first, `At least ${MIN_PASSPHRASE} characters. A few unrelated words are easy to type and hard to guess.`),
    field("Again", again),
    h("div", "form-actions", submit, status),
  ) as HTMLFormElement;
  const setStatus = (text: string, bad: boolean): void => {
    status.textContent = text;
    status.classList.toggle("bad", bad);
    status.setAttribute("role", bad ? "alert" : "status");
  };
  form.addEventListener("input", () => (form.dataset.dirty = "true"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const passphrase = first.value;
    const repeated = again.value;
    first.value = "";
    again.value = "";
    const wrong = checkNewPassphrase(passphrase, repeated);
    if (wrong !== null) {
      setStatus(wrong, true);
      first.focus();
      return;
    }
    submit.disabled = true;
    setStatus("Setting…", false);
    options.send(passphrase).then(
      () => {
        delete form.dataset.dirty;
        setStatus(options.done ?? "", false);
      },
      (err: unknown) => {
        // Kept across a re-render (src/live.ts carries a form marked dirty), so the reason stays.
        form.dataset.dirty = "true";
        setStatus(err instanceof Error ? err.message : String(err), true);
        first.focus();
      },
    ).finally(() => (submit.disabled = false));
  });
  return form;
}
