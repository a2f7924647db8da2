// Generated from crates/engine/src/api.rs by `cargo run -p postern-app --bin gen-bindings`. Do not edit.

export type Status = { 
/**
 * The home directory this engine owns.
 */
home: string, 
/**
 * The socket agents' shims connect to.
 */
socket: string, 
/**
 * Configured servers, by label.
 */
servers: Array<ServerStatus>, 
/**
 * Connected agent sessions, oldest first.
 */
sessions: Array<SessionStatus>, 
/**
 * The audit log: calls are refused unless it is ready.
 */
audit: AuditStatus, 
/**
 * The gate: the vault lock, waiting approvals, settings.
 */
gate: GateStatus, };

export type ServerStatus = { 
/**
 * The label agents use: `postern mcp <label>`.
 */
label: string, 
/**
 * The program and its arguments.
 */
command: Array<string>, 
/**
 * The working directory, when configured.
 */
cwd: string | null, 
/**
 * How many processes of this server are running now (one per agent session).
 */
running: number, 
/**
 * `manual` or `on-change`.
 */
restart: string, 
/**
 * Whether the server reloads its own code (nodemon-style).
 */
selfReloading: boolean, 
/**
 * Extra identity paths the user configured.
 */
identityPaths: Array<string>, };

export type SessionStatus = { 
/**
 * The session's id, unique within this engine's run.
 */
id: string, 
/**
 * The server label the agent asked for.
 */
server: string, 
/**
 * The agent's own name and version from `initialize` (self-reported, for display).
 */
client: string | null, 
/**
 * The agent process behind the shim, as the process table says.
 */
agent: AgentView | null, 
/**
 * When the agent connected, in unix milliseconds.
 */
connectedAtMs: number, 
/**
 * Where the server is in the refresh contract's state machine.
 */
state: SessionState, 
/**
 * The server process id while it runs.
 */
serverPid: number | null, 
/**
 * The current (or last) execution epoch and what was launched.
 */
execution: ExecutionView | null, 
/**
 * The current epoch's catalog.
 */
catalog: CatalogView | null, 
/**
 * Identity artifacts that changed on disk since the running process started.
 */
artifactsNewer: Array<string>, 
/**
 * Why the server last stopped or failed to start.
 */
lastExit: string | null, 
/**
 * Crash back-off: no launch before this time (unix ms).
 */
backoffUntilMs: number | null, 
/**
 * Credential scopes bound to the server that this launch was given, or not, and why.
 */
credentials: CredentialsView, };

export type SessionState = "stopped" | "starting" | "identityPending" | "catalogReady";

export type ExecutionView = { 
/**
 * The epoch (a ULID).
 */
epoch: string, 
/**
 * One digest over the whole identity.
 */
identity: string, 
/**
 * The command, program resolved.
 */
launchCommand: Array<string>, 
/**
 * The program that runs.
 */
executable: ArtifactView, 
/**
 * `#!` wrappers on the way.
 */
wrappers: Array<ArtifactView>, 
/**
 * The interpreter's entry file.
 */
entry: ArtifactView | null, 
/**
 * Lockfiles in the working directory.
 */
lockfiles: Array<ArtifactView>, 
/**
 * Configured identity paths.
 */
extraPaths: Array<ArtifactView>, 
/**
 * The interpreter's version.
 */
runtime: string | null, 
/**
 * The working directory.
 */
workingDirectory: string, 
/**
 * Names of the environment variables the process got (never values).
 */
envNames: Array<string>, 
/**
 * Whether the digests pin the code that runs.
 */
pinned: boolean, 
/**
 * Why not, when not.
 */
unpinnedReason: string | null, 
/**
 * The process id at launch.
 */
pid: number, 
/**
 * Launch time, unix ms.
 */
startedAtMs: number, };

export type ArtifactView = { 
/**
 * Its path.
 */
path: string, 
/**
 * `sha256:<hex>`.
 */
digest: string, };

export type AgentView = { 
/**
 * Its process id.
 */
pid: number, 
/**
 * Its executable and digest, when readable.
 */
executable: ArtifactView | null, 
/**
 * Process names from its parent down to the shim.
 */
chain: Array<string>, 
/**
 * Its working directory (display only).
 */
cwd: string | null, };

export type CatalogView = { 
/**
 * The revision digest.
 */
revision: string, 
/**
 * The tool names, sorted.
 */
tools: Array<string>, 
/**
 * The revision this agent was last shown, if it listed tools.
 */
presentedRevision: string | null, 
/**
 * What changed from the previous revision, one line per change.
 */
changes: Array<string>, 
/**
 * Whether a change makes a tool look safer than before (an annotation hint flip).
 */
escalation: boolean, };

export type AuditStatus = { 
/**
 * Ready, unavailable, quarantined or closed.
 */
state: AuditState, 
/**
 * The last committed record, `SEQ:HASH`.
 */
head: string | null, 
/**
 * The head last written to the keychain.
 */
anchored: string | null, 
/**
 * Why the last anchor write failed, while it keeps failing.
 */
anchorError: string | null, 
/**
 * Batches whose transaction failed (their calls were refused).
 */
failedBatches: number, 
/**
 * Events that could not be recorded (unavailable or quarantined log).
 */
dropped: number, };

export type AuditState = { "state": "ready" } | { "state": "unavailable", 
/**
 * Why.
 */
reason: string, } | { "state": "quarantined", 
/**
 * The first bad sequence number.
 */
seq: number, 
/**
 * What is wrong there.
 */
reason: string, } | { "state": "closed" };

export type GateStatus = { 
/**
 * `ready`, `locked`, `unlocking`, or `quarantined` (the audit log failed verification).
 */
vault: "ready" | "locked" | "unlocking" | "quarantined", 
/**
 * Approval requests waiting for a human.
 */
approvals: number, 
/**
 * Live grants.
 */
grants: number, 
/**
 * The settings.
 */
settings: Settings, };

export type CredentialsView = { 
/**
 * Released to this launch.
 */
released: Array<string>, 
/**
 * Bound but withheld from this launch.
 */
withheld: Array<string>, 
/**
 * Why, e.g. "identity changed since approval".
 */
reason: string | null, };

export type Settings = { 
/**
 * `prompt` (a human admits each new agent run) or `observe` (admitted and journaled).
 */
sessionMode: "prompt" | "observe", 
/**
 * How long a human has to answer an approval request (ms).
 */
approvalTimeoutMs: number, 
/**
 * Lock the vault after this long without a call or an answer (ms; 0: never).
 */
autoLockMs: number, };

// From src-tauri/src/view.rs: the engine as the app sees it.

export type EngineView = { "state": "starting", 
/**
 * The home directory.
 */
home: string, } | { "state": "running", 
/**
 * The engine's snapshot.
 */
status: Status, } | { "state": "unavailable", 
/**
 * The home directory, when one could be chosen.
 */
home: string | null, 
/**
 * Why, as a stable code.
 */
reason: Unavailable, 
/**
 * The error, for people.
 */
message: string, } | { "state": "stopped", 
/**
 * The home directory.
 */
home: string, };

export type Unavailable = "already_running" | "no_home" | "start_failed" | "status_failed";

