//! The Sessions and Activity journals (and the grants given in sessions): projections of
//! the audit log.
//!
//! The log is the truth. Its bodies open only with the key, so the journals are written at
//! append time, from the plaintext event, in the same transaction as the record
//! ([`crate::AuditWriter::append`]); `meta` keeps how far they go (`journal.seq`) and the
//! current engine run (`journal.run`). When they are behind the log (dropped, or a log from
//! before they existed), the engine rebuilds them from opened records
//! ([`crate::AuditWriter::project`]), which needs the key.
//!
//! - `journal_sessions`: one row per agent session. Its id is the sequence number of the record
//!   that opened it (stable across rebuilds). Session numbers restart with each engine run, so
//!   a session is `(run, session)`, the run being the `engine_started` record's seq.
//!   It also keeps who admitted the session (`approved`), the agent process behind it
//!   (`agent`, for display) and how many approval requests it raised (`approvals`).
//! - `journal_activity`: one row per call, keyed by the seq of its intent (or refusal) record;
//!   the result fills in the outcome and duration.
//! - `journal_grants`: one row per grant a human gave, under the session it was given in;
//!   the `grant_ended` record fills in when and why it stopped applying.

mod project;

use rusqlite::types::Value as SqlValue;
use rusqlite::{OptionalExtension, params_from_iter};
use serde::Serialize;

use crate::{Store, StoreError};

pub(crate) use project::Projector;

/// Which Activity rows to return: newest first, `limit` at most, before seq `before`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivityFilter {
    /// A journal session id ([`SessionRow::id`]).
    pub session: Option<i64>,
    /// A server label.
    pub server: Option<String>,
    /// An execution epoch.
    pub epoch: Option<String>,
    /// A tool name.
    pub tool: Option<String>,
    /// `allowed`, `observed`, `denied` (any refusal), or one refusal code.
    pub decision: Option<String>,
    /// At or after this time (unix ms).
    pub since: Option<i64>,
    /// Before this time (unix ms).
    pub until: Option<i64>,
    /// Only rows with a smaller seq (the previous page's last seq).
    pub before: Option<i64>,
    /// Page size (0 means 50).
    pub limit: u32,
}

/// One call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityRow {
    /// Seq of the intent (or refusal) record.
    pub seq: i64,
    /// When (unix ms).
    pub time: i64,
    /// The journal session id.
    pub session: i64,
    /// The server label.
    pub server: String,
    /// The execution epoch it ran under (or was refused under).
    pub epoch: Option<String>,
    /// The tool.
    pub tool: String,
    /// The JSON-RPC id, as JSON.
    pub call: String,
    /// `allowed` (under a grant), `observed` (observe mode, no grant), or the refusal code.
    pub decision: String,
    /// `ok`, `tool_error`, `error`, `epoch_transition`, `cancelled`, `refused`; `None` while
    /// no result is recorded (in flight, or the engine died).
    pub outcome: Option<String>,
    /// How long the call took.
    pub duration_ms: Option<i64>,
}

/// Which sessions to return: newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// A server label.
    pub server: Option<String>,
    /// `running`, `ended` or `interrupted`.
    pub status: Option<String>,
    /// Only sessions with a smaller id.
    pub before: Option<i64>,
    /// Page size (0 means 50).
    pub limit: u32,
}

/// One agent session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// The journal id: seq of the record that opened it.
    pub id: i64,
    /// Seq of its engine run's `engine_started` record (0: before any).
    pub run: i64,
    /// The engine's session number within the run.
    pub session: i64,
    /// The server label.
    pub server: String,
    /// The agent's self-reported client name.
    pub client: Option<String>,
    /// The agent process as the engine identified it, for display: its process chain and
    /// pid, e.g. `bash -> claude -> postern (pid 4242)`.
    pub agent: Option<String>,
    /// Start (unix ms).
    pub started: i64,
    /// End (unix ms), when it ended cleanly.
    pub ended: Option<i64>,
    /// `running`, `ended` or `interrupted` (the engine stopped without ending it).
    pub status: String,
    /// Why it ended.
    pub reason: Option<String>,
    /// Calls forwarded.
    pub calls: i64,
    /// Calls refused before forwarding.
    pub denied: i64,
    /// Results other than ok.
    pub failed: i64,
    /// Who admitted the agent run: `human` or `observe`; `None` while not admitted.
    pub approved: Option<String>,
    /// Approval requests it raised.
    pub approvals: i64,
    /// Execution epochs it used, in order of first use.
    pub epochs: Vec<String>,
    /// The grants given in it, in the order they were given.
    pub grants: Vec<GrantRow>,
}

/// One grant a human gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRow {
    /// The grant id.
    pub grant: String,
    /// The server label.
    pub server: String,
    /// The execution epoch it is bound to.
    pub epoch: String,
    /// Which tools: the `ToolScope`, as JSON.
    pub tools: serde_json::Value,
    /// Which credential scopes, by name.
    pub credentials: Vec<String>,
    /// How it was to end: the `GrantEnd`, as JSON.
    pub end: serde_json::Value,
    /// When it was issued (unix ms).
    pub issued: i64,
    /// When it stopped applying (unix ms), if a `grant_ended` record says so. A grant
    /// also ends with its epoch and its agent run, which this does not repeat.
    pub ended: Option<i64>,
    /// Why it stopped applying.
    pub reason: Option<String>,
}

impl Store {
    /// The last audit seq the journals include (0: none).
    pub fn journal_seq(&self) -> Result<i64, StoreError> {
        meta_int(&self.conn, "journal.seq")
    }

    /// A page of the Activity journal.
    pub fn activity(&self, filter: &ActivityFilter) -> Result<Vec<ActivityRow>, StoreError> {
        let mut sql = String::from(
            "SELECT seq, time, session, server, epoch, tool, call, decision, outcome, duration_ms
             FROM journal_activity WHERE 1",
        );
        let mut args: Vec<SqlValue> = Vec::new();
        let mut eq = |column: &str, value: SqlValue, sql: &mut String| {
            args.push(value);
            sql.push_str(&format!(" AND {column} = ?{}", args.len()));
        };
        if let Some(session) = filter.session {
            eq("session", session.into(), &mut sql);
        }
        for (column, value) in [
            ("server", &filter.server),
            ("epoch", &filter.epoch),
            ("tool", &filter.tool),
        ] {
            if let Some(value) = value {
                eq(column, value.clone().into(), &mut sql);
            }
        }
        match filter.decision.as_deref() {
            Some("denied") => sql.push_str(" AND decision NOT IN ('allowed', 'observed')"),
            Some(decision) => eq("decision", decision.to_owned().into(), &mut sql),
            None => {}
        }
        let mut range = |op: &str, column: &str, value: Option<i64>, sql: &mut String| {
            if let Some(value) = value {
                args.push(value.into());
                sql.push_str(&format!(" AND {column} {op} ?{}", args.len()));
            }
        };
        range(">=", "time", filter.since, &mut sql);
        range("<", "time", filter.until, &mut sql);
        range("<", "seq", filter.before, &mut sql);
        args.push(i64::from(page(filter.limit)).into());
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ?{}", args.len()));

        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args), |r| {
            Ok(ActivityRow {
                seq: r.get(0)?,
                time: r.get(1)?,
                session: r.get(2)?,
                server: r.get(3)?,
                epoch: r.get(4)?,
                tool: r.get(5)?,
                call: r.get(6)?,
                decision: r.get(7)?,
                outcome: r.get(8)?,
                duration_ms: r.get(9)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A page of the Sessions journal.
    pub fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>, StoreError> {
        let mut sql = String::from(
            "SELECT id, run, session, server, client, started, ended, status, reason, calls,
                    denied, failed,
                    (SELECT group_concat(epoch, ' ') FROM
                        (SELECT epoch FROM journal_session_epochs e WHERE e.session = s.id
                         ORDER BY e.seq)),
                    agent, approved, approvals
             FROM journal_sessions s WHERE 1",
        );
        let mut args: Vec<SqlValue> = Vec::new();
        for (column, value) in [("server", &filter.server), ("status", &filter.status)] {
            if let Some(value) = value {
                args.push(value.clone().into());
                sql.push_str(&format!(" AND {column} = ?{}", args.len()));
            }
        }
        if let Some(before) = filter.before {
            args.push(before.into());
            sql.push_str(&format!(" AND id < ?{}", args.len()));
        }
        args.push(i64::from(page(filter.limit)).into());
        sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", args.len()));
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args), |r| {
            let epochs: Option<String> = r.get(12)?;
            Ok(SessionRow {
                id: r.get(0)?,
                run: r.get(1)?,
                session: r.get(2)?,
                server: r.get(3)?,
                client: r.get(4)?,
                started: r.get(5)?,
                ended: r.get(6)?,
                status: r.get(7)?,
                reason: r.get(8)?,
                calls: r.get(9)?,
                denied: r.get(10)?,
                failed: r.get(11)?,
                epochs: epochs
                    .map(|e| e.split(' ').map(str::to_owned).collect())
                    .unwrap_or_default(),
                agent: r.get(13)?,
                approved: r.get(14)?,
                approvals: r.get(15)?,
                grants: Vec::new(),
            })
        })?;
        let mut rows: Vec<SessionRow> = rows.collect::<Result<_, _>>()?;
        // One indexed lookup per row: a page is at most a few hundred sessions.
        let mut grants = self.conn.prepare_cached(
            "SELECT grant, server, epoch, tools, credentials, end_kind, issued, ended, reason
             FROM journal_grants WHERE session = ?1 ORDER BY seq",
        )?;
        for row in &mut rows {
            row.grants = grants
                .query_map([row.id], StoredGrant::read)?
                .map(|g| g?.into_row())
                .collect::<Result<_, StoreError>>()?;
        }
        Ok(rows)
    }
}

/// A `journal_grants` row as stored: its JSON columns not yet parsed.
struct StoredGrant {
    grant: String,
    server: String,
    epoch: String,
    tools: String,
    credentials: String,
    end: String,
    issued: i64,
    ended: Option<i64>,
    reason: Option<String>,
}

impl StoredGrant {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            grant: row.get(0)?,
            server: row.get(1)?,
            epoch: row.get(2)?,
            tools: row.get(3)?,
            credentials: row.get(4)?,
            end: row.get(5)?,
            issued: row.get(6)?,
            ended: row.get(7)?,
            reason: row.get(8)?,
        })
    }

    fn into_row(self) -> Result<GrantRow, StoreError> {
        let corrupt = |column: &str, e: serde_json::Error| StoreError::Corrupt {
            what: format!("journal grant {}", self.grant),
            why: format!("{column}: {e}"),
        };
        Ok(GrantRow {
            tools: serde_json::from_str(&self.tools).map_err(|e| corrupt("tools", e))?,
            credentials: serde_json::from_str(&self.credentials)
                .map_err(|e| corrupt("credentials", e))?,
            end: serde_json::from_str(&self.end).map_err(|e| corrupt("end", e))?,
            grant: self.grant,
            server: self.server,
            epoch: self.epoch,
            issued: self.issued,
            ended: self.ended,
            reason: self.reason,
        })
    }
}

fn meta_int(conn: &rusqlite::Connection, key: &str) -> Result<i64, StoreError> {
    let value: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?;
    match value {
        None => Ok(0),
        Some(text) => text.parse().map_err(|_| StoreError::Corrupt {
            what: format!("meta {key}"),
            why: format!("{text:?} is not an integer"),
        }),
    }
}

fn page(limit: u32) -> u32 {
    if limit == 0 { 50 } else { limit.min(10_000) }
}
