// Writes the app's screenshots (one per view) into the directory given as the first argument.
// Run by scripts/screenshot.sh, which builds the binaries and provides Xvfb and a bus:
//
//   POSTERN_APP=... POSTERN_CLI=... node ui/e2e/screenshots.mjs docs/screenshots
//
// The homes live under $TMPDIR/postern-demo, so the pictures show a short, stable path.

import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { agent, CLOCK } from "./agent.mjs";
import { Session, sleep, startDriver, until } from "./webdriver.mjs";

const app = resolve(process.env.POSTERN_APP ?? "");
const cli = resolve(process.env.POSTERN_CLI ?? "");
const out = resolve(process.argv[2] ?? "docs/screenshots");
const demo = join(tmpdir(), "postern-demo");
const repo = fileURLToPath(new URL("../..", import.meta.url));
/** The rebuildable fixture server (tests/fixtures/rebuildable/README.md) and the venv with its MCP SDK. */
const REBUILDABLE = join(repo, "tests/fixtures/rebuildable");
const VENV = join(repo, "tests/.deps/venv");
mkdirSync(out, { recursive: true });

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
  async status(home) {
    const publisher = rebuildable(join(home, "publisher"));
    postern(home, "server", "add", "publisher", "--cwd", publisher.app, "--env", `FIXTURE_EFFECTS=${publisher.effects}`,
      "--identity", "lib", "--restart", "on-change", "--", ".venv/bin/python", "-B", "server.py");
    const clockDir = join(home, "clock");
    mkdirSync(clockDir, { recursive: true });
    const clock = join(clockDir, "clock.py");
    copyFileSync(CLOCK, clock);
    postern(home, "server", "add", "clock", "--cwd", clockDir, "--", "python3", "clock.py");
    const agents = [];
    try {
      return await withApp(home, async (s) => {
        await s.setWindowRect(900, 800);
        await s.waitForTexts(".server-label", (l) => l.length === 2);
        agents.push(agent(cli, home, "publisher", "claude-code", "2.0.14"));
        await s.waitForTexts(".session .state", (t) => same(t, ["catalog-ready"]), 30_000);
        agents.push(agent(cli, home, "clock", "Cursor", "1.7.2"));
        await s.waitForTexts(".session .state", (t) => same(t, ["catalog-ready", "catalog-ready"]), 30_000);

        publisher.build("b-annotation-flip");
        writeFileSync(clock, `${readFileSync(clock, "utf8")}\n# rebuilt\n`);
        await s.waitForTexts('[data-server="publisher"] .changes .flag', (t) => t.length === 1, 30_000);
        await s.waitForTexts('[data-server="publisher"] .state', (t) => same(t, ["catalog-ready"]), 30_000);
        await s.waitForTexts('[data-server="clock"] .newer .paths li', (t) => t.length === 1, 15_000);
        const status = await s.screenshot();

        await s.click('[data-server="publisher"] details.record summary');
        await s.execute("document.querySelector('[data-server=publisher]').scrollIntoView()");
        const record = await s.screenshot();
        return { "status.png": status, "execution-record.png": record };
      });
    } finally {
      for (const a of agents) a.stdin.end();
    }
  },

  async "first-run"(home) {
    return withApp(home, async (s) => {
      await s.waitForTexts(".welcome h2", (t) => t.length === 1);
      return { "first-run.png": await s.screenshot() };
    });
  },

  async "engine-unavailable"(home) {
    const daemon = spawn(cli, ["--home", home, "daemon"], { stdio: "ignore" });
    try {
      await until(() => existsSync(join(home, "run", "engine.sock")), 10_000, "the daemon");
      return await withApp(home, async (s) => {
        await s.waitForTexts(".notice h2", (t) => t.length === 1);
        return { "engine-unavailable.png": await s.screenshot() };
      });
    } finally {
      daemon.kill("SIGTERM");
      await Promise.race([new Promise((r) => daemon.once("exit", r)), sleep(5000)]);
    }
  },
};

for (const [name, take] of Object.entries(shots)) {
  const home = join(demo, name);
  rmSync(home, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  try {
    for (const [file, png] of Object.entries(await take(home))) {
      writeFileSync(join(out, file), png);
      console.log(`wrote ${join(out, file)}`);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
process.exit(0);

/**
 * A working copy of the rebuildable fixture under `dir` (as tests/src/rebuild.rs makes one):
 * `app/` holds revision A's entry, the lockfile, `lib/` and `.venv` (a link to the test venv);
 * `build(revision)` copies that revision's files over it with atomic renames, as a build does.
 */
function rebuildable(dir) {
  if (!existsSync(join(VENV, "bin/python"))) {
    throw new Error(`the screenshots need the test venv with the MCP SDK (${VENV}): run scripts/setup-test-deps.sh`);
  }
  const app = join(dir, "app");
  const noCache = (src) => !src.includes("__pycache__");
  mkdirSync(app, { recursive: true });
  cpSync(join(REBUILDABLE, "lib"), join(app, "lib"), { recursive: true, filter: noCache });
  copyFileSync(join(REBUILDABLE, "requirements.txt"), join(app, "requirements.txt"));
  cpSync(join(REBUILDABLE, "revisions/a"), app, { recursive: true, filter: noCache });
  symlinkSync(VENV, join(app, ".venv"));
  let builds = 0;
  return {
    app,
    effects: join(dir, "effects.txt"),
    build(revision) {
      const from = join(REBUILDABLE, "revisions", revision);
      for (const file of readdirSync(from)) {
        const staged = join(dir, `.build-${builds++}`);
        copyFileSync(join(from, file), staged);
        renameSync(staged, join(app, file));
      }
    },
  };
}

async function withApp(home, body) {
  const driver = await startDriver({ env: { POSTERN_HOME: home, RUST_LOG: "warn" } });
  let session;
  try {
    session = await Session.create(driver.url, app);
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

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}
