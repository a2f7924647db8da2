// The app's memory at rest, and how fast its windows come back. Starts the real app (its window
// process read through WebKitWebDriver) on a fresh home with three servers configured and two
// agents connected (so two server processes run), lets it settle, and reads the resident set of
// every process of the app (the resident process `postern-desk`, the window process
// `postern-app` and the WebKit processes it started: web content, network) from /proc: once
// with the status window open, once after closing it (as a window manager's close button does;
// the window process ends with it, and a new one waits on standby) and letting it settle again. The MCP servers' own processes are listed apart:
// they are the servers' memory, not Postern's. Then, with the window closed: how long the
// tray's Open Postern takes to show the current state (both servers' lists and both sessions),
// five times; and how long a request takes to show its card in the approval window, three
// times. The baseline, measured the same way in the same run: the same engine with no window,
// `postern daemon`, on a home configured alike. Prints figures only (docs/benchmarks.md).
//
// Linux, under a display and a bus with an unlocked keyring (the engine keeps its audit key in
// the OS keychain), with trayer, xdotool and WebKitWebDriver installed, e.g. from the
// repository root:
//
//   dbus-run-session -- sh -c 'printf x | gnome-keyring-daemon --unlock --components=secrets >/dev/null;
//     POSTERN_APP=target/release/postern-app POSTERN_CLI=target/debug/postern xvfb-run -a node ui/e2e/idle-memory.mjs
//
// (`postern-desk` must be built beside `postern-app`: the window process starts it.)'

import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

import { client, CLOCK } from "./agent.mjs";
import { choosePassphrase, posternAtTerminal } from "./passphrase.mjs";
import { closeWindow, startTray } from "./tray.mjs";
import { processes, Session, sleep, startDriver, until } from "./webdriver.mjs";

const app = resolve(process.env.POSTERN_APP ?? "target/debug/postern-app");
const cli = resolve(process.env.POSTERN_CLI ?? "target/debug/postern");
const settleMs = Number(process.env.SETTLE_MS ?? 15_000);
/** How long the harness waits, idle, after a click before it looks at the window it opened. */
const QUIET_MS = 3000;

/** A fresh home with three servers configured. */
function configured() {
  // The servers' files beside the Postern home (a confined server cannot see into it).
  const root = mkdtempSync(join(tmpdir(), "postern-memory-"));
  const home = join(root, "home");
  mkdirSync(home);
  const postern = (...args) => execFileSync(cli, ["--home", home, ...args], { encoding: "utf8" });
  mkdirSync(join(root, "clock"));
  copyFileSync(CLOCK, join(root, "clock", "clock.py"));
  const revision = join(root, "revision.txt");
  writeFileSync(revision, "1\n");
  postern("server", "add", "clock", "--cwd", join(root, "clock"), "--", "python3", "clock.py");
  postern("server", "add", "deploy", "--restart", "on-change", "--identity", revision, "--", cli, "demo-server", "--revision-file", revision);
  postern("server", "add", "time", "--", "uvx", "mcp-server-time");
  return home;
}

/** The memory of the app's processes (resident, window process, WebKit's below it); the rest below them are servers. */
function sampleApp(driver) {
  const roots = driver.appProcesses().filter(([, p]) => p.comm === "postern-desk" || p.comm === "postern-app").map(([pid]) => pid);
  return sample(roots);
}

/** The memory of the processes `roots` and the WebKit processes below them; the rest below them are servers. */
function sample(roots) {
  const all = [...new Set(roots.flatMap((pid) => [pid, ...descendants(pid)]))];
  const rows = all.flatMap((p) => {
    try {
      return [{ pid: p, ...usage(p) }];
    } catch {
      return []; // Gone meanwhile.
    }
  });
  const ours = rows.filter((r) => roots.includes(r.pid) || r.comm.startsWith("WebKit"));
  return { ours, servers: rows.filter((r) => !ours.includes(r)) };
}

/** The app, open then closed, and its windows' times; the tray must be up before it starts. */
async function measureApp() {
  const home = configured();
  const driver = await startDriver({ env: { POSTERN_HOME: home, RUST_LOG: "warn" } });
  const agents = [];
  let s;
  try {
    s = await Session.create(driver, app);
    await choosePassphrase(s);
    agents.push(await client(cli, home, "clock", "memory-agent"), await client(cli, home, "deploy", "memory-agent"));
    await sleep(settleMs);
    const open = sampleApp(driver);

    // With its last window, the window process ends (and its web processes with it), and a
    // new one waits on standby: counted with the app's processes, as it is one of them.
    const closeMain = async () => {
      const drew = sampleApp(driver).ours.filter((r) => r.comm === "postern-app").map((r) => r.pid);
      await closeWindow("Postern");
      await until(() => {
        const ours = sampleApp(driver).ours;
        return !ours.some((r) => drew.includes(r.pid) || r.comm.startsWith("WebKit")) && ours.some((r) => r.comm === "postern-app");
      }, 10_000, "the window process to end and another to wait on standby");
    };
    await closeMain();
    await sleep(settleMs);
    const closed = sampleApp(driver);

    // The current state: three servers, both sessions with their catalogs.
    const current = "return document.querySelectorAll('.server-label').length === 3 && document.querySelectorAll('.session .state[data-state=\"catalog-ready\"]').length === 2";
    // Times are read from the page itself: when it started (`performance.timeOrigin`) and when
    // it painted what the harness then found (the window's last paint mark, PAINT_MARK in
    // ui/src/dom.ts), against the wall clock at the tray's click: attaching WebDriver to a new
    // window process takes the harness a while, and that is not the window's time.
    // The first paint of `what` (a mark's detail), as wall-clock ms.
    const painted = (what) => s.execute("const m = performance.getEntriesByName('postern:paint').find((m) => m.detail === arguments[0]); return m === undefined ? null : performance.timeOrigin + m.startTime", [what]);
    const reopen = [];
    const reopenPage = [];
    for (let i = 0; i < 5; i++) {
      if (i > 0) await closeMain();
      await tray.openMenu();
      await tray.keys("Down", "Down");
      const started = Date.now();
      tray.press("Return");
      // The harness keeps off the CPU while the window starts (2 cores): it looks afterwards.
      await sleep(QUIET_MS);
      await until(async () => {
        for (const handle of await s.windowHandles()) {
          await s.switchToWindow(handle);
          if (await s.execute(current).catch(() => false)) return true;
        }
        return false;
      }, 10_000, "the reopened window to show the current state");
      reopen.push((await painted("running")) - started);
      reopenPage.push((await s.execute("return performance.timeOrigin")) - started);
    }
    await closeMain();

    // A request arrives with no window open: its card in the approval window.
    const approval = [];
    const approvalWindow = [];
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const answer = agents[0].call("now");
      await sleep(QUIET_MS);
      await until(async () => {
        for (const handle of await s.windowHandles()) {
          await s.switchToWindow(handle);
          if (await s.execute("return document.querySelector('.approval .tool-name')?.textContent === 'now'").catch(() => false)) return true;
        }
        return false;
      }, 10_000, "the approval window to show the card");
      const id = await s.execute("return document.querySelector('.approval')?.getAttribute('data-approval')");
      approval.push((await painted(id)) - started);
      approvalWindow.push((await s.execute("return performance.timeOrigin")) - started);
      // Denied from the keyboard (Escape), once the window takes answers.
      await s.waitForAttributes(".allow", "disabled", (d) => d.length > 0 && d.every((v) => v === null));
      await s.sendKeys(".allow", "\uE00C").catch(() => {});
      await answer;
      await until(async () => (await s.windowHandles()).length === 0, 10_000, "the approval window to close");
    }
    return { open, closed, reopen, reopenPage, approval, approvalWindow };
  } finally {
    for (const a of agents) a.close();
    await s?.delete().catch(() => {});
    await driver.stop();
    rmSync(dirname(home), { recursive: true, force: true });
  }
}

/** `postern daemon` on a home configured alike, with the same two agents. */
async function measureDaemon() {
  const home = configured();
  const child = spawn(cli, ["--home", home, "daemon"], { env: { ...process.env, POSTERN_HOME: home, RUST_LOG: "warn" }, stdio: "ignore" });
  const agents = [];
  try {
    await until(() => existsSync(join(home, "run", "engine.sock")), 60_000, "the daemon's engine");
    // A fresh home's engine starts locked with no passphrase: choose one (which unlocks), as
    // a person would at a terminal, so the agents' servers start.
    await posternAtTerminal(cli, home, ["passphrase"]);
    agents.push(await client(cli, home, "clock", "memory-agent"), await client(cli, home, "deploy", "memory-agent"));
    await sleep(settleMs);
    return sample([child.pid]);
  } finally {
    for (const a of agents) a.close();
    child.kill("SIGTERM");
    await Promise.race([new Promise((r) => child.once("exit", r)), sleep(5000)]);
    rmSync(dirname(home), { recursive: true, force: true });
  }
}

const tray = await startTray();
let appRun;
try {
  appRun = await measureApp();
} finally {
  await tray.stop();
}
const daemonRun = await measureDaemon();
const sum = (rows, key) => rows.reduce((n, r) => n + r[key], 0);
const [d] = daemonRun.ours;
console.log(`postern-app memory at rest: ${app}`);
console.log(`3 servers configured, 2 agents connected, ${settleMs / 1000} s after start and again ${settleMs / 1000} s after closing the window\n`);
for (const [title, run] of [["window open", appRun.open], ["window closed", appRun.closed]]) {
  console.log(`${title}:\n`);
  console.log("| process | RSS | peak RSS (VmHWM) | PSS |");
  console.log("|---|---:|---:|---:|");
  for (const r of run.ours) console.log(`| ${r.comm} | ${mb(r.rss)} | ${mb(r.hwm)} | ${mb(r.pss)} |`);
  console.log(`| **the app, total** | **${mb(sum(run.ours, "rss"))}** | | **${mb(sum(run.ours, "pss"))}** |`);
  console.log(`| baseline: \`postern daemon\` (${cli}) | ${mb(d.rss)} | ${mb(d.hwm)} | ${mb(d.pss)} |\n`);
  console.log(`the app / the daemon, ${title}: ${(sum(run.ours, "rss") / d.rss).toFixed(1)}x RSS, ${(sum(run.ours, "pss") / d.pss).toFixed(1)}x PSS (goal with the window closed: <= 4x RSS)\n`);
}
const ms = (list) => list.map((t) => `${Math.round(t)} ms`).join(", ");
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
console.log(`reopening from the tray to the current state painted: ${ms(appRun.reopen)} (median ${Math.round(median(appRun.reopen))} ms; goal <= 400 ms; the page started after ${ms(appRun.reopenPage)})`);
console.log(`a request to its card painted in the approval window, no window open: ${ms(appRun.approval)} (median ${Math.round(median(appRun.approval))} ms; the page started after ${ms(appRun.approvalWindow)})`);
console.log(`MCP server processes (not Postern's): ${appRun.open.servers.map((r) => `${r.comm} ${mb(r.rss)}`).join(", ") || "none"}`);
process.exit(0);

/** Every process below `pid`. */
function descendants(pid) {
  const all = processes();
  const out = [];
  const walk = (p) => {
    for (const [child, { ppid }] of all) {
      if (ppid === p) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

/** A process's name and memory, in kB. */
function usage(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (text, name) => Number(text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, "m"))?.[1] ?? 0);
  let pss = 0;
  try {
    pss = field(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"), "Pss");
  } catch {
    // Not readable here.
  }
  return { comm: status.match(/^Name:\s+(.*)$/m)?.[1] ?? "?", rss: field(status, "VmRSS"), hwm: field(status, "VmHWM"), pss };
}

function mb(kb) {
  return `${(kb / 1024).toFixed(1)} MiB`;
}
