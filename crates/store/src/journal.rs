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
//! - `journal_activity_buckets`: per session, how many calls, refusals and grants fell in
//!   each minute, ten minutes, hour, six hours and day ([`SPANS`]): what the timeline draws a
//!   wide window from ([`timeline`]).
//!
//! Each session and each epoch of a session also keep when they were last seen (the time
//! of the last record naming them), so that the timeline can draw lanes and epoch bands
//! without reading the calls.

mod launches;
mod project;
mod timeline;

use std::path::Path;
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params_from_iter};
use serde::Serialize;

use crate::{DB_FILE, Store, StoreError, migrations};

pub(crate) use project::Projector;
pub use timeline::{Band, Bucket, Complete, Lane, Mark, MarkKind, Timeline, TimelineQuery};

/// The widths (ms) calls are counted by, per session, in `journal_activity_buckets`: a
/// minute, ten minutes, an hour, six hours, a day. Migration 7 backfills the same ones.
pub(crate) const SPANS: [i64; 5] = [60_000, 600_000, 3_600_000, 21_600_000, 86_400_000];

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
    /// `allowed`, `observed`, `denied` (any refusal: refused before forwarding), or one
    /// decision (`no_intent`, a refusal code).
    pub decision: Option<String>,
    /// At or after this time (unix ms).
    pub since: Option<i64>,
    /// Before this time (unix ms).
    pub until: Option<i64>,
    /// Only rows after this one in the page order (the previous page's last seq): older, or
    /// as old with a smaller seq.
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

    /// Opens the database in `home` for reading the journals only: no migration, no
    /// writes, so it never waits for (or holds up) the audit writer. The schema must be
    /// the one this build writes (the engine migrates it when it opens the home).
    pub fn open_read_only(home: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open_with_flags(
            home.join(DB_FILE),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        let found: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if found > migrations::LATEST {
            return Err(StoreError::TooNew {
                found,
                known: migrations::LATEST,
            });
        }
        if found < migrations::LATEST {
            return Err(StoreError::Corrupt {
                what: "the database schema".into(),
                why: format!(
                    "it is at version {found}, this Postern reads {}: open it with the engine \
                     first, which migrates it",
                    migrations::LATEST
                ),
            });
        }
        Ok(Store { conn })
    }

    /// A page of the Activity journal: newest first (by time, then seq).
    ///
    /// Every filter has an index that ends in `time` (and the rowid, the seq), so a filter,
    /// a time range and the order are served by one index walk that stops after the page:
    /// `session`, `server`, `epoch`, `tool`, `decision` each by `(column, time)`, `denied`
    /// by a partial index on `time` of the refused rows, no filter by `time`.
    pub fn activity(&self, filter: &ActivityFilter) -> Result<Vec<ActivityRow>, StoreError> {
        let (sql, args) = self.activity_sql(filter)?;
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

    /// The statement of an Activity page and its arguments.
    fn activity_sql(&self, filter: &ActivityFilter) -> Result<(String, Vec<SqlValue>), StoreError> {
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
            // Spelled as the partial index's condition, so that the index applies.
            Some("denied") => sql.push_str(" AND outcome = 'refused'"),
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
        if let Some(before) = filter.before {
            match self.record_time(before)? {
                Some(time) => {
                    args.push(time.into());
                    args.push(before.into());
                    let (t, s) = (args.len() - 1, args.len());
                    sql.push_str(&format!(
                        " AND time <= ?{t} AND (time < ?{t} OR seq < ?{s})"
                    ));
                }
                // A seq the database does not know: everything before it.
                None => range("<", "seq", Some(before), &mut sql),
            }
        }
        args.push(i64::from(page(filter.limit)).into());
        sql.push_str(&format!(
            " ORDER BY time DESC, seq DESC LIMIT ?{}",
            args.len()
        ));

        Ok((sql, args))
    }

    /// The time of record `seq`: its Activity row's, else its audit log row's.
    fn record_time(&self, seq: i64) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT time FROM journal_activity WHERE seq = ?1
                 UNION ALL SELECT time FROM audit_log WHERE seq = ?1 LIMIT 1",
            )?
            .query_row([seq], |r| r.get(0))
            .optional()?)
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

fn meta_int(conn: &Connection, key: &str) -> Result<i64, StoreError> {
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

    #[test]
    fn every_activity_filter_walks_one_index_in_page_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        // A row for the `before` cursor to find.
        store
            .conn
            .execute(
                "INSERT INTO journal_activity (seq, time, session, server, tool, call, decision)
                 VALUES (5, 5000, 1, 's', 't', '1', 'allowed')",
                [],
            )
            .expect("row");
        let f = ActivityFilter::default;
        let text = || Some("x".to_owned());
        let window = |filter: ActivityFilter| ActivityFilter {
            since: Some(1),
            until: Some(2),
            ..filter
        };
        let cases = [
            (
                f(),
                "SCAN journal_activity USING INDEX journal_activity_time",
            ),
            (
                ActivityFilter {
                    session: Some(1),
                    ..f()
                },
                "journal_activity_session_time (session=?)",
            ),
            (
                ActivityFilter {
                    server: text(),
                    ..f()
                },
                "journal_activity_server_time (server=?)",
            ),
            (
                ActivityFilter {
                    epoch: text(),
                    ..f()
                },
                "journal_activity_epoch_time (epoch=?)",
            ),
            (
                ActivityFilter {
                    tool: text(),
                    ..f()
                },
                "journal_activity_tool_time (tool=?)",
            ),
            (
                ActivityFilter {
                    decision: Some("denied".into()),
                    ..f()
                },
                "SCAN journal_activity USING INDEX journal_activity_refused",
            ),
            (
                ActivityFilter {
                    decision: Some("approval_denied".into()),
                    ..f()
                },
                "journal_activity_decision_time (decision=?)",
            ),
            (window(f()), "journal_activity_time (time>? AND time<?)"),
            (
                window(ActivityFilter {
                    session: Some(1),
                    ..f()
                }),
                "journal_activity_session_time (session=? AND time>? AND time<?)",
            ),
            (
                window(ActivityFilter {
                    server: text(),
                    ..f()
                }),
                "journal_activity_server_time (server=? AND time>? AND time<?)",
            ),
            (
                window(ActivityFilter {
                    epoch: text(),
                    ..f()
                }),
                "journal_activity_epoch_time (epoch=? AND time>? AND time<?)",
            ),
            (
                window(ActivityFilter {
                    tool: text(),
                    ..f()
                }),
                "journal_activity_tool_time (tool=? AND time>? AND time<?)",
            ),
            (
                window(ActivityFilter {
                    decision: Some("denied".into()),
                    ..f()
                }),
                "journal_activity_refused (time>? AND time<?)",
            ),
            (
                window(ActivityFilter {
                    decision: Some("allowed".into()),
                    ..f()
                }),
                "journal_activity_decision_time (decision=? AND time>? AND time<?)",
            ),
            (
                ActivityFilter {
                    before: Some(5),
                    ..f()
                },
                "journal_activity_time (time<?)",
            ),
            (
                ActivityFilter {
                    server: text(),
                    before: Some(5),
                    ..f()
                },
                "journal_activity_server_time (server=? AND time<?)",
            ),
        ];
        for (filter, index) in cases {
            let (sql, args) = store.activity_sql(&filter).expect("sql");
            let plan = plan(&store, &sql, &args);
            assert!(
                plan.contains(index) && !plan.contains("TEMP B-TREE") && plan.lines().count() == 1,
                "{filter:?}: {plan}"
            );
        }
    }
}
