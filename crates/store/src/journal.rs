//! The Sessions and Activity journals (and the grants given in sessions): projections of
//! the audit log.
//!
//! The log is the truth. Its bodies open only with the key, so the journals are written from
//! the plaintext events the log committed, shortly after they are durable (the engine's
//! journals' thread gathers the batches of up to 50 ms into one transaction,
//! [`crate::JournalWriter::project_appended`]), in a file of their own (`postern-journals.db`,
//! attached as `journal`); `journal_meta` keeps how far they go (`seq`) and the current engine
//! run (`run`). When they are behind the log (dropped, or a log from before they existed), the
//! engine rebuilds them from opened records ([`crate::JournalWriter::project`]), which needs
//! the key.
//!
//! - `journal_sessions`: one row per agent session. Its id is the sequence number of the record
//!   that opened it (stable across rebuilds). Session numbers restart with each engine run, so
//!   a session is `(run, session)`, the run being the `engine_started` record's seq.
//!   It also keeps who admitted the session (`approved`), the agent process behind it
//!   (`agent`, for display) and how many approval requests it raised (`approvals`).
//! - `journal_activity`: one row per call, keyed by the seq of its intent (or refusal) record;
//!   the result fills in the outcome and duration. An allowed call keeps its authority (a
//!   grant, observe mode, an admitted run) and grant; a call a person was asked about, its
//!   approval request ([`activity`]).
//! - `journal_approvals`: one row per approval request, with its answer (granted, denied,
//!   expired) and the call that raised it: the intent that first used the grant it gave, or
//!   the refusal with the code it ended in, in the same session and for the same tool.
//! - `journal_grants`: one row per grant a human gave, under the session it was given in;
//!   the `grant_ended` record fills in when and why it stopped applying.
//! - `journal_activity_buckets`: per session, how many calls, refusals and grants fell in
//!   each minute, ten minutes, hour, six hours and day ([`SPANS`]): what the timeline draws a
//!   wide window from ([`timeline`]).
//! - `journal_credential_uses`: per credential, server and host, the requests the egress
//!   broker put the credential in and those it refused ([`credential_uses`]).
//!
//! Each session and each epoch of a session also keep when they were last seen (the time
//! of the last record naming them), so that the timeline can draw lanes and epoch bands
//! without reading the calls.

mod activity;
mod credential_uses;
mod launches;
mod project;
mod timeline;

use std::path::Path;
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params_from_iter};
use serde::Serialize;

use crate::{DB_FILE, Store, StoreError, migrations};

pub use activity::{ActivityFilter, ActivityRow, Agent, Asked, GrantLife, SessionName};
pub use credential_uses::CredentialUse;
pub(crate) use project::Projector;
pub use timeline::{Band, Bucket, Complete, Lane, Mark, MarkKind, Timeline, TimelineQuery, Wait};

/// The widths (ms) calls are counted by, per session, in `journal_activity_buckets`: a
/// minute, ten minutes, an hour, six hours, a day. Migration 7 backfills the same ones.
pub(crate) const SPANS: [i64; 5] = [60_000, 600_000, 3_600_000, 21_600_000, 86_400_000];

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
    /// The agent's working directory.
    pub cwd: Option<String>,
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
        journal_meta(&self.conn, "seq")
    }

    /// Opens the database in `home` for reading the journals only: no migration, no
    /// writes, so it never waits for (or holds up) the audit writer. The schema must be
    /// the one this build writes (the engine migrates it when it opens the home).
    pub fn open_read_only(home: &Path) -> Result<Self, StoreError> {
        let db = home.join(DB_FILE);
        let conn = Connection::open_with_flags(
            &db,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        crate::schema::harden(&conn)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        crate::attach_journals(&conn, &db)?;
        for (schema, latest) in [
            ("main", migrations::LATEST),
            ("journal", migrations::JOURNAL_LATEST),
        ] {
            let found = migrations::version(&conn, schema, latest)?;
            if found < latest {
                return Err(StoreError::Corrupt {
                    what: format!("the database schema ({schema})"),
                    why: format!(
                        "it is at version {found}, this Postern reads {latest}: open it with \
                         the engine first, which migrates it"
                    ),
                });
            }
        }
        Ok(Store { conn })
    }

    /// A page of the Sessions journal.
    pub fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>, StoreError> {
        let mut sql = String::from(
            "SELECT id, run, session, server, client, started, ended, status, reason, calls,
                    denied, failed,
                    (SELECT group_concat(epoch, ' ') FROM
                        (SELECT epoch FROM journal_session_epochs e WHERE e.session = s.id
                         ORDER BY e.seq)),
                    agent, approved, approvals, cwd
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
                cwd: r.get(16)?,
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

/// A value of `journal_meta` (0 when not set).
/// The journals' tables, each with the columns its rows are ordered by: every row derives from
/// the log alone, so journals projected anew from the same records hold the same rows.
const JOURNAL_TABLES: [(&str, &str); 7] = [
    ("journal_sessions", "id"),
    ("journal_session_epochs", "session, epoch"),
    ("journal_activity", "seq"),
    ("journal_activity_buckets", "session, span, start"),
    ("journal_grants", "\"grant\""),
    ("journal_approvals", "approval"),
    ("journal_credential_uses", "credential, server, host"),
];

/// Where two journals first differ: a row of `table` as one of them has it and as the other
/// does (`None`: it has no such row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalDifference {
    /// The table.
    pub table: &'static str,
    /// The row as the journals being checked have it (`column=value`, in the table's order).
    pub found: Option<String>,
    /// The row as the reference has it.
    pub expected: Option<String>,
}

/// The journals as they are at one moment (a read transaction, ended when this is dropped),
/// while the engine goes on writing them.
#[derive(Debug)]
pub struct JournalSnapshot<'a> {
    store: &'a Store,
    /// How far they go: the seq of the last record projected.
    pub seq: i64,
}

impl Store {
    /// Begins a [`JournalSnapshot`] of this connection's journals.
    pub fn journal_snapshot(&self) -> Result<JournalSnapshot<'_>, StoreError> {
        self.conn.execute_batch("BEGIN")?;
        let mut snapshot = JournalSnapshot {
            store: self,
            seq: 0,
        };
        snapshot.seq = journal_meta(&self.conn, "seq")?;
        Ok(snapshot)
    }
}

impl JournalSnapshot<'_> {
    /// The first row in which these journals differ from `reference`'s (journals projected
    /// anew from the log up to [`JournalSnapshot::seq`]), table by table; `None` when they hold
    /// the same rows.
    pub fn first_difference(
        &self,
        reference: &Store,
    ) -> Result<Option<JournalDifference>, StoreError> {
        for (table, order) in JOURNAL_TABLES {
            let sql = format!("SELECT * FROM journal.{table} ORDER BY {order}");
            let mut found = self.store.conn.prepare(&sql)?;
            let mut expected = reference.conn.prepare(&sql)?;
            let names: Vec<String> = found.column_names().map(str::to_owned).collect();
            let mut found = found.query([])?;
            let mut expected = expected.query([])?;
            loop {
                let a = found.next()?.map(|row| row_text(row, &names)).transpose()?;
                let b = expected
                    .next()?
                    .map(|row| row_text(row, &names))
                    .transpose()?;
                if a.is_none() && b.is_none() {
                    break;
                }
                if a != b {
                    return Ok(Some(JournalDifference {
                        table,
                        found: a,
                        expected: b,
                    }));
                }
            }
        }
        Ok(None)
    }
}

impl Drop for JournalSnapshot<'_> {
    fn drop(&mut self) {
        // A read transaction: nothing to keep.
        let _ = self.store.conn.execute_batch("ROLLBACK");
    }
}

/// A row as `column=value` pairs.
fn row_text(row: &rusqlite::Row<'_>, names: &[String]) -> Result<String, StoreError> {
    let mut text = String::new();
    for (i, name) in names.iter().enumerate() {
        let value = match row.get::<_, SqlValue>(i)? {
            SqlValue::Null => "null".to_owned(),
            SqlValue::Integer(n) => n.to_string(),
            SqlValue::Real(x) => x.to_string(),
            SqlValue::Text(t) => format!("{t:?}"),
            SqlValue::Blob(b) => format!("<{} bytes>", b.len()),
        };
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!("{name}={value}"));
    }
    Ok(text)
}

fn journal_meta(conn: &Connection, key: &str) -> Result<i64, StoreError> {
    Ok(conn
        .query_row(
            "SELECT value FROM journal_meta WHERE key = ?1",
            [key],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

fn page(limit: u32) -> u32 {
    if limit == 0 { 50 } else { limit.min(10_000) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query plan of `sql`, one step per line.
    pub(crate) fn plan(store: &Store, sql: &str, args: &[SqlValue]) -> String {
        let mut stmt = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("explain");
        let steps = stmt
            .query_map(params_from_iter(args), |r| r.get::<_, String>(3))
            .expect("plan")
            .collect::<Result<Vec<_>, _>>()
            .expect("steps");
        steps.join("\n")
    }
}
