//! The engine's status model as shells see it. These types cross the app's IPC
//! boundary; their TypeScript twins in `ui/src/bindings.ts` are generated from here.

use postern_domain::{Artifact, ExecutionRecord, Pinning, ServerConfig};
use postern_gateway::{Phase, SessionInfo};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::permissions::{GrantView, session_grants};
use crate::{AuditState, AuditStatus, Home};

/// Everything the status view shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The home directory this engine owns.
    pub home: String,
    /// The socket agents' shims connect to.
    pub socket: String,
    /// Configured servers, by label.
    pub servers: Vec<ServerStatus>,
    /// Connected agent sessions, oldest first.
    pub sessions: Vec<SessionStatus>,
    /// The audit log: calls are refused unless it is ready.
    pub audit: AuditStatus,
    /// The gate: the vault lock, waiting approvals, settings.
    pub gate: GateStatus,
    /// The OS authentication that stands in for the passphrase while the vault is unlocked
    /// (`polkit`, `LocalAuthentication`), when this machine offers it.
    pub system_auth: Option<String>,
}

/// The gate's state at a glance (what the tray icon shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GateStatus {
    /// `ready`, `locked`, `unlocking`, or `quarantined` (the audit log failed verification).
    #[ts(type = "\"ready\" | \"locked\" | \"unlocking\" | \"quarantined\"")]
    pub vault: postern_domain::decision::VaultState,
    /// Approval requests waiting for a human.
    pub approvals: u32,
    /// Live grants.
    pub grants: u32,
    /// The settings.
    pub settings: crate::Settings,
    /// Whether a Postern passphrase was chosen (the app's first-run step sets one).
    pub passphrase_set: bool,
    /// Until when (unix ms) a plain click in the app approves, the person having typed the
    /// passphrase shortly before (the setting `clickWindowMs`); `null`: a click is no proof.
    #[ts(type = "number | null")]
    pub clicks_until_ms: Option<u64>,
    /// Settings found edited in the store behind the engine's back (wider than it wrote
    /// them), and what is in force instead.
    pub config_warning: Option<String>,
    /// Requests the egress broker refused because they carried a credential's placeholder
    /// toward a host it may not go to, until a person dismisses them (oldest first).
    pub leaks: Vec<LeakNotice>,
    /// The last proof that came over the socket (a passphrase typed at a terminal, or the
    /// OS's word for a CLI process) since the engine started: the app tells the person of
    /// each, so one they did not give (a passphrase a program of theirs captured) shows.
    pub socket_proof: Option<SocketProof>,
}

/// A proof the engine held that came over its socket, not from the app's own window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SocketProof {
    /// What it proved, in words ("unlock the vault").
    pub what: String,
    /// When (unix ms).
    #[ts(type = "number")]
    pub at_ms: u64,
    /// How many proofs came over the socket since the engine started (this one included).
    #[ts(type = "number")]
    pub count: u64,
}

/// A request the egress broker refused: a launch of `server` sent the placeholders of
/// `credentials` toward `host`. The launch gets no value any more, and the server's next launch
/// none of them until a person approves again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct LeakNotice {
    /// The server whose launch sent it.
    pub server: String,
    /// The credentials whose placeholders it carried.
    pub credentials: Vec<String>,
    /// Where it was headed.
    pub host: String,
    /// When (unix ms): the latest such request.
    #[ts(type = "number")]
    pub at_ms: u64,
    /// How many such requests (same server, host and credentials) were refused.
    pub count: u32,
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// The label agents use: `postern mcp <label>`.
    pub label: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The working directory, when configured.
    pub cwd: Option<String>,
    /// How many processes of this server are running now (one per agent session).
    pub running: u32,
    /// `manual` or `on-change`.
    pub restart: String,
    /// Whether the server reloads its own code (nodemon-style).
    pub self_reloading: bool,
    /// Extra identity paths the user configured.
    pub identity_paths: Vec<String>,
    /// Methods the gate does not know that agents may send it all the same (decided and
    /// journaled).
    pub pass_methods: Vec<String>,
    /// `confined` (its launches run in the OS sandbox) or `unconfined` (opted out).
    pub confinement: String,
    /// Where a confined launch may write besides its directory and a private /tmp.
    pub writable: Vec<String>,
}

/// One connected agent session and the server process it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    /// The session's id, unique within this engine's run.
    pub id: String,
    /// Its journal id: the session number Activity, the timeline and `postern sessions`
    /// show ("session 27"); `null` until its first record is committed, or while the audit
    /// log is not written.
    #[ts(type = "number | null")]
    pub journal: Option<i64>,
    /// The server label the agent asked for.
    pub server: String,
    /// The agent's own name and version from `initialize` (self-reported, for display).
    pub client: Option<String>,
    /// The agent process behind the shim, as the process table says.
    pub agent: Option<AgentView>,
    /// When the agent connected, in unix milliseconds.
    #[ts(type = "number")]
    pub connected_at_ms: i64,
    /// Where the server is in the refresh contract's state machine.
    pub state: SessionState,
    /// The server process id while it runs.
    pub server_pid: Option<u32>,
    /// The current (or last) execution epoch and what was launched.
    pub execution: Option<ExecutionView>,
    /// The current epoch's catalog.
    pub catalog: Option<CatalogView>,
    /// Identity artifacts that changed on disk since the running process started.
    pub artifacts_newer: Vec<String>,
    /// Why the server last stopped or failed to start.
    pub last_exit: Option<String>,
    /// Crash back-off: no launch before this time (unix ms).
    #[ts(type = "number | null")]
    pub backoff_until_ms: Option<i64>,
    /// Credential scopes bound to the server that this launch was given, or not, and why.
    pub credentials: CredentialsView,
    /// Since when (unix ms) the running server has not answered Postern's pings, while it does
    /// not.
    #[ts(type = "number | null")]
    pub unresponsive_since_ms: Option<i64>,
    /// The live grants that cover this session's current launch (its agent run's, for this
    /// server, at this epoch), oldest first: what it may do without asking.
    pub grants: Vec<GrantView>,
}

/// Which bound credentials a launch holds (names only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsView {
    /// Released to this launch.
    pub released: Vec<String>,
    /// Those of `released` the launch holds as placeholders: the egress broker adds the value
    /// toward the credential's hosts only. The others are values in the server's environment,
    /// exposed to its code.
    pub brokered: Vec<String>,
    /// Bound but withheld from this launch.
    pub withheld: Vec<String>,
    /// Why, e.g. "identity changed since approval".
    pub reason: Option<String>,
}

/// The state of a session's server (docs/refresh-contract.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub enum SessionState {
    /// Not running; the next request starts it.
    Stopped,
    /// Launched, handshake in progress.
    Starting,
    /// A new epoch whose catalog is being fetched: requests are held.
    IdentityPending,
    /// Running, its catalog known.
    CatalogReady,
    /// Running; the server said its tools changed and Postern is fetching and checking the new
    /// catalog: requests are held.
    CatalogRefreshing,
}

/// An execution record as shells show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionView {
    /// The epoch (a ULID).
    pub epoch: String,
    /// One digest over the whole identity.
    pub identity: String,
    /// The command, program resolved.
    pub launch_command: Vec<String>,
    /// The program that runs.
    pub executable: ArtifactView,
    /// `#!` wrappers on the way.
    pub wrappers: Vec<ArtifactView>,
    /// The interpreter's entry file.
    pub entry: Option<ArtifactView>,
    /// Lockfiles in the working directory.
    pub lockfiles: Vec<ArtifactView>,
    /// Configured identity paths.
    pub extra_paths: Vec<ArtifactView>,
    /// The interpreter's version.
    pub runtime: Option<String>,
    /// The working directory.
    pub working_directory: String,
    /// Names of the environment variables the process got (never values).
    pub env_names: Vec<String>,
    /// The values of the variables that change what it loads (`NODE_OPTIONS=...`), part of
    /// its identity.
    pub loader_env: Vec<String>,
    /// Which launch of its server this is, counted from 1 over every session and engine run
    /// the journal holds ("launch 7"); `None` while the audit log (and so the journal) is
    /// not being written.
    pub launch: Option<u32>,
    /// Whether the digests pin the code that runs, in part, or not.
    pub pinning: PinningView,
    /// The OS sandbox it runs in; `null`: unconfined (it can read every file the user can and
    /// connect anywhere).
    pub sandbox: Option<SandboxView>,
    /// The process id at launch.
    pub pid: u32,
    /// Launch time, unix ms.
    #[ts(type = "number")]
    pub started_at_ms: i64,
}

/// The OS sandbox a launch runs in (`postern_domain::Sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SandboxView {
    /// "bubblewrap" or "sandbox-exec".
    pub tool: String,
    /// What it cannot see (those that exist at launch are hidden).
    pub hidden: Vec<String>,
    /// Where it may write, besides a private /tmp.
    pub writable: Vec<String>,
    /// Its way to the network, in words.
    pub network: String,
}

/// Whether the digests cover the code that runs (`postern_domain::Pinning`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(
    tag = "state",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum PinningView {
    /// All of it.
    Pinned,
    /// The server's own code, not everything it runs.
    Partly {
        /// What the digests cover: "the entry file server.js".
        covered: String,
        /// What they do not, and how to cover it.
        uncovered: String,
    },
    /// The digests prove less than they seem.
    Unpinned {
        /// Why.
        reason: String,
    },
}

/// The agent process behind a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    /// Its process id.
    pub pid: u32,
    /// Its executable and digest, when readable.
    pub executable: Option<ArtifactView>,
    /// Process names from its parent down to the shim.
    pub chain: Vec<String>,
    /// Its working directory (display only).
    pub cwd: Option<String>,
}

/// A hashed file or tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactView {
    /// Its path.
    pub path: String,
    /// `sha256:<hex>`.
    pub digest: String,
}

/// A catalog revision as shells show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CatalogView {
    /// The revision digest.
    pub revision: String,
    /// The tool names, sorted.
    pub tools: Vec<String>,
    /// The revision this agent was last shown, if it listed tools.
    pub presented_revision: Option<String>,
    /// What changed from the previous revision, one line per change.
    pub changes: Vec<String>,
    /// Whether a change makes a tool look safer than before (an annotation hint flip).
    pub escalation: bool,
}

/// Each launch's number among its server's launches ("launch 7"), by epoch: what
/// [`crate::launches`] read from the journal.
pub(crate) type Launches = std::collections::HashMap<postern_domain::ExecutionEpoch, u32>;

/// Each live session's journal id (what Activity calls "session 27"), by its number in this
/// engine run and its server: what [`crate::launches::journal_ids`] read from the journal.
pub(crate) type JournalIds = std::collections::HashMap<(u64, String), i64>;

/// The numbers people read instead of ids, from the journal: each launch's and each live
/// session's.
#[derive(Debug, Default)]
pub(crate) struct Numbers {
    /// "launch 7", by epoch.
    pub launches: Launches,
    /// "session 27", by session number and server.
    pub sessions: JournalIds,
}

/// Builds the status view from configuration and live sessions.
pub(crate) fn status(
    home: &Home,
    configs: &[ServerConfig],
    sessions: &[SessionInfo],
    audit: AuditStatus,
    gate: GateStatus,
    grants: &[postern_domain::Grant],
    numbers: &Numbers,
) -> Status {
    let servers = configs
        .iter()
        .map(|c| ServerStatus {
            label: c.label.to_string(),
            command: c.command.clone(),
            cwd: c.cwd.as_ref().map(|p| p.display().to_string()),
            running: sessions
                .iter()
                .filter(|s| s.server == c.label && s.pid().is_some())
                .count() as u32,
            restart: c.restart.to_string(),
            self_reloading: c.self_reloading,
            identity_paths: c
                .identity_paths
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            pass_methods: c.pass_methods.clone(),
            confinement: c.confinement.to_string(),
            writable: c.writable.iter().map(|p| p.display().to_string()).collect(),
        })
        .collect();
    let sessions = sessions
        .iter()
        .map(|s| SessionStatus {
            journal: numbers.sessions.get(&(s.id, s.server.to_string())).copied(),
            ..session_status(s, grants, &numbers.launches)
        })
        .collect();
    Status {
        home: home.path().display().to_string(),
        socket: home.socket_path().display().to_string(),
        servers,
        sessions,
        gate,
        audit,
        system_auth: None,
    }
}

fn session_status(
    s: &SessionInfo,
    grants: &[postern_domain::Grant],
    launches: &Launches,
) -> SessionStatus {
    SessionStatus {
        id: format!("#{}", s.id),
        journal: None,
        server: s.server.to_string(),
        client: s.client.clone(),
        agent: s.agent.as_ref().map(|a| AgentView {
            pid: a.pid,
            executable: a.executable.as_ref().map(artifact_view),
            chain: a.chain.clone(),
            cwd: a.cwd.as_ref().map(|p| p.display().to_string()),
        }),
        connected_at_ms: s.connected_at_ms,
        state: match s.phase {
            Phase::Stopped => SessionState::Stopped,
            Phase::Starting => SessionState::Starting,
            Phase::IdentityPending => SessionState::IdentityPending,
            Phase::CatalogReady => SessionState::CatalogReady,
            Phase::CatalogRefreshing => SessionState::CatalogRefreshing,
        },
        server_pid: s.pid(),
        execution: s.record.as_ref().map(|r| execution_view(r, launches)),
        catalog: s.catalog.as_ref().map(|c| {
            let diff = s.previous_catalog.as_ref().map(|old| old.diff(c));
            CatalogView {
                revision: c.digest().to_string(),
                tools: c.tools_by_name().map(|t| t.name().to_owned()).collect(),
                presented_revision: s.presented.as_ref().map(|p| p.digest().to_string()),
                changes: diff.as_ref().map(|d| d.lines()).unwrap_or_default(),
                escalation: diff.as_ref().is_some_and(|d| d.has_escalation()),
            }
        }),
        artifacts_newer: s
            .artifacts_newer
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        last_exit: s.last_exit.clone(),
        backoff_until_ms: s.backoff_until_ms,
        credentials: CredentialsView {
            released: s.credentials.released.clone(),
            brokered: s.credentials.brokered.clone(),
            withheld: s.credentials.withheld.clone(),
            reason: s.credentials.reason.clone(),
        },
        unresponsive_since_ms: s.unresponsive_since_ms,
        grants: session_grants(s, grants, launches),
    }
}

fn artifact_view(a: &Artifact) -> ArtifactView {
    ArtifactView {
        path: a.path.display().to_string(),
        digest: a.digest.to_string(),
    }
}

fn execution_view(r: &ExecutionRecord, launches: &Launches) -> ExecutionView {
    ExecutionView {
        epoch: r.epoch.to_string(),
        identity: r.identity_digest().to_string(),
        launch_command: r.launch_command.clone(),
        executable: artifact_view(&r.executable),
        wrappers: r.wrappers.iter().map(artifact_view).collect(),
        entry: r.entry.as_ref().map(artifact_view),
        lockfiles: r.lockfiles.iter().map(artifact_view).collect(),
        extra_paths: r.extra_paths.iter().map(artifact_view).collect(),
        runtime: r.runtime.clone(),
        working_directory: r.working_directory.display().to_string(),
        env_names: r.env_names.clone(),
        loader_env: r.loader_env.clone(),
        launch: launches.get(&r.epoch).copied(),
        pinning: match &r.pinning {
            Pinning::Pinned => PinningView::Pinned,
            Pinning::Partly { covered, uncovered } => PinningView::Partly {
                covered: covered.clone(),
                uncovered: uncovered.clone(),
            },
            Pinning::Unpinned { reason } => PinningView::Unpinned {
                reason: reason.clone(),
            },
        },
        sandbox: r.sandbox.as_ref().map(|s| SandboxView {
            tool: s.tool.clone(),
            hidden: s.hidden.iter().map(|p| p.display().to_string()).collect(),
            writable: s.writable.iter().map(|p| p.display().to_string()).collect(),
            network: s.network.clone(),
        }),
        pid: r.pid,
        started_at_ms: r.started_at_ms,
    }
}

/// The TypeScript declarations of every type above, as committed in `ui/src/bindings.ts`.
pub fn typescript_bindings() -> String {
    let decls = [
        Status::decl(),
        ServerStatus::decl(),
        SessionStatus::decl(),
        SessionState::decl(),
        ExecutionView::decl(),
        PinningView::decl(),
        SandboxView::decl(),
        ArtifactView::decl(),
        AgentView::decl(),
        CatalogView::decl(),
        AuditStatus::decl(),
        AuditState::decl(),
        GateStatus::decl(),
        LeakNotice::decl(),
        SocketProof::decl(),
        CredentialsView::decl(),
        crate::Settings::decl(),
        crate::permissions::Permissions::decl(),
        crate::permissions::RunGrants::decl(),
        crate::permissions::RunKey::decl(),
        GrantView::decl(),
        crate::permissions::GrantTools::decl(),
        crate::permissions::GrantEndView::decl(),
        crate::permissions::EveryUseTarget::decl(),
        crate::journal::TimelineQuery::decl(),
        crate::journal::Timeline::decl(),
        crate::journal::MarksComplete::decl(),
        crate::journal::TimelineLane::decl(),
        crate::journal::EpochBand::decl(),
        crate::journal::TimelineMark::decl(),
        crate::journal::TimelineBucket::decl(),
        crate::journal::ApprovalWait::decl(),
        crate::journal::ActivityFilter::decl(),
        crate::journal::ActivityRow::decl(),
        crate::journal::AgentName::decl(),
        crate::journal::CallGrant::decl(),
        crate::journal::CallAsked::decl(),
        crate::journal::SessionFilter::decl(),
        crate::journal::SessionRow::decl(),
        crate::journal::GrantRow::decl(),
        crate::journal::AuditEntry::decl(),
        crate::journal::AuditBody::decl(),
        crate::journal::EntrySession::decl(),
    ];
    let mut out = String::from(
        "// Generated from crates/engine/src/api.rs by `cargo run -p postern-desk --bin gen-bindings`. Do not edit.\n\n",
    );
    for decl in decls {
        out.push_str("export ");
        out.push_str(&decl);
        out.push_str("\n\n");
    }
    out
}
