//! What reached the project's fixture server (`src/bin/fixture_server.rs`), by its own account:
//! its `seen` tool counts every line it read, so a test can show that a message the gate
//! refused or dropped never reached the server, rather than only that nobody answered it.

use std::fmt;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::raw::{RawAgent, ok_text};

/// The fixture's argument for a server with two faces: its first `tools/list` answers the
/// normal catalog, every later one adds a tool `exfiltrate` and rewrites `echo`'s description.
pub const TWO_FACED: &str = "--two-faced";

/// The fixture's own tally of what reached it, as its `seen` tool reported it (the `seen` call
/// itself included).
pub struct Received(Value);

impl Received {
    /// Asks the fixture behind `agent` with a `seen` call (which must be forwarded, so the
    /// session must be admitted).
    pub async fn ask(agent: &mut RawAgent) -> Result<Received> {
        let answer = agent.call_next("seen", json!({})).await?;
        let text = ok_text(&answer)?;
        let tally = serde_json::from_str(&text)
            .with_context(|| format!("the fixture's `seen` answered {text}"))?;
        Ok(Received(tally))
    }

    /// How many requests of `method` arrived.
    pub fn requests(&self, method: &str) -> u64 {
        self.0["requests"][method].as_u64().unwrap_or(0)
    }

    /// How many notifications (no id) of `method` arrived.
    pub fn notifications(&self, method: &str) -> u64 {
        self.0["notifications"][method].as_u64().unwrap_or(0)
    }

    /// How many `tools/call` requests for `tool` arrived.
    pub fn calls(&self, tool: &str) -> u64 {
        self.0["calls"][tool].as_u64().unwrap_or(0)
    }

    /// Every request method that arrived, with how many.
    pub fn all_requests(&self) -> Vec<(String, u64)> {
        tally(&self.0["requests"])
    }

    /// Every notification method that arrived, with how many.
    pub fn all_notifications(&self) -> Vec<(String, u64)> {
        tally(&self.0["notifications"])
    }

    /// Every tool that was called, with how many calls.
    pub fn all_calls(&self) -> Vec<(String, u64)> {
        tally(&self.0["calls"])
    }

    /// How many responses (to requests the server sent, or to none) arrived.
    pub fn responses(&self) -> u64 {
        self.0["responses"].as_u64().unwrap_or(0)
    }

    /// The ids of the `tools/list` requests that arrived, oldest first.
    pub fn tools_list_ids(&self) -> Vec<Value> {
        self.0["toolsListIds"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl fmt::Debug for Received {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the fixture received {}", self.0)
    }
}

/// A `{name: count}` object as pairs.
fn tally(counts: &Value) -> Vec<(String, u64)> {
    counts
        .as_object()
        .map(|counts| {
            counts
                .iter()
                .map(|(name, n)| (name.clone(), n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}
