// The app's idle memory: starts the real app on a fresh home with a few servers configured and
// two agents connected (so two server processes run), lets it settle, and reads the resident
// set of the app process and of the WebKit processes it started (the web content and network
// processes) from /proc. The MCP servers' own processes are listed apart: they are the servers'
// memory, not Postern's. The baseline, measured the same way in the same run: the same engine
// with no window, `postern daemon`, on a home configured alike. Prints figures only
// (docs/benchmarks.md).
//
// Linux, under a display and a bus with an unlocked keyring (the engine keeps its audit key in
// the OS keychain), e.g. from the repository root:
//
//   dbus-run-session -- sh -c 'printf x | gnome-keyring-daemon --unlock --components=secrets >/dev/null;
//     POSTERN_APP=target/debug/postern-app POSTERN_CLI=target/debug/postern xvfb-run -a node ui/e2e/idle-memory.mjs'

import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

import { client, CLOCK } from "./agent.mjs";
import { posternAtTerminal } from "./passphrase.mjs";
import { sleep, until } from "./webdriver.mjs";

const app = resolve(process.env.POSTERN_APP ?? "target/debug/postern-app");
const cli = resolve(process.env.POSTERN_CLI ?? "target/debug/postern");
const settleMs = Number(process.env.SETTLE_MS ?? 15_000);

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

/** Starts `program args` on a configured home, connects two agents, lets it settle; its processes' memory. */
async function measure(program, args) {
  const home = configured();
  const child = spawn(program, args(home), { env: { ...process.env, POSTERN_HOME: home, RUST_LOG: "warn" }, stdio: "ignore" });
  const agents = [];
  try {
    await until(() => existsSync(join(home, "run", "engine.sock")), 60_000, `${program}'s engine`);
    // A fresh home's engine starts locked with no passphrase: choose one (which unlocks), as
    // a person would at a terminal, so the agents' servers start.
    await posternAtTerminal(cli, home, ["passphrase"]);
    agents.push(await client(cli, home, "clock", "memory-agent"), await client(cli, home, "deploy", "memory-agent"));
    await sleep(settleMs);
    const rows = [child.pid, ...descendants(child.pid)].map((pid) => ({ pid, ...usage(pid) }));
    const ours = rows.filter((r) => r.pid === child.pid || r.comm.startsWith("WebKit"));
    return { ours, servers: rows.filter((r) => !ours.includes(r)) };
  } finally {
    for (const a of agents) a.close();
    child.kill("SIGTERM");
    await Promise.race([new Promise((r) => child.once("exit", r)), sleep(5000)]);
    rmSync(dirname(home), { recursive: true, force: true });
  }
}

const appRun = await measure(app, () => []);
const daemonRun = await measure(cli, (home) => ["--home", home, "daemon"]);
const sum = (rows, key) => rows.reduce((n, r) => n + r[key], 0);
console.log(`postern-app idle memory: ${app}`);
console.log(`3 servers configured, 2 agents connected, ${settleMs / 1000} s after start\n`);
console.log("| process | RSS | peak RSS (VmHWM) | PSS |");
console.log("|---|---:|---:|---:|");
for (const r of appRun.ours) console.log(`| ${r.comm} | ${mb(r.rss)} | ${mb(r.hwm)} | ${mb(r.pss)} |`);
console.log(`| **the app, total** | **${mb(sum(appRun.ours, "rss"))}** | | **${mb(sum(appRun.ours, "pss"))}** |`);
const [d] = daemonRun.ours;
console.log(`| baseline: \`postern daemon\` (${cli}) | ${mb(d.rss)} | ${mb(d.hwm)} | ${mb(d.pss)} |`);
console.log(`\nthe app / the daemon (RSS): ${(sum(appRun.ours, "rss") / d.rss).toFixed(1)}x`);
console.log(`MCP server processes (not Postern's): ${appRun.servers.map((r) => `${r.comm} ${mb(r.rss)}`).join(", ") || "none"}`);
process.exit(0);

/** Every process below `pid` (Linux: from /proc). */
function descendants(pid) {
  const parent = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  const out = [];
  const walk = (p) => {
    for (const [child, ppid] of parent) {
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
