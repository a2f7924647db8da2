// Status values for tests: every field filled with a plausible default, so each test spells
// out only what it is about (and a new engine field changes one place).

import type { CatalogView, ExecutionView, ServerStatus, SessionStatus, Status } from "./bindings";

export function server(fields: Partial<ServerStatus> & Pick<ServerStatus, "label">): ServerStatus {
  return {
    command: ["run", fields.label],
    cwd: null,
    running: 0,
    restart: "manual",
    selfReloading: false,
    identityPaths: [],
    ...fields,
  };
}

export function session(fields: Partial<SessionStatus> & Pick<SessionStatus, "id" | "server">): SessionStatus {
  return {
    client: null,
    agent: null,
    connectedAtMs: 0,
    state: "catalogReady",
    serverPid: null,
    execution: null,
    catalog: null,
    artifactsNewer: [],
    lastExit: null,
    backoffUntilMs: null,
    credentials: { released: [], withheld: [], reason: null },
    ...fields,
  };
}

export function status(fields: Partial<Status> = {}): Status {
  return {
    home: "/home/ada/.local/share/postern",
    socket: "/home/ada/.local/share/postern/run/engine.sock",
    servers: [],
    sessions: [],
    audit: {
      state: { state: "ready" },
      head: null,
      anchored: null,
      anchorError: null,
      failedBatches: 0,
      dropped: 0,
    },
    gate: {
      vault: "ready",
      approvals: 0,
      grants: 0,
      settings: { sessionMode: "prompt", approvalTimeoutMs: 120000, autoLockMs: 28800000 },
    },
    ...fields,
  };
}

/** A digest made of one repeated hex digit, so tests can spell it: `digest("a")`. */
export function digest(hex: string): string {
  return `sha256:${hex.repeat(64).slice(0, 64)}`;
}

export function execution(fields: Partial<ExecutionView> = {}): ExecutionView {
  return {
    epoch: "01JQ7R4S4S0QJ7GZP1S2K8XWQD",
    identity: digest("1d"),
    launchCommand: ["/usr/bin/node", "dist/server.js"],
    executable: { path: "/usr/bin/node", digest: digest("e") },
    wrappers: [],
    entry: { path: "/srv/inventory/dist/server.js", digest: digest("f") },
    lockfiles: [{ path: "/srv/inventory/package-lock.json", digest: digest("9") }],
    extraPaths: [],
    runtime: "node v20.20.2",
    workingDirectory: "/srv/inventory",
    envNames: ["HOME", "PATH"],
    pinned: true,
    unpinnedReason: null,
    pid: 48192,
    startedAtMs: 0,
    ...fields,
  };
}

export function catalog(fields: Partial<CatalogView> = {}): CatalogView {
  return {
    revision: digest("c0"),
    tools: ["list_items", "publish_preview"],
    presentedRevision: digest("c0"),
    changes: [],
    escalation: false,
    ...fields,
  };
}
