// The person's proof of presence in the end-to-end runs (issue 13): the Postern passphrase.
//
// - In the app: a fresh home shows "Choose a Postern passphrase" before anything else
//   (`choosePassphrase`), and the windows ask for it for every approval, unlock and widening
//   change.
// - On a terminal: the `postern` CLI reads it from /dev/tty only (never standard input,
//   arguments or the environment). `posternAtTerminal` runs it under util-linux `script`, which
//   gives it a pseudo-terminal, and types the passphrase at each prompt as a person would.

import { spawn } from "node:child_process";

import { sleep, until } from "./webdriver.mjs";

/** The passphrase the end-to-end person chooses (the same as tests/src/tty.rs). */
export const PASSPHRASE = "postern-e2e-passphrase";

/** The CLI's prompts (crates/cli/src/proof.rs): "Postern passphrase: ", "New Postern passphrase: ", "The same again: ". */
const PROMPTS = /passphrase: |again: /g;

/**
 * Sets `passphrase` through the first-run step of a fresh home, and waits until the window
 * has moved past it (setting it also unlocks the vault).
 */
export async function choosePassphrase(s, passphrase = PASSPHRASE) {
  await s.waitForTexts(".choose-passphrase h2", (t) => t.length === 1 && t[0] === "Choose a Postern passphrase", 30_000);
  await typeInto(s, "input.passphrase-new", passphrase);
  await typeInto(s, "input.passphrase-again", passphrase);
  await s.click("button.set-passphrase");
  await s.waitForTexts(".choose-passphrase", (t) => t.length === 0, 15_000);
  await s.waitForTexts(".pill", (t) => t.length === 1 && t[0] === "Engine running", 15_000);
}

/**
 * Runs `postern --home HOME ARGS...` with a terminal, typing `passphrase` at every prompt;
 * resolves with what the terminal showed (`\r\n` made `\n`), rejects when it exits non-zero.
 * A command that asks nothing just runs. `stdinFile`, when given, is its standard input (the
 * terminal stays the one the passphrase is asked on).
 */
export function posternAtTerminal(cli, home, args, { passphrase = PASSPHRASE, stdinFile, timeoutMs = 60_000 } = {}) {
  const command = [cli, "--home", home, ...args].map(shellQuote).join(" ") + (stdinFile === undefined ? "" : ` < ${shellQuote(stdinFile)}`);
  // -q: no "Script started" lines; -e: exit with the command's status; -c: the command;
  // /dev/null: no typescript file.
  const child = spawn("script", ["-qec", command, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
  let screen = "";
  let answered = 0;
  const onOutput = (chunk) => {
    screen += String(chunk);
    const asked = screen.match(PROMPTS)?.length ?? 0;
    for (; answered < asked; answered++) child.stdin.write(`${passphrase}\n`);
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`postern ${args.join(" ")}: no exit within ${timeoutMs} ms; the terminal showed ${JSON.stringify(screen)}`));
    }, timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run util-linux script (Debian: bsdutils): ${err.message}`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      child.stdin.end();
      const shown = screen.replaceAll("\r\n", "\n");
      if (code === 0) resolve(shown);
      else reject(new Error(`postern ${args.join(" ")} exited with ${code}; the terminal showed ${JSON.stringify(shown)}`));
    });
  });
}

/** `text` quoted for sh. */
function shellQuote(text) {
  return `'${String(text).replaceAll("'", `'\\''`)}'`;
}

/**
 * Approves the only request waiting, shown in the approval window, with its narrowest choice:
 * the passphrase typed in its field, then Enter there. The engine holds back the try after a
 * wrong passphrase for a moment (its message says how long): a refused try is typed again
 * after that. The answer closes the window, perhaps before the driver hears back from the
 * keystroke: that is the outcome wanted, not a failure.
 */
export async function approveInWindow(s, passphrase = PASSPHRASE) {
  const closed = async () => (await s.windowHandles()).length === 1;
  await retried(s, "the approval to be taken", async () => {
    if (await closed()) return { done: true };
    await s.waitForAttributes(".allow", "disabled", (d) => d.length > 0 && d.every((v) => v === null));
    await typeInto(s, "input.passphrase", `${passphrase}\uE007`);
    // Enter answers at once (the window shows the answer on its way, the last refusal gone):
    // wait for the window to close, or for the engine's refusal.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(100)) {
      if (await closed()) return { done: true };
      const said = await s.texts(".answer-error").catch(() => []);
      const enabled = await s.attributes(".allow", "disabled").catch(() => []);
      if (said.length === 1 && said[0] !== "" && enabled.length > 0 && enabled.every((v) => v === null)) return { done: false, said: said[0] };
    }
    return { done: false, said: "" };
  });
}

/**
 * Unlocks from the status window's locked screen: the passphrase and Enter in its field, again
 * after the engine's pause if it held back the try.
 */
export async function unlockInWindow(s, passphrase = PASSPHRASE) {
  const locked = async () => (await s.texts(".locked")).length > 0;
  await retried(s, "the vault to unlock", async () => {
    if (!(await locked())) return { done: true };
    await typeInto(s, ".locked input.passphrase", `${passphrase}\uE007`);
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(100)) {
      if (!(await locked())) return { done: true };
      const said = await s.texts(".unlock-error").catch(() => []);
      const button = await s.attributes(".locked .unlock", "disabled").catch(() => []);
      if (said.length === 1 && said[0] !== "" && button.length === 1 && button[0] === null) return { done: false, said: said[0] };
    }
    return { done: false, said: "" };
  });
}

/**
 * How long the engine's refusal asks to wait ("... the next try is allowed in 2 s"), with a
 * little to spare; a second when it says no time.
 */
export function retryAfterMs(message) {
  const m = /in (\d+(?:\.\d+)?) ?s\b/.exec(message ?? "");
  return m ? Math.ceil(Number(m[1]) * 1000) + 500 : 1000;
}

/**
 * Types `text` into the field at `css`, again if the window re-rendered it meanwhile (or it is
 * not there yet: a window just started may paint once more before its form settles).
 */
export async function typeInto(s, css, text) {
  await until(async () => {
    try {
      await s.sendKeys(css, text);
      return true;
    } catch (err) {
      if (String(err.message).includes("stale element") || String(err.message).includes("nothing to type into")) return false;
      // The keystroke closed the window (an answer): done.
      if (String(err.message).includes("no such window")) return true;
      throw err;
    }
  }, 10_000, `typing into ${css}`);
}

/** Runs `attempt` until it is done, at most 5 times, waiting as each refusal asks. */
async function retried(s, what, attempt) {
  const refusals = [];
  for (let i = 0; i < 5; i++) {
    const { done, said } = await attempt();
    if (done) return;
    refusals.push(said);
    await sleep(retryAfterMs(said));
  }
  throw new Error(`${what}: refused ${refusals.length} times: ${JSON.stringify(refusals)}`);
}
