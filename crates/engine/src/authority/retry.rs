//! A decision given after the agent stopped waiting (issue 14 item 3). Clients give a tool
//! call a fixed time (Codex 60 s by default, Claude Code `MCP_TOOL_TIMEOUT`) and cancel it
//! when it runs out; a person may well answer after that. The card then stays open: an
//! identical retry (same agent run, server, epoch, tool and arguments) joins it instead of
//! raising a second card, and an answer given while nothing waits covers that retry for
//! [`RETRY_WINDOW_MS`]: approved "this call only", it lets exactly the identical retry
//! through; denied, the retry gets `approval_denied` at once. An approval for the run or for
//! some minutes is a grant like any other and covers the retry by itself.

use postern_domain::decision::Denial;
use postern_domain::{AgentRun, AuditEvent, ExecutionEpoch, GrantId, ServerLabel};
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::CallToAuthorize;
use serde_json::Value;

use super::{Authority, State};

/// How long a decision given after the agent stopped waiting covers its identical retry.
pub const RETRY_WINDOW_MS: u64 = 10 * 60 * 1000;

/// What makes a retry identical to the call a card was opened for.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RetryKey {
    run: AgentRun,
    server: ServerLabel,
    epoch: ExecutionEpoch,
    tool: String,
    arguments: Value,
}

impl RetryKey {
    /// The key of `call`; none when its agent run is unknown (nothing could tell a retry).
    pub(super) fn of(call: &CallToAuthorize) -> Option<RetryKey> {
        Some(RetryKey {
            run: call.request.run()?,
            server: call.request.server.clone(),
            epoch: call.request.epoch,
            tool: call.request.tool.clone(),
            arguments: call.arguments.clone(),
        })
    }
}

/// A decision waiting for the identical retry of the call it was given for.
#[derive(Debug)]
pub(super) struct Later {
    key: RetryKey,
    decision: LaterDecision,
    until_ms: u64,
}

/// What the retry gets.
#[derive(Debug)]
pub(super) enum LaterDecision {
    /// Through, on this grant ("this call only", used up by the retry).
    Allow(GrantId),
    /// Refused, as the person denied it.
    Deny(Denial),
}

impl Authority {
    /// Keeps `decision`, given for `call` after its agent stopped waiting, for its retry.
    pub(super) fn keep_for_retry(
        &self,
        state: &mut State,
        call: &CallToAuthorize,
        decision: LaterDecision,
        now: u64,
    ) {
        let Some(key) = RetryKey::of(call) else {
            return;
        };
        tracing::info!(tool = %call.request.tool, "a decision for a call its agent stopped waiting for: kept for its identical retry");
        state.later.retain(|l| l.key != key);
        state.later.push(Later {
            key,
            decision,
            until_ms: now + RETRY_WINDOW_MS,
        });
    }

    /// The kept decision `call` is the identical retry of, if any (taken: it applies once).
    pub(super) fn take_later(
        &self,
        state: &mut State,
        call: &CallToAuthorize,
        now: u64,
    ) -> Option<LaterDecision> {
        state.later.retain(|l| l.until_ms > now);
        if state.later.is_empty() {
            return None; // the common case: no copy of the call's key to look for
        }
        let key = RetryKey::of(call)?;
        let at = state.later.iter().position(|l| l.key == key)?;
        let later = state.later.remove(at);
        if let LaterDecision::Allow(grant) = &later.decision {
            self.inner.audit.record(AuditEvent::GrantEnded {
                grant: *grant,
                reason: "used by the identical retry of the call it was approved for".into(),
            });
        }
        Some(later.decision)
    }
}
