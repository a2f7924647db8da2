//! The engine's status model as shells see it. These types cross the app's IPC
//! boundary; their TypeScript twins in `ui/src/bindings.ts` are generated from here.

use postern_domain::ServerConfig;
use postern_gateway::{Phase, SessionInfo};
use serde::Serialize;
use ts_rs::TS;

use crate::Home;

/// Everything the status view shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
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
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
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
}

/// One connected agent session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    /// The session's id, unique within this engine's run.
    pub id: String,
    /// The server label the agent asked for.
    pub server: String,
    /// The agent's own name and version from `initialize` (self-reported, for display).
    pub client: Option<String>,
    /// When the agent connected, in unix milliseconds.
    #[ts(type = "number")]
    pub connected_at_ms: i64,
    /// The state of this session's server process.
    pub state: SessionState,
    /// The server process id while it runs.
    pub server_pid: Option<u32>,
}

/// The state of a session's server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub enum SessionState {
    /// Not started yet, or stopped after an exit; the next call starts it.
    Stopped,
    /// Launched, handshake in progress.
    Starting,
    /// Running and initialized.
    Running,
}

/// Builds the status view from configuration and live sessions.
pub(crate) fn status(home: &Home, configs: &[ServerConfig], sessions: &[SessionInfo]) -> Status {
    let servers = configs
        .iter()
        .map(|c| ServerStatus {
            label: c.label.to_string(),
            command: c.command.clone(),
            cwd: c.cwd.as_ref().map(|p| p.display().to_string()),
            running: sessions
                .iter()
                .filter(|s| s.server == c.label && matches!(s.phase, Phase::Running { .. }))
                .count() as u32,
        })
        .collect();
    let sessions = sessions
        .iter()
        .map(|s| SessionStatus {
            id: format!("#{}", s.id),
            server: s.server.to_string(),
            client: s.client.clone(),
            connected_at_ms: s.connected_at_ms,
            state: match s.phase {
                Phase::Stopped => SessionState::Stopped,
                Phase::Starting => SessionState::Starting,
                Phase::Running { .. } => SessionState::Running,
            },
            server_pid: match s.phase {
                Phase::Running { pid } => Some(pid),
                _ => None,
            },
        })
        .collect();
    Status {
        home: home.path().display().to_string(),
        socket: home.socket_path().display().to_string(),
        servers,
        sessions,
    }
}

/// The TypeScript declarations of every type above, as committed in `ui/src/bindings.ts`.
pub fn typescript_bindings() -> String {
    let decls = [
        Status::decl(),
        ServerStatus::decl(),
        SessionStatus::decl(),
        SessionState::decl(),
    ];
    let mut out = String::from(
        "// Generated from crates/engine/src/api.rs by `cargo run -p postern-app --bin gen-bindings`. Do not edit.\n\n",
    );
    for decl in decls {
        out.push_str("export ");
        out.push_str(&decl);
        out.push_str("\n\n");
    }
    out
}
