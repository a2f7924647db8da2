//! The Sessions and Activity journals: projections of the audit log.
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
//! - `journal_activity`: one row per call, keyed by the seq of its intent (or refusal) record;
//!   the result fills in the outcome and duration.

use postern_domain::AuditEvent;
use rusqlite::types::Value as SqlValue;
use rusqlite::{OptionalExtension, Transaction, params, params_from_iter};

use crate::{Store, StoreError};

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
    /// `allowed`, `denied` (any refusal), or one refusal code.
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `allowed`, or the refusal code.
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Execution epochs it used, in order of first use.
    pub epochs: Vec<String>,
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
            Some("denied") => sql.push_str(" AND decision <> 'allowed'"),
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
                         ORDER BY e.seq))
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
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Writes journal rows for events, tracking how far it got and the current engine run.
#[derive(Debug, Clone)]
pub(crate) struct Projector {
    seq: i64,
    run: i64,
}

impl Projector {
    pub(crate) fn load(conn: &rusqlite::Connection) -> Result<Self, StoreError> {
        Ok(Projector {
            seq: meta_int(conn, "journal.seq")?,
            run: meta_int(conn, "journal.run")?,
        })
    }

    /// Empties the journals (inside `tx`).
    pub(crate) fn cleared(tx: &Transaction<'_>) -> Result<Self, StoreError> {
        tx.execute_batch(
            "DELETE FROM journal_activity;
             DELETE FROM journal_session_epochs;
             DELETE FROM journal_sessions;",
        )?;
        Ok(Projector { seq: 0, run: 0 })
    }

    pub(crate) fn seq(&self) -> i64 {
        self.seq
    }

    pub(crate) fn save(&self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?;
        stmt.execute(params!["journal.seq", self.seq.to_string()])?;
        stmt.execute(params!["journal.run", self.run.to_string()])?;
        Ok(())
    }

    /// Projects one event (record `seq`, written at `time`).
    pub(crate) fn apply(
        &mut self,
        tx: &Transaction<'_>,
        seq: i64,
        time: i64,
        event: &AuditEvent,
    ) -> Result<(), StoreError> {
        let at = At { seq, time };
        match event {
            AuditEvent::EngineStarted { .. } => {
                tx.execute(
                    "UPDATE journal_sessions SET status = 'interrupted' WHERE status = 'running'",
                    [],
                )?;
                self.run = seq;
            }
            AuditEvent::EngineStopped { reason } => {
                tx.execute(
                    "UPDATE journal_sessions SET status = 'ended', ended = ?1, reason = ?2
                     WHERE status = 'running'",
                    params![time, format!("engine stopped: {reason}")],
                )?;
            }
            AuditEvent::SessionStarted {
                session,
                server,
                client,
                ..
            } => {
                tx.prepare_cached(
                    "INSERT INTO journal_sessions (id, run, session, server, client, started, status)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running')
                     ON CONFLICT (run, session) DO UPDATE SET client = excluded.client",
                )?
                .execute(params![seq, self.run, *session as i64, server.as_str(), client, time])?;
            }
            AuditEvent::SessionEnded {
                session,
                server,
                reason,
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                tx.prepare_cached(
                    "UPDATE journal_sessions SET status = 'ended', ended = ?2, reason = ?3
                     WHERE id = ?1",
                )?
                .execute(params![id, time, reason])?;
            }
            AuditEvent::ServerStarted { session, record } => {
                let id = self.session(tx, at, *session, record.server_label.as_str())?;
                epoch_used(tx, id, &record.epoch.to_string(), seq)?;
            }
            AuditEvent::ServerReplaced {
                session,
                server,
                new_epoch: Some(epoch),
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                epoch_used(tx, id, &epoch.to_string(), seq)?;
            }
            AuditEvent::ToolCallIntent {
                session,
                server,
                epoch,
                call,
                tool,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                let epoch = epoch.to_string();
                epoch_used(tx, id, &epoch, seq)?;
                insert_activity(
                    tx,
                    at,
                    id,
                    server.as_str(),
                    Some(&epoch),
                    tool,
                    call,
                    "allowed",
                )?;
                bump(tx, id, "calls")?;
            }
            AuditEvent::ToolCallResult {
                session,
                server,
                epoch,
                call,
                tool,
                outcome,
                duration_ms,
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                let call_text = call.to_string();
                let pending: Option<i64> = tx
                    .prepare_cached(
                        "SELECT seq FROM journal_activity
                         WHERE session = ?1 AND call = ?2 AND result_seq IS NULL
                         ORDER BY seq DESC LIMIT 1",
                    )?
                    .query_row(params![id, call_text], |r| r.get(0))
                    .optional()?;
                let row = match pending {
                    Some(row) => row,
                    None => {
                        // A result with no intent on record: shown, never hidden.
                        let epoch = epoch.to_string();
                        insert_activity(
                            tx,
                            at,
                            id,
                            server.as_str(),
                            Some(&epoch),
                            tool,
                            call,
                            "no_intent",
                        )?;
                        seq
                    }
                };
                let outcome = serde_json::to_value(outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".into());
                tx.prepare_cached(
                    "UPDATE journal_activity SET outcome = ?2, duration_ms = ?3, result_seq = ?4
                     WHERE seq = ?1",
                )?
                .execute(params![row, outcome, *duration_ms as i64, seq])?;
                if outcome != "ok" {
                    bump(tx, id, "failed")?;
                }
            }
            AuditEvent::AuthorizationDenied {
                session,
                server,
                epoch,
                call,
                tool,
                code,
                ..
            } => {
                let id = self.session(tx, at, *session, server.as_str())?;
                let epoch = epoch.map(|e| e.to_string());
                insert_activity(
                    tx,
                    at,
                    id,
                    server.as_str(),
                    epoch.as_deref(),
                    tool,
                    call,
                    code,
                )?;
                tx.prepare_cached(
                    "UPDATE journal_activity SET outcome = 'refused', result_seq = seq WHERE seq = ?1",
                )?
                .execute([seq])?;
                bump(tx, id, "denied")?;
            }
            AuditEvent::ServerReplaced { .. }
            | AuditEvent::ArtifactsChanged { .. }
            | AuditEvent::CatalogRefreshed { .. }
            | AuditEvent::CatalogPresented { .. }
            | AuditEvent::ConfigChanged { .. } => {}
        }
        self.seq = seq;
        Ok(())
    }

    /// The journal id of `session` in the current run, opening a row if the log has none yet.
    fn session(
        &self,
        tx: &Transaction<'_>,
        at: At,
        session: u64,
        server: &str,
    ) -> Result<i64, StoreError> {
        let found: Option<i64> = tx
            .prepare_cached("SELECT id FROM journal_sessions WHERE run = ?1 AND session = ?2")?
            .query_row(params![self.run, session as i64], |r| r.get(0))
            .optional()?;
        if let Some(id) = found {
            return Ok(id);
        }
        tx.prepare_cached(
            "INSERT INTO journal_sessions (id, run, session, server, started, status)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running')",
        )?
        .execute(params![at.seq, self.run, session as i64, server, at.time])?;
        Ok(at.seq)
    }
}

#[derive(Debug, Clone, Copy)]
struct At {
    seq: i64,
    time: i64,
}

#[allow(clippy::too_many_arguments, reason = "one column each")]
fn insert_activity(
    tx: &Transaction<'_>,
    at: At,
    session: i64,
    server: &str,
    epoch: Option<&str>,
    tool: &str,
    call: &serde_json::Value,
    decision: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO journal_activity (seq, time, session, server, epoch, tool, call, decision)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        at.seq,
        at.time,
        session,
        server,
        epoch,
        tool,
        call.to_string(),
        decision
    ])?;
    Ok(())
}

fn epoch_used(tx: &Transaction<'_>, session: i64, epoch: &str, seq: i64) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO journal_session_epochs (session, epoch, seq) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![session, epoch, seq])?;
    Ok(())
}

fn bump(tx: &Transaction<'_>, session: i64, column: &'static str) -> Result<(), StoreError> {
    tx.prepare_cached(&format!(
        "UPDATE journal_sessions SET {column} = {column} + 1 WHERE id = ?1"
    ))?
    .execute([session])?;
    Ok(())
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
