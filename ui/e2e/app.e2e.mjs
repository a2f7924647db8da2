// End-to-end tests of the real Postern app window, driven over WebDriver under Xvfb.
// Run by scripts/test-app.sh, which builds the binaries and provides the X server and bus:
//
//   POSTERN_APP=target/debug/postern-app POSTERN_CLI=target/debug/postern node ui/e2e/app.e2e.mjs
//
// Every scenario uses its own temporary POSTERN_HOME, never the user's.

import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { agent, CLOCK } from "./agent.mjs";
import { Session, sleep, startDriver, until } from "./webdriver.mjs";

const app = resolve(need("POSTERN_APP"));
const cli = resolve(need("POSTERN_CLI"));
const verbose = process.env.E2E_VERBOSE === "1";

const scenarios = {
  async "shows the configured servers and the running engine"({ home }) {
    postern(home, "server", "add", "time", "--", "uvx", "mcp-server-time");
    postern(home, "server", "add", "everything", "--cwd", home, "--", "npx", "-y", "@modelcontextprotocol/server-everything", "stdio");

    await withApp(home, async (s) => {
      await s.waitForTexts(".server-label", (labels) => same(labels, ["everything", "time"]));
      expectEqual(await s.texts(".pill"), ["Engine running"], "status pill");
      expectEqual(await s.texts(".server-cmd"), ["npx -y @modelcontextprotocol/server-everything stdio", "uvx mcp-server-time"], "commands");
      expectIncludes((await s.texts(".home code"))[0], home, "home path");

      // Configuration edited with the CLI reaches the window without a restart.
      postern(home, "server", "add", "notes", "--", "python3", "-m", "notes_server");
      await s.waitForTexts(".server-label", (labels) => same(labels, ["everything", "notes", "time"]), 8000);
      postern(home, "server", "remove", "time");
      await s.waitForTexts(".server-label", (labels) => same(labels, ["everything", "notes"]), 8000);
    });
  },

  async "shows connected agent sessions, their server processes, epochs and catalogs"({ home }) {
    // A private copy of the fixture server, so the test can change its files while it runs.
    const dir = join(home, "clock");
    mkdirSync(dir);
    const entry = join(dir, "clock.py");
    copyFileSync(CLOCK, entry);
    postern(home, "server", "add", "clock", "--cwd", dir, "--", "python3", "clock.py");
    const agents = [];
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        expectEqual(await s.texts(".server .restart"), ["restart manual"], "restart policy");
        agents.push(agent(cli, home, "clock", "e2e-agent", "1.2.3"));
        await s.waitForTexts(".session .state", (states) => same(states, ["catalog-ready"]));
        expectEqual(await s.texts(".session-server, .session-agent"), ["clock", "e2e-agent 1.2.3"], "session");
        const [pid] = await s.texts(".session .facts .pid");
        if (!/^\d+$/.test(pid)) throw new Error(`server pid: expected a number, got ${JSON.stringify(pid)}`);
        expectEqual(await s.texts(".server .running"), ["1 running"], "running count");

        // The epoch and catalog revision the engine reports (through the CLI) are the ones shown.
        const engine = posternStatus(home, "clock");
        const [epochShort] = await s.texts(".session .facts .epoch");
        const [epochTitle] = await s.attributes(".session .facts .epoch", "title");
        expectEqual(epochShort, `${engine.epoch.slice(0, 6)}…${engine.epoch.slice(-4)}`, "short epoch");
        expectIncludes(epochTitle, engine.epoch, "full epoch on hover");
        expectEqual(await s.texts(".session .facts .revision"), [engine.revision.slice("sha256:".length, "sha256:".length + 12)], "catalog revision");
        expectEqual(await s.texts(".session .tool-count"), ["1 tool"], "tool count");
        expectEqual(await s.texts(".session .facts .identity"), [engine.identity.slice("sha256:".length, "sha256:".length + 12)], "identity digest");
        // No lockfile next to clock.py: the engine calls it unpinned, and the window says why.
        expectEqual(await s.texts(".session .pin"), ["UNPINNED"], "pinning badge");
        expectEqual(await s.texts(".session .unpinned-reason"), [`Unpinned: ${engine.unpinned}`], "unpinned reason");

        // The execution record opens on demand, and stays open while the status changes.
        await s.click(".session details.record summary");
        const record = await s.waitForTexts(".session .record-grid dd", (dds) => dds.length > 0 && dds[0] !== "");
        expectEqual(record[0], engine.epoch, "record: epoch");
        if (!record.some((dd) => dd.endsWith(entry))) throw new Error(`record: no entry ${entry} in ${JSON.stringify(record)}`);

        // A build lands: the running process keeps its epoch, and the window says its files are newer.
        writeFileSync(entry, `${readFileSync(entry, "utf8")}\n# rebuilt\n`);
        await s.waitForTexts(".session .newer .paths li", (paths) => same(paths, [entry]), 8000);
        expectIncludes((await s.texts(".session .newer .callout-title"))[0], "Files newer than the running process", "newer notice");
        expectEqual(await s.texts(".session .facts .epoch"), [epochShort], "epoch after the build (manual restart policy)");
        expectEqual(await s.attributes(".session details.record", "open"), ["true"], "record still open");

        // The agent leaves: its session leaves the window too.
        agents.pop().stdin.end();
        await s.waitForTexts(".panel-sessions .panel-head .muted", (t) => same(t, ["none connected"]), 8000);
      });
    } finally {
      for (const a of agents) a.stdin.end();
    }
  },

  async "a new home explains how to add a server"({ home }) {
    await withApp(home, async (s) => {
      await s.waitForTexts(".welcome h2", (t) => same(t, ["No servers yet"]));
      const snippets = await s.texts(".welcome .snippet");
      expectEqual(snippets[0], "postern server add <label> -- <command>", "add command");
      expectEqual(JSON.parse(snippets[1]), { mcpServers: { "<label>": { command: "postern", args: ["mcp", "<label>"] } } }, "agent snippet");
    });
  },

  async "says so when another engine owns the home"({ home }) {
    postern(home, "server", "add", "time", "--", "uvx", "mcp-server-time");
    const daemon = spawn(cli, ["--home", home, "daemon"], { stdio: ["ignore", "ignore", verbose ? "inherit" : "ignore"] });
    try {
      await until(() => existsSync(join(home, "run", "engine.sock")) || daemon.exitCode !== null, 10_000, "the daemon's socket");
      if (daemon.exitCode !== null) throw new Error(`postern daemon exited with ${daemon.exitCode}`);
      await withApp(home, async (s) => {
        await s.waitForTexts(".notice h2", (t) => same(t, ["Another Postern engine owns this home"]));
        expectEqual(await s.texts(".pill"), ["Engine unavailable"], "status pill");
        expectIncludes((await s.texts(".details dd"))[0], home, "home path");
      });
    } finally {
      daemon.kill("SIGTERM");
      await Promise.race([new Promise((r) => daemon.once("exit", r)), sleep(5000)]);
    }
  },
};

// --- runner ----------------------------------------------------------------------------------

const only = process.argv[2];
let passed = 0;
const failed = [];
for (const [name, run] of Object.entries(scenarios)) {
  if (only && !name.includes(only)) continue;
  const home = mkdtempSync(join(tmpdir(), "postern-e2e-"));
  const started = Date.now();
  try {
    await run({ home });
    passed += 1;
    console.log(`  ok    ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    failed.push(name);
    console.log(`  FAIL  ${name}\n        ${String(err?.stack ?? err).replaceAll("\n", "\n        ")}`);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
console.log(`\napp e2e: ${passed} passed, ${failed.length} failed`);
process.exit(failed.length === 0 && passed > 0 ? 0 : 1);

// --- helpers ---------------------------------------------------------------------------------

/** Opens the app on `home` in a WebDriver session, runs `body`, then closes everything. */
async function withApp(home, body) {
  const driver = await startDriver({
    env: { POSTERN_HOME: home, RUST_LOG: verbose ? "debug" : "warn" },
    log: verbose ? (line) => process.stderr.write(line) : undefined,
  });
  let session;
  try {
    session = await Session.create(driver.url, app);
    await body(session);
  } catch (err) {
    if (!verbose) err.message += `\n--- WebKitWebDriver and app output ---\n${driver.output().slice(-3000)}`;
    throw err;
  } finally {
    await session?.delete();
    await driver.stop();
  }
}

function postern(home, ...args) {
  return execFileSync(cli, ["--home", home, ...args], { encoding: "utf8" });
}

/** The first session of `label` as `postern server status` prints it: epoch, identity, catalog, pinning. */
function posternStatus(home, label) {
  const out = postern(home, "server", "status", label);
  const find = (re, what) => {
    const m = out.match(re);
    if (!m) throw new Error(`postern server status: no ${what} in\n${out}`);
    return m[1];
  };
  return {
    epoch: find(/running epoch (\S+)/, "epoch"),
    identity: find(/identity (sha256:\S+)/, "identity"),
    revision: find(/catalog (sha256:\S+)/, "catalog revision"),
    unpinned: find(/UNPINNED: (.+)/, "unpinned reason"),
  };
}

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`set ${name} (see scripts/test-app.sh)`);
    process.exit(2);
  }
  return value;
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function expectEqual(actual, expected, what) {
  if (!same(actual, expected)) throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

function expectIncludes(actual, part, what) {
  if (typeof actual !== "string" || !actual.includes(part)) throw new Error(`${what}: expected ${JSON.stringify(actual)} to include ${JSON.stringify(part)}`);
}
