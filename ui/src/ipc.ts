// The only module that talks to the Rust side. Everything else receives plain typed values and
// callbacks, which keeps the views testable without a Tauri runtime.
import { invoke } from "@tauri-apps/api/core";
import { listen } from "@tauri-apps/api/event";
import { LogicalSize } from "@tauri-apps/api/dpi";
import { getCurrentWebviewWindow } from "@tauri-apps/api/webviewWindow";

import type { Apis } from "./api";
import type { Reply } from "./approval-card";
import type { ApprovalSource, InitialApprovals } from "./approvals-live";
import type {
  ActivityRow,
  AgentSnippet,
  Approval,
  AuditEntry,
  Chosen,
  CommandError,
  CredentialItem,
  EngineView,
  ImportSource,
  Imported,
  Permissions,
  Plan,
  Proof,
  Rewired,
  Settings,
  SettingsChange,
  Timeline,
  Verification,
} from "./bindings";
import type { Actions, StatusSource } from "./live";

/** The event the app emits whenever the engine reports a change (crates/desk/src/shell.rs). */
export const STATUS_CHANGED = "status-changed";
/** The event the app emits whenever the approval queue changes (crates/desk/src/approvals.rs). */
export const APPROVALS_CHANGED = "approvals-changed";

/** The event naming the request a person chose in the tray (crates/desk/src/approvals.rs). */
export const APPROVALS_FOCUS = "approvals-focus";

/** This window's label: `main` (the status window) or `approvals` (src-tauri/src/window.rs). */
export function windowLabel(): string {
  return getCurrentWebviewWindow().label;
}

/**
 * What the app gave this window for its first paint (src-tauri/src/window.rs: INITIAL_STATUS,
 * INITIAL_APPROVALS), read once: `null` when it gave nothing.
 */
function takeGlobal<T>(name: string): T | null {
  const globals = window as unknown as Record<string, T | undefined>;
  const value = globals[name] ?? null;
  delete globals[name];
  return value;
}

/** Status from the app's `status` command, and pushes of the `status-changed` event. */
export const tauriStatus: StatusSource = {
  fetch: () => invoke<EngineView>("status"),
  subscribe: (onView) => listen<EngineView>(STATUS_CHANGED, (event) => onView(event.payload)),
  initial: () => takeGlobal<EngineView>("__POSTERN_STATUS__"),
};

/** What the status window asks of the engine. */
export const tauriActions: Actions = {
  lock: () => call<boolean>("lock").then(() => undefined),
  dismissLeaks: () => call<number>("dismiss_leaks").then(() => undefined),
  unlock: (proof: Proof) => call<boolean>("unlock", { proof }).then(() => undefined),
  updateSettings: (change: SettingsChange, proof: Proof | null) => call<Settings>("update_settings", { change, proof }),
  setPassphrase: (passphrase: string, proof: Proof | null) => call<null>("set_passphrase", { passphrase, proof }).then(() => undefined),
  showApprovals: () => call<void>("show_approvals"),
};

/** Servers, credentials, the journals and the audit log, permissions (src-tauri/src/{servers,credentials,journal,permissions}.rs). */
export const tauriApis: Apis = {
  servers: {
    restart: (label) => call<number>("restart", { label }),
    addServer: (server) => call<string>("add_server", { server }),
    importSources: (path) => call<ImportSource[]>("import_sources", { path: path ?? null }),
    importServers: (path, names) => call<Imported[]>("import_servers", { path, names }),
    agentSnippet: (labels) => call<AgentSnippet>("agent_snippet", { labels }),
    rewirePreview: (path) => call<Plan>("rewire_preview", { path }),
    rewire: (path, names) => call<Rewired>("rewire", { path, names }),
  },
  credentials: {
    list: () => call<CredentialItem[]>("credentials"),
    // The value goes to the app once, inbound; nothing here keeps it.
    add: (credential, proof) => call<void>("add_credential", { credential, proof }),
    rotate: (name, value, proof) => call<void>("rotate_credential", { name, value, proof }),
    remove: (name, proof) => call<void>("remove_credential", { name, proof }),
    bind: (server, name, proof) => call<boolean>("bind_credential", { server, name, proof }),
    unbind: (server, name) => call<boolean>("unbind_credential", { server, name }),
    moveToKeychain: (server, name, proof) => call<string>("move_to_keychain", { server, var: name, proof }),
  },
  journal: {
    timeline: (query) => call<Timeline>("timeline", { query }),
    activity: (filter) => call<ActivityRow[]>("activity", { filter }),
    auditEntry: (seq) => call<AuditEntry | null>("audit_entry", { seq }),
    verify: (openBodies) => call<Verification>("verify_audit", { openBodies }),
  },
  permissions: {
    list: () => call<Permissions>("permissions"),
    revoke: (id) => call<boolean>("revoke_grant", { id }),
    revokeRun: (run) => call<string[]>("revoke_run", { run }),
    setEveryUse: (target, on, proof) => call<string | null>("set_every_use", { target, on, proof }),
  },
};

/** The approval queue, pushes of it, and the human's answers. */
export const tauriApprovals: ApprovalSource = {
  initial: () => takeGlobal<InitialApprovals>("__POSTERN_APPROVALS__"),
  fetch: () => invoke<Approval[]>("approvals"),
  subscribe: (onList) => listen<Approval[]>(APPROVALS_CHANGED, (event) => onList(event.payload)),
  focus: () => call<Chosen | null>("approval_focus"),
  fit: (width, height) => getCurrentWebviewWindow().setSize(new LogicalSize(width, height)),
  clicksUntil: () => call<number | null>("clicks_until"),
  onFocus: (onChosen) => listen<Chosen>(APPROVALS_FOCUS, (event) => onChosen(event.payload)),
  // The proof goes with an approval only; it is not kept here.
  answer: (id: string, reply: Reply, proof: Proof | null) => call<void>("answer", { id, reply, proof }),
  systemAuth: () => call<string | null>("system_auth"),
  lock: () => call<boolean>("lock").then(() => undefined),
};

/**
 * Invokes `cmd`; a refusal (`CommandError`) becomes an Error carrying the engine's sentence and
 * its `code` (src/proof.ts reads `passphrase_wrong` and `proof_backoff` from it). Arguments
 * are never logged: they may hold a passphrase or a credential's value.
 */
async function call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(cmd, args);
  } catch (err) {
    const refusal = err as Partial<CommandError> | null;
    if (refusal !== null && typeof refusal === "object" && typeof refusal.message === "string") {
      throw Object.assign(new Error(refusal.message), { code: refusal.code });
    }
    throw err instanceof Error ? err : new Error(String(err));
  }
}
