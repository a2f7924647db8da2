import { beforeEach, describe, expect, it } from "vitest";

import type { SessionStatus, ServerStatus } from "./bindings";
import { catalog, digest, execution, server, session, status } from "./fixtures/status";
import { render } from "./view";

const NOW = new Date(2026, 10, 29, 15, 30).getTime();

/** The window for one session (of server "inventory") or one server row; returns that element. */
function card(fields: Partial<SessionStatus>): HTMLElement {
  const s = session({ id: "#1", server: "inventory", serverPid: 48192, ...fields });
  const root = render({ kind: "view", view: { state: "running", status: status({ servers: [server({ label: "inventory" })], sessions: [s] }) } }, NOW);
  document.body.replaceChildren(root);
  return root.querySelector<HTMLElement>('[data-session="#1"]')!;
}

function serverRow(fields: Partial<ServerStatus>): HTMLElement {
  const root = render({ kind: "view", view: { state: "running", status: status({ servers: [server({ label: "inventory", ...fields })] }) } }, NOW);
  document.body.replaceChildren(root);
  return root.querySelector<HTMLElement>('[data-label="inventory"]')!;
}

const text = (el: Element | null | undefined): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

beforeEach(() => document.body.replaceChildren());

describe("a live session's number", () => {
  it("is the number Activity and the timeline use for it", () => {
    const el = card({ journal: 27 });
    expect(text(el.querySelector(".session-head .session-number"))).toBe("session 27");
  });

  it("is left out until the journal has the session", () => {
    expect(card({ journal: null }).querySelector(".session-number")).toBeNull();
  });
});

describe("a session's launch", () => {
  it("shows the launch by its number and start time, with the full ULID on hover", () => {
    const el = card({ execution: execution({ epoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD", launch: 7, startedAtMs: new Date(2026, 10, 29, 15, 9).getTime() }) });

    const launch = el.querySelector(".facts .launch");
    expect(text(launch?.closest(".fact") ?? null)).toBe("launch 7 · started 15:09");
    expect(launch?.getAttribute("title")).toBe("execution epoch 01JQ7R4S4S0QJ7GZP1S2K8XWQD");
    // The ULID itself is in the execution record.
    expect(text(el.querySelector(".record .epoch-full"))).toBe("01JQ7R4S4S0QJ7GZP1S2K8XWQD");
  });

  it("falls back to the epoch short when the engine could not number the launch", () => {
    const el = card({ execution: execution({ epoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD", launch: null, startedAtMs: new Date(2026, 10, 29, 15, 9).getTime() }) });

    expect(text(el.querySelector(".facts .launch"))).toBe("01JQ7R…XWQD · started 15:09");
  });

  it("shows the pid and the identity digest short", () => {
    const el = card({ serverPid: 4242, execution: execution({ identity: digest("ab"), pid: 4242 }) });

    expect(text(el.querySelector(".facts .pid"))).toBe("4242");
    expect(text(el.querySelector(".facts .identity"))).toBe("abababababab");
    expect(el.querySelector(".facts .identity")?.getAttribute("title")).toContain(digest("ab"));
  });

  it("calls the launch of a stopped server its last one", () => {
    const el = card({ state: "stopped", serverPid: null, execution: execution() });

    expect(all(el, ".facts .fact-k")[0]).toBe("last launch");
    expect(text(el.querySelector(".facts .pid"))).toBe("—");
  });
});

describe("pinning", () => {
  it("marks a pinned server PINNED, calmly", () => {
    const el = card({ execution: execution({ pinning: { state: "pinned" } }) });

    expect(all(el, ".pin")).toEqual(["PINNED"]);
    expect(el.querySelector(".pin")?.classList).toContain("badge-ok");
    expect(el.querySelector(".unpinned-reason")).toBeNull();
    expect(el.querySelector(".pin-note")).toBeNull();
  });

  it("says a partly pinned server calmly, with what is covered and what is not", () => {
    const pinning = {
      state: "partly",
      covered: "the entry file server.py",
      uncovered: "the code it loads: there is no lockfile in the working directory (add one, or name the dependency tree with --identity)",
    } as const;
    const el = card({ execution: execution({ pinning }) });

    expect(all(el, ".pin")).toEqual(["partly pinned"]);
    expect(el.querySelector(".pin")?.classList).not.toContain("unpinned");
    expect(el.querySelector(".pin")?.classList).toContain("badge-outline");
    const note = el.querySelector(".pin-note");
    expect(text(note)).toBe(
      "Partly pinned: the digests cover the entry file server.py, not the code it loads: there is no lockfile in the working directory (add one, or name the dependency tree with --identity).",
    );
    expect(note?.classList).toContain("muted");
    expect(el.querySelector(".unpinned-reason")).toBeNull();
  });

  it("marks an unpinned server UNPINNED and says why", () => {
    const reason = "`npx` fetches and runs a package by name, and there is no lockfile in the working directory";
    const el = card({ execution: execution({ pinning: { state: "unpinned", reason } }) });

    expect(all(el, ".pin")).toEqual(["UNPINNED"]);
    expect(el.querySelector(".pin")?.classList).toContain("unpinned");
    expect(el.querySelector(".pin")?.getAttribute("title")).toBe(reason);
    expect(text(el.querySelector(".unpinned-reason"))).toBe(`Unpinned: ${reason}`);
  });
});

describe("the state in words", () => {
  it.each([
    ["catalogReady", "Ready · 3 tools", "catalog-ready"],
    ["catalogRefreshing", "Checking its new tools…", "catalog-refreshing"],
    ["identityPending", "Reading its tools…", "identity-pending"],
    ["starting", "Starting…", "starting"],
    ["stopped", "Stopped", "stopped"],
  ] as const)("says %s as %j, keeping the contract's name", (state, words, raw) => {
    const el = card({ state, catalog: catalog({ tools: ["a", "b", "c"] }) });

    const badge = el.querySelector(".state");
    expect(text(badge)).toBe(words);
    expect(badge?.getAttribute("data-state")).toBe(raw);
    expect(badge?.getAttribute("title")?.startsWith(`${raw}: `)).toBe(true);
  });

  it("says one tool in the singular, and a ready server without a catalog as Ready", () => {
    expect(text(card({ catalog: catalog({ tools: ["a"] }) }).querySelector(".state"))).toBe("Ready · 1 tool");
    expect(text(card({ catalog: null }).querySelector(".state"))).toBe("Ready");
  });

  it("shows a state a newer engine sends by its own name", () => {
    const el = card({ state: "draining" as unknown as "stopped" });

    expect(text(el.querySelector(".state"))).toBe("draining");
    expect(el.querySelector(".state")?.getAttribute("data-state")).toBe("draining");
  });
});

describe("files newer than the running process", () => {
  it("says so prominently, lists the files and how to restart", () => {
    const el = card({ artifactsNewer: ["/srv/inventory/dist/server.js", "/srv/inventory/package-lock.json"] });

    const notice = el.querySelector(".newer");
    // No live region: the card is drawn again every minute, and would be announced again.
    expect(notice?.getAttribute("role")).toBeNull();
    expect(text(notice?.querySelector(".callout-title"))).toBe("Files newer than the running process — restart to use them");
    expect(all(notice!, ".paths li")).toEqual(["/srv/inventory/dist/server.js", "/srv/inventory/package-lock.json"]);
    expect(text(notice)).toContain("postern server restart inventory");
  });

  it("says nothing when the files are what runs", () => {
    expect(card({ artifactsNewer: [] }).querySelector(".newer")).toBeNull();
  });
});

describe("the catalog", () => {
  it("shows the revision short with the tool count", () => {
    const el = card({ catalog: catalog({ revision: digest("c4"), presentedRevision: digest("c4"), tools: ["a", "b", "c"] }) });

    expect(text(el.querySelector(".facts .revision"))).toBe("c4c4c4c4c4c4");
    expect(el.querySelector(".facts .revision")?.getAttribute("title")).toContain(digest("c4"));
    expect(text(el.querySelector(".tool-count"))).toBe("3 tools");
    expect(el.querySelector(".tool-count")?.getAttribute("title")).toBe("a\nb\nc");
    expect(el.querySelector(".stale")).toBeNull();
    expect(el.querySelector(".changes")).toBeNull();
  });

  it("says the agent has a stale tool list when it was shown an older revision", () => {
    const el = card({ catalog: catalog({ revision: digest("c5"), presentedRevision: digest("c4") }) });

    expect(text(el.querySelector(".stale"))).toBe("agent has a stale tool list");
    expect(el.querySelector(".stale")?.getAttribute("title")).toContain(digest("c4"));
  });

  it("does not call a tool list stale when the agent never listed tools", () => {
    expect(card({ catalog: catalog({ presentedRevision: null }) }).querySelector(".stale")).toBeNull();
  });

  it("lists the changes from the previous revision", () => {
    const el = card({ catalog: catalog({ changes: ["added tool publish_release", "publish_preview: input schema: /properties/target added"] }) });

    expect(all(el, ".changes li")).toEqual(["added tool publish_release", "publish_preview: input schema: /properties/target added"]);
    expect(el.querySelector(".changes")?.classList).not.toContain("escalation");
    expect(el.querySelector(".changes .flag")).toBeNull();
  });

  it("flags an escalation as a warning, on the change that makes a tool look safer", () => {
    const el = card({
      catalog: catalog({
        escalation: true,
        changes: ["added tool publish_release", "publish_preview: annotation readOnlyHint: false -> true [escalation]"],
      }),
    });

    const box = el.querySelector(".changes");
    expect(box?.classList).toContain("callout-bad");
    expect(text(box?.querySelector(".flag"))).toBe("escalation");
    expect(all(box!, "li")).toEqual(["added tool publish_release", "publish_preview: annotation readOnlyHint: false -> true"]);
    expect([...box!.querySelectorAll("li")].map((li) => li.classList.contains("change-escalation"))).toEqual([false, true]);
  });

  it("says the catalog is being fetched in a new epoch", () => {
    const el = card({ state: "identityPending", catalog: null });

    expect(text(el.querySelector(".state"))).toBe("Reading its tools…");
    expect(all(el, ".fact")).toContain("catalog fetching…");
  });
});

describe("exits and crash back-off", () => {
  it("shows the last exit reason", () => {
    const el = card({ state: "stopped", serverPid: null, lastExit: "server exited (exit status 1)" });
    expect(text(el.querySelector(".last-exit"))).toBe("last exit server exited (exit status 1)");
  });

  it("shows when the next launch may happen during a crash back-off", () => {
    const until = new Date(2026, 10, 29, 15, 30, 16).getTime();
    const el = card({ state: "stopped", serverPid: null, backoffUntilMs: until });
    expect(text(el.querySelector(".backoff"))).toBe("crash back-off · no launch before 15:30:16");
  });

  it("drops a back-off that has passed", () => {
    expect(card({ state: "stopped", backoffUntilMs: NOW - 1000 }).querySelector(".backoff")).toBeNull();
  });
});

describe("the execution record", () => {
  const record = execution({
    epoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD",
    identity: digest("1d"),
    launchCommand: ["/usr/bin/node", "dist/server.js", "--port", "two words"],
    executable: { path: "/usr/bin/node", digest: digest("e0") },
    wrappers: [{ path: "/home/ada/.volta/bin/node", digest: digest("a1") }],
    entry: { path: "/srv/inventory/dist/server.js", digest: digest("f0") },
    lockfiles: [{ path: "/srv/inventory/package-lock.json", digest: digest("90") }],
    extraPaths: [{ path: "/srv/inventory/node_modules", digest: digest("3a") }],
    runtime: "node v20.20.2",
    workingDirectory: "/srv/inventory",
    envNames: ["HOME", "INVENTORY_TOKEN", "PATH"],
    loaderEnv: ["NODE_OPTIONS=--require ./trace.js"],
    pid: 48192,
    startedAtMs: new Date(2026, 10, 29, 15, 25).getTime(),
  });

  it("is closed until asked for, and keeps its key across renders", () => {
    const details = card({ execution: record }).querySelector("details.record");
    expect(details).not.toBeNull();
    expect((details as HTMLDetailsElement).open).toBe(false);
    expect(details?.getAttribute("data-keep")).toBe("record:#1");
    expect(text(details?.querySelector("summary"))).toBe("Execution record");
  });

  it("lists what was launched: command, executable, wrappers, entry, lockfiles, identity paths, runtime, directory, variable names", () => {
    const details = card({ execution: record }).querySelector("details.record")!;
    const rows = Object.fromEntries(
      [...details.querySelectorAll("dt")].map((dt) => [text(dt), text(dt.nextElementSibling)]),
    );

    expect(rows).toEqual({
      epoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD",
      identity: digest("1d"),
      launched: "15:25 · 5 min ago · pid 48192",
      command: "/usr/bin/node dist/server.js --port 'two words'",
      executable: "e0e0e0e0e0e0 /usr/bin/node",
      wrappers: "a1a1a1a1a1a1 /home/ada/.volta/bin/node",
      entry: "f0f0f0f0f0f0 /srv/inventory/dist/server.js",
      lockfiles: "909090909090 /srv/inventory/package-lock.json",
      "identity paths": "3a3a3a3a3a3a /srv/inventory/node_modules",
      runtime: "node v20.20.2",
      directory: "/srv/inventory",
      environment: "HOME INVENTORY_TOKEN PATH",
      sandbox:
        "Confined (bubblewrap): writes /srv/inventory and a private /tmp; network only through the egress broker; cannot see 2 credential and session paths (~/.ssh, the Postern home, …).",
      "loads with": "NODE_OPTIONS=--require ./trace.js",
    });
    expect([...details.querySelectorAll(".digest")].map((d) => d.getAttribute("title"))).toEqual(
      [digest("e0"), digest("a1"), digest("f0"), digest("90"), digest("3a")],
    );
    expect(all(details, ".chip")).toEqual(["HOME", "INVENTORY_TOKEN", "PATH", "NODE_OPTIONS=--require ./trace.js"]);
  });

  it("flags an unconfined launch on the card and in its record, and shows a confined one calmly", () => {
    const confined = card({ execution: record });
    expect(confined.querySelector(".confinement")?.classList.contains("confined")).toBe(true);
    const open = card({ execution: execution({ sandbox: null }) });
    expect(text(open.querySelector(".confinement.unconfined"))).toBe("UNCONFINED");
    const rows = Object.fromEntries(
      [...open.querySelectorAll("details.record dt")].map((dt) => [text(dt), text(dt.nextElementSibling)]),
    );
    expect(rows.sandbox).toBe("none: it can read every file you can and connect anywhere");
  });

  it("says when there is no entry, no lockfile, no runtime and no variables", () => {
    const bare = execution({ wrappers: [], entry: null, lockfiles: [], extraPaths: [], runtime: null, envNames: [], loaderEnv: [] });
    const details = card({ execution: bare }).querySelector("details.record")!;
    const rows = Object.fromEntries([...details.querySelectorAll("dt")].map((dt) => [text(dt), text(dt.nextElementSibling)]));

    expect(rows.entry).toBe("no entry file");
    expect(rows.lockfiles).toBe("none in the working directory");
    expect(rows.runtime).toBe("—");
    expect(rows.environment).toBe("no variables");
    expect(rows.wrappers).toBeUndefined();
    expect(rows["identity paths"]).toBeUndefined();
    expect(rows["loads with"]).toBeUndefined();
  });

  it("renders paths and commands from the engine as text, never as markup", () => {
    const el = card({ execution: execution({ launchCommand: ["<img src=x onerror=alert(1)>"], workingDirectory: "<b>x</b>" }), artifactsNewer: ["<script>x</script>"] });
    expect(el.querySelector("img, b, script")).toBeNull();
  });
});

describe("a server row", () => {
  it("says confined, or UNCONFINED for a server opted out", () => {
    expect(text(serverRow({}).querySelector(".confinement"))).toBe("confined");
    const open = serverRow({ confinement: "unconfined" });
    expect(text(open.querySelector(".confinement.unconfined"))).toBe("UNCONFINED");
  });

  it("shows its restart policy", () => {
    expect(text(serverRow({ restart: "manual" }).querySelector(".restart"))).toBe("restart manual");
    expect(text(serverRow({ restart: "on-change" }).querySelector(".restart"))).toBe("restart on-change");
  });

  it("flags a self-reloading server", () => {
    expect(text(serverRow({ selfReloading: true }).querySelector(".self-reloading"))).toBe("self-reloading");
    expect(serverRow({ selfReloading: false }).querySelector(".self-reloading")).toBeNull();
  });

  it("lists its identity paths", () => {
    const row = serverRow({ identityPaths: ["dist", "node_modules"] });
    expect(all(row, ".server-identity code")).toEqual(["dist", "node_modules"]);
    expect(serverRow({ identityPaths: [] }).querySelector(".server-identity")).toBeNull();
  });
});

describe("the agent process", () => {
  it("shows the process chain from the process table, and says when there is none", () => {
    const known = card({
      client: "claude-code 2.1",
      agent: { pid: 4242, executable: { path: "/usr/bin/claude", digest: digest("c") }, chain: ["zsh", "claude", "postern"], cwd: "/work" },
    });
    const chain = known.querySelector(".session-chain");
    expect(chain?.textContent).toBe("zsh → claude → postern");
    expect(chain?.getAttribute("title")).toContain("pid 4242");
    expect(chain?.getAttribute("title")).toContain("/usr/bin/claude");

    expect(card({}).querySelector(".session-chain")?.textContent).toBe("unidentified process");
  });
});
