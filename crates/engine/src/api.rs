//! The engine's status model as shells see it. These types cross the app's IPC
//! boundary; their TypeScript twins in `ui/src/bindings.ts` are generated from here.

use serde::Serialize;
use ts_rs::TS;

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
