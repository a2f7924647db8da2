//! The journals as shells read them: the Sessions timeline, the Activity feed, the Sessions
//! journal, and one audit record opened for a clicked mark. These types cross the app's IPC
//! boundary (their TypeScript twins are generated with the rest, see
//! [`crate::typescript_bindings`]).
//!
//! Every read opens its own read-only connection to the home's database
//! ([`Store::open_read_only`]: about 0.1 ms), never the engine's shared one: a query on a
//! million rows neither waits for nor holds up the audit writer (WAL lets readers and the
//! writer proceed together) or the gate, which uses the shared connection.
//!
//! This file holds the Activity feed and the Sessions journal, and the read-only connection
//! every read opens. The timeline is in `timeline`, the opened audit record in `entry`;
//! their items are re-exported here.

mod entry;
mod timeline;

use postern_store::Store;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::{EngineError, Home};

pub use entry::{AuditBody, AuditEntry, EntrySession, audit_entry};
pub use timeline::{
    ApprovalWait, EpochBand, MarksComplete, Timeline, TimelineBucket, TimelineLane, TimelineMark,
    TimelineQuery, timeline,
};

/// Which Activity rows to read: newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase", default)]
pub struct ActivityFilter {
    /// A journal session id (a lane's `id`).
    #[ts(type = "number | null")]
    pub session: Option<i64>,
    /// A server label.
    pub server: Option<String>,
    /// An execution epoch.
    pub epoch: Option<String>,
    /// A tool name.
    pub tool: Option<String>,
    /// `allowed`, `observed`, `denied` (any refusal), `asked` (a person was asked about
    /// the call), or one refusal code.
    pub decision: Option<String>,
    /// At or after, unix ms.
    #[ts(type = "number | null")]
    pub since: Option<i64>,
    /// Before, unix ms.
    #[ts(type = "number | null")]
    pub until: Option<i64>,
    /// The next page: the previous page's last `seq`.
    #[ts(type = "number | null")]
    pub before: Option<i64>,
    /// Page size (0: 50; at most 10,000).
    pub limit: u32,
}

/// One call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ActivityRow {
    /// The intent's (or refusal's) audit record.
    #[ts(type = "number")]
    pub seq: i64,
    /// Unix ms.
    #[ts(type = "number")]
    pub time: i64,
    /// The journal session id.
    #[ts(type = "number")]
    pub session: i64,
    /// The server label.
    pub server: String,
    /// The epoch it ran (or was refused) under.
    pub epoch: Option<String>,
    /// Which launch of its server that epoch is ("launch 7", as the Servers view numbers
    /// it); `null` without an epoch.
    pub launch: Option<u32>,
    /// The tool.
    pub tool: String,
    /// The JSON-RPC id, as JSON text.
    pub call: String,
    /// `allowed`, `observed`, `no_intent`, or the refusal code.
    pub decision: String,
    /// `ok`, `tool_error`, `error`, `epoch_transition`, `cancelled`, `refused`; `null` while
    /// no result is recorded.
    pub outcome: Option<String>,
    /// How long it took.
    #[ts(type = "number | null")]
    pub duration_ms: Option<i64>,
    /// Who called: its session's agent.
    pub agent: AgentName,
    /// On what authority it went: `grant`, `observed` (observe mode), `admitted` (a request
    /// other than a tool call, from a run a person admitted); `null` for a refusal and for
    /// rows the journal recorded before it kept this.
    pub authority: Option<String>,
    /// The grant it went under, and how long it was given for.
    pub grant: Option<CallGrant>,
    /// The approval request it raised, when a person was asked about it.
    pub asked: Option<CallAsked>,
}

/// An agent as the journal names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AgentName {
    /// Its own name and version from its `initialize` (`claude-code 2.1.3`; self-reported).
    pub client: Option<String>,
    /// The process as the engine identified it (chain and pid).
    pub process: Option<String>,
    /// Its working directory.
    pub cwd: Option<String>,
}

/// The grant a call went under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CallGrant {
    /// The grant id.
    pub grant: String,
    /// The `GrantEnd` it was given with; `null` when the journal has no record of it.
    #[ts(type = "unknown")]
    pub end: Option<serde_json::Value>,
    /// When it was given, unix ms.
    #[ts(type = "number | null")]
    pub issued: Option<i64>,
}

/// The approval request a call raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CallAsked {
    /// The approval id.
    pub approval: String,
    /// When it was asked, unix ms.
    #[ts(type = "number")]
    pub requested: i64,
    /// When it was answered, unix ms.
    #[ts(type = "number | null")]
    pub answered: Option<i64>,
    /// `granted`, `denied` or `expired`.
    pub answer: Option<String>,
    /// Where the person answered: `window` (the approval window), `tray`, `terminal` (the
    /// CLI); `null` when nobody did, and for answers recorded before the log kept it.
    pub by: Option<String>,
}

/// Which sessions to read: newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionFilter {
    /// A server label.
    pub server: Option<String>,
    /// `running`, `ended` or `interrupted`.
    pub status: Option<String>,
    /// The next page: the previous page's last `id`.
    #[ts(type = "number | null")]
    pub before: Option<i64>,
    /// Page size (0: 50; at most 10,000).
    pub limit: u32,
}

/// One agent session in the Sessions journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// The journal id.
    #[ts(type = "number")]
    pub id: i64,
    /// The seq of its engine run's first record.
    #[ts(type = "number")]
    pub run: i64,
    /// The engine's session number within the run.
    #[ts(type = "number")]
    pub session: i64,
    /// The server label.
    pub server: String,
    /// The agent's self-reported client name.
    pub client: Option<String>,
    /// The agent process, for display.
    pub agent: Option<String>,
    /// The agent's working directory.
    pub cwd: Option<String>,
    /// Start, unix ms.
    #[ts(type = "number")]
    pub started: i64,
    /// End, unix ms, when it ended cleanly.
    #[ts(type = "number | null")]
    pub ended: Option<i64>,
    /// `running`, `ended` or `interrupted`.
    pub status: String,
    /// Why it ended.
    pub reason: Option<String>,
    /// Calls forwarded.
    #[ts(type = "number")]
    pub calls: i64,
    /// Calls refused.
    #[ts(type = "number")]
    pub denied: i64,
    /// Results other than ok.
    #[ts(type = "number")]
    pub failed: i64,
    /// Who admitted it: `human` or `observe`.
    pub approved: Option<String>,
    /// Approval requests it raised.
    #[ts(type = "number")]
    pub approvals: i64,
    /// The epochs it used, in order.
    pub epochs: Vec<String>,
    /// The grants given in it, in order.
    pub grants: Vec<GrantRow>,
}

/// One grant a human gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GrantRow {
    /// The grant id.
    pub grant: String,
    /// The server label.
    pub server: String,
    /// The epoch it is bound to.
    pub epoch: String,
    /// The `ToolScope`.
    #[ts(type = "unknown")]
    pub tools: serde_json::Value,
    /// Credential scopes, by name.
    pub credentials: Vec<String>,
    /// The `GrantEnd`.
    #[ts(type = "unknown")]
    pub end: serde_json::Value,
    /// Issued, unix ms.
    #[ts(type = "number")]
    pub issued: i64,
    /// Ended, unix ms, when a record says so.
    #[ts(type = "number | null")]
    pub ended: Option<i64>,
    /// Why it ended.
    pub reason: Option<String>,
}

/// A page of the home's Activity journal.
pub fn activity(home: &Home, filter: &ActivityFilter) -> Result<Vec<ActivityRow>, EngineError> {
    let rows = reader(home)?.activity(&postern_store::ActivityFilter {
        session: filter.session,
        server: filter.server.clone(),
        epoch: filter.epoch.clone(),
        tool: filter.tool.clone(),
        decision: filter.decision.clone(),
        since: filter.since,
        until: filter.until,
        before: filter.before,
        limit: filter.limit,
    })?;
    Ok(rows.into_iter().map(activity_row).collect())
}

pub(crate) fn activity_row(r: postern_store::ActivityRow) -> ActivityRow {
    ActivityRow {
        seq: r.seq,
        time: r.time,
        session: r.session,
        server: r.server,
        epoch: r.epoch,
        launch: r.launch,
        tool: r.tool,
        call: r.call,
        decision: r.decision,
        outcome: r.outcome,
        duration_ms: r.duration_ms,
        agent: AgentName {
            client: r.agent.client,
            process: r.agent.process,
            cwd: r.agent.cwd,
        },
        authority: r.authority,
        grant: r.grant.map(|g| CallGrant {
            grant: g.grant,
            end: g.end,
            issued: g.issued,
        }),
        asked: r.asked.map(|a| CallAsked {
            approval: a.approval,
            requested: a.requested,
            answered: a.answered,
            answer: a.answer,
            by: a.by,
        }),
    }
}

/// A page of the home's Sessions journal.
pub fn sessions(home: &Home, filter: &SessionFilter) -> Result<Vec<SessionRow>, EngineError> {
    let rows = reader(home)?.sessions(&postern_store::SessionFilter {
        server: filter.server.clone(),
        status: filter.status.clone(),
        before: filter.before,
        limit: filter.limit,
    })?;
    Ok(rows
        .into_iter()
        .map(|s| SessionRow {
            id: s.id,
            run: s.run,
            session: s.session,
            server: s.server,
            client: s.client,
            agent: s.agent,
            cwd: s.cwd,
            started: s.started,
            ended: s.ended,
            status: s.status,
            reason: s.reason,
            calls: s.calls,
            denied: s.denied,
            failed: s.failed,
            approved: s.approved,
            approvals: s.approvals,
            epochs: s.epochs,
            grants: s
                .grants
                .into_iter()
                .map(|g| GrantRow {
                    grant: g.grant,
                    server: g.server,
                    epoch: g.epoch,
                    tools: g.tools,
                    credentials: g.credentials,
                    end: g.end,
                    issued: g.issued,
                    ended: g.ended,
                    reason: g.reason,
                })
                .collect(),
        })
        .collect())
}

fn reader(home: &Home) -> Result<Store, EngineError> {
    Ok(Store::open_read_only(home.path())?)
}

#[cfg(test)]
mod tests;
