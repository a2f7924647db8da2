import { beforeEach, describe, expect, it, vi } from "vitest";
import indexHtml from "../index.html?raw";

import type { EngineView } from "./bindings";
import { server, session, status } from "./fixtures/status";
import { inertControls, render, type Shown } from "./view";

const NOW = new Date(2026, 10, 29, 15, 30).getTime();

function show(view: EngineView | Shown): HTMLElement {
  const shown: Shown = "kind" in view ? view : { kind: "view", view };
  const root = render(shown, NOW);
  document.body.replaceChildren(root);
  return root;
}

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

beforeEach(() => document.body.replaceChildren());

describe("a running engine", () => {
  const twoServers = status({
    servers: [
      server({ label: "everything", command: ["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"], cwd: "/srv/mcp", running: 2 }),
      server({ label: "time", command: ["uvx", "mcp-server-time"] }),
    ],
  });

  it("lists every configured server with its command, directory and running count", () => {
    const root = show({ state: "running", status: twoServers });

    expect(all(root, ".server-label")).toEqual(["everything", "time"]);
    expect(all(root, ".server-cmd")).toEqual(["npx -y @modelcontextprotocol/server-everything stdio", "uvx mcp-server-time"]);
    expect(text(root.querySelector('[data-label="everything"] .server-cwd'))).toBe("in /srv/mcp");
    expect(root.querySelector('[data-label="time"] .server-cwd')).toBeNull();
    expect(all(root, ".server .running")).toEqual(["2 running", "idle"]);
    expect(all(root, ".panel-servers .panel-head > *")).toEqual(["Servers", "2 servers"]);
  });

  it("says the engine runs and where its home and socket are", () => {
    const root = show({ state: "running", status: twoServers });

    expect(text(root.querySelector(".pill"))).toBe("Engine running");
    expect(text(root.querySelector(".home"))).toBe("Home /home/ada/.local/share/postern");
    expect(text(root.querySelector(".foot"))).toContain("/home/ada/.local/share/postern/run/engine.sock");
  });

  it("shows connected agent sessions, one card each, with the state in words and by the contract's name", () => {
    const connected = new Date(2026, 10, 29, 15, 18).getTime();
    const root = show({
      state: "running",
      status: {
        ...twoServers,
        sessions: [
          session({ id: "#1", server: "time", client: "claude-code 2.1.0", connectedAtMs: connected, serverPid: 4242 }),
          session({ id: "#2", server: "everything", connectedAtMs: connected, state: "starting" }),
          session({ id: "#3", server: "time", connectedAtMs: connected, state: "identityPending", serverPid: 4300 }),
          session({ id: "#4", server: "time", connectedAtMs: connected, state: "stopped", lastExit: "exit status 1" }),
        ],
      },
    });

    const cards = [...root.querySelectorAll("ul.sessions > li.session")];
    expect(cards.map((li) => li.getAttribute("data-session"))).toEqual(["#1", "#2", "#3", "#4"]);
    expect(all(root, ".session-server")).toEqual(["time", "everything", "time", "time"]);
    expect(all(root, ".session-agent")).toEqual(["claude-code 2.1.0", "unnamed agent", "unnamed agent", "unnamed agent"]);
    expect(all(root, ".session .state")).toEqual(["Ready", "Starting…", "Reading its tools…", "Stopped"]);
    expect([...root.querySelectorAll(".session .state")].map((el) => el.getAttribute("data-state"))).toEqual(["catalog-ready", "starting", "identity-pending", "stopped"]);
    expect(all(root, ".session .pid")).toEqual(["4242", "—", "4300", "—"]);
    expect(all(root, ".session-since")).toEqual(Array(4).fill("15:18 · 12 min ago"));
    expect(root.querySelector('[data-session="#3"] .state')?.getAttribute("title")).toBe(
      "identity-pending: a new launch: requests are held until Postern has read its tools",
    );
    expect(root.querySelector('[data-session="#4"] .state')?.getAttribute("title")).toBe(
      "stopped: not running: an agent's next call starts it, as a new launch (last exit: exit status 1)",
    );
    expect(all(root, ".panel-sessions .panel-head > *")).toEqual(["Agent sessions", "4 connected"]);
  });

  it("without sessions, shows how to connect an agent to the first server", () => {
    const root = show({ state: "running", status: twoServers });

    expect(root.querySelector("ul.sessions")).toBeNull();
    expect(text(root.querySelector(".empty-sessions"))).toContain("No agent is connected");
    expect(JSON.parse(text(root.querySelector(".empty-sessions .snippet")))).toEqual({
      mcpServers: { everything: { command: "postern", args: ["mcp", "everything"] } },
    });
  });

  it("renders labels and commands as text, never as markup", () => {
    const root = show({
      state: "running",
      status: status({ servers: [server({ label: "x", command: ["<img src=x onerror=alert(1)>"] })] }),
    });

    expect(root.querySelector("img")).toBeNull();
    expect(text(root.querySelector(".server-cmd"))).toBe("'<img src=x onerror=alert(1)>'");
  });
});

describe("a new user", () => {
  it("gets the first-run guide instead of empty lists (src/firstrun.test.ts covers it)", () => {
    const root = show({ state: "running", status: status() });

    expect(text(root.querySelector(".welcome h2"))).toBe("Welcome to Postern");
    expect(root.querySelector(".panel-servers")).toBeNull();
    expect(root.querySelector(".choose-passphrase")).toBeNull();
  });

  it("chooses a passphrase before anything else, and sees nothing from the vault meanwhile", () => {
    const configured = status({ servers: [server({ label: "secret-server" })], sessions: [session({ id: "#7", server: "secret-server" })] });
    const root = show({ state: "running", status: { ...configured, gate: { ...configured.gate, vault: "locked", passphraseSet: false } } });

    expect(all(root, "h2")).toEqual(["Choose a Postern passphrase"]);
    expect(text(root.querySelector(".pill"))).toBe("No passphrase yet");
    expect(root.querySelectorAll("input.passphrase-new, input.passphrase-again, button.set-passphrase")).toHaveLength(3);
    expect(root.querySelector(".locked, .tabs, .lock-button, .welcome")).toBeNull();
    for (const secret of ["secret-server", "#7", "/home/ada", "engine.sock"]) {
      expect(root.textContent).not.toContain(secret);
    }
  });

  it("sets it through the guide's controls", () => {
    const setPassphrase = vi.fn(async () => {});
    const controls = inertControls();
    const root = render(
      { kind: "view", view: { state: "running", status: status({ gate: { ...status().gate, vault: "locked", passphraseSet: false } }) } },
      NOW,
      { tab: "overview", controls: { ...controls, guide: { ...controls.guide, setPassphrase } } },
    );
    document.body.replaceChildren(root);
    root.querySelector<HTMLInputElement>(".passphrase-new")!.value = "a long enough one";
    root.querySelector<HTMLInputElement>(".passphrase-again")!.value = "a long enough one";
    root.querySelector<HTMLButtonElement>(".set-passphrase")!.click();

    expect(setPassphrase).toHaveBeenCalledWith("a long enough one");
  });
});

describe("settings changed behind the engine's back", () => {
  const warned = (vault: "ready" | "locked") =>
    status({ gate: { ...status().gate, vault, configWarning: "settings changed in the database were not applied: session_mode = observe" } });

  it.each(["ready", "locked"] as const)("are a warning on the %s window", (vault) => {
    const root = show({ state: "running", status: warned(vault) });

    expect(text(root.querySelector(".config-warning"))).toBe("Settings not applied. settings changed in the database were not applied: session_mode = observe");
    // No live region: the window is drawn again every minute, and would announce it again.
    expect(root.querySelector(".config-warning")?.getAttribute("role")).toBeNull();
  });

  it("are no warning when there are none", () => {
    expect(show({ state: "running", status: status() }).querySelector(".config-warning")).toBeNull();
  });
});

describe("requests the egress broker refused", () => {
  const leaked = () =>
    status({
      gate: {
        ...status().gate,
        leaks: [{ server: "ci", credentials: ["deploy-token"], host: "evil.example", atMs: NOW - 60_000, count: 2 }],
      },
    });

  it("are on every page until the person says they saw them", () => {
    const dismissLeaks = vi.fn();
    const root = render({ kind: "view", view: { state: "running", status: leaked() } }, NOW, { tab: "overview", controls: { ...inertControls(), dismissLeaks } });
    const banner = root.querySelector(".leak-banner")!;
    expect(text(banner.querySelector(".leak-list li"))).toMatch(/^ci sent the placeholder of deploy-token toward evil\.example \(2 requests\) · /);
    expect(text(banner)).toContain("Nothing reached that host");
    banner.querySelector<HTMLButtonElement>(".dismiss-leaks")!.click();
    expect(dismissLeaks).toHaveBeenCalledOnce();
  });

  it("are no banner when there are none", () => {
    expect(show({ state: "running", status: status() }).querySelector(".leak-banner")).toBeNull();
  });
});

describe("the tabs", () => {
  it("offer every view of the main window, in order", () => {
    const root = show({ state: "running", status: status() });

    expect(all(root, ".tabs .tab")).toEqual(["Overview", "Servers", "Timeline", "Activity", "Permissions", "Credentials", "Integrity", "Settings"]);
  });

  it("mount the timeline and Activity panes as they are", () => {
    const timeline = document.createElement("section");
    timeline.className = "timeline-pane";
    const root = render({ kind: "view", view: { state: "running", status: status() } }, NOW, {
      tab: "timeline",
      controls: inertControls(),
      panes: { timeline },
    });

    expect(root.querySelector(".timeline-pane")).toBe(timeline);
    expect(root.classList.contains("page-timeline")).toBe(true);
  });

  it("warn on every page while the audit log cannot record", () => {
    const audit = { ...status().audit, state: { state: "unavailable" as const, reason: "no keychain" } };
    const root = render({ kind: "view", view: { state: "running", status: status({ audit }) } }, NOW, { tab: "servers", controls: inertControls() });

    expect(text(root.querySelector(".audit-banner"))).toContain("every tool call is refused: no keychain");
  });
});

describe("no engine here", () => {
  it("says clearly that another engine owns the home", () => {
    const root = show({
      state: "unavailable",
      home: "/home/ada/.local/share/postern",
      reason: "already_running",
      message: "another Postern engine is already running for /home/ada/.local/share/postern",
    });

    expect(text(root.querySelector(".pill"))).toBe("Engine unavailable");
    expect(text(root.querySelector(".notice h2"))).toBe("Another Postern engine owns this home");
    expect(text(root.querySelector(".notice"))).toContain("postern daemon");
    expect(all(root, ".details dd")).toEqual([
      "/home/ada/.local/share/postern",
      "another Postern engine is already running for /home/ada/.local/share/postern",
    ]);
    expect(root.querySelector(".panel-servers")).toBeNull();
  });

  it.each([
    ["no_home", "No Postern home"],
    ["start_failed", "The engine could not start"],
    ["status_failed", "Cannot read the engine's status"],
  ] as const)("explains %s", (reason, title) => {
    const root = show({ state: "unavailable", home: null, reason, message: "boom" });

    expect(text(root.querySelector(".notice h2"))).toBe(title);
    expect(text(root.querySelector(".notice .message"))).toBe("boom");
    expect(root.querySelector(".notice")?.getAttribute("role")).toBeNull();
  });

  it("shows starting, stopped, loading and IPC failures", () => {
    expect(text(show({ state: "starting", home: "/h" }).querySelector(".pill"))).toBe("Starting…");
    expect(text(show({ state: "stopped", home: "/h" }).querySelector(".notice h2"))).toBe("The engine has stopped");
    expect(text(show({ kind: "loading" }).querySelector(".pill"))).toBe("Connecting…");
    const failed = show({ kind: "ipcError", message: "command status not found" });
    expect(text(failed.querySelector(".notice"))).toContain("command status not found");
  });
});

describe("a locked vault", () => {
  const busy = status({
    servers: [server({ label: "secret-server", command: ["run", "--token-file", "/home/ada/vault/token"], running: 1 })],
    sessions: [session({ id: "#7", server: "secret-server", client: "claude-code 2.1.0" })],
  });

  it.each(["locked", "unlocking", "quarantined"] as const)("shows only the %s screen, nothing from the vault", (vault) => {
    const root = show({ state: "running", status: { ...busy, gate: { ...busy.gate, vault, approvals: 2 } } });

    expect(root.querySelector(".locked")).not.toBeNull();
    const all = root.textContent ?? "";
    for (const secret of ["secret-server", "#7", "claude-code", "/home/ada", "engine.sock", "token"]) {
      expect(all).not.toContain(secret);
    }
    expect(root.querySelector(".server, .session, .tabs, .waiting, .lock-button")).toBeNull();
    // A quarantined log shows where its chain failed: the audit log's own state, nothing else.
    const panels = [...root.querySelectorAll(".panel")];
    expect(panels.every((p) => p.closest(".integrity-view") !== null)).toBe(true);
    expect(panels.length > 0).toBe(vault === "quarantined");
  });

  const lockedWith = (unlock = vi.fn(), lockNote?: { error: string | null; busy: boolean }) => {
    const root = render(
      { kind: "view", view: { state: "running", status: { ...busy, gate: { ...busy.gate, vault: "locked" } } } },
      NOW,
      { tab: "overview", controls: { ...inertControls(), unlock }, ...(lockNote === undefined ? {} : { lockNote }) },
    );
    document.body.replaceChildren(root);
    return root;
  };

  it("offers Unlock with the passphrase, which asks the app and keeps no copy of it", () => {
    const unlock = vi.fn();
    const root = lockedWith(unlock);

    expect(text(root.querySelector(".pill"))).toBe("Locked");
    expect(text(root.querySelector(".locked h2"))).toBe("Postern is locked");
    const field = root.querySelector<HTMLInputElement>(".locked input.passphrase")!;
    expect(field.type).toBe("password");
    expect(field.getAttribute("autocomplete")).toBe("current-password");
    field.value = "correct horse battery";
    root.querySelector<HTMLButtonElement>(".unlock")!.click();

    expect(unlock).toHaveBeenCalledExactlyOnceWith({ passphrase: "correct horse battery" });
    expect(field.value).toBe("");
  });

  it("unlocks on Enter in the passphrase field (the form's submit), and asks for it when empty", () => {
    const unlock = vi.fn();
    const root = lockedWith(unlock);
    const form = root.querySelector<HTMLFormElement>(".unlock-form")!;

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    expect(unlock).not.toHaveBeenCalled();
    expect(text(root.querySelector(".unlock-error"))).toBe("Type your Postern passphrase to unlock.");

    root.querySelector<HTMLInputElement>(".passphrase")!.value = "correct horse battery";
    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    expect(unlock).toHaveBeenCalledWith({ passphrase: "correct horse battery" });
  });

  it("says why the last unlock was refused, and waits while one is on its way", () => {
    const root = lockedWith(vi.fn(), { error: "wrong passphrase: try again in 2 seconds", busy: false });
    expect(text(root.querySelector(".unlock-error"))).toBe("wrong passphrase: try again in 2 seconds");
    expect(root.querySelector<HTMLElement>(".unlock-error")!.hidden).toBe(false);

    const waiting = lockedWith(vi.fn(), { error: null, busy: true });
    expect(waiting.querySelector<HTMLButtonElement>(".unlock")!.disabled).toBe(true);
    expect(waiting.querySelector<HTMLElement>(".unlock-error")!.hidden).toBe(true);
  });

  it("offers no Unlock while the audit log is quarantined", () => {
    const root = show({ state: "running", status: { ...busy, gate: { ...busy.gate, vault: "quarantined" } } });

    expect(text(root.querySelector(".pill"))).toBe("Audit log quarantined");
    expect(text(root.querySelector(".locked h2"))).toBe("The audit log failed verification");
    expect(root.querySelector(".unlock")).toBeNull();
  });
});

describe("the window's controls", () => {
  const controls = () => ({ ...inertControls(), tab: vi.fn(), lock: vi.fn(), unlock: vi.fn(), saveSettings: vi.fn(async () => {}), showApprovals: vi.fn() });
  const running = (approvals = 0): Shown => ({ kind: "view", view: { state: "running", status: status({ gate: { ...status().gate, approvals } }) } });

  it("locks from the header and opens the approval window when requests wait", () => {
    const c = controls();
    const root = render(running(2), NOW, { tab: "overview", controls: c });

    root.querySelector<HTMLButtonElement>(".lock-button")!.click();
    expect(c.lock).toHaveBeenCalledOnce();
    expect(text(root.querySelector(".waiting"))).toBe("2 waiting");
    root.querySelector<HTMLButtonElement>(".waiting")!.click();
    expect(c.showApprovals).toHaveBeenCalledOnce();
    expect(render(running(0), NOW, { tab: "overview", controls: c }).querySelector(".waiting")).toBeNull();
  });

  it("switches between the overview and the settings", () => {
    const c = controls();
    const overview = render(running(), NOW, { tab: "overview", controls: c });
    expect(overview.querySelector(".tab-overview")?.getAttribute("aria-selected")).toBe("true");
    expect(overview.querySelector(".settings-form")).toBeNull();
    overview.querySelector<HTMLButtonElement>(".tab-settings")!.click();
    expect(c.tab).toHaveBeenCalledWith("settings");

    const settings = render(running(), NOW, { tab: "settings", controls: c });
    expect(settings.querySelector(".tab-settings")?.getAttribute("aria-selected")).toBe("true");
    expect(settings.querySelector(".settings-form")).not.toBeNull();
    expect(settings.querySelector(".welcome")).toBeNull();
  });

  it("shows why an action failed", () => {
    const root = render(running(), NOW, { tab: "overview", controls: controls(), actionError: "Cannot lock: no engine" });

    expect(text(root.querySelector(".action-error"))).toBe("Cannot lock: no engine");
  });
});

describe("live regions", () => {
  it("are not the window: it is drawn again every minute and would be read out whole each time", () => {
    const app = /<div id="app"[^>]*>/.exec(indexHtml)?.[0];
    expect(app).toBeDefined();
    expect(app).not.toMatch(/aria-live|role=/);
  });

  it("are not the status pill nor a state that is drawn again", () => {
    const root = show({ state: "running", status: status({ sessions: [session({ id: "#1", server: "time", artifactsNewer: ["/x"] })] }) });
    expect(root.querySelector(".pill")).not.toBeNull();
    expect(root.querySelector(".newer")).not.toBeNull();
    expect(root.querySelectorAll("[role=status], [role=alert], [aria-live]").length).toBe(0);
  });
});
