//! Who is on the other end of a session: the agent process that launched the shim,
//! as the kernel's process table describes it (never as the agent describes itself).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Artifact;

/// The agent process behind a session: the first ancestor of the `postern mcp` shim
/// that is not the shim itself. Keyed by pid and start time: a reused pid is another
/// process, so another agent run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentIdentity {
    /// The agent's process id.
    pub pid: u32,
    /// Its start time (clock ticks since boot on Linux, microseconds since the epoch on macOS):
    /// with the pid, the run's key.
    pub start_time: u64,
    /// Its executable and that file's digest, when readable.
    pub executable: Option<Artifact>,
    /// Process names from the agent's parent down to the shim, e.g. `zsh -> claude -> postern`.
    pub chain: Vec<String>,
    /// Its working directory, for display only.
    pub cwd: Option<PathBuf>,
}

impl AgentIdentity {
    /// The chain as people write it: `claude -> postern`.
    pub fn chain_text(&self) -> String {
        self.chain.join(" -> ")
    }

    /// The key of the agent run: pid and start time.
    pub fn run_key(&self) -> (u32, u64) {
        (self.pid, self.start_time)
    }
}
