// Generated from crates/engine/src/api.rs by `cargo run -p postern-desk --bin gen-bindings`. Do not edit.

import type { ApprovalCard } from "./approval-card";

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
gate: GateStatus, 
/**
 * The OS authentication that stands in for the passphrase while the vault is unlocked
 * (`polkit`, `LocalAuthentication`), when this machine offers it.
 */
systemAuth: string | null, };

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
identityPaths: Array<string>, 
/**
 * Methods the gate does not know that agents may send it all the same (decided and
 * journaled).
 */
passMethods: Array<string>, 
/**
 * `confined` (its launches run in the OS sandbox) or `unconfined` (opted out).
 */
confinement: string, 
/**
 * Where a confined launch may write besides its directory and a private /tmp.
 */
writable: Array<string>, };

export type SessionStatus = { 
/**
 * The session's id, unique within this engine's run.
 */
id: string, 
/**
 * Its journal id: the session number Activity, the timeline and `postern sessions`
 * show ("session 27"); `null` until its first record is committed, or while the audit
 * log is not written.
 */
journal: number | null, 
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
credentials: CredentialsView, 
/**
 * Since when (unix ms) the running server has not answered Postern's pings, while it does
 * not.
 */
unresponsiveSinceMs: number | null, 
/**
 * The live grants that cover this session's current launch (its agent run's, for this
 * server, at this epoch), oldest first: what it may do without asking.
 */
grants: Array<GrantView>, };

export type SessionState = "stopped" | "starting" | "identityPending" | "catalogReady" | "catalogRefreshing";

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
 * The values of the variables that change what it loads (`NODE_OPTIONS=...`), part of
 * its identity.
 */
loaderEnv: Array<string>, 
/**
 * Which launch of its server this is, counted from 1 over every session and engine run
 * the journal holds ("launch 7"); `None` while the audit log (and so the journal) is
 * not being written.
 */
launch: number | null, 
/**
 * Whether the digests pin the code that runs, in part, or not.
 */
pinning: PinningView, 
/**
 * The OS sandbox it runs in; `null`: unconfined (it can read every file the user can and
 * connect anywhere).
 */
sandbox: SandboxView | null, 
/**
 * The process id at launch.
 */
pid: number, 
/**
 * Launch time, unix ms.
 */
startedAtMs: number, };

export type PinningView = { "state": "pinned" } | { "state": "partly", 
/**
 * What the digests cover: "the entry file server.js".
 */
covered: string, 
/**
 * What they do not, and how to cover it.
 */
uncovered: string, } | { "state": "unpinned", 
/**
 * Why.
 */
reason: string, };

export type SandboxView = { 
/**
 * "bubblewrap" or "sandbox-exec".
 */
tool: string, 
/**
 * What it cannot see (those that exist at launch are hidden).
 */
hidden: Array<string>, 
/**
 * Where it may write, besides a private /tmp.
 */
writable: Array<string>, 
/**
 * Its way to the network, in words.
 */
network: string, };

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
settings: Settings, 
/**
 * Whether a Postern passphrase was chosen (the app's first-run step sets one).
 */
passphraseSet: boolean, 
/**
 * Until when (unix ms) a plain click in the app approves, the person having typed the
 * passphrase shortly before (the setting `clickWindowMs`); `null`: a click is no proof.
 */
clicksUntilMs: number | null, 
/**
 * Settings found edited in the store behind the engine's back (wider than it wrote
 * them), and what is in force instead.
 */
configWarning: string | null, 
/**
 * Requests the egress broker refused because they carried a credential's placeholder
 * toward a host it may not go to, until a person dismisses them (oldest first).
 */
leaks: Array<LeakNotice>, 
/**
 * The last proof that came over the socket (a passphrase typed at a terminal, or the
 * OS's word for a CLI process) since the engine started: the app tells the person of
 * each, so one they did not give (a passphrase a program of theirs captured) shows.
 */
socketProof: SocketProof | null, };

export type LeakNotice = { 
/**
 * The server whose launch sent it.
 */
server: string, 
/**
 * The credentials whose placeholders it carried.
 */
credentials: Array<string>, 
/**
 * Where it was headed.
 */
host: string, 
/**
 * When (unix ms): the latest such request.
 */
atMs: number, 
/**
 * How many such requests (same server, host and credentials) were refused.
 */
count: number, };

export type SocketProof = { 
/**
 * What it proved, in words ("unlock the vault").
 */
what: string, 
/**
 * When (unix ms).
 */
atMs: number, 
/**
 * How many proofs came over the socket since the engine started (this one included).
 */
count: number, };

export type CredentialsView = { 
/**
 * Released to this launch.
 */
released: Array<string>, 
/**
 * Those of `released` the launch holds as placeholders: the egress broker adds the value
 * toward the credential's hosts only. The others are values in the server's environment,
 * exposed to its code.
 */
brokered: Array<string>, 
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
autoLockMs: number, 
/**
 * For this long after the passphrase was typed, a plain click in the app approves a
 * request (ms; 0, the default: every approval needs the passphrase). On X11 any program
 * of the user can click for them meanwhile.
 */
clickWindowMs: number, };

export type Permissions = { 
/**
 * Agent runs holding at least one live grant, the longest-held grant's run first.
 */
runs: Array<RunGrants>, 
/**
 * Where every call asks a human, whatever was granted (in the store's order).
 */
everyUse: Array<EveryUseTarget>, };

export type RunGrants = { 
/**
 * The run, as the revoke-all command takes it back.
 */
run: RunKey, 
/**
 * The agent's own name and version from its `initialize` ("claude-code 2.1.3";
 * self-reported), when one of its sessions is connected and said it.
 */
client: string | null, 
/**
 * The agent process's working directory, when known.
 */
cwd: string | null, 
/**
 * Whether a session of this run is connected now (a grant until the run ends outlives
 * its session while the agent process lives).
 */
connected: boolean, 
/**
 * Its live grants, oldest first.
 */
grants: Array<GrantView>, };

export type RunKey = { 
/**
 * The process id.
 */
pid: number, 
/**
 * The process start time as the process table reports it (compared, never shown).
 */
startTime: number, };

export type GrantView = { 
/**
 * The grant's id (what revoke takes).
 */
id: string, 
/**
 * The server.
 */
server: string, 
/**
 * The launch (execution epoch) it covers, and no other.
 */
epoch: string, 
/**
 * Which launch of its server that is, counted from 1 ("launch 7"; `None`: not known).
 */
launch: number | null, 
/**
 * When that launch started (unix ms; the epoch's own time).
 */
launchedAtMs: number, 
/**
 * Whether that launch still runs for the grant's agent run: once it ended the grant
 * covers nothing (the next launch asks again).
 */
launchRunning: boolean, 
/**
 * The tools it covers.
 */
tools: GrantTools, 
/**
 * The credentials (names) calls under it may use.
 */
credentials: Array<string>, 
/**
 * When a human gave it (unix ms).
 */
issuedAtMs: number, 
/**
 * When it ends (besides its launch ending).
 */
end: GrantEndView, };

export type GrantTools = { "kind": "named", 
/**
 * The names, sorted.
 */
names: Array<string>, } | { "kind": "everyToolOfCatalog", 
/**
 * The revision.
 */
revision: string, 
/**
 * Its tools' names, when a connected session holds that revision (else empty).
 */
names: Array<string>, };

export type GrantEndView = { "kind": "thisCall" } | { "kind": "until", 
/**
 * The end.
 */
unixMs: number, } | { "kind": "runEnds" };

export type EveryUseTarget = { "on": "tool", 
/**
 * The server.
 */
server: string, 
/**
 * The tool.
 */
tool: string, } | { "on": "server", 
/**
 * The server.
 */
server: string, } | { "on": "credential", 
/**
 * The credential's name.
 */
name: string, };

export type TimelineQuery = { 
/**
 * Window start, unix ms (default: the first session's start).
 */
since: number | null, 
/**
 * Window end, exclusive, unix ms (default: just after the last record of any session).
 */
until: number | null, 
/**
 * Only sessions with a larger id: the previous page's last lane.
 */
lanesAfter: number | null, 
/**
 * Most lanes (0: 100; at most 1,000).
 */
maxLanes: number, 
/**
 * Most call, refusal and grant marks (0: 2,000; at most 20,000).
 */
maxMarks: number, 
/**
 * Buckets across the window when the marks do not fit (0: 200; at most 2,000).
 */
buckets: number, };

export type Timeline = { 
/**
 * The window start, unix ms.
 */
since: number, 
/**
 * The window end (exclusive), unix ms.
 */
until: number, 
/**
 * The sessions overlapping the window, oldest first.
 */
lanes: Array<TimelineLane>, 
/**
 * More sessions overlap the window: ask again with `lanesAfter` set to the last lane's id.
 */
moreLanes: boolean, 
/**
 * Which kinds of marks are all given one by one; the others are only counted, in the
 * lanes' buckets. Rebuilds are always marks.
 */
complete: MarksComplete, 
/**
 * The width of every bucket (ms), when the lanes have buckets.
 */
bucketWidth: number | null, };

export type MarksComplete = { 
/**
 * Every call (and so every refusal).
 */
calls: boolean, 
/**
 * Every refusal.
 */
refusals: boolean, 
/**
 * Every grant issued or ended.
 */
grants: boolean, };

export type TimelineLane = { 
/**
 * The journal session id (what `ActivityFilter.session` takes).
 */
id: number, 
/**
 * The server label.
 */
server: string, 
/**
 * The agent process as the engine identified it (chain and pid), for display.
 */
agent: string | null, 
/**
 * The agent's self-reported client name (display only).
 */
client: string | null, 
/**
 * The agent's working directory.
 */
cwd: string | null, 
/**
 * Start, unix ms.
 */
started: number, 
/**
 * End, unix ms, when it ended cleanly.
 */
ended: number | null, 
/**
 * Its last record, unix ms: where an interrupted lane stops.
 */
lastSeen: number, 
/**
 * `running` (the lane goes on to now), `ended` or `interrupted`.
 */
status: string, 
/**
 * Who admitted the agent run: `human` or `observe`.
 */
approved: string | null, 
/**
 * Its epochs overlapping the window, in order.
 */
bands: Array<EpochBand>, 
/**
 * Its marks in the window, by time.
 */
marks: Array<TimelineMark>, 
/**
 * Its counts per bucket (`bucketWidth` wide), by start, when not every mark is given;
 * buckets with nothing in them are left out.
 */
buckets: Array<TimelineBucket>, 
/**
 * Its approval requests overlapping the window: while each was open, the agent waited
 * for a person.
 */
waits: Array<ApprovalWait>, };

export type EpochBand = { 
/**
 * The epoch.
 */
epoch: string, 
/**
 * The first record naming it in the session, unix ms.
 */
first: number, 
/**
 * The last record naming it in the session, unix ms.
 */
last: number, 
/**
 * The seq of the first record naming it (its audit entry).
 */
seq: number, };

export type TimelineMark = { "kind": "call", time: number, seq: number, tool: string, epoch: string | null, decision: string, 
/**
 * `ok`, `tool_error`, ...; `null` while no result is recorded.
 */
outcome: string | null, } | { "kind": "refusal", time: number, seq: number, tool: string, epoch: string | null, 
/**
 * The stable refusal code (`approval_denied`, `catalog_stale`, ...).
 */
code: string, } | { "kind": "grantIssued", time: number, seq: number, grant: string, epoch: string, 
/**
 * The `ToolScope`.
 */
tools: unknown, } | { "kind": "grantEnded", time: number, 
/**
 * `null` for a grant that ended before the journals recorded which record ended it.
 */
seq: number | null, grant: string, reason: string | null, } | { "kind": "rebuild", time: number, seq: number, from: string, to: string, };

export type TimelineBucket = { 
/**
 * Unix ms.
 */
start: number, 
/**
 * Calls, refusals included.
 */
calls: number, 
/**
 * Calls refused before forwarding.
 */
refused: number, 
/**
 * Grants issued.
 */
grants: number, };

export type ApprovalWait = { 
/**
 * The approval id.
 */
approval: string, 
/**
 * The tool the call was for.
 */
tool: string, 
/**
 * When it was asked, unix ms.
 */
requested: number, 
/**
 * The request's audit record.
 */
seq: number, 
/**
 * When it was answered, unix ms; `null` while open (or never: the engine stopped first).
 */
answered: number | null, 
/**
 * `granted`, `denied` or `expired`.
 */
answer: string | null, 
/**
 * The answer's audit record.
 */
answerSeq: number | null, 
/**
 * Where the person answered: `window`, `tray`, `terminal`; `null` when nobody did, or
 * the record predates it.
 */
by: string | null, };

export type ActivityFilter = { 
/**
 * A journal session id (a lane's `id`).
 */
session: number | null, 
/**
 * A server label.
 */
server: string | null, 
/**
 * An execution epoch.
 */
epoch: string | null, 
/**
 * A tool name.
 */
tool: string | null, 
/**
 * `allowed`, `observed`, `denied` (any refusal), `asked` (a person was asked about
 * the call), or one refusal code.
 */
decision: string | null, 
/**
 * At or after, unix ms.
 */
since: number | null, 
/**
 * Before, unix ms.
 */
until: number | null, 
/**
 * The next page: the previous page's last `seq`.
 */
before: number | null, 
/**
 * Page size (0: 50; at most 10,000).
 */
limit: number, };

export type ActivityRow = { 
/**
 * The intent's (or refusal's) audit record.
 */
seq: number, 
/**
 * Unix ms.
 */
time: number, 
/**
 * The journal session id.
 */
session: number, 
/**
 * The server label.
 */
server: string, 
/**
 * The epoch it ran (or was refused) under.
 */
epoch: string | null, 
/**
 * Which launch of its server that epoch is ("launch 7", as the Servers view numbers
 * it); `null` without an epoch.
 */
launch: number | null, 
/**
 * The tool.
 */
tool: string, 
/**
 * The JSON-RPC id, as JSON text.
 */
call: string, 
/**
 * `allowed`, `observed`, `no_intent`, or the refusal code.
 */
decision: string, 
/**
 * `ok`, `tool_error`, `error`, `epoch_transition`, `cancelled`, `refused`; `null` while
 * no result is recorded.
 */
outcome: string | null, 
/**
 * How long it took.
 */
durationMs: number | null, 
/**
 * Who called: its session's agent.
 */
agent: AgentName, 
/**
 * On what authority it went: `grant`, `observed` (observe mode), `admitted` (a request
 * other than a tool call, from a run a person admitted); `null` for a refusal and for
 * rows the journal recorded before it kept this.
 */
authority: string | null, 
/**
 * The grant it went under, and how long it was given for.
 */
grant: CallGrant | null, 
/**
 * The approval request it raised, when a person was asked about it.
 */
asked: CallAsked | null, };

export type AgentName = { 
/**
 * Its own name and version from its `initialize` (`claude-code 2.1.3`; self-reported).
 */
client: string | null, 
/**
 * The process as the engine identified it (chain and pid).
 */
process: string | null, 
/**
 * Its working directory.
 */
cwd: string | null, };

export type CallGrant = { 
/**
 * The grant id.
 */
grant: string, 
/**
 * The `GrantEnd` it was given with; `null` when the journal has no record of it.
 */
end: unknown, 
/**
 * When it was given, unix ms.
 */
issued: number | null, };

export type CallAsked = { 
/**
 * The approval id.
 */
approval: string, 
/**
 * When it was asked, unix ms.
 */
requested: number, 
/**
 * When it was answered, unix ms.
 */
answered: number | null, 
/**
 * `granted`, `denied` or `expired`.
 */
answer: string | null, 
/**
 * Where the person answered: `window` (the approval window), `tray`, `terminal` (the
 * CLI); `null` when nobody did, and for answers recorded before the log kept it.
 */
by: string | null, };

export type SessionFilter = { 
/**
 * A server label.
 */
server: string | null, 
/**
 * `running`, `ended` or `interrupted`.
 */
status: string | null, 
/**
 * The next page: the previous page's last `id`.
 */
before: number | null, 
/**
 * Page size (0: 50; at most 10,000).
 */
limit: number, };

export type SessionRow = { 
/**
 * The journal id.
 */
id: number, 
/**
 * The seq of its engine run's first record.
 */
run: number, 
/**
 * The engine's session number within the run.
 */
session: number, 
/**
 * The server label.
 */
server: string, 
/**
 * The agent's self-reported client name.
 */
client: string | null, 
/**
 * The agent process, for display.
 */
agent: string | null, 
/**
 * The agent's working directory.
 */
cwd: string | null, 
/**
 * Start, unix ms.
 */
started: number, 
/**
 * End, unix ms, when it ended cleanly.
 */
ended: number | null, 
/**
 * `running`, `ended` or `interrupted`.
 */
status: string, 
/**
 * Why it ended.
 */
reason: string | null, 
/**
 * Calls forwarded.
 */
calls: number, 
/**
 * Calls refused.
 */
denied: number, 
/**
 * Results other than ok.
 */
failed: number, 
/**
 * Who admitted it: `human` or `observe`.
 */
approved: string | null, 
/**
 * Approval requests it raised.
 */
approvals: number, 
/**
 * The epochs it used, in order.
 */
epochs: Array<string>, 
/**
 * The grants given in it, in order.
 */
grants: Array<GrantRow>, };

export type GrantRow = { 
/**
 * The grant id.
 */
grant: string, 
/**
 * The server label.
 */
server: string, 
/**
 * The epoch it is bound to.
 */
epoch: string, 
/**
 * The `ToolScope`.
 */
tools: unknown, 
/**
 * Credential scopes, by name.
 */
credentials: Array<string>, 
/**
 * The `GrantEnd`.
 */
end: unknown, 
/**
 * Issued, unix ms.
 */
issued: number, 
/**
 * Ended, unix ms, when a record says so.
 */
ended: number | null, 
/**
 * Why it ended.
 */
reason: string | null, };

export type AuditEntry = { 
/**
 * Its sequence number.
 */
seq: number, 
/**
 * Its time, unix ms (from the clear header).
 */
time: number, 
/**
 * Its event kind (from the clear header).
 */
kind: string, 
/**
 * The header's format version.
 */
version: number, 
/**
 * Its chain hash, hex.
 */
hash: string, 
/**
 * What is wrong with the record as stored, checked against the previous record only
 * (the header, the seq, the link to the previous hash): `null` when nothing is. The
 * Integrity view's full verification is what vouches for the whole log.
 */
problem: string | null, 
/**
 * The event, when it could be opened.
 */
body: AuditBody, 
/**
 * The call the record is about (its intent, refusal or result), as the Activity
 * journal has it: known even while the body stays sealed.
 */
call: ActivityRow | null, 
/**
 * The agent session the record names, by its journal id (the event's own `session` is
 * the engine's number within its run, which starts again with each run).
 */
session: EntrySession | null, };

export type AuditBody = { "state": "opened", event: unknown, } | { "state": "sealed", reason: string, };

export type EntrySession = { 
/**
 * The journal session id: the number the app and `postern sessions` show.
 */
id: number, 
/**
 * The server label.
 */
server: string, 
/**
 * Its agent.
 */
agent: AgentName, };

// From crates/desk/src/view.rs: the engine as the app sees it.

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

// From crates/desk/src/approvals.rs and commands.rs: approvals and the commands' types.

export type Approval = { 
/**
 * The engine's card.
 */
card: ApprovalCard, 
/**
 * What changed in the catalog since the last approved revision, one line per change
 * (empty unless the catalog changed); a line ending in ` [escalation]` makes a tool
 * look safer than before.
 */
catalogChanges: Array<string>, 
/**
 * Whether a change makes a tool look safer than before (an annotation hint flip).
 */
escalation: boolean, };

export type Chosen = { 
/**
 * The request.
 */
id: string, 
/**
 * Review… of a flagged request (the window opens its details), not Approve… of a calm one.
 */
review: boolean, };

export type SettingsChange = { 
/**
 * `prompt` (a human admits each new agent run) or `observe`.
 */
sessionMode: "prompt" | "observe" | null, 
/**
 * How long a human has to answer an approval request (ms, at least 1000).
 */
approvalTimeoutMs: number | null, 
/**
 * Lock the vault after this long without a call or an answer (ms; 0: never).
 */
autoLockMs: number | null, 
/**
 * Plain clicks approve for this long after the passphrase (ms; 0: never).
 */
clickWindowMs: number | null, };

export type Proof = { 
/**
 * The Postern passphrase.
 */
passphrase?: string, 
/**
 * Ask the OS to authenticate the person instead.
 */
system?: boolean, };

export type CommandError = { 
/**
 * What kind of failure, as a stable code.
 */
code: ErrorCode, 
/**
 * The engine's sentence, for people.
 */
message: string, };

export type ErrorCode = "no_engine" | "not_open" | "unacceptable" | "bad_request" | "settings_refused" | "refused" | "failed" | "proof_required" | "passphrase_wrong" | "proof_backoff" | "passphrase_not_set" | "passphrase_already_set" | "passphrase_too_short" | "vault_key_replaced" | "os_auth_needs_passphrase" | "os_auth_unavailable" | "os_auth_no_agent" | "os_auth_dismissed" | "os_auth_denied";

// From crates/desk/src/servers.rs and postern_engine::import: servers from the window.

export type NewServer = { 
/**
 * The label agents will use (`postern mcp <label>`).
 */
label: string, 
/**
 * The program and its arguments.
 */
command: Array<string>, 
/**
 * The working directory (absolute; must exist), if any.
 */
cwd: string | null, 
/**
 * Environment variables, `NAME=value` each.
 */
env: Array<string>, };

export type ImportSource = { 
/**
 * Whose file it is and where, when it is a known agent's.
 */
found: Found | null, 
/**
 * The file.
 */
path: string, 
/**
 * Its server entries (each says why it would be skipped, if so).
 */
entries: Array<Entry>, 
/**
 * Why the file could not be read.
 */
error: string | null, 
/**
 * How its servers are reached now (`null` when it could not be read).
 */
coverage: Coverage | null, };

export type Found = { 
/**
 * Whose file it is.
 */
client: Client, 
/**
 * Where it is.
 */
path: string, };

export type Client = "claudeDesktop" | "claudeCode" | "cursor";

export type Entry = { 
/**
 * The entry's name in the file (the label Postern would use, when valid).
 */
name: string, 
/**
 * How the agent reaches it today.
 */
route: Route, 
/**
 * The command and its arguments (empty when skipped for lack of one).
 */
command: Array<string>, 
/**
 * Environment variable names it sets (values are imported, never shown).
 */
envNames: Array<string>, 
/**
 * Why it cannot be imported, if so.
 */
skipped: string | null, };

export type Route = "direct" | "postern" | "remote" | "unusable";

export type Coverage = { 
/**
 * Server entries in the file (each name once).
 */
servers: number, 
/**
 * Those that run `postern mcp`.
 */
throughPostern: number, 
/**
 * Remote servers, by name: Postern does not gate them.
 */
remote: Array<string>, 
/**
 * Servers the agent runs itself, by name: nothing gates them.
 */
direct: Array<string>, 
/**
 * The coverage in one sentence: "1 of 3 servers through Postern; linear is remote, not
 * gated; notes runs directly".
 */
sentence: string, };

export type Plan = { 
/**
 * The file.
 */
path: string, 
/**
 * The entries it changes (empty: nothing to rewire).
 */
changes: Array<Change>, };

export type Change = { 
/**
 * The entry's name in the file.
 */
name: string, 
/**
 * The Postern server it goes through.
 */
label: string, 
/**
 * Its command and arguments now.
 */
before: Array<string>, 
/**
 * Its command and arguments after.
 */
after: Array<string>, 
/**
 * The environment variable names it loses (Postern holds them), never their values.
 */
envNames: Array<string>, };

export type Rewired = { 
/**
 * The backup of the file as it was, beside it.
 */
backup: string, 
/**
 * How its servers are reached now.
 */
coverage: Coverage, };

export type Imported = { 
/**
 * The entry's name in the file.
 */
name: string, 
/**
 * The label it was added under.
 */
label: string | null, 
/**
 * Why it was not added.
 */
skipped: string | null, 
/**
 * Its environment variables whose names say they hold a secret: imported in plain text,
 * as the file had them, better moved into the keychain.
 */
secrets: Array<string>, };

export type AgentSnippet = { 
/**
 * The `postern` program the snippet runs (an absolute path when one was found).
 */
postern: string, 
/**
 * The `mcpServers` JSON that Claude Desktop, Claude Code and Cursor read, pretty-printed.
 */
json: string, 
/**
 * The same for Claude Code's CLI, one command per server.
 */
claudeCode: Array<string>, };

// From crates/desk/src/credentials.rs: credentials, never their values.

export type CredentialItem = { 
/**
 * The scope name grants and approval cards use.
 */
name: string, 
/**
 * How its value reaches the code that uses it.
 */
injection: CredentialKind, 
/**
 * The hosts an HTTP request may carry it to (header kinds).
 */
hosts: Array<string>, 
/**
 * Those of its hosts that name this machine loosely (without a port, or as `localhost`,
 * kept from before an address and port were required): any process of the user listening
 * where a request for one connects receives the value.
 */
looselyHere: Array<string>, 
/**
 * Every call that would use it needs a human.
 */
everyUse: boolean, 
/**
 * Bumped by each rotation.
 */
version: number, 
/**
 * When it was added (unix ms).
 */
createdAtMs: number, 
/**
 * When it was last rotated (unix ms).
 */
rotatedAtMs: number | null, 
/**
 * The servers it is bound to (the built-in `postern` for header kinds).
 */
servers: Array<string>, 
/**
 * Where it went through the egress broker, the most recent first.
 */
uses: Array<CredentialUseItem>, };

export type CredentialUseItem = { 
/**
 * The server whose launches sent them.
 */
server: string, 
/**
 * The host they were headed to.
 */
host: string, 
/**
 * Requests the broker put the value in.
 */
uses: number, 
/**
 * Requests refused: its placeholder was headed to a host it is not bound to.
 */
leaks: number, 
/**
 * The first (unix ms).
 */
firstMs: number, 
/**
 * The last (unix ms).
 */
lastMs: number, };

export type CredentialKind = { "kind": "env", 
/**
 * The variable's name.
 */
var: string, } | { "kind": "bearer" } | { "kind": "header", 
/**
 * The header's name.
 */
name: string, } | { "kind": "basic" };

export type NewCredential = { 
/**
 * Its name: 1 to 48 of `a-z 0-9 - _ .`.
 */
name: string, 
/**
 * How it is injected.
 */
injection: CredentialKind, 
/**
 * The hosts it may go to (header kinds).
 */
hosts: Array<string>, 
/**
 * Ask a human for every call that would use it.
 */
everyUse: boolean, 
/**
 * The value, typed into a password field.
 */
value: string, };

// From crates/desk/src/journal.rs: verifying the audit log.

export type Verification = { "state": "verified", 
/**
 * Records verified.
 */
records: number, 
/**
 * The last record verified, `SEQ:HASH`.
 */
head: string | null, 
/**
 * How the anchor in the keychain was checked.
 */
anchor: AnchorView, 
/**
 * Whether every body was opened too.
 */
bodiesOpened: boolean, 
/**
 * Why bodies were not opened, when they were not.
 */
keyNote: string | null, } | { "state": "failed", 
/**
 * Its sequence number.
 */
seq: number, 
/**
 * The stable code (`audit_chain_broken`, `audit_log_truncated`, ...).
 */
code: string, 
/**
 * What is wrong there.
 */
reason: string, };

export type AnchorView = { "state": "checked", 
/**
 * The anchor.
 */
head: string, } | { "state": "empty" } | { "state": "unavailable", 
/**
 * Why.
 */
reason: string, };

