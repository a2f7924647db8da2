// Writes the app's screenshots (one per view) into the directory given as the first argument.
// Run by scripts/screenshot.sh, which builds the binaries and provides Xvfb and a bus:
//
//   POSTERN_APP=... POSTERN_CLI=... node ui/e2e/screenshots.mjs docs/screenshots
//
// The homes live under $TMPDIR/postern-demo, so the pictures show a short, stable path. Each
// home is fresh: the app first asks for a Postern passphrase (passphrase.mjs chooses one), and
// it is typed wherever the app or the `postern` CLI asks for it.

import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { agent, client, CLOCK } from "./agent.mjs";
import { approveInWindow, choosePassphrase, PASSPHRASE, posternAtTerminal, typeInto } from "./passphrase.mjs";
import { rebuildable } from "./rebuildable.mjs";
import { startTray } from "./tray.mjs";
import { Session, sleep, startDriver, until } from "./webdriver.mjs";

const app = resolve(process.env.POSTERN_APP ?? "");
const cli = resolve(process.env.POSTERN_CLI ?? "");
const out = resolve(process.argv[2] ?? "docs/screenshots");
const demo = join(tmpdir(), "postern-demo");
mkdirSync(out, { recursive: true });

/** The status window's default size (tauri.conf.json): every picture of it is taken at it. */
const MAIN_SIZE = [900, 640];

/** `POSTERN_SHOTS=journals,first-run` takes only those homes' pictures. */
const only = process.env.POSTERN_SHOTS?.split(",").filter((name) => name !== "");

// The servers inherit the app's environment, and their execution records list its variable
// names: keep the pictures to what a desktop session has, not this machine's build variables.
const DESKTOP_ENV = /^(PATH|HOME|USER|LOGNAME|LANG|LC_\w+|SHELL|TERM|TMPDIR|DISPLAY|XAUTHORITY|DBUS_SESSION_BUS_ADDRESS|XDG_\w+|PYENV_\w+)$/;
for (const name of Object.keys(process.env)) {
  if (!DESKTOP_ENV.test(name)) delete process.env[name];
}

/** Each home's pictures: a function of the home that returns `{ "name.png": png, ... }`. */
const shots = {
  // Two live sessions, each showing what the refresh contract makes visible: a pinned server
  // rebuilt under `--restart on-change` (a new epoch, its catalog changes with an escalation,
  // an agent still holding the old tool list), and an unpinned one rebuilt under the manual
  // policy (files newer than the running process). Then one execution record, opened.
  async status(home, work) {
    const publisher = rebuildable(join(work, "publisher"));
    postern(home, "server", "add", "publisher", "--cwd", publisher.app, "--writable", "..", "--env", `FIXTURE_EFFECTS=${publisher.effects}`,
      "--identity", "lib", "--restart", "on-change", "--", ".venv/bin/python", "-B", "server.py");
    const clockDir = join(work, "clock");
    mkdirSync(clockDir, { recursive: true });
    const clock = join(clockDir, "clock.py");
    copyFileSync(CLOCK, clock);
    postern(home, "server", "add", "clock", "--cwd", clockDir, "--", "python3", "clock.py");
    const agents = [];
    try {
      return await withApp(home, async (s) => {
        await s.setWindowRect(...MAIN_SIZE);
        await s.waitForTexts(".server-label", (l) => l.length === 2);
        // A credential bound to the publisher: its launches start without it until a human
        // approves that code for it, and the Servers view says why.
        await credential(home, "publisher-token", "--kind", "env", "--env", "PUBLISHER_TOKEN");
        await posternAtTerminal(cli, home, ["server", "bind", "publisher", "publisher-token"]);
        agents.push(agent(cli, home, "publisher", "claude-code", "2.0.14"));
        await s.waitForAttributes(".session .state", "data-state", (t) => same(t, ["catalog-ready"]), 30_000);
        agents.push(agent(cli, home, "clock", "Cursor", "1.7.2"));
        await s.waitForAttributes(".session .state", "data-state", (t) => same(t, ["catalog-ready", "catalog-ready"]), 30_000);

        publisher.build("b-annotation-flip");
        writeFileSync(clock, `${readFileSync(clock, "utf8")}\n# rebuilt\n`);
        await s.waitForTexts('[data-server="publisher"] .changes .flag', (t) => t.length === 1, 30_000);
        await s.waitForAttributes('[data-server="publisher"] .state', "data-state", (t) => same(t, ["catalog-ready"]), 30_000);
        await s.waitForTexts('[data-server="clock"] .newer .paths li', (t) => t.length === 1, 15_000);
        const status = await s.screenshot();

        await s.click('[data-server="publisher"] details.record summary');
        await s.execute("document.querySelector('[data-server=publisher]').scrollIntoView()");
        const record = await s.screenshot();

        // The Servers view: the rebuilt publisher's catalog diff (an escalation flagged), its
        // credential withheld from the new code, and Restart.
        await s.setWindowRect(...MAIN_SIZE);
        await s.click(".tab-servers");
        await s.waitForTexts('.server-card[data-label="publisher"] .changes .flag', (t) => t.length === 1);
        await s.execute("window.scrollTo(0, 0)");
        const servers = await s.screenshot();
        return { "status.png": status, "execution-record.png": record, "servers.png": servers };
      });
    } finally {
      for (const a of agents) a.stdin.end();
    }
  },

  // The approval window over a rebuild: a call to `publisher` was approved on revision A; the
  // server was rebuilt (a new epoch whose schema gained `target`, default `preview`), and the
  // agent's next call asks again, showing what changed since the approval. A second agent's
  // first call waits behind it. Then the tray's menu with both requests (in trayer, see
  // tray.mjs), the status window's Settings, and the locked screen.
  async approval(home, work) {
    const publisher = rebuildable(join(work, "publisher"));
    postern(home, "server", "add", "publisher", "--cwd", publisher.app, "--writable", "..", "--env", `FIXTURE_EFFECTS=${publisher.effects}`,
      "--identity", "lib", "--restart", "on-change", "--", ".venv/bin/python", "-B", "server.py");
    const clockDir = join(work, "clock");
    mkdirSync(clockDir, { recursive: true });
    copyFileSync(CLOCK, join(clockDir, "clock.py"));
    postern(home, "server", "add", "clock", "--cwd", clockDir, "--", "python3", "clock.py");
    const agents = [];
    const tray = await startTray();
    try {
      return await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.setWindowRect(...MAIN_SIZE);
        await s.waitForTexts(".server-label", (l) => l.length === 2);
        const claude = await client(cli, home, "publisher", "claude-code", "2.0.14");
        agents.push(claude);
        const first = claude.call("publish_preview", { branch: "main" });
        await s.waitForWindow("approvals", 30_000);
        await approveInWindow(s);
        await first;
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);

        publisher.build("b-schema");
        await s.waitForTexts('[data-server="publisher"] .changes li', (t) => t.length > 0, 30_000);
        await s.waitForAttributes('[data-server="publisher"] .state', "data-state", (t) => same(t, ["catalog-ready"]), 30_000);
        await claude.request("tools/list", {});
        void claude.call("publish_preview", { branch: "main" }, 600_000).catch(() => {});
        const cursor = await client(cli, home, "clock", "Cursor", "1.7.2");
        agents.push(cursor);
        void cursor.call("now", {}, 600_000).catch(() => {});

        await s.waitForWindow("approvals", 30_000);
        // The window at its own default size (src-tauri/src/window.rs).
        await s.setWindowRect(560, 720);
        await s.waitForTexts(".queue-pos", (t) => same(t, ["1 of 2"]), 30_000);
        await s.waitForAttributes(".allow", "disabled", (d) => d.length > 0 && d[0] === null);
        const approval = await s.screenshot();

        // The first request's submenu open: its arguments and risk lines, Review… and Deny.
        await tray.openMenu();
        await tray.keys("Down", "Right");
        const trayMenu = tray.picture(1100, 330);
        await tray.keys("Escape", "Escape");

        await s.switchToWindow(main);
        await s.click(".tab-settings");
        await s.waitForTexts(".settings-form h2", (t) => t.length === 1);
        const settings = await s.screenshot();

        await s.click(".lock-button");
        await s.waitForTexts(".locked h2", (t) => same(t, ["Postern is locked"]));
        const locked = await s.screenshot();
        return { "approval-window.png": approval, "tray-menu.png": trayMenu, "settings.png": settings, "locked.png": locked };
      });
    } finally {
      for (const a of agents) a.close();
      await tray.stop();
    }
  },

  // First run on an empty home: the passphrase step, then the guide, with a Cursor
  // configuration found in the user's home.
  async "first-run"(home) {
    const user = join(home, "user");
    mkdirSync(user, { recursive: true });
    // Claude Code's own configuration: a stdio server, one holding a token, a remote one.
    writeFileSync(
      join(user, ".claude.json"),
      JSON.stringify({
        numStartups: 4,
        mcpServers: {
          time: { type: "stdio", command: "uvx", args: ["mcp-server-time", "--local-timezone", "UTC"] },
          github: { type: "stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-github"], env: { GITHUB_TOKEN: "not-shown" } },
          linear: { type: "sse", url: "https://mcp.linear.app/sse" },
        },
      }, null, 2),
    );
    return withApp(
      home,
      async (s) => {
        await s.setWindowRect(...MAIN_SIZE);
        await s.waitForTexts(".choose-passphrase h2", (t) => t.length === 1, 30_000);
        const passphrase = await s.screenshot();
        await choosePassphrase(s);
        await s.waitForTexts(".welcome h2", (t) => t.length === 1);
        await s.waitForTexts(".import-entry", (t) => t.length === 3);
        const guide = await s.screenshot();
        // Import time and github, then Rewire's preview for Claude Code itself.
        await s.click(".import-source .import");
        await s.waitForTexts(".guide-note", (t) => t.length === 1 && t[0].startsWith("Imported"));
        await s.click(".rewire-preview");
        await s.waitForTexts(".rewire-changes li", (t) => t.length === 2);
        await s.execute("document.querySelector('.rewire-source').scrollIntoView(); return true");
        return { "first-run-passphrase.png": passphrase, "first-run.png": guide, "first-run-rewire.png": await s.screenshot() };
      },
      { HOME: user },
      { choose: false },
    );
  },

  // The journals after a short story: two agents, approvals, a denial, a rebuild and the stale
  // call it refuses. Then the timeline (a refusal's audit record opened), the Activity feed,
  // the Credentials view and the Integrity view after a full verification.
  async journals(home, work) {
    const revision = join(work, "deploy", "revision.txt");
    mkdirSync(join(work, "deploy"), { recursive: true });
    writeFileSync(revision, "1\n");
    postern(home, "server", "add", "deploy", "--restart", "on-change", "--identity", revision, "--", cli, "demo-server", "--revision-file", revision);
    const clockDir = join(work, "clock");
    mkdirSync(clockDir, { recursive: true });
    copyFileSync(CLOCK, join(clockDir, "clock.py"));
    postern(home, "server", "add", "clock", "--cwd", clockDir, "--", "python3", "clock.py");
    const agents = [];
    try {
      return await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.setWindowRect(...MAIN_SIZE);
        await s.waitForTexts(".server-label", (l) => l.length === 2);
        await credential(home, "deploy-key", "--kind", "env", "--env", "DEPLOY_KEY", "--every-use");
        await credential(home, "github", "--kind", "bearer", "--host", "api.github.com");
        await credential(home, "linear", "--kind", "header", "--header", "X-Api-Key", "--host", "api.linear.app");
        await posternAtTerminal(cli, home, ["server", "bind", "postern", "github"]);

        const claude = await client(cli, home, "deploy", "claude-code", "2.0.14");
        agents.push(claude);
        const last = (n) => n - 1;
        const once = () => 0;
        // Approved until the run ends: its next calls of deploy on this epoch go through.
        await gated(s, main, claude.call("deploy", { branch: "main" }, 60_000), last);
        await gated(s, main, claude.call("status", {}, 60_000), once);
        await sleep(600);
        await gated(s, main, claude.call("deploy", { branch: "release" }, 60_000), last);

        const cursor = await client(cli, home, "clock", "Cursor", "1.7.2");
        agents.push(cursor);
        await gated(s, main, cursor.call("now", {}, 60_000), null);
        await sleep(500);
        await gated(s, main, cursor.call("now", {}, 60_000), last);

        // The rebuild: a new epoch; the call prepared against the old one is refused as stale,
        // then, after listing tools again, a human is asked about the new code.
        await sleep(700);
        const before = epochOf(home, "deploy");
        writeFileSync(revision, "2\n");
        await until(() => {
          const out = postern(home, "server", "status", "deploy");
          const epoch = out.match(/running epoch (\S+)/)?.[1];
          return epoch !== undefined && epoch !== before && out.includes("catalog-ready");
        }, 20_000, "the rebuild's new epoch");
        await sleep(800);
        await gated(s, main, claude.call("deploy", { branch: "main" }, 60_000), null);
        await claude.request("tools/list", {});
        await gated(s, main, claude.call("deploy", { branch: "main" }, 60_000), last);
        await sleep(500);
        await gated(s, main, cursor.call("now", {}, 60_000), last);
        await gated(s, main, claude.call("deploy", { branch: "hotfix" }, 60_000), last);

        await s.click(".tab-timeline");
        await s.waitForAttributes(".timeline .lane", "data-lane", (t) => t.length === 2, 15_000);
        await s.waitForAttributes(".timeline .mark-refusal", "data-seq", (t) => t.length >= 2, 15_000);
        await s.execute(
          "const stale = [...document.querySelectorAll('.timeline .mark-refusal[data-seq]')].find((m) => m.textContent.includes('authorization_stale')); stale.dispatchEvent(new MouseEvent('click', { bubbles: true })); return true",
        );
        await s.waitForTexts(".timeline .entry .entry-kind", (t) => t.length === 1 && t[0] !== "");
        const timeline = await s.screenshot();

        await s.click(".tab-activity");
        await s.waitForTexts(".activity-row", (t) => t.length >= 6);
        const activity = await s.screenshot();

        // The grant claude-code was given until its run ends, with Revoke; the every-use rule.
        await s.click(".tab-permissions");
        await s.waitForTexts(".grant", (t) => t.length >= 1, 15_000);
        const permissions = await s.screenshot();

        await s.setWindowRect(...MAIN_SIZE);
        await s.click(".tab-credentials");
        await s.waitForTexts(".credential-name", (t) => t.length === 3);
        const credentials = await s.screenshot();

        await s.setWindowRect(...MAIN_SIZE);
        await s.click(".tab-integrity");
        await s.click(".verify");
        await s.waitForTexts(".verify-result .callout-title", (t) => t.length === 1, 30_000);
        const integrity = await s.screenshot();
        return { "timeline.png": timeline, "activity.png": activity, "permissions.png": permissions, "credentials.png": credentials, "integrity.png": integrity };
      });
    } finally {
      for (const a of agents) a.close();
    }
  },

  async "engine-unavailable"(home) {
    const daemon = spawn(cli, ["--home", home, "daemon"], { stdio: "ignore" });
    try {
      await until(() => existsSync(join(home, "run", "engine.sock")), 10_000, "the daemon");
      return await withApp(
        home,
        async (s) => {
          await s.waitForTexts(".notice h2", (t) => t.length === 1);
          return { "engine-unavailable.png": await s.screenshot() };
        },
        {},
        { choose: false },
      );
    } finally {
      daemon.kill("SIGTERM");
      await Promise.race([new Promise((r) => daemon.once("exit", r)), sleep(5000)]);
    }
  },
};

for (const [name, take] of Object.entries(shots)) {
  if (only !== undefined && only.length > 0 && !only.includes(name)) continue;
  // The Postern home, and beside it the servers' files (a confined server cannot see into it).
  const root = join(demo, name);
  const home = join(root, "postern");
  const work = join(root, "servers");
  rmSync(root, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  try {
    for (const [file, png] of Object.entries(await take(home, work))) {
      writeFileSync(join(out, file), png);
      console.log(`wrote ${join(out, file)}`);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
process.exit(0);

/**
 * A working copy of the rebuildable fixture under `dir` (as tests/src/rebuild.rs makes one):
 * `app/` holds revision A's entry, the lockfile, `lib/` and `.venv` (a link to the test venv);
 * `build(revision)` copies that revision's files over it with atomic renames, as a build does.
 */
/** Opens the app on `home`; chooses the passphrase first unless `choose` is false. */
async function withApp(home, body, env = {}, { choose = true } = {}) {
  const driver = await startDriver({ env: { POSTERN_HOME: home, RUST_LOG: "warn", ...env } });
  let session;
  try {
    session = await Session.create(driver, app);
    if (choose) await choosePassphrase(session);
    // Let fonts settle and the first status refresh land before the picture.
    await sleep(500);
    return await body(session);
  } catch (err) {
    err.message += `\n--- WebKitWebDriver and app output ---\n${driver.output().slice(-3000)}`;
    throw err;
  } finally {
    await session?.delete();
    await driver.stop();
  }
}

function postern(home, ...args) {
  return execFileSync(cli, ["--home", home, ...args], { encoding: "utf8" });
}

/** The running epoch of the first session of `label` (null when none runs). */
function epochOf(home, label) {
  return postern(home, "server", "status", label).match(/running epoch (\S+)/)?.[1] ?? null;
}

/**
 * Adds a credential through the CLI at a terminal (it asks for the passphrase there), its value
 * (a made-up one) on standard input from a file.
 */
async function credential(home, name, ...args) {
  const value = join(home, `.value-${name}`);
  writeFileSync(value, `demo-value-for-${name}`);
  try {
    await posternAtTerminal(cli, home, ["credential", "add", name, ...args], { stdinFile: value });
  } finally {
    rmSync(value, { force: true });
  }
}

/**
 * Waits for `call` to be answered; when the approval window opens for it first, answers with
 * `pick` (see `answer`). Resolves with the call's response.
 */
async function gated(s, main, call, pick) {
  let done = false;
  const settled = call.then((r) => {
    done = true;
    return r;
  });
  await until(async () => done || (await s.windowHandles()).length > 1, 30_000, "the call's answer or its approval request");
  if (!done) await answer(s, main, pick);
  return settled;
}

/**
 * Answers the request the approval window shows: the choice `pick(n)` of its n choices, or
 * Deny when `pick` is null. Then back to the main window.
 */
async function answer(s, main, pick) {
  await s.waitForWindow("approvals", 30_000);
  await s.waitForAttributes(".allow", "disabled", (d) => d.length > 0 && d.every((v) => v === null));
  // The answer may close the window before the driver hears back: that is the expected outcome.
  const closing = (err) => {
    if (!/no such window|Could not parse script result/.test(String(err.message))) throw err;
  };
  if (pick === null) {
    await s.click(".deny").catch(closing);
  } else {
    // An approval carries the passphrase, typed in the window's field.
    await typeInto(s, "input.passphrase", PASSPHRASE);
    const n = (await s.attributes(".lifetime", "class")).length;
    if (n > 0) await s.execute("document.querySelectorAll('.lifetime')[arguments[0]].click(); return true", [pick(n)]);
    await s.click(".allow").catch(closing);
  }
  await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
  await s.switchToWindow(main);
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}
