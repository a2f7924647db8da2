import { describe, expect, it, vi } from "vitest";

import type { GrantView, Permissions } from "./bindings";
import { execution, session } from "./fixtures/status";
import { allowedLine, endWords, permissionsPanel, readTarget, type Known, type PermissionControls } from "./permissions";
import { sessionCard } from "./session";

const NOW = new Date(2026, 10, 29, 21, 28).getTime();
const at = (hh: number, mm: number) => new Date(2026, 10, 29, hh, mm).getTime();
const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

function grant(fields: Partial<GrantView> = {}): GrantView {
  return {
    id: "01JGRANT0000000000000000AA",
    server: "ci-server",
    epoch: "01JEPOCH00000000000000QZZX",
    launch: 7,
    launchedAtMs: at(21, 9),
    launchRunning: true,
    tools: { kind: "named", names: ["deploy"] },
    credentials: [],
    issuedAtMs: at(21, 25),
    end: { kind: "until", unixMs: at(21, 40) },
    ...fields,
  };
}

const page: Permissions = {
  runs: [
    {
      run: { pid: 4242, startTime: 123456 },
      client: "claude-code 2.1.3",
      cwd: "/home/ada/shop",
      connected: true,
      grants: [
        grant(),
        grant({
          id: "01JGRANT0000000000000000BB",
          tools: { kind: "everyToolOfCatalog", revision: "sha256:abc", names: ["status", "logs"] },
          credentials: ["deploy-key"],
          end: { kind: "runEnds" },
          launch: null,
          launchRunning: false,
        }),
      ],
    },
    { run: { pid: 77, startTime: 1 }, client: null, cwd: null, connected: false, grants: [grant({ id: "01JGRANT0000000000000000CC", end: { kind: "thisCall" } })] },
  ],
  everyUse: [
    { on: "tool", server: "ci-server", tool: "deploy" },
    { on: "credential", name: "deploy-key" },
  ],
};

const known: Known = { servers: ["ci-server", "postern"], tools: { "ci-server": ["deploy", "status"] }, credentials: ["deploy-key"] };

function controls() {
  return {
    revoke: vi.fn<PermissionControls["revoke"]>(async () => {}),
    revokeRun: vi.fn<PermissionControls["revokeRun"]>(async () => {}),
    addEveryUse: vi.fn<PermissionControls["addEveryUse"]>(async () => null),
    removeEveryUse: vi.fn<PermissionControls["removeEveryUse"]>(async () => {}),
  };
}

function panel(c = controls(), p: Permissions | null = page) {
  const root = permissionsPanel(p, known, c, NOW);
  document.body.replaceChildren(root);
  return root;
}

describe("endWords", () => {
  it("says when a grant ends in words", () => {
    expect(endWords({ kind: "thisCall" }, NOW)).toBe("this call");
    expect(endWords({ kind: "until", unixMs: at(21, 40) }, NOW)).toBe("until 21:40 (12 min left)");
    expect(endWords({ kind: "until", unixMs: at(22, 33) }, NOW)).toBe("until 22:33 (1 h 5 min left)");
    expect(endWords({ kind: "until", unixMs: NOW + 20_000 }, NOW)).toBe("until 21:28 (less than a minute left)");
    expect(endWords({ kind: "runEnds" }, NOW)).toBe("until the agent run ends");
  });
});

describe("the Permissions page", () => {
  it("lists each agent run by its own name with its grants: tools, server, launch, credentials, end, when given", () => {
    const root = panel();
    expect(all(root, ".run-agent")).toEqual(["claude-code 2.1.3", "agent pid 77"]);
    expect(all(root, ".run-cwd")).toEqual(["in /home/ada/shop"]);
    expect(all(root, ".run-gone")).toEqual(["not connected"]);
    const [first, second] = [...root.querySelectorAll(".grant-run")[0]!.querySelectorAll(".grant")];
    expect(text(first!.querySelector(".grant-what"))).toBe("deploy on ci-server until 21:40 (12 min left)");
    expect(text(first!.querySelector(".grant-launch"))).toBe("launch 7 · started 21:09");
    expect(first!.querySelector(".grant-launch")?.getAttribute("title")).toBe("execution epoch 01JEPOCH00000000000000QZZX");
    expect(text(first!.querySelector(".grant-given"))).toBe("given 21:25 · 3 min ago");
    expect(text(second!.querySelector(".grant-what"))).toBe("every tool of this catalog (status, logs) on ci-server until the agent run ends");
    expect(text(second!.querySelector(".grant-credentials"))).toBe("credentials deploy-key");
    expect(text(second!.querySelector(".launch-ended"))).toBe("· ended: covers nothing now");
    // Not numbered (the audit log was not being written): the epoch short instead.
    expect(text(second!.querySelector(".grant-launch"))).toBe("launch 01JEPO…QZZX · started 21:09 · ended: covers nothing now");
    expect(text(root.querySelector('[data-grant="01JGRANT0000000000000000CC"] .grant-end'))).toBe("this call");
    expect(text(root.querySelector(".grants-panel .panel-head .muted"))).toBe("3 grants");
  });

  it("revokes one grant by its id, or every grant of an agent run", async () => {
    const c = controls();
    const root = panel(c);
    root.querySelector<HTMLButtonElement>('[data-grant="01JGRANT0000000000000000BB"] .revoke')!.click();
    expect(c.revoke).toHaveBeenCalledWith("01JGRANT0000000000000000BB");
    root.querySelector<HTMLButtonElement>('.grant-run[data-pid="4242"] .revoke-run')!.click();
    expect(c.revokeRun).toHaveBeenCalledWith({ pid: 4242, startTime: 123456 }, "claude-code 2.1.3");
  });

  it("says so when nothing is granted, and while it reads", () => {
    expect(text(panel(controls(), { runs: [], everyUse: [] }).querySelector(".nothing-granted"))).toBe("Nothing is granted: each call asks you.");
    expect(all(panel(controls(), null), ".grants-panel .empty-line")).toEqual(["Reading…"]);
  });

  it("lists the every-use rules in words, removes one, and adds one from the form", async () => {
    const c = controls();
    c.addEveryUse.mockResolvedValueOnce("'ci-server' did not offer a tool named 'deplyo'");
    const root = panel(c);
    expect(all(root, ".rule-text")).toEqual(["tool deploy of ci-server", "every call using credential deploy-key"]);
    root.querySelectorAll<HTMLButtonElement>(".remove-every-use")[1]!.click();
    expect(c.removeEveryUse).toHaveBeenCalledWith({ on: "credential", name: "deploy-key" });

    const form = root.querySelector<HTMLFormElement>(".every-use-form")!;
    expect([...form.querySelectorAll("#every-use-tools option")].map((o) => o.getAttribute("value"))).toEqual(["deploy", "status"]);
    form.querySelector<HTMLInputElement>('input[name="tool"]')!.value = "deplyo";
    form.dispatchEvent(new Event("submit", { cancelable: true }));
    expect(c.addEveryUse).toHaveBeenCalledWith({ on: "tool", server: "ci-server", tool: "deplyo" });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(text(form.querySelector(".form-status"))).toContain("did not offer a tool named");
  });

  it("reads the rule the form describes, or says what is missing", () => {
    expect(readTarget("tool", "ci-server", " deploy ", "")).toEqual({ on: "tool", server: "ci-server", tool: "deploy" });
    expect(readTarget("tool", "ci-server", "", "")).toBe("Name the tool.");
    expect(readTarget("server", "ci-server", "x", "")).toEqual({ on: "server", server: "ci-server" });
    expect(readTarget("credential", "", "", "github")).toEqual({ on: "credential", name: "github" });
    expect(readTarget("credential", "", "", " ")).toBe("Name the credential.");
  });
});

describe("a session card", () => {
  it("says in one line what its agent may do and until when", () => {
    const s = session({ id: "#1", server: "ci-server", serverPid: 9, execution: execution({ pid: 9 }), grants: [grant(), grant({ tools: { kind: "named", names: ["status", "logs"] }, end: { kind: "runEnds" } })] });
    expect(allowedLine(s, NOW)).toBe("allowed: deploy on ci-server until 21:40; status, logs on ci-server until the agent run ends");
    expect(text(sessionCard(s, NOW).querySelector(".allowed"))).toBe("allowed: deploy on ci-server until 21:40; status, logs on ci-server until the agent run ends");
    const none = session({ id: "#2", server: "ci-server" });
    expect(text(sessionCard(none, NOW).querySelector(".allowed"))).toBe("nothing granted; each call asks");
    expect(allowedLine(none, NOW, "observe")).toBe("nothing granted; observe mode lets its calls through, journaled");
  });
});
