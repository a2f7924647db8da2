//! The Activity journal: one row per call, newest first, with who called it (the session's
//! agent), on what authority it went (its grant and how long that was given for) and whether
//! a person was asked (its approval request and the answer).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use rusqlite::types::Value as SqlValue;
use rusqlite::{OptionalExtension, params_from_iter};
use serde::Serialize;

use super::page;
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
    /// `allowed`, `observed`, `denied` (any refusal: refused before forwarding), `asked`
    /// (the call raised an approval request: a person was asked), or one decision
    /// (`no_intent`, a refusal code).
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
    /// Which launch of its server that epoch is ("launch 7": [`Store::launch_number`]).
    pub launch: Option<u32>,
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
    /// Who called: the session's agent.
    pub agent: Agent,
    /// On what authority it went: `grant`, `observed` (observe mode), `admitted` (a request
    /// other than a tool call, from a run a person admitted); `None` for a refusal, and for
    /// rows projected before the journals recorded it.
    pub authority: Option<String>,
    /// The grant it went under, as given.
    pub grant: Option<GrantLife>,
    /// The approval request it raised, when a person was asked about it.
    pub asked: Option<Asked>,
}

/// A journal session by its id, with its agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionName {
    /// The journal session id.
    pub id: i64,
    /// The server label.
    pub server: String,
    /// Its agent.
    pub agent: Agent,
}

/// The columns an Activity statement selects, in the order [`Store::activity_rows`] reads.
const COLUMNS: &str = "SELECT seq, time, session, server, epoch, tool, call, decision, outcome,
                              duration_ms, authority, grant, approval
                       FROM journal_activity";

/// The Activity row whose intent, refusal (`seq`) or result (`result_seq`) is record ?1: the
/// primary key, then `journal_activity_result`.
fn record_call() -> String {
    format!(
        "{COLUMNS} WHERE seq = ?1
         UNION ALL {COLUMNS} WHERE result_seq = ?1 AND result_seq != seq LIMIT 1"
    )
}

/// The journal session numbered ?2 in the engine run of record ?1 (the last
/// `engine_started` at or before it): `audit_log_engine_started`, then `(run, session)`.
const SESSION_OF_RECORD: &str = "
    SELECT id, server FROM journal_sessions
    WHERE session = ?2 AND run = (SELECT coalesce(max(seq), 0) FROM audit_log
                                  WHERE kind = 'engine_started' AND seq <= ?1)";

/// The agent behind a session, as the journal knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// Its self-reported client name and version (`claude-code 2.1.3`).
    pub client: Option<String>,
    /// The process as the engine identified it: chain and pid.
    pub process: Option<String>,
    /// Its working directory.
    pub cwd: Option<String>,
}

/// A grant a call went under: which, and how long it was given for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantLife {
    /// The grant id.
    pub grant: String,
    /// How it was to end: the `GrantEnd`, as JSON; `None` when the journal has no record of
    /// the grant.
    pub end: Option<serde_json::Value>,
    /// When it was issued (unix ms).
    pub issued: Option<i64>,
}

/// An approval request a call raised, and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Asked {
    /// The approval id.
    pub approval: String,
    /// When it was asked (unix ms).
    pub requested: i64,
    /// When it was answered (unix ms).
    pub answered: Option<i64>,
    /// `granted`, `denied` or `expired`.
    pub answer: Option<String>,
    /// Where the person answered: `window`, `tray`, `terminal`; `None` when nobody did, and
    /// for answers recorded before the audit log kept it.
    pub by: Option<String>,
}

impl Store {
    /// A page of the Activity journal: newest first (by time, then seq).
    ///
    /// Every filter has an index that ends in `time` (and the rowid, the seq), so a filter,
    /// a time range and the order are served by one index walk that stops after the page:
    /// `session`, `server`, `epoch`, `tool`, `decision` each by `(column, time)`, `denied`
    /// and `asked` by partial indexes on `time` of the refused and the asked rows, no filter
    /// by `time`. The agent, grant and approval of each row are primary-key lookups after.
    pub fn activity(&self, filter: &ActivityFilter) -> Result<Vec<ActivityRow>, StoreError> {
        let (sql, args) = self.activity_sql(filter)?;
        self.activity_rows(&sql, args)
    }

    /// The Activity row record `seq` is about: the call whose intent, refusal or result it
    /// is (`None` for a record of another kind).
    pub fn activity_of_record(&self, seq: i64) -> Result<Option<ActivityRow>, StoreError> {
        Ok(self.activity_rows(&record_call(), vec![seq.into()])?.pop())
    }

    /// The journal session record `seq` names as the engine's session `number` (the
    /// session numbers of the engine run the record belongs to), with its agent.
    pub fn session_of_record(
        &self,
        seq: i64,
        number: u64,
    ) -> Result<Option<SessionName>, StoreError> {
        let found: Option<(i64, String)> = self
            .conn
            .prepare_cached(SESSION_OF_RECORD)?
            .query_row(rusqlite::params![seq, number as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        found
            .map(|(id, server)| {
                Ok(SessionName {
                    id,
                    server,
                    agent: self.session_agent(id)?,
                })
            })
            .transpose()
    }

    /// Runs an Activity statement (its columns [`COLUMNS`]) and completes each row.
    fn activity_rows(
        &self,
        sql: &str,
        args: Vec<SqlValue>,
    ) -> Result<Vec<ActivityRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params_from_iter(args), |r| {
            let grant: Option<String> = r.get(11)?;
            let approval: Option<String> = r.get(12)?;
            Ok((
                ActivityRow {
                    seq: r.get(0)?,
                    time: r.get(1)?,
                    session: r.get(2)?,
                    server: r.get(3)?,
                    epoch: r.get(4)?,
                    launch: None,
                    tool: r.get(5)?,
                    call: r.get(6)?,
                    decision: r.get(7)?,
                    outcome: r.get(8)?,
                    duration_ms: r.get(9)?,
                    agent: Agent::default(),
                    authority: r.get(10)?,
                    grant: None,
                    asked: None,
                },
                grant,
                approval,
            ))
        })?;
        let rows: Vec<_> = rows.collect::<Result<_, _>>()?;
        let mut agents: HashMap<i64, Agent> = HashMap::new();
        let mut launches: HashMap<(String, String), u32> = HashMap::new();
        rows.into_iter()
            .map(|(mut row, grant, approval)| {
                row.agent = match agents.entry(row.session) {
                    Entry::Occupied(known) => known.get().clone(),
                    Entry::Vacant(slot) => slot.insert(self.session_agent(row.session)?).clone(),
                };
                if let Some(epoch) = &row.epoch {
                    row.launch = Some(match launches.entry((row.server.clone(), epoch.clone())) {
                        Entry::Occupied(known) => *known.get(),
                        Entry::Vacant(slot) => *slot.insert(self.launch_of(&row.server, epoch)?),
                    });
                }
                row.grant = grant.map(|g| self.grant_life(g)).transpose()?;
                row.asked = approval.map(|a| self.asked(a)).transpose()?;
                Ok(row)
            })
            .collect()
    }

    /// The agent of journal session `id` (none known: all `None`).
    fn session_agent(&self, id: i64) -> Result<Agent, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT client, agent, cwd FROM journal_sessions WHERE id = ?1")?
            .query_row([id], |r| {
                Ok(Agent {
                    client: r.get(0)?,
                    process: r.get(1)?,
                    cwd: r.get(2)?,
                })
            })
            .optional()?
            .unwrap_or_default())
    }

    /// Grant `grant` as the journal recorded it being given.
    fn grant_life(&self, grant: String) -> Result<GrantLife, StoreError> {
        let found: Option<(String, i64)> = self
            .conn
            .prepare_cached("SELECT end_kind, issued FROM journal_grants WHERE grant = ?1")?
            .query_row([&grant], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let (end, issued) = match found {
            Some((end, issued)) => {
                let end = serde_json::from_str(&end).map_err(|e| StoreError::Corrupt {
                    what: format!("journal grant {grant}"),
                    why: format!("end: {e}"),
                })?;
                (Some(end), Some(issued))
            }
            None => (None, None),
        };
        Ok(GrantLife { grant, end, issued })
    }

    /// Approval request `approval` and its answer.
    fn asked(&self, approval: String) -> Result<Asked, StoreError> {
        type Found = (i64, Option<i64>, Option<String>, Option<String>);
        let found: Option<Found> = self
            .conn
            .prepare_cached(
                "SELECT requested, answered, answer, channel FROM journal_approvals
                 WHERE approval = ?1",
            )?
            .query_row([&approval], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?;
        let (requested, answered, answer, by) = found.ok_or_else(|| StoreError::Corrupt {
            what: format!("journal approval {approval}"),
            why: "a call names it and it is not in the journal".into(),
        })?;
        Ok(Asked {
            approval,
            requested,
            answered,
            answer,
            by,
        })
    }

    /// The statement of an Activity page and its arguments.
    fn activity_sql(&self, filter: &ActivityFilter) -> Result<(String, Vec<SqlValue>), StoreError> {
        let mut sql = format!("{COLUMNS} WHERE 1");
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
            Some("asked") => sql.push_str(" AND approval IS NOT NULL"),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::tests::plan;

    #[test]
    fn a_records_call_and_session_are_index_searches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let args = [SqlValue::Integer(1)];
        let call = plan(&store, &record_call(), &args);
        assert!(
            call.contains("USING INTEGER PRIMARY KEY (rowid=?)"),
            "{call}"
        );
        assert!(
            call.contains("journal_activity_result (result_seq=?)"),
            "{call}"
        );
        assert!(!call.contains("SCAN"), "{call}");
        let session = plan(&store, SESSION_OF_RECORD, &[1.into(), 1.into()]);
        assert!(
            session.contains("sqlite_autoindex_journal_sessions")
                && session.contains("audit_log_engine_started"),
            "{session}"
        );
        assert!(!session.contains("SCAN"), "{session}");
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
                    decision: Some("asked".into()),
                    ..f()
                },
                "SCAN journal_activity USING INDEX journal_activity_asked",
            ),
            (
                window(ActivityFilter {
                    decision: Some("asked".into()),
                    ..f()
                }),
                "journal_activity_asked (time>? AND time<?)",
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
