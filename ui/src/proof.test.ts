import { beforeEach, describe, expect, it, vi } from "vitest";

import type { Proof } from "./bindings";
import { checkNewPassphrase, errorCode, isProofRefusal, passphraseField, ProofCancelled, proofDialog, takeProof } from "./proof";

const PASSPHRASE = "correct horse battery";
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));
const refusal = (code: string, text: string) => Object.assign(new Error(text), { code });

const dialog = () => document.querySelector<HTMLElement>(".proof-dialog");
const field = () => document.querySelector<HTMLInputElement>(".proof-dialog input.passphrase")!;
const said = () => document.querySelector<HTMLElement>(".proof-error");

/** Types `passphrase` into the open dialog and confirms it. */
async function confirm(passphrase: string): Promise<void> {
  field().value = passphrase;
  document.querySelector<HTMLButtonElement>(".proof-dialog .prove")!.click();
  await settled();
}

/** Everything of the page a passphrase could be left in: the markup and every field's value. */
function leaked(value: string): boolean {
  return document.documentElement.outerHTML.includes(value) || [...document.querySelectorAll("input")].some((i) => i.value.includes(value));
}

beforeEach(() => document.body.replaceChildren());

describe("a passphrase field", () => {
  it("is a password field the browser does not fill with a new password", () => {
    const input = passphraseField();
    expect(input.type).toBe("password");
    expect(input.className).toBe("passphrase");
    expect(input.getAttribute("autocomplete")).toBe("current-password");
  });

  it("gives its proof once, and is empty after", () => {
    const input = passphraseField();
    input.value = PASSPHRASE;
    expect(takeProof(input)).toEqual({ passphrase: PASSPHRASE });
    expect(input.value).toBe("");
    expect(takeProof(input)).toBeNull();
  });
});

describe("the engine's refusals", () => {
  it("are retried after a wrong passphrase or a back-off only", () => {
    expect(isProofRefusal(refusal("passphrase_wrong", "x"))).toBe(true);
    expect(isProofRefusal(refusal("proof_backoff", "x"))).toBe(true);
    expect(isProofRefusal(refusal("os_auth_denied", "x"))).toBe(true);
    expect(isProofRefusal(refusal("os_auth_no_agent", "x"))).toBe(true);
    expect(isProofRefusal(refusal("proof_required", "x"))).toBe(false);
    expect(isProofRefusal(new Error("x"))).toBe(false);
    expect(errorCode("text")).toBeUndefined();
  });
});

describe("the Confirm it's you dialog", () => {
  it("asks, sends the proof to the one command, closes, and keeps nothing", async () => {
    const run = vi.fn(async (proof: Proof) => `done with ${proof.passphrase?.length} characters`);
    const asked = proofDialog(document)({ action: "Turn on observe mode.", detail: "Every run is admitted." }, run);

    expect(dialog()?.getAttribute("role")).toBe("dialog");
    expect(dialog()?.textContent).toContain("Confirm it's you");
    expect(dialog()?.textContent).toContain("Turn on observe mode.");
    expect(dialog()?.textContent).toContain("Every run is admitted.");
    expect(document.activeElement).toBe(field());
    await confirm(PASSPHRASE);

    await expect(asked).resolves.toBe("done with 21 characters");
    expect(run).toHaveBeenCalledExactlyOnceWith({ passphrase: PASSPHRASE });
    expect(dialog()).toBeNull();
    expect(leaked(PASSPHRASE)).toBe(false);
  });

  it("sends nothing without a passphrase, and says so", async () => {
    const run = vi.fn(async () => {});
    const asked = proofDialog(document)({ action: "Unlock." }, run).catch((err: unknown) => err);

    await confirm("");

    expect(run).not.toHaveBeenCalled();
    expect(said()?.textContent).toBe("Type your Postern passphrase.");
    expect(said()?.hidden).toBe(false);
    document.querySelector<HTMLButtonElement>(".cancel-proof")!.click();
    expect(await asked).toBeInstanceOf(ProofCancelled);
  });

  it("shows the engine's message for a wrong passphrase and a back-off, empties the field, and lets the person try again", async () => {
    const run = vi
      .fn(async (_proof: Proof) => "ok")
      .mockRejectedValueOnce(refusal("passphrase_wrong", "wrong passphrase: the next try is allowed in 1 second"))
      .mockRejectedValueOnce(refusal("proof_backoff", "too many wrong passphrases: wait 30 seconds"));
    const asked = proofDialog(document)({ action: "Add the credential api." }, run);

    await confirm("not it");
    expect(said()?.textContent).toBe("wrong passphrase: the next try is allowed in 1 second");
    expect(field().value).toBe("");
    expect(document.activeElement).toBe(field());
    expect(document.querySelector<HTMLButtonElement>(".prove")!.disabled).toBe(false);
    expect(leaked("not it")).toBe(false);

    await confirm("nor this");
    expect(said()?.textContent).toBe("too many wrong passphrases: wait 30 seconds");

    await confirm(PASSPHRASE);
    await expect(asked).resolves.toBe("ok");
    expect(run.mock.calls.map(([proof]) => proof.passphrase)).toEqual(["not it", "nor this", PASSPHRASE]);
    expect(dialog()).toBeNull();
  });

  it("offers system authentication only when the engine has it, and tries again after a refusal", async () => {
    const plain = proofDialog(document)({ action: "Unlock." }, async () => {}).catch((err: unknown) => err);
    expect(dialog()).not.toBeNull();
    expect(document.querySelector(".proof-dialog .system-auth")).toBeNull();
    document.querySelector<HTMLButtonElement>(".cancel-proof")!.click();
    expect(await plain).toBeInstanceOf(ProofCancelled);

    const run = vi
      .fn(async (_proof: Proof) => "ok")
      .mockRejectedValueOnce(refusal("os_auth_denied", "system authentication failed; the next try is allowed in 1 s"));
    const asked = proofDialog(document, () => "polkit")({ action: "Turn on observe mode." }, run);
    const system = () => document.querySelector<HTMLButtonElement>(".proof-dialog .system-auth")!;
    expect(system().textContent).toBe("Use system authentication");
    field().value = "typed, then not used";
    system().click();
    await settled();
    expect(said()?.textContent).toBe("system authentication failed; the next try is allowed in 1 s");
    expect(leaked("typed, then not used")).toBe(false);

    system().click();
    await expect(asked).resolves.toBe("ok");
    expect(run.mock.calls.map(([proof]) => proof)).toEqual([{ system: true }, { system: true }]);
    expect(dialog()).toBeNull();
  });

  it("closes and hands any other failure to the caller", async () => {
    const asked = proofDialog(document)({ action: "Unlock." }, async () => Promise.reject(refusal("failed", "the keychain is unavailable")));
    const caught = asked.catch((err: unknown) => err);

    await confirm(PASSPHRASE);

    expect(await caught).toMatchObject({ message: "the keychain is unavailable", code: "failed" });
    expect(dialog()).toBeNull();
  });

  it("is cancelled by Escape or Cancel, sending nothing, and its Escape goes no further", async () => {
    const run = vi.fn(async () => {});
    const prove = proofDialog(document);
    const windowEscape = vi.fn();
    document.addEventListener("keydown", windowEscape);

    const first = prove({ action: "Unlock." }, run).catch((err: unknown) => err);
    field().value = PASSPHRASE;
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true, cancelable: true }));
    expect(await first).toBeInstanceOf(ProofCancelled);
    expect(windowEscape).not.toHaveBeenCalled();
    expect(leaked(PASSPHRASE)).toBe(false);

    const second = prove({ action: "Unlock." }, run).catch((err: unknown) => err);
    document.querySelector<HTMLButtonElement>(".cancel-proof")!.click();
    expect(await second).toBeInstanceOf(ProofCancelled);
    expect(run).not.toHaveBeenCalled();
    expect(dialog()).toBeNull();
    document.removeEventListener("keydown", windowEscape);
  });

  it("shows one request at a time: a new one cancels the one open", async () => {
    const prove = proofDialog(document);
    const first = prove({ action: "First." }, async () => "first").catch((err: unknown) => err);
    const second = prove({ action: "Second." }, async () => "second");

    expect(await first).toBeInstanceOf(ProofCancelled);
    expect(document.querySelectorAll(".proof-dialog")).toHaveLength(1);
    expect(dialog()?.textContent).toContain("Second.");
    await confirm(PASSPHRASE);
    await expect(second).resolves.toBe("second");
  });
});

describe("a new passphrase", () => {
  it("is at least 8 characters, typed the same twice", () => {
    expect(checkNewPassphrase("", "")).toBe("Type a passphrase.");
    expect(checkNewPassphrase("1234567", "1234567")).toBe("A passphrase has at least 8 characters.");
    expect(checkNewPassphrase("12345678", "12345679")).toBe("The two passphrases differ: type the same one twice.");
    expect(checkNewPassphrase("12345678", "12345678")).toBeNull();
    // Characters, not UTF-16 units: eight emoji are eight characters.
    expect(checkNewPassphrase("🔑".repeat(8), "🔑".repeat(8))).toBeNull();
  });
});
