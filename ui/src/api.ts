// What the main window's views ask of the app, as interfaces: src/ipc.ts implements them over
// Tauri's IPC, and the tests hand the views fakes. No view imports `@tauri-apps/api`.

import type {
  ActivityFilter,
  ActivityRow,
  AgentSnippet,
  AuditEntry,
  CredentialItem,
  EveryUseTarget,
  ImportSource,
  Imported,
  NewCredential,
  NewServer,
  Permissions,
  Plan,
  Proof,
  Rewired,
  RunKey,
  Timeline,
  TimelineQuery,
  Verification,
} from "./bindings";

/** Servers: restart, add, import, and the agent snippet. */
export interface ServersApi {
  /** Restarts every running process of `label`; resolves with how many were running. */
  restart(label: string): Promise<number>;
  /** Adds a server; resolves with its label. */
  addServer(server: NewServer): Promise<string>;
  /** The agent configurations found on this machine, or the one file at `path`. */
  importSources(path?: string): Promise<ImportSource[]>;
  /** Adds the entries `names` of the configuration file at `path`. */
  importServers(path: string, names: string[]): Promise<Imported[]>;
  /** The configuration that points an agent at Postern for `labels`. */
  agentSnippet(labels: string[]): Promise<AgentSnippet>;
  /** What rewiring the agent configuration at `path` to go through Postern would change. */
  rewirePreview(path: string): Promise<Plan>;
  /** Rewires it as the preview listed (`names`), keeping a backup. */
  rewire(path: string, names: string[]): Promise<Rewired>;
}

/**
 * Credentials: values go in once and never come back. Adding, rotating, removing and binding
 * one need the person's proof (src/proof.ts); unbinding only narrows, and needs none.
 */
export interface CredentialsApi {
  list(): Promise<CredentialItem[]>;
  add(credential: NewCredential, proof: Proof): Promise<void>;
  rotate(name: string, value: string, proof: Proof): Promise<void>;
  remove(name: string, proof: Proof): Promise<void>;
  bind(server: string, name: string, proof: Proof): Promise<boolean>;
  unbind(server: string, name: string): Promise<boolean>;
  /** Moves `server`'s plain environment variable `name` into the keychain; resolves with the
   * credential's name. */
  moveToKeychain(server: string, name: string, proof: Proof): Promise<string>;
}

/** The journals and the audit log. */
export interface JournalApi {
  timeline(query: TimelineQuery): Promise<Timeline>;
  activity(filter: ActivityFilter): Promise<ActivityRow[]>;
  auditEntry(seq: number): Promise<AuditEntry | null>;
  verify(openBodies: boolean): Promise<Verification>;
}

/**
 * Grants and the every-use rules. Revoking and adding a rule only narrow, and need no proof;
 * removing a rule widens, and carries the person's proof (src/proof.ts).
 */
export interface PermissionsApi {
  list(): Promise<Permissions>;
  /** Resolves with whether the grant was still live. */
  revoke(id: string): Promise<boolean>;
  /** Resolves with the ids of the grants that were live. */
  revokeRun(run: RunKey): Promise<string[]>;
  /** On: `proof` null; resolves with the engine's warning, if any. Off: the person's proof. */
  setEveryUse(target: EveryUseTarget, on: boolean, proof: Proof | null): Promise<string | null>;
}

/** Everything the main window's views use besides status and the gate's controls. */
export interface Apis {
  servers: ServersApi;
  credentials: CredentialsApi;
  journal: JournalApi;
  permissions: PermissionsApi;
}

/** The message of a failed call, for people. */
export function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
