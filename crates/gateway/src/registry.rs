//! The live list of agent sessions, shared between the gateway and status readers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use postern_domain::catalog::Catalog;
use postern_domain::{AgentIdentity, ExecutionEpoch, ExecutionRecord, ServerLabel};
use tokio::sync::watch;

/// Where a session's server is, in the refresh contract's state machine
/// (docs/refresh-contract.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not running; the next request starts it.
    Stopped,
    /// Launched; `initialize` in progress.
    Starting,
    /// A new epoch whose catalog is not known yet: requests are held.
    IdentityPending,
    /// The epoch's catalog is known: requests flow.
    CatalogReady,
    /// The server said its tools changed: the gate fetches and checks the new catalog, and
    /// requests are held until it is in.
    CatalogRefreshing,
}

/// What status views show about one agent session.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// Unique within this engine's run.
    pub id: u64,
    /// The server label the agent connected to.
    pub server: ServerLabel,
    /// The agent's self-reported name and version, once it initialized.
    pub client: Option<String>,
    /// The agent process behind the shim, from the process table.
    pub agent: Option<AgentIdentity>,
    /// Unix milliseconds at connection.
    pub connected_at_ms: i64,
    /// Its server's state.
    pub phase: Phase,
    /// The current (or last) epoch's execution record.
    pub record: Option<ExecutionRecord>,
    /// The current epoch's catalog, once fetched.
    pub catalog: Option<Arc<Catalog>>,
    /// The catalog before the current one, for diffs.
    pub previous_catalog: Option<Arc<Catalog>>,
    /// The catalog revision this agent was last shown (a forwarded tools/list).
    pub presented: Option<Arc<Catalog>>,
    /// The epoch of the server process that listed [`SessionInfo::presented`].
    pub presented_epoch: Option<ExecutionEpoch>,
    /// Identity artifacts that changed on disk since the running process started
    /// (manual restart policy): the running process is older than its files.
    pub artifacts_newer: Vec<PathBuf>,
    /// Why the last launch failed or the process exited, while stopped.
    pub last_exit: Option<String>,
    /// Unix ms before which the server will not be launched again (crash back-off).
    pub backoff_until_ms: Option<i64>,
    /// The credentials bound to the server that the current launch got, and did not get.
    pub credentials: Credentials,
    /// Since when (unix ms) the running server has not answered the gate's pings, while it
    /// does not.
    pub unresponsive_since_ms: Option<i64>,
}

/// Credential scopes (names only) a launch was given or not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Released to this launch.
    pub released: Vec<String>,
    /// Those of `released` the launch holds as placeholders (the egress broker adds the value
    /// toward the credential's hosts); the rest are values in its environment.
    pub brokered: Vec<String>,
    /// Bound but withheld from this launch.
    pub withheld: Vec<String>,
    /// Why they were withheld.
    pub reason: Option<String>,
}

impl SessionInfo {
    /// The running process id, while one runs.
    pub fn pid(&self) -> Option<u32> {
        match self.phase {
            Phase::Stopped => None,
            _ => self.record.as_ref().map(|r| r.pid),
        }
    }
}

/// The shared session list. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Sessions {
    inner: Arc<Mutex<BTreeMap<u64, SessionInfo>>>,
    changed: Arc<watch::Sender<u64>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::new()
    }
}

impl Sessions {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            inner: Arc::default(),
            changed: Arc::new(watch::channel(0).0),
        }
    }

    /// Every session, in connection order.
    pub fn snapshot(&self) -> Vec<SessionInfo> {
        self.inner
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A receiver that changes whenever the list or a session's state changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// How many sessions are connected.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether no session is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn upsert(&self, info: SessionInfo) {
        if let Ok(mut map) = self.inner.lock() {
            map.insert(info.id, info);
        }
        self.bump();
    }

    pub(crate) fn remove(&self, id: u64) {
        if let Ok(mut map) = self.inner.lock() {
            map.remove(&id);
        }
        self.bump();
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}
