// End-to-end tests of the real Postern app window, driven over WebDriver under Xvfb.
// Run by scripts/test-app.sh, which builds the binaries and provides the X server and bus:
//
//   POSTERN_APP=target/debug/postern-app POSTERN_CLI=target/debug/postern node ui/e2e/app.e2e.mjs
//
// Every scenario uses its own temporary POSTERN_HOME, never the user's. A fresh home's engine
// starts locked with no passphrase: `withApp` first chooses one in the window's first-run step
// (passphrase.mjs), and the scenarios type it wherever the app asks for proof of presence.
// `postern` commands that need it run at a terminal (`posternAtTerminal`).

import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { agent, client, CLOCK } from "./agent.mjs";
import { approveInWindow, choosePassphrase, PASSPHRASE, posternAtTerminal, retryAfterMs, typeInto, unlockInWindow } from "./passphrase.mjs";
import { rebuildable } from "./rebuildable.mjs";
import { closeWindow, startTray } from "./tray.mjs";
import { alive, processes, Session, sleep, startDriver, until } from "./webdriver.mjs";

const app = resolve(need("POSTERN_APP"));
// The app names the CLI by its real path (a target directory may be a symlink).
const cli = realpathSync(resolve(need("POSTERN_CLI")));
const verbose = process.env.E2E_VERBOSE === "1";

const scenarios = {
  async "shows the configured servers and the running engine"({ home, work }) {
    postern(home, "server", "add", "time", "--", "uvx", "mcp-server-time");
    postern(home, "server", "add", "everything", "--cwd", work, "--", "npx", "-y", "@modelcontextprotocol/server-everything", "stdio");

    await withApp(home, async (s) => {
      await s.waitForTexts(".server-label", (labels) => same(labels, ["everything", "time"]));
      expectEqual(await s.texts(".pill"), ["Engine running"], "status pill");
      expectEqual(await s.texts(".server-cmd"), ["npx -y @modelcontextprotocol/server-everything stdio", "uvx mcp-server-time"], "commands");
      expectIncludes((await s.texts(".home code"))[0], home, "home path");

      // Configuration edited with the CLI reaches the window without a restart.
      postern(home, "server", "add", "notes", "--", "python3", "-m", "notes_server");
      await s.waitForTexts(".server-label", (labels) => same(labels, ["everything", "notes", "time"]), 8000);
      // Removing a server destroys configuration: the CLI asks for the passphrase on its terminal.
      const removed = await posternAtTerminal(cli, home, ["server", "remove", "time"]);
      expectIncludes(removed, "Postern passphrase: ", "the passphrase asked on the terminal");
      if (removed.includes(PASSPHRASE)) throw new Error(`the terminal echoed the passphrase: ${JSON.stringify(removed)}`);
      await s.waitForTexts(".server-label", (labels) => same(labels, ["everything", "notes"]), 8000);
    });
  },

  async "shows connected agent sessions, their server processes, epochs and catalogs"({ home, work }) {
    // A private copy of the fixture server, so the test can change its files while it runs.
    const dir = join(work, "clock");
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
        await s.waitForAttributes(".session .state", "data-state", (states) => same(states, ["catalog-ready"]));
        expectEqual(await s.texts(".session-server, .session-agent"), ["clock", "e2e-agent 1.2.3"], "session");
        const [pid] = await s.texts(".session .facts .pid");
        if (!/^\d+$/.test(pid)) throw new Error(`server pid: expected a number, got ${JSON.stringify(pid)}`);
        expectEqual(await s.texts(".server .running"), ["1 running"], "running count");

        // The epoch and catalog revision the engine reports (through the CLI) are the ones shown.
        const engine = posternStatus(home, "clock");
        // The launch by its number (the engine's), the epoch on hover.
        const [launchShort] = await s.texts(".session .facts .launch");
        const [epochTitle] = await s.attributes(".session .facts .launch", "title");
        expectIncludes(launchShort, `${engine.launch} · started `, "the launch by its number");
        expectIncludes(epochTitle, engine.epoch, "full epoch on hover");
        expectEqual(await s.texts(".session .state"), ["Ready · 1 tool"], "the state in words");
        expectEqual(await s.texts(".session .facts .revision"), [engine.revision.slice("sha256:".length, "sha256:".length + 12)], "catalog revision");
        expectEqual(await s.texts(".session .tool-count"), ["1 tool"], "tool count");
        expectEqual(await s.texts(".session .facts .identity"), [engine.identity.slice("sha256:".length, "sha256:".length + 12)], "identity digest");
        // No lockfile next to clock.py: the engine calls it partly pinned (clock.py is hashed, not
        // what it imports), and the window says so calmly, with what is and is not covered.
        expectEqual(await s.texts(".session .pin"), ["partly pinned"], "pinning badge");
        expectEqual(await s.texts(".session .pin-note"), [`Partly pinned: the digests cover ${engine.covered}, not ${engine.uncovered}.`], "pinning note");

        // The execution record opens on demand, and stays open while the status changes.
        await s.click(".session details.record summary");
        const record = await s.waitForTexts(".session .record-grid dd", (dds) => dds.length > 0 && dds[0] !== "");
        expectEqual(record[0], engine.epoch, "record: epoch");
        if (!record.some((dd) => dd.endsWith(entry))) throw new Error(`record: no entry ${entry} in ${JSON.stringify(record)}`);

        // A build lands: the running process keeps its epoch, and the window says its files are newer.
        writeFileSync(entry, `${readFileSync(entry, "utf8")}\n# rebuilt\n`);
        await s.waitForTexts(".session .newer .paths li", (paths) => same(paths, [entry]), 8000);
        expectIncludes((await s.texts(".session .newer .callout-title"))[0], "Files newer than the running process", "newer notice");
        expectEqual(await s.attributes(".session .facts .launch", "title"), [epochTitle], "epoch after the build (manual restart policy)");
        expectEqual(await s.attributes(".session details.record", "open"), ["true"], "record still open");

        // The agent leaves: its session leaves the window too.
        agents.pop().stdin.end();
        await s.waitForTexts(".panel-sessions .panel-head .muted", (t) => same(t, ["none connected"]), 8000);
      });
    } finally {
      for (const a of agents) a.stdin.end();
    }
  },

  // The engine's default session approval is `prompt`: the agent's first call opens one card
  // that asks about the agent run and the call together.
  async "approving a request in the approval window lets the agent's call through"({ home, work }) {
    addClock(home, work);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        agentClient = await client(cli, home, "clock", "e2e-agent");
        const answer = agentClient.call("now");

        await s.waitForWindow("approvals");
        await s.waitForTexts(".approval .server-name", (t) => same(t, ["clock"]));
        // The window's capability lets it follow the queue's pushes (tauri.conf.json).
        const listens = await s.execute(
          "const t = window.__TAURI_INTERNALS__; return t.invoke('plugin:event|listen', { event: 'approvals-changed', target: { kind: 'Any' }, handler: t.transformCallback(() => {}) }).then(() => 'allowed', (e) => String(e))",
        );
        expectEqual(listens, "allowed", "approvals-changed events in the approval window");
        // Its capability grants the queue, the answer and the lock, and nothing else: a script
        // in it cannot read credentials or add a server.
        const attempt = (cmd, args) =>
          s.execute(`return window.__TAURI_INTERNALS__.invoke(arguments[0], arguments[1]).then(() => 'allowed', (e) => String(e?.message ?? e))`, [cmd, args]);
        expectEqual(await attempt("approvals", {}), "allowed", "the queue from the approval window");
        for (const [cmd, args] of [
          ["credentials", {}],
          ["add_server", { server: {} }],
          ["update_settings", { change: {}, proof: null }],
          ["unlock", { proof: null }],
          ["set_passphrase", { passphrase: "not-from-here", proof: null }],
        ]) {
          expectIncludes(await attempt(cmd, args), "not allowed", `${cmd} from the approval window`);
        }
        expectEqual(await s.texts(".queue-pos"), ["1 of 1"], "queue position");
        expectEqual(await s.texts(".approval .tool-name"), ["now"], "tool");
        // The headline: the agent by its own name (its initialize), the tool, the server.
        expectEqual(await s.texts(".headline"), ["e2e-agent 1.0.0 wants to call now on clock"], "what is asked");
        // A first approval of a call without credentials has nothing to weigh: one calm line.
        expectEqual(await s.texts(".risks .risk"), [], "risk lines");
        expectIncludes((await s.texts(".calm"))[0], "Your first approval for clock", "the calm line");
        // The agent is this test's own process (node), which launched the shim: evidence,
        // folded in the details until asked for.
        await s.click(".forensics summary");
        expectEqual(await s.texts(".agent-pid"), [`· pid ${process.pid}`], "agent pid");
        expectIncludes((await s.texts(".agent-chain"))[0], "→ postern", "agent chain");
        expectEqual(await s.texts(".since"), ["No launch of this server was approved before."], "identity since");
        const [left] = await s.texts(".countdown-text");
        if (!/^expires in [12]:\d\d$/.test(left)) throw new Error(`countdown: got ${JSON.stringify(left)}`);
        expectEqual(await s.attributes(".lifetime", "data-choice"), ["thisCall", "forMinutes:15", "forMinutes:60", "untilRunEnds"], "lifetimes");
        expectEqual(await s.attributes(".lifetime", "aria-checked"), ["true", "false", "false", "false"], "the narrowest chosen");
        // The buttons take input a moment after the card appears. The chosen lifetime has the
        // focus; the passphrase is typed in its field, and Enter there allows.
        await s.waitForAttributes(".allow", "disabled", (d) => d.length === 1 && d[0] === null);
        const focused = await s.execute("const el = document.activeElement; return el ? el.dataset.choice : null");
        expectEqual(focused, "thisCall", "focused lifetime");
        // A wrong passphrase: the card stays, with the engine's message, the field emptied.
        await type(s, "input.passphrase", "not-the-passphrase\uE007");
        const [refused] = await s.waitForTexts(".answer-error", (t) => t.length === 1 && t[0] !== "");
        expectIncludes(refused.toLowerCase(), "passphrase", "the engine's refusal of a wrong passphrase");
        expectEqual(await s.texts(".approval .tool-name"), ["now"], "the card after a wrong passphrase");
        expectEqual(await s.execute("return document.querySelector('input.passphrase').value"), "", "the field after a wrong passphrase");
        // The right one, after the pause the engine asks for.
        await sleep(retryAfterMs(refused));
        await approveInWindow(s);

        const result = (await answer).result;
        if (result?.isError || !result?.content?.[0]?.text) throw new Error(`tools/call: expected the tool's result, got ${JSON.stringify(result)}`);

        // The queue emptied: the approval window closed itself.
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);
        expectEqual(await s.texts(".pill"), ["Engine running"], "status pill");
        expectEqual(await s.texts(".waiting"), [], "nothing waiting");
      });
    } finally {
      agentClient?.close();
    }
  },

  // Issue 18: the approval window at its own default size (560x720), over a rebuild whose
  // schema gained `target` (default `preview`): the headline, the arguments with the default
  // and the decision row show without scrolling, the risk strip says the code and the tool
  // changed, keys 1–4 choose how long, Enter leads to the passphrase and allows, Esc denies.
  async "the approval window shows a rebuild card's decision without scrolling, and answers from the keyboard"({ home, work }) {
    const publisher = rebuildable(join(work, "publisher"));
    postern(home, "server", "add", "publisher", "--cwd", publisher.app, "--writable", "..", "--env", `FIXTURE_EFFECTS=${publisher.effects}`,
      "--identity", "lib", "--restart", "on-change", "--", ".venv/bin/python", "-B", "server.py");
    let claude;
    try {
      await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.waitForTexts(".server-label", (l) => same(l, ["publisher"]));
        claude = await client(cli, home, "publisher", "claude-code", "2.1.3");
        const first = claude.call("publish_preview", { branch: "main" });
        await s.waitForWindow("approvals", 30_000);
        await approveInWindow(s);
        expectEqual((await first).result?.isError ?? false, false, "the first call, approved");
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);

        publisher.build("b-schema");
        await s.waitForTexts('[data-server="publisher"] .changes li', (t) => t.length > 0, 30_000);
        await s.waitForAttributes('[data-server="publisher"] .state', "data-state", (t) => same(t, ["catalog-ready"]), 30_000);
        await claude.request("tools/list", {});
        const second = claude.call("publish_preview", { branch: "main" }, 120_000);
        await s.waitForWindow("approvals", 30_000);
        await s.waitForAttributes(".allow", "disabled", (d) => same(d, [null]));

        // The window as the app opened it: its default width, scrolled to the top, and as tall
        // as the card (within the screen): nothing to scroll to.
        const size = await s.execute("return [window.innerWidth, document.scrollingElement.scrollTop]");
        expectEqual(size, [560, 0], "the approval window's width and scroll");
        // The window remembers whether its details were open (an earlier scenario may have
        // opened them in this webview profile): start folded.
        if (await s.execute("return document.querySelector('.forensics').open")) await s.click(".forensics summary");
        await until(
          async () => await s.execute("const d = document.documentElement; const card = document.querySelector('#app > .window').getBoundingClientRect().height; return d.scrollHeight <= window.innerHeight + 1 && window.innerHeight - card <= 40"),
          10_000,
          "the window to fit its card",
        );
        // Opening the details makes it taller, up to the screen.
        const before = await s.execute("return window.innerHeight");
        await s.click(".forensics summary");
        await until(async () => (await s.execute("return window.innerHeight")) > before, 10_000, "the window to grow with the details");
        const grown = await s.execute("return [window.innerHeight, screen.availHeight]");
        if (grown[0] > grown[1]) throw new Error(`the window outgrew the screen: ${grown}`);
        await s.click(".forensics summary");
        // Folded again, it fits the card again (at once, and twice more as the layout settles).
        await sleep(2000);
        await s.setWindowRect(560, 720);
        await until(async () => (await s.execute("return window.innerHeight")) === 720, 5000, "the default size");
        expectEqual(await s.texts(".headline"), ["claude-code 2.1.3 wants to call publish_preview on publisher"], "the headline");
        const kinds = await s.attributes(".risks .risk", "data-kind");
        expectEqual(kinds.slice(0, 2), ["codeChanged", "toolChanged"], "the risk strip, most severe first");
        const risks = await s.texts(".risks .risk");
        expectIncludes(risks[1], 'fills in target = "preview" by default', "the new default, in words");
        expectEqual(await s.texts('.args tr[data-pointer="/target"] .arg-default'), ["default"], "the default, marked");
        // Everything a decision needs is inside the window without scrolling.
        const unseen = await s.execute(`
          const h = window.innerHeight;
          return ['.headline', '.args tr[data-pointer="/target"]', '.risks', '.lifetimes', '.covers', 'input.passphrase', '.decide-buttons .allow', '.decide-buttons .deny']
            .filter((css) => { const r = document.querySelector(css)?.getBoundingClientRect(); return !r || r.top < 0 || r.bottom > h; });`);
        expectEqual(unseen, [], "parts of the decision outside the window");
        // At the window's minimum size (420x480) the headline, the arguments and the decision
        // row still show without scrolling.
        await s.setWindowRect(420, 480);
        await until(async () => (await s.execute("return window.innerHeight")) === 480, 5000, "the minimum size");
        const unseenSmall = await s.execute(`
          const h = window.innerHeight, w = window.innerWidth;
          return ['.headline', '.args tr[data-pointer="/target"]', '.lifetimes', 'input.passphrase', '.decide-buttons .allow', '.decide-buttons .deny']
            .filter((css) => { const r = document.querySelector(css)?.getBoundingClientRect(); return !r || r.top < 0 || r.bottom > h || r.right > w; });`);
        expectEqual(unseenSmall, [], "parts of the decision outside the window at its minimum size");
        await s.setWindowRect(560, 720);

        // Keys: 3 chooses an hour and says so; 1 goes back to this call; Enter with nothing
        // typed takes the person to the passphrase; the passphrase and Enter allow.
        await s.sendKeys(".lifetime.checked", "3");
        expectEqual(await s.attributes(".lifetime", "aria-checked"), ["false", "false", "true", "false"], "after 3");
        expectIncludes((await s.texts(".covers"))[0], "For 1 hour", "what an hour covers");
        await s.sendKeys(".lifetime.checked", "1");
        expectEqual(await s.attributes(".lifetime", "aria-checked"), ["true", "false", "false", "false"], "after 1");
        expectIncludes((await s.texts(".covers"))[0], "Allows this one call", "what this call covers");
        await s.sendKeys(".lifetime.checked", "\uE007");
        expectEqual(await s.execute("return document.activeElement?.classList.contains('passphrase') ?? false"), true, "Enter leads to the passphrase");
        await approveInWindow(s);
        const allowed = (await second).result;
        if (allowed?.isError) throw new Error(`the rebuilt call, allowed: ${JSON.stringify(allowed)}`);

        // This call only: the next one asks again, and Esc denies it.
        const third = claude.call("publish_preview", { branch: "main" }, 120_000);
        await s.waitForWindow("approvals", 30_000);
        await s.waitForAttributes(".allow", "disabled", (d) => same(d, [null]));
        await answerWithKey(s, ".lifetime.checked", "\uE00C");
        expectEqual((await third).result?.structuredContent?.error, "approval_denied", "the call after Esc");
      });
    } finally {
      claude?.close();
    }
  },

  // Issue 18 item 5: a grant made in the approval window is on the Permissions page, under
  // the agent's own name, and on its session card; Revoke ends it, and the agent's next
  // identical call asks again.
  async "permissions: a grant made in the approval window is listed, and Revoke makes the next call ask again"({ home, work }) {
    addClock(home, work);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        agentClient = await client(cli, home, "clock", "e2e-agent", "2.1.3");
        const allowed = await callGranted(s, agentClient, "forMinutes:15");
        if (allowed?.isError || !allowed?.content?.[0]?.text) throw new Error(`the first call: expected the tool's result, got ${JSON.stringify(allowed)}`);
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);

        // The session card says what its agent may do, and until when.
        const [line] = await s.waitForTexts(".session .allowed", (t) => t.length === 1 && t[0].startsWith("allowed: "));
        if (!/^allowed: now on clock until (\d{4}-\d\d-\d\d )?\d\d:\d\d$/.test(line)) throw new Error(`the session card's line: got ${JSON.stringify(line)}`);

        // The Permissions page: the agent by its own name, the grant in words.
        await s.click(".tab-permissions");
        await s.waitForTexts(".run-agent", (t) => same(t, ["e2e-agent 2.1.3"]));
        const [what] = await s.texts(".grant .grant-what");
        if (!/^now on clock until (\d{4}-\d\d-\d\d )?\d\d:\d\d \(1[45] min left\)$/.test(what)) throw new Error(`the grant: got ${JSON.stringify(what)}`);
        const engine = posternStatus(home, "clock");
        const [launch] = await s.attributes(".grant .grant-launch", "title");
        expectIncludes(launch, engine.epoch, "the grant's launch is the running epoch");
        expectIncludes((await s.texts(".grant .grant-launch"))[0], `launch ${engine.launch} · started `, "the grant's launch by its number");
        // Covered: the same call goes through without asking.
        const covered = (await agentClient.call("now", {}, 15_000)).result;
        if (covered?.isError) throw new Error(`a call under the grant: expected the tool's result, got ${JSON.stringify(covered)}`);
        expectEqual(await s.texts(".waiting"), [], "nothing waiting under the grant");

        // Revoking narrows: no passphrase.
        await s.click(".grant .revoke");
        await s.waitForTexts(".nothing-granted", (t) => same(t, ["Nothing is granted: each call asks you."]));
        expectEqual(await s.texts(".proof-dialog"), [], "no dialog for a revoke");
        expectIncludes(postern(home, "grants"), "no live grants", "the engine's grants");

        // The agent's next identical call asks again: a new approval appears.
        const next = agentClient.call("now");
        await s.waitForTexts(".waiting", (t) => same(t, ["1 waiting"]));
        await s.waitForWindow("approvals");
        await s.waitForTexts(".approval .tool-name", (t) => same(t, ["now"]));
        await s.waitForAttributes(".deny", "disabled", (d) => same(d, [null]));
        await answerWithKey(s, ".allow", "\uE00C");
        expectEqual((await next).result?.structuredContent?.error, "approval_denied", "the call after the revoke");
      });
    } finally {
      agentClient?.close();
    }
  },

  // The real tray menu, in trayer (tray.mjs): Deny in a request's submenu answers the agent;
  // Approve there opens the approval window, where the passphrase approves; Lock vault locks
  // the window, and Unlock vault shows its locked screen, where the passphrase unlocks.
  async "the tray menu denies waiting requests, sends approvals to the window, and locks and unlocks the vault"({ home, work }) {
    addClock(home, work);
    const tray = await startTray();
    let agentClient;
    try {
      await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        await tray.waitForIcon();
        agentClient = await client(cli, home, "clock", "e2e-agent");
        // Through the tray's menu: "1 request waiting" (a note), the request's submenu holding
        // Approve and Deny, Review…, Lock vault, Open Postern, Quit.
        // The agent's call, waiting in the approval window (wrapped: an async function
        // returning the call's promise would wait for its answer).
        const waiting = async () => {
          const answer = agentClient.call("now");
          await s.waitForWindow("approvals");
          await s.switchToWindow(main);
          await s.waitForTexts(".waiting", (t) => same(t, ["1 waiting"]));
          return { answer };
        };

        // Deny: the agent is told at once.
        const { answer: denial } = await waiting();
        await tray.openMenu();
        await tray.keys("Down", "Right", "Down", "Return");
        const denied = (await denial).result;
        expectEqual(denied?.structuredContent?.error, "approval_denied", "a request denied from the tray");
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);

        // Approve: a click cannot prove a person is there, so the tray opens the approval
        // window and the call waits until the passphrase is typed in it.
        const { answer: approval } = await waiting();
        await tray.openMenu();
        await tray.keys("Down", "Right", "Return");
        const early = await Promise.race([approval.then(() => "answered", () => "answered"), sleep(2000).then(() => "waiting")]);
        expectEqual(early, "waiting", "the call after Approve in the tray, before the passphrase");
        await s.waitForTexts(".waiting", (t) => same(t, ["1 waiting"]));
        await s.waitForWindow("approvals");
        await approveInWindow(s);
        const approved = (await approval).result;
        if (approved?.isError || !approved?.content?.[0]?.text) throw new Error(`a request approved through the tray: expected the tool's result, got ${JSON.stringify(approved)}`);
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);
        await s.waitForTexts(".waiting", (t) => t.length === 0);

        // A flagged request (every use of now asked for): its submenu offers Review…, never a
        // one-step Approve…: it opens the approval window on that request with its details
        // open, and the call waits for the person there.
        postern(home, "every-use", "on", "--server", "clock", "--tool", "now");
        const { answer: flagged } = await waiting();
        await tray.openMenu();
        await tray.keys("Down", "Right", "Return");
        await s.waitForWindow("approvals");
        await s.waitForAttributes(".risks .risk", "data-kind", (k) => k.includes("everyUse"));
        await until(async () => (await s.execute("return document.querySelector('.forensics')?.open ?? false")) === true, 10_000, "Review… to open the details");
        const reviewed = await Promise.race([flagged.then(() => "answered", () => "answered"), sleep(1000).then(() => "waiting")]);
        expectEqual(reviewed, "waiting", "the flagged call after Review… in the tray");
        await answerWithKey(s, ".allow", "\uE00C");
        expectEqual((await flagged).result?.structuredContent?.error, "approval_denied", "the flagged call, denied in the window");
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);
        await s.waitForTexts(".waiting", (t) => t.length === 0);

        // With nothing waiting, the menu starts with Lock vault.
        await tray.openMenu();
        await tray.keys("Down", "Return");
        await s.waitForTexts(".locked h2", (t) => same(t, ["Postern is locked"]));
        const refused = (await agentClient.call("now")).result;
        expectEqual(refused?.structuredContent?.error, "vault_locked", "a call after the tray's lock");

        // Locked, the menu starts with Unlock vault: it shows the window's locked screen, and
        // unlocks nothing by itself.
        await tray.openMenu();
        await tray.keys("Down", "Return");
        await sleep(1000);
        expectEqual(await s.texts(".pill"), ["Locked"], "after Unlock vault in the tray, before the passphrase");
        await unlockInWindow(s);
        await s.waitForTexts(".pill", (t) => same(t, ["Engine running"]));
      });
    } finally {
      agentClient?.close();
      await tray.stop();
    }
  },

  // A menu-bar app lives all day with its window closed. Closing the window (as a window
  // manager's close button does) ends the window process and its web process, and with them
  // most of the app's memory; the engine keeps serving from the tray (the resident process),
  // a new window process waits on standby (its libraries loaded, nothing of GTK or WebKit
  // started), and the tray's Open Postern opens the window in it, showing what changed while
  // it was closed. Quit still ends the app with no window open, the one on standby with it.
  async "closing the window ends its window process; the tray opens it again on the current state, and Quit ends the app"({ home, work }) {
    addClock(home, work);
    const tray = await startTray();
    let agentClient;
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        await tray.waitForIcon();
        const shown = webProcesses();
        if (shown.length === 0) throw new Error("no web process under the app while its window shows");

        const drew = windowProcesses(s.driver);
        expectEqual(drew.length, 1, "window processes drawing the window");
        await closeWindow("Postern");
        await until(() => webProcesses().length === 0 && !alive(drew[0]), 10_000, "the closed window's processes to end");
        expectEqual(await s.windowHandles(), [], "window handles after closing");
        expectEqual(residents().length, 1, "resident processes, no window open");
        await until(() => onStandby(s.driver).length === 1, 10_000, "a window process on standby");
        expectEqual(windowProcesses(s.driver), [], "window processes drawing a window, none open");
        const standby = onStandby(s.driver);

        // Closed, the engine still serves: an agent connects, and a server is added.
        agentClient = await client(cli, home, "clock", "e2e-agent");
        postern(home, "server", "add", "notes", "--", "python3", "-m", "notes_server");

        // With nothing waiting, the menu's second item is Open Postern.
        await tray.openMenu();
        await tray.keys("Down", "Down", "Return");
        await s.waitForWindow("main");
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock", "notes"]));
        await s.waitForAttributes(".session .state", "data-state", (states) => same(states, ["catalog-ready"]));
        expectEqual(await s.texts(".session-server, .session-agent"), ["clock", "e2e-agent 1.0.0"], "the session that connected while the window was closed");
        if (webProcesses().length !== 1) throw new Error(`web processes after reopening: ${JSON.stringify(webProcesses())}`);
        expectEqual(windowProcesses(s.driver), standby, "the window process drawing the reopened window (the one on standby)");

        // And the reopened window works: the agent's call asks, and the answer lets it through.
        const answer = agentClient.call("now");
        await s.waitForWindow("approvals");
        await approveInWindow(s);
        const result = (await answer).result;
        if (result?.isError || !result?.content?.[0]?.text) throw new Error(`the call approved after reopening: ${JSON.stringify(result)}`);

        // With no window open, Quit in the tray (its last item) still ends the app.
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await closeWindow("Postern");
        await until(() => webProcesses().length === 0 && !alive(standby[0]), 10_000, "the window's processes to end again");

        // Started again (its icon clicked), the app asks the running one for its window: no
        // second resident, no second tray icon.
        const again = s.driver.launch(app);
        await s.waitForWindow("main");
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock", "notes"]));
        await until(() => again.exitCode !== null, 10_000, "the second start to end");
        expectEqual(again.exitCode, 0, "the second start's exit code");
        expectEqual(residents().length, 1, "resident processes after starting the app again");
        const drawing = windowProcesses(s.driver);
        expectEqual(drawing.length, 1, "window processes drawing the window after the second start");
        await closeWindow("Postern");
        await until(() => !alive(drawing[0]), 10_000, "the window process to end once more");
        await until(() => onStandby(s.driver).length === 1, 10_000, "a window process on standby before Quit");
        const waiting = onStandby(s.driver);

        const apps = residents();
        expectEqual(apps.length, 1, "resident processes");
        await tray.openMenu();
        await tray.keys("Up", "Return");
        await until(() => !processes().some(([pid]) => pid === apps[0][0]), 15_000, "the app to quit");
        await until(() => !alive(waiting[0]), 5000, "the window process on standby to end with the app");
        expectEqual(appWindowProcesses(s.driver), [], "window processes after Quit");
      });
    } finally {
      agentClient?.close();
      await tray.stop();
    }
  },

  async "denying a request refuses the call with approval_denied"({ home, work }) {
    addClock(home, work);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        agentClient = await client(cli, home, "clock", "e2e-agent");
        const answer = agentClient.call("now");

        // The main window says a request waits.
        await s.waitForTexts(".waiting", (t) => same(t, ["1 waiting"]));
        await s.waitForWindow("approvals");
        await s.waitForAttributes(".deny", "disabled", (d) => same(d, [null]));
        // Escape denies the request shown.
        await answerWithKey(s, ".allow", "\uE00C");

        const result = (await answer).result;
        expectEqual(result?.isError, true, "isError");
        expectEqual(result?.structuredContent?.error, "approval_denied", "refusal code");
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
      });
    } finally {
      agentClient?.close();
    }
  },

  async "settings, lock and unlock from the window: a locked vault refuses calls and shows nothing"({ home, work }) {
    addClock(home, work);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));

        // Session approval set to observe in the Settings panel: calls run without a card.
        await s.click(".tab-settings");
        await s.waitForTexts(".settings-form h2", (t) => same(t, ["Settings"]));
        expectEqual(await s.attributes('input[name="approvalTimeout"]', "value"), ["120"], "approval timeout shown");
        await s.click('input[name="sessionMode"][value="observe"]');
        await s.click(".settings-form .save");
        // Observe mode widens: the window asks "Confirm it's you" first, and saves nothing until then.
        await s.waitForTexts(".proof-dialog h2", (t) => same(t, ["Confirm it's you"]));
        expectIncludes(postern(home, "settings"), "session approval: prompt", "the engine's settings before the proof");
        await type(s, ".proof-dialog input.passphrase", PASSPHRASE);
        await s.click(".proof-dialog .prove");
        await s.waitForTexts(".settings-form .form-status", (t) => same(t, ["Saved"]));
        expectEqual(await s.texts(".proof-dialog"), [], "the dialog after the proof");
        expectIncludes(postern(home, "settings"), "session approval: observe", "the engine's settings");
        await s.click(".tab-overview");

        agentClient = await client(cli, home, "clock", "e2e-agent");
        const first = (await agentClient.call("now", {}, 15_000)).result;
        if (first?.isError) throw new Error(`observe mode: expected the tool's result, got ${JSON.stringify(first)}`);
        await s.waitForAttributes(".session .state", "data-state", (t) => same(t, ["catalog-ready"]));

        await s.click(".lock-button");
        await s.waitForTexts(".locked h2", (t) => same(t, ["Postern is locked"]));
        expectEqual(await s.texts(".pill"), ["Locked"], "status pill");
        // Only the locked screen: no server, session, path or tab.
        expectEqual(await s.texts(".server-label, .session, .tabs, .home code, .foot"), [], "nothing from the vault");
        const page = (await s.texts("body"))[0];
        for (const hidden of ["clock", home]) {
          if (page.includes(hidden)) throw new Error(`the locked window shows ${JSON.stringify(hidden)}: ${JSON.stringify(page)}`);
        }
        const locked = (await agentClient.call("now", {}, 15_000)).result;
        expectEqual(locked?.structuredContent?.error, "vault_locked", "refusal while locked");

        // Unlock asks for the passphrase: a wrong one is refused and said, the right one unlocks.
        await type(s, ".locked input.passphrase", "not-the-passphrase\uE007");
        const [refused] = await s.waitForTexts(".unlock-error", (t) => t.length === 1 && t[0] !== "");
        expectIncludes(refused.toLowerCase(), "passphrase", "the engine's refusal of a wrong passphrase");
        expectEqual(await s.texts(".pill"), ["Locked"], "still locked");
        await sleep(retryAfterMs(refused));
        await unlockInWindow(s);
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        expectEqual(await s.texts(".pill"), ["Engine running"], "status pill after unlock");
        const again = (await agentClient.call("now", {}, 15_000)).result;
        if (again?.isError) throw new Error(`after unlock: expected the tool's result, got ${JSON.stringify(again)}`);
      });
    } finally {
      agentClient?.close();
    }
  },

  // (d) First run: an empty home shows the guide; a server added in its form is configured,
  // an agent configuration found in the user's home is offered for import, the snippet names
  // the absolute path of the `postern` CLI, and the agent's first call opens the approval window.
  async "first run with an empty home: the guide adds a server, imports one, and shows the first gated call"({ home, work }) {
    const user = join(home, "user");
    mkdirSync(user, { recursive: true });
    // Claude Code's own configuration, as it writes it (other settings beside the servers).
    const claudeJson = join(user, ".claude.json");
    const original = `${JSON.stringify({ numStartups: 3, mcpServers: { notes: { type: "stdio", command: "python3", args: ["-m", "notes_server"], env: { NOTES_TOKEN: "e2e-env-value" } }, web: { type: "http", url: "https://example.com/mcp" } } }, null, 2)}\n`;
    writeFileSync(claudeJson, original);
    const dir = join(work, "clock");
    mkdirSync(dir);
    copyFileSync(CLOCK, join(dir, "clock.py"));
    let agentClient;
    try {
      await withApp(home, async (s) => {
        // Before anything else: the passphrase, with why, and nothing else on the window.
        await s.waitForTexts(".choose-passphrase h2", (t) => same(t, ["Choose a Postern passphrase"]), 30_000);
        expectEqual(await s.texts(".welcome, .tabs, .lock-button, .locked"), [], "only the passphrase step");
        expectEqual(await s.texts(".pill"), ["No passphrase yet"], "status pill");
        const [why] = await s.texts(".passphrase-why");
        for (const said of ["a person, not an agent, approves", "every approval, every unlock", "never stored in the clear", "new Postern home"]) {
          expectIncludes(why, said, "why a passphrase");
        }
        expectEqual(await s.attributes("input.passphrase-new, input.passphrase-again", "type"), ["password", "password"], "password fields");
        // A passphrase too short, and two that differ, are caught in the window.
        const attempt = async (first, again) => {
          await type(s, "input.passphrase-new", first);
          await type(s, "input.passphrase-again", again);
          await s.click("button.set-passphrase");
        };
        await attempt("short", "short");
        await s.waitForTexts(".choose-passphrase .form-status", (t) => same(t, ["A passphrase has at least 8 characters."]));
        await attempt(PASSPHRASE, `${PASSPHRASE}-not`);
        await s.waitForTexts(".choose-passphrase .form-status", (t) => same(t, ["The two passphrases differ: type the same one twice."]));
        expectEqual(await s.execute("return [...document.querySelectorAll('input')].map((i) => i.value).join('')"), "", "the fields after a refusal");
        await choosePassphrase(s);

        await s.waitForTexts(".welcome h2", (t) => same(t, ["Welcome to Postern"]));
        expectEqual(await s.texts(".server-label, .session"), [], "nothing configured yet");
        expectIncludes((await s.texts(".demo-command"))[0], "demo", "the demo hint");

        // The agent configuration under the user's home is offered, with the entry that cannot be imported said why.
        await s.waitForTexts(".import-source .import-title", (t) => t.length === 1 && t[0].startsWith("Claude Code"));
        expectEqual(await s.texts(".import-entry .entry-name"), ["notes", "web"], "entries");
        expectIncludes((await s.texts(".import-entry.skipped .entry-skip"))[0], "remote", "the remote entry is skipped");
        const page = await s.execute("return document.documentElement.outerHTML");
        if (page.includes("e2e-env-value")) throw new Error("an environment value from the agent's configuration reached the window");

        // Step 1 by hand: the form.
        await type(s, '.add-server-form input[name="label"]', "clock");
        await type(s, '.add-server-form input[name="command"]', "python3");
        await type(s, '.add-server-form input[name="args"]', "clock.py");
        await type(s, '.add-server-form input[name="cwd"]', dir);
        await s.click(".add-server-form .add-server");
        await s.waitForTexts(".guide-note", (t) => t.length === 1 && t[0].startsWith("Added clock"));
        expectIncludes(postern(home, "server", "list"), "clock\tpython3 clock.py", "configured through the store");

        // And by import.
        await s.click(".import-source .import");
        await s.waitForTexts(".guide-note", (t) => t.length === 1 && t[0].startsWith("Imported notes"));
        expectIncludes(postern(home, "server", "list"), "notes\tpython3 -m notes_server", "imported");
        // Its NOTES_TOKEN came in plain text, as the file had it: Move to keychain (with the
        // passphrase) makes it a credential bound to notes, gone from the server's configuration.
        await s.waitForTexts(".plain-secret-list li", (t) => t.length === 1 && t[0].startsWith("NOTES_TOKEN of notes"));
        await s.click(".move-to-keychain");
        await confirmInDialog(s, "Move NOTES_TOKEN of notes into the keychain.");
        await s.waitForTexts(".guide-note", (t) => t.length === 1 && t[0].includes("is in the keychain now"));
        expectEqual(await s.texts(".plain-secrets"), [], "nothing left in plain text");
        expectIncludes(postern(home, "credential", "list"), "notes-notes_token", "the credential");
        const notesLine = postern(home, "server", "list").split("\n").find((l) => l.startsWith("notes\t"));
        expectEqual(notesLine, "notes\tpython3 -m notes_server  [confined]", "notes without its plain variable");

        // Step 2: the snippet runs this checkout's `postern` by its absolute path, on this
        // (non-default) home: an agent does not inherit the app's POSTERN_HOME.
        const [snippet] = await s.waitForTexts(".agent-snippet", (t) => t.length === 1 && t[0].includes("notes"));
        const servers = JSON.parse(snippet).mcpServers;
        expectEqual(Object.keys(servers), ["clock", "notes"], "snippet labels");
        expectEqual(servers.clock, { command: cli, args: ["--home", home, "mcp", "clock"] }, "snippet for clock");

        // Step 2 for Claude Code itself: how much of it goes through Postern, then Rewire, with a
        // preview of each change and a backup of the file as it was.
        expectEqual(await s.texts(".rewire-source .coverage"), ["0 of 2 servers through Postern; web is remote, not gated; notes runs directly."], "coverage before");
        await s.click(".rewire-preview");
        await s.waitForTexts(".rewire-changes del", (t) => same(t, ["python3 -m notes_server"]));
        expectEqual(await s.texts(".rewire-changes ins"), [`${cli} --home ${home} mcp notes`], "the entry after");
        expectEqual(readFileSync(claudeJson, "utf8"), original, "the file before the person says so");
        await s.click(".rewire-apply");
        await s.waitForTexts(".rewire-source .coverage", (t) => same(t, ["1 of 2 servers through Postern; web is remote, not gated."]));
        const [rewired] = await s.texts(".rewired");
        const backup = rewired.match(/kept at (\S+)\./)?.[1];
        expectEqual(backup !== undefined && readFileSync(backup, "utf8") === original, true, `the backup ${backup}`);
        const now = JSON.parse(readFileSync(claudeJson, "utf8"));
        expectEqual(now.numStartups, 3, "Claude Code's other settings");
        expectEqual(now.mcpServers.notes, { type: "stdio", command: cli, args: ["--home", home, "mcp", "notes"] }, "the rewired entry");
        expectEqual(now.mcpServers.web, { type: "http", url: "https://example.com/mcp" }, "the remote entry, untouched");

        // Step 3: the first gated call arrives, in the approval window.
        agentClient = await client(cli, home, "clock", "e2e-agent");
        await s.waitForTexts(".call-state", (t) => t.length === 1 && t[0].startsWith("An agent is connected to clock"));
        const main = await s.windowHandle();
        const answer = agentClient.call("now");
        await s.waitForWindow("approvals");
        await s.waitForTexts(".approval .tool-name", (t) => same(t, ["now"]));
        await s.switchToWindow(main);
        await s.waitForTexts(".call-waiting p", (t) => t.length === 1 && t[0].startsWith("A call is waiting"));
        await s.waitForWindow("approvals");
        await s.waitForAttributes(".deny", "disabled", (d) => same(d, [null]));
        await answerWithKey(s, ".allow", "\uE00C");
        expectEqual((await answer).result?.structuredContent?.error, "approval_denied", "the agent's answer");
      }, { HOME: user }, { choose: false });
    } finally {
      agentClient?.close();
    }
  },

  // (a) A credential added in the Credentials view is listed, and its value is nowhere in the
  // page afterwards: not in the markup, not in any field.
  async "a credential added in the Credentials view is listed, its value nowhere in the page"({ home, work }) {
    addClock(home, work);
    const value = `e2e-secret-${process.pid}-${Date.now()}`;
    await withApp(home, async (s) => {
      await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
      await s.click(".tab-credentials");
      await s.waitForTexts(".credentials .empty-line", (t) => t.length === 1 && t[0].startsWith("No credentials yet"));
      await type(s, '.add-credential-form input[name="name"]', "clock-api");
      await type(s, '.add-credential-form input[name="envVar"]', "CLOCK_TOKEN");
      await type(s, '.add-credential-form input[name="value"]', value);
      await s.click('.add-credential-form input[name="everyUse"]');
      await s.click(".add-credential-form .add-credential");
      // Adding a credential widens: the window asks for the passphrase first.
      await confirmInDialog(s, "Add the credential clock-api.");

      await s.waitForTexts(".credential-name", (t) => same(t, ["clock-api"]));
      expectEqual(await s.texts(".credential .kind"), ["env CLOCK_TOKEN"], "kind");
      expectEqual(await s.texts(".credential .every-use"), ["every use"], "every-use flag");
      expectIncludes((await s.texts(".credential-version"))[0], "v1", "version");
      const leaked = (v) =>
        s.execute(
          "const v = arguments[0]; return document.documentElement.outerHTML.includes(v) || [...document.querySelectorAll('input, textarea')].some((i) => i.value.includes(v))",
          [v],
        );
      expectEqual(await leaked(value), false, "the value anywhere in the page");
      expectEqual(await leaked(PASSPHRASE), false, "the passphrase anywhere in the page");
      expectIncludes(postern(home, "credential", "list"), "clock-api", "the engine has it");

      // Bound to the server from the view, then unbound.
      await s.click('.credential[data-name="clock-api"] .bind');
      await confirmInDialog(s, "Bind the credential clock-api to clock.");
      await s.waitForTexts(".credential .bound code", (t) => same(t, ["clock"]));
      // Unbinding only narrows: no passphrase.
      await s.click('.credential .bound .unbind');
      await s.waitForTexts(".credential .unbound", (t) => same(t, ["no server"]));
      expectEqual(await s.texts(".proof-dialog"), [], "no dialog for an unbind");
    });
  },

  // (b) Restart in the Servers view: the server's process gets a new execution epoch, shown there.
  async "the Servers view shows a restarted server's new epoch after clicking Restart"({ home, work }) {
    addClock(home, work);
    const agents = [];
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        agents.push(agent(cli, home, "clock", "e2e-agent"));
        await s.click(".tab-servers");
        await s.waitForAttributes('.server-card[data-label="clock"] .session .state', "data-state", (t) => same(t, ["catalog-ready"]), 20_000);
        const before = epochOf(home, "clock");
        expectEqual(await s.attributes(".server-card .session .record .epoch-full", "class"), ["epoch-full"], "the record is there");
        const [shown] = await s.attributes(".server-card .session .facts .launch", "title");
        expectIncludes(shown, before, "the epoch shown before");
        expectEqual(await s.texts(".server-card .server-state"), ["1 running"], "state summary");

        await s.click('.server-card[data-label="clock"] .restart-button');
        await s.waitForTexts(".restart-note", (t) => same(t, ["Restarting 1 process of clock: each gets a new execution epoch."]));
        const [after] = await s.waitForAttributes(
          ".server-card .session .facts .launch",
          "title",
          (t) => t.length === 1 && t[0] !== null && !t[0].includes(before),
          20_000,
        );
        await s.waitForAttributes(".server-card .session .state", "data-state", (t) => same(t, ["catalog-ready"]), 20_000);
        const engine = epochOf(home, "clock");
        expectIncludes(after, engine, "the new epoch is the engine's");
        // The server's second launch, by number.
        const [launch] = await s.texts(".server-card .session .facts .launch");
        if (!launch.startsWith("2 · started ")) throw new Error(`the restarted launch: expected launch 2, got ${JSON.stringify(launch)}`);

        // Adding a server is on this view too, not only in the first-run guide. (A repaint
        // landing on the click can leave the form folded: it is opened until it stays open.)
        await until(async () => {
          const [open] = await s.attributes(".add-servers", "open");
          if (open !== null && open !== undefined) return true;
          await s.click(".add-servers summary");
          return false;
        }, 10_000, "the add-server form to open");
        await type(s, '.add-servers input[name="label"]', "clock-two");
        await type(s, '.add-servers input[name="command"]', "python3");
        await type(s, '.add-servers input[name="args"]', "clock.py");
        await s.click(".add-servers .add-server");
        await s.waitForAttributes(".server-card", "data-label", (l) => same(l, ["clock", "clock-two"]), 15_000).catch(async (err) => {
          // What the form said (a refusal, a field it found empty) is the first thing to read.
          throw new Error(`${err.message}; the form said ${JSON.stringify(await s.texts(".add-servers .form-status"))}`);
        });
        expectIncludes(postern(home, "server", "list"), "clock-two\tpython3 clock.py", "added from the Servers view");
      });
    } finally {
      for (const a of agents) a.stdin.end();
    }
  },

  // (c) A rebuild under `--restart on-change`: the bundled demo server, whose identity is its
  // revision file. A call, a rebuild, another call: the timeline shows the session's lane with
  // the two epochs as bands, a rebuild mark between them, and a mark opens its audit record.
  async "the timeline shows the session lane with the rebuild's two epochs"({ home, work }) {
    const revision = join(work, "revision.txt");
    writeFileSync(revision, "1\n");
    postern(home, "server", "add", "deploy", "--restart", "on-change", "--identity", revision, "--", cli, "demo-server", "--revision-file", revision);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["deploy"]));
        // Calls run without a card: this scenario is about what the timeline shows. Observe
        // mode widens: the CLI asks for the passphrase on its terminal.
        await posternAtTerminal(cli, home, ["settings", "--session-mode", "observe"]);
        expectIncludes(postern(home, "settings"), "session approval: observe", "the engine's settings");
        agentClient = await client(cli, home, "deploy", "e2e-agent");
        const first = (await agentClient.call("status", {}, 20_000)).result;
        expectEqual(first?.content?.[0]?.text, "revision 1", "the first call");
        const epochA = epochOf(home, "deploy");

        writeFileSync(revision, "2\n");
        await until(() => {
          const now = epochOf(home, "deploy");
          return now !== null && now !== epochA;
        }, 20_000, "the rebuild's new epoch");
        await until(() => postern(home, "server", "status", "deploy").includes("catalog-ready"), 20_000, "the new epoch's catalog");
        const epochB = epochOf(home, "deploy");
        const second = (await agentClient.call("status", {}, 20_000)).result;
        expectEqual(second?.content?.[0]?.text, "revision 2", "the second call");

        await s.click(".tab-timeline");
        await s.waitForAttributes(".timeline .lane", "data-lane", (t) => t.length === 1, 15_000);
        const bands = await s.waitForAttributes(".timeline .lane .band", "data-epoch", (t) => t.length === 2, 15_000);
        expectEqual(bands, [epochA, epochB], "the lane's epoch bands");
        const calls = await s.waitForAttributes(".timeline .lane .mark-call", "data-seq", (t) => t.length === 2, 15_000);
        expectEqual((await s.attributes(".timeline .lane .mark-rebuild", "data-kind")).length, 1, "one rebuild mark");

        // A mark opens its audit record.
        await s.execute("document.querySelector('.timeline .mark-call').dispatchEvent(new MouseEvent('click', { bubbles: true }))");
        await s.waitForTexts(".timeline .entry .panel-head h2", (t) => same(t, [`Audit record #${calls[0]}`]));
        await s.waitForTexts(".timeline .entry .entry-kind", (t) => t.length === 1 && t[0] !== "");
        // One sentence above the record; its JSON folded under it.
        const [sentence] = await s.waitForTexts(".timeline .entry .entry-summary", (t) => t.length === 1);
        expectIncludes(sentence, "e2e-agent 1.0.0 called status on deploy", "the record's sentence");
        expectIncludes(sentence, "allowed by observe mode", "the record's sentence says how");
        await s.click(".timeline .entry .entry-details summary");
        const [body] = await s.waitForTexts(".timeline .entry .entry-body", (t) => t.length === 1 && t[0] !== "");
        expectIncludes(body, "status", "the record's body names the tool");

        // The lane's label leads to the session's Activity.
        await s.execute("document.querySelector('.timeline .lane-label').dispatchEvent(new MouseEvent('click', { bubbles: true }))");
        await s.waitForTexts(".activity-row .col-tool", (t) => same(t, ["status", "status"]));
        expectEqual(await s.texts(".activity-row .col-decision"), ["observed", "observed"], "decisions");
        const epochs = await s.attributes(".activity-row .col-epoch .launch", "title");
        // Launches by number, as the Servers view says them.
        expectEqual(await s.texts(".activity-row .col-epoch"), ["launch 2", "launch 1"], "each call's launch");
        expectEqual(epochs, [epochB, epochA], "each call's epoch, newest first");
      });
    } finally {
      agentClient?.close();
    }
  },

  // Issue 18 item 8: labels are placed by their width as the webview draws them (measured in
  // it, not estimated from their characters), so on a busy lane no two overlap.
  async "timeline: on a busy lane no two labels overlap, as the webview draws them"({ home, work }) {
    addClock(home, work);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        agentClient = await client(cli, home, "clock", "e2e-agent");
        // A tool the server lacks is refused at once, nobody asked (unknown_tool): a refusal
        // mark with its code for a label. Unevenly spaced, so that labels crowd each other.
        const gaps = [0, 150, 400, 150, 900, 300, 150, 600, 250, 1200, 150, 450, 100, 700];
        for (const gap of gaps) {
          await sleep(gap);
          const refused = (await agentClient.call("no_such_tool", {}, 15_000)).result;
          expectEqual(refused?.structuredContent?.error, "unknown_tool", "a call to a tool the server lacks");
        }
        await s.click(".tab-timeline");
        await s.waitForAttributes(".timeline .lane .mark-refusal", "data-seq", (t) => t.length === gaps.length, 15_000);
        const labels = await s.execute(`return [...document.querySelectorAll(".timeline .timeline-svg:not(.measure-probe) text.mark-label, .timeline .timeline-svg:not(.measure-probe) text.band-label, .timeline .timeline-svg:not(.measure-probe) text.tick-label")].map((t) => {
          const r = t.getBoundingClientRect();
          return { text: t.textContent, lane: t.closest(".lane")?.getAttribute("data-lane") ?? "axis", x0: r.left, x1: r.right, y0: r.top, y1: r.bottom };
        });`);
        const codes = labels.filter((l) => l.text === "unknown_tool");
        if (codes.length < 2) throw new Error(`a busy lane writes more than one code: ${JSON.stringify(labels)}`);
        if (codes.length === gaps.length) throw new Error(`crowded codes are left out: ${JSON.stringify(codes)}`);
        for (const [i, a] of labels.entries()) {
          for (const b of labels.slice(i + 1)) {
            if (a.lane !== b.lane) continue;
            if (a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1) throw new Error(`labels overlap as drawn: ${JSON.stringify(a)} and ${JSON.stringify(b)}`);
          }
        }
      });
    } finally {
      agentClient?.close();
    }
  },

  // Issue 18 item 8: Activity says who called (the agent by its own name) and how each call
  // was allowed: a grant given in the approval window (its lifetime in words, and that you
  // approved it), a call under it, a call you denied; the "Asked you" quick filter keeps the
  // two you were asked about, a row's record leads with one sentence, and the timeline draws
  // the two waits for you.
  async "activity: each call's agent and how it was allowed, quick filters, and the waits on the timeline"({ home, work }) {
    addClock(home, work);
    let agentClient;
    try {
      await withApp(home, async (s) => {
        const main = await s.windowHandle();
        await s.waitForTexts(".server-label", (labels) => same(labels, ["clock"]));
        agentClient = await client(cli, home, "clock", "e2e-agent", "2.1.3");
        if ((await callGranted(s, agentClient, "forMinutes:15"))?.isError) throw new Error("the first call was refused");
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);
        const covered = (await agentClient.call("now", {}, 15_000)).result;
        if (covered?.isError) throw new Error(`a call under the grant: got ${JSON.stringify(covered)}`);
        // Revoked (Permissions), so that the next call asks again; denied with Esc.
        await s.click(".tab-permissions");
        await s.waitForTexts(".run-agent", (t) => same(t, ["e2e-agent 2.1.3"]));
        await s.click(".grant .revoke");
        await s.waitForTexts(".nothing-granted", (t) => t.length === 1);
        const denied = agentClient.call("now");
        await s.waitForWindow("approvals");
        await s.waitForAttributes(".deny", "disabled", (d) => same(d, [null]));
        await answerWithKey(s, ".allow", "\uE00C");
        expectEqual((await denied).result?.structuredContent?.error, "approval_denied", "the third call");
        await until(async () => (await s.windowHandles()).length === 1, 10_000, "the approval window to close");
        await s.switchToWindow(main);

        await s.click(".tab-activity");
        const agents = await s.waitForTexts(".activity-row .col-agent", (t) => t.length === 3);
        for (const a of agents) expectIncludes(a, "e2e-agent 2.1.3", "each row's agent");
        const how = await s.texts(".activity-row .col-how");
        // Where you answered, from the audit log: the approval window, both times.
        expectEqual(how[0], "you denied it in the approval window", "the denied call");
        expectEqual(how[1], "your grant · 15 min", "the call the grant covered");
        if (!/^your grant · 15 min · you approved in the approval window after \d+(\.\d)? (ms|s)$/.test(how[2])) throw new Error(`the call you approved: got ${JSON.stringify(how[2])}`);
        // The table fits the window: it scrolls sideways inside its own box (whose scrollbar is
        // on screen), never the page, and the live session card shows the same number.
        const fit = await s.execute(`const box = document.querySelector(".activity-rows").getBoundingClientRect();
          return { page: document.documentElement.scrollWidth, width: innerWidth, right: box.right, box: box.height, height: innerHeight };`);
        if (fit.page > fit.width || fit.right > fit.width || fit.box > fit.height) throw new Error(`the Activity table does not fit the window: ${JSON.stringify(fit)}`);
        const sessions = await s.texts(".activity-row .col-session");
        expectEqual(new Set(sessions).size, 1, "one session number for the three rows");
        // The live session's card on the Overview says the same number.
        await s.click(".tab-overview");
        await s.waitForTexts(".session .session-number", (t) => same(t, [`session ${sessions[0]}`]), 15_000);
        await s.click(".tab-activity");
        await s.waitForTexts(".activity-row .col-agent", (t) => t.length === 3);

        // Quick filter: the calls you were asked about. (A repaint landing on the click can
        // lose it, as it did once: the chip is clicked until its click reached the filter form,
        // which it sets at once; the chip shows pressed only once the rows are in.)
        const asked = `return document.querySelector("form.activity-filter").elements.namedItem("decision").value;`;
        await until(async () => {
          if ((await s.execute(asked)) === "asked") return true;
          await s.click(".quick-asked");
          return false;
        }, 10_000, "the Asked-you chip's click to reach the filter");
        await s.waitForTexts(".activity-row .col-how", (t) => t.length === 2 && t[0] === "you denied it in the approval window");
        expectEqual(await s.attributes(".quick-asked", "aria-pressed"), ["true"], "the chip is pressed");
        // A row's record leads with a sentence, even before it is unfolded.
        await s.execute("document.querySelector('.activity-row:last-child').dispatchEvent(new MouseEvent('click', { bubbles: true }))");
        const [sentence] = await s.waitForTexts(".activity .entry .entry-summary", (t) => t.length === 1);
        if (!/^e2e-agent 2\.1\.3 called now on clock \(launch .+\), allowed by your grant · 15 min \(you approved in the approval window after .+\); it returned after .+\.$/.test(sentence)) {
          throw new Error(`the record's sentence: got ${JSON.stringify(sentence)}`);
        }
        await s.waitForTexts(".quick-agent", (t) => same(t, [`This agent: e2e-agent 2.1.3 (session ${sessions[0]})`]));

        // The timeline: one lane named by the agent, with its two waits for you.
        await s.click(".tab-timeline");
        await s.waitForTexts(".timeline .lane-title", (t) => same(t, ["e2e-agent 2.1.3"]), 15_000);
        const waits = await s.waitForAttributes(".timeline .wait", "class", (t) => t.length === 2, 15_000);
        expectEqual(waits, ["wait wait-granted", "wait wait-denied"], "the waits for you");
      });
    } finally {
      agentClient?.close();
    }
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
      }, {}, { choose: false });
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
  // Servers' own files live outside the Postern home, which a confined server cannot see.
  const work = mkdtempSync(join(tmpdir(), "postern-e2e-work-"));
  const started = Date.now();
  try {
    await run({ home, work });
    passed += 1;
    console.log(`  ok    ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    failed.push(name);
    console.log(`  FAIL  ${name}\n        ${String(err?.stack ?? err).replaceAll("\n", "\n        ")}`);
  } finally {
    rmSync(home, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}
console.log(`\napp e2e: ${passed} passed, ${failed.length} failed`);
process.exit(failed.length === 0 && passed > 0 ? 0 : 1);

// --- helpers ---------------------------------------------------------------------------------

/**
 * Opens the app on `home` in a WebDriver session, chooses the passphrase in its first-run step
 * (unless `choose` is false: the scenario does, or no engine runs in the app), runs `body`,
 * then closes everything.
 */
async function withApp(home, body, env = {}, { choose = true } = {}) {
  const driver = await startDriver({
    env: { POSTERN_HOME: home, RUST_LOG: verbose ? "debug" : "warn", ...env },
    log: verbose ? (line) => process.stderr.write(line) : undefined,
  });
  let session;
  try {
    session = await createSession(driver);
    if (choose) await choosePassphrase(session);
    await body(session);
  } catch (err) {
    if (!verbose) err.message += `\n--- WebKitWebDriver and app output ---\n${driver.output().slice(-3000)}`;
    throw err;
  } finally {
    await session?.delete();
    await driver.stop();
  }
}

/**
 * A WebDriver session on a new app. Under Xvfb the app now and then fails to open the display
 * at start ("Failed to initialize GTK"): that start is tried once more, and said; any other
 * failure, or a second one, is the test's.
 */
async function createSession(driver) {
  try {
    return await Session.create(driver, app);
  } catch (err) {
    if (!driver.output().includes("Failed to initialize GTK")) throw err;
    console.log("  (the app could not open the X display; starting it once more)");
    return Session.create(driver, app);
  }
}

/**
 * Confirms a widening act in the "Confirm it's you" dialog: it must name `action`; the
 * passphrase is typed there, and the dialog closes once the engine took it.
 */
async function confirmInDialog(s, action) {
  await s.waitForTexts(".proof-dialog h2", (t) => same(t, ["Confirm it's you"]));
  expectIncludes((await s.texts(".proof-dialog"))[0], action, "what the dialog asks about");
  await type(s, ".proof-dialog input.passphrase", PASSPHRASE);
  await s.click(".proof-dialog .prove");
  await s.waitForTexts(".proof-dialog", (t) => t.length === 0);
}

/**
 * Answers the request shown in the approval window with the grant `choice` (its button's
 * `data-choice`: "thisCall", "forMinutes:15", "forMinutes:60", "untilRunEnds"), the passphrase
 * typed first as the proof. The Permissions scenario's one step in the approval window: adapt
 * it here when that window changes.
 */
async function grantInApprovalWindow(s, choice) {
  await s.waitForAttributes(".allow", "disabled", (d) => d.length > 0 && d.every((v) => v === null));
  await s.click(`.lifetime[data-choice="${choice}"]`);
  await type(s, "input.passphrase", PASSPHRASE);
  await s.click(".allow").catch((err) => {
    // The answer empties the queue and the window closes, perhaps before the click returns.
    if (!String(err.message).includes("no such window")) throw err;
  });
}

/** The agent calls clock's `now`; the approval window grants it with `choice`. Returns the call's result. */
async function callGranted(s, agentClient, choice) {
  const call = agentClient.call("now");
  await s.waitForWindow("approvals");
  await s.waitForTexts(".approval .tool-name", (t) => same(t, ["now"]));
  await grantInApprovalWindow(s, choice);
  return (await call).result;
}

function type(s, css, text) {
  return typeInto(s, css, text);
}

/**
 * Types `key` into the approval window. The answer empties the queue, and the window may close
 * before the driver reports the keystroke done: that is the expected outcome, not a failure.
 */
async function answerWithKey(s, css, key) {
  await s.sendKeys(css, key).catch((err) => {
    if (!String(err.message).includes("no such window")) throw err;
  });
}

/** Configures `clock`, a private copy of the fixture server kept in `work`, on `home`; returns its entry file. */
function addClock(home, work) {
  const dir = join(work, "clock");
  mkdirSync(dir);
  const entry = join(dir, "clock.py");
  copyFileSync(CLOCK, entry);
  postern(home, "server", "add", "clock", "--cwd", dir, "--", "python3", "clock.py");
  return entry;
}

/** The test's app's window processes (`postern-app`: drawing a window, or on standby). */
function appWindowProcesses(driver) {
  return driver.appProcesses().filter(([, p]) => p.comm === "postern-app").map(([pid]) => pid);
}

/** The test's app's window processes drawing a window (WebKit's processes run under them). */
function windowProcesses(driver) {
  const all = processes();
  return appWindowProcesses(driver).filter((pid) => all.some(([, p]) => p.ppid === pid && p.comm.startsWith("WebKit")));
}

/** The test's app's window processes on standby (no WebKit process under them). */
function onStandby(driver) {
  const drawing = windowProcesses(driver);
  return appWindowProcesses(driver).filter((pid) => !drawing.includes(pid));
}

/** The resident processes running (`postern-desk`: the engine and the tray). */
function residents() {
  return processes().filter(([, p]) => p.comm === "postern-desk");
}

/** The pids of the WebKit web processes (a window's page) under a running postern-app. */
function webProcesses() {
  const procs = new Map(processes());
  return [...procs].filter(([, p]) => p.comm.startsWith("WebKitWebProces") && procs.get(p.ppid)?.comm === "postern-app").map(([pid]) => pid);
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
    launch: find(/running epoch \S+ {2}pid \d+ {2}launch (\d+)/, "launch number"),
    identity: find(/identity (sha256:\S+)/, "identity"),
    revision: find(/catalog (sha256:\S+)/, "catalog revision"),
    covered: out.match(/partly pinned: covers (.+?), not /)?.[1] ?? null,
    uncovered: out.match(/partly pinned: covers .+?, not (.+)/)?.[1] ?? null,
  };
}

/** The running epoch of the first session of `label`, as `postern server status` prints it (null when none runs). */
function epochOf(home, label) {
  return postern(home, "server", "status", label).match(/running epoch (\S+)/)?.[1] ?? null;
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
