//! The Sessions timeline over a time window: one lane per agent session, the epochs it ran
//! as bands, and marks (calls, refusals, grants issued and ended, rebuilds), with the work
//! bounded whatever the window.
//!
//! - **Lanes** are the sessions that overlap `[since, until)`, oldest first, at most
//!   `max_lanes` of them (`more_lanes` says there are more: ask again with `lanes_after`).
//! - **Bands** come from `journal_session_epochs`: when each epoch was first and last named
//!   in the session. A **rebuild** is an epoch change within a lane, marked when the next
//!   epoch was first named; rebuilds are always given as marks (one per epoch change).
//! - **Marks** of calls, refusals and grants are given one by one only while they fit in
//!   `max_marks`, filled in that order of priority: grants, then refusals and calls together,
//!   else refusals alone. A kind is either complete or absent ([`Complete`]); when any is
//!   absent, every lane gets **buckets** (calls, refused, grants per bucket), counted in SQL
//!   from `journal_activity_buckets` (rows already counted per minute, ten minutes, hour,
//!   six hours, day), or from the rows themselves when a bucket is narrower than a minute.
//!
//! - **Waits** are the approval requests of a lane that overlap the window: from the request
//!   to its answer (or, unanswered, to the lane's end), the time the agent waited for a
//!   person. Always given in full (`max_marks` does not bound them: people answer at most a
//!   few a minute), from `journal_approvals` by `(session, requested)`.
//!
//! Zoom and pan are a new query over another window. The reads are index walks that stop
//! at the bounds: per lane, `(session, time)` on the Activity rows (`LIMIT` the marks
//! left), the partial `(session, time)` index of refused rows, `(session, issued)` and
//! `(session, ended)` on grants, and the buckets' primary key `(session, span, start)`.

use serde::Serialize;

use super::SPANS;
use crate::{Store, StoreError};

/// Which part of the timeline to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimelineQuery {
    /// Window start, unix ms (default: the first session's start).
    pub since: Option<i64>,
    /// Window end, exclusive, unix ms (default: just after the last time any session was
    /// seen).
    pub until: Option<i64>,
    /// Only sessions with a larger id (the previous page's last lane).
    pub lanes_after: Option<i64>,
    /// Most lanes (0 means 100; at most 1,000).
    pub max_lanes: u32,
    /// Most call, refusal and grant marks (0 means 2,000; at most 20,000).
    pub max_marks: u32,
    /// How many buckets the window is cut into when marks do not fit (0 means 200; at most
    /// 2,000). Bucket widths are whole multiples of a counting span, so there may be fewer.
    pub buckets: u32,
}

/// The timeline of a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// The window start (resolved), unix ms.
    pub since: i64,
    /// The window end (resolved, exclusive), unix ms.
    pub until: i64,
    /// The sessions overlapping the window, oldest first.
    pub lanes: Vec<Lane>,
    /// More sessions overlap the window than were returned.
    pub more_lanes: bool,
    /// Which kinds of marks are given in full.
    pub complete: Complete,
    /// The width of every bucket (ms), when the lanes have buckets.
    pub bucket_width: Option<i64>,
}

/// Which kinds of marks are given one by one, all of them within the window (the others
/// are only counted in the buckets). Rebuilds always are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Complete {
    /// Every call (and so every refusal).
    pub calls: bool,
    /// Every refusal.
    pub refusals: bool,
    /// Every grant issued or ended.
    pub grants: bool,
}

/// One agent session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    /// The journal session id.
    pub id: i64,
    /// The server label.
    pub server: String,
    /// The agent process, for display (chain and pid).
    pub agent: Option<String>,
    /// The agent's self-reported client name.
    pub client: Option<String>,
    /// The agent's working directory.
    pub cwd: Option<String>,
    /// Start (unix ms).
    pub started: i64,
    /// End (unix ms), when it ended cleanly.
    pub ended: Option<i64>,
    /// The last record of the session (unix ms): where an interrupted lane stops.
    pub last_seen: i64,
    /// `running`, `ended` or `interrupted`.
    pub status: String,
    /// Who admitted it: `human` or `observe`.
    pub approved: Option<String>,
    /// The epochs it ran that overlap the window, in order.
    pub bands: Vec<Band>,
    /// Its marks in the window, by time.
    pub marks: Vec<Mark>,
    /// Its counts per bucket, by start, when not every mark is given (buckets without any
    /// count are left out).
    pub buckets: Vec<Bucket>,
    /// Its approval requests overlapping the window, by time: while each was open, the agent
    /// waited for a person.
    pub waits: Vec<Wait>,
}

/// An approval request, from the request to its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    /// The approval id.
    pub approval: String,
    /// The tool the call was for.
    pub tool: String,
    /// When it was asked (unix ms).
    pub requested: i64,
    /// The seq of the request's record.
    pub seq: i64,
    /// When it was answered (unix ms); `None` while open (or never answered: the engine
    /// stopped first).
    pub answered: Option<i64>,
    /// `granted`, `denied` or `expired`.
    pub answer: Option<String>,
    /// The seq of the answer's record.
    pub answer_seq: Option<i64>,
    /// Where the person answered (`window`, `tray`, `terminal`); `None` when nobody did, or
    /// the record predates it.
    pub by: Option<String>,
}

/// An execution epoch within a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Band {
    /// The epoch.
    pub epoch: String,
    /// The first record naming it in the session (unix ms).
    pub first: i64,
    /// The last record naming it in the session (unix ms).
    pub last: i64,
    /// The seq of the first record naming it.
    pub seq: i64,
}

/// Something that happened on a lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mark {
    /// When (unix ms).
    pub time: i64,
    /// The audit record to open for it (a grant that ended before the journals recorded
    /// which record ended it has none).
    pub seq: Option<i64>,
    /// What happened.
    #[serde(flatten)]
    pub kind: MarkKind,
}

/// What a mark is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum MarkKind {
    /// A call that went through (or a result without an intent: `no_intent`).
    #[serde(rename_all = "camelCase")]
    Call {
        tool: String,
        epoch: Option<String>,
        /// `allowed`, `observed` or `no_intent`.
        decision: String,
        /// `None` while no result is recorded.
        outcome: Option<String>,
    },
    /// A call refused before forwarding.
    #[serde(rename_all = "camelCase")]
    Refusal {
        tool: String,
        epoch: Option<String>,
        /// The refusal code (`approval_denied`, `catalog_stale`, ...).
        code: String,
    },
    /// A human gave a grant.
    #[serde(rename_all = "camelCase")]
    GrantIssued {
        grant: String,
        epoch: String,
        /// The `ToolScope`, as JSON.
        tools: serde_json::Value,
    },
    /// A grant stopped applying.
    #[serde(rename_all = "camelCase")]
    GrantEnded {
        grant: String,
        reason: Option<String>,
    },
    /// The session's server moved to another epoch.
    #[serde(rename_all = "camelCase")]
    Rebuild { from: String, to: String },
}

/// Counts in `[start, start + width)` on one lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    /// Unix ms, a multiple of the width.
    pub start: i64,
    /// Calls (refusals included).
    pub calls: i64,
    /// Calls refused before forwarding.
    pub refused: i64,
    /// Grants issued.
    pub grants: i64,
}

impl Store {
    /// The timeline of a window (see the module docs).
    pub fn timeline(&self, query: &TimelineQuery) -> Result<Timeline, StoreError> {
        let (since, until) = self.window(query)?;
        if until <= since {
            return Ok(Timeline {
                since,
                until,
                lanes: Vec::new(),
                more_lanes: false,
                complete: Complete {
                    calls: true,
                    refusals: true,
                    grants: true,
                },
                bucket_width: None,
            });
        }
        let max_lanes = bound(query.max_lanes, 100, 1_000);
        let mut budget = bound(query.max_marks, 2_000, 20_000);
        let buckets = bound(query.buckets, 200, 2_000);

        let mut lanes = self.lanes(since, until, query.lanes_after, max_lanes + 1)?;
        let more_lanes = lanes.len() > max_lanes;
        lanes.truncate(max_lanes);
        for lane in &mut lanes {
            self.bands(lane, since, until)?;
            self.waits(lane, since, until)?;
        }

        let grants = self.grant_marks(&lanes, since, until, budget + 1)?;
        let mut complete = Complete {
            calls: false,
            refusals: false,
            grants: count(&grants) <= budget,
        };
        if complete.grants {
            budget -= count(&grants);
            attach(&mut lanes, grants);
        }
        let calls = self.activity_marks(&lanes, since, until, budget + 1, false)?;
        if count(&calls) <= budget {
            complete.calls = true;
            complete.refusals = true;
            attach(&mut lanes, calls);
        } else {
            let refusals = self.activity_marks(&lanes, since, until, budget + 1, true)?;
            if count(&refusals) <= budget {
                complete.refusals = true;
                attach(&mut lanes, refusals);
            }
        }
        for lane in &mut lanes {
            lane.marks.sort_by_key(|m| (m.time, m.seq));
        }

        let bucket_width = if complete.calls && complete.grants {
            None
        } else {
            let width = self.buckets(&mut lanes, since, until, buckets)?;
            Some(width)
        };
        Ok(Timeline {
            since,
            until,
            lanes,
            more_lanes,
            complete,
            bucket_width,
        })
    }

    /// The window asked for, its open ends closed from the sessions.
    fn window(&self, query: &TimelineQuery) -> Result<(i64, i64), StoreError> {
        if let (Some(since), Some(until)) = (query.since, query.until) {
            return Ok((since, until));
        }
        let (first, last): (Option<i64>, Option<i64>) = self.conn.query_row(
            "SELECT min(started), max(max(coalesce(last_time, started), coalesce(ended, started)))
             FROM journal_sessions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let since = query.since.or(first).unwrap_or(0);
        let until = query.until.or(last.map(|t| t + 1)).unwrap_or(since);
        Ok((since, until))
    }

    /// Sessions overlapping the window, oldest first: started before its end, and running
    /// or last seen at or after its start.
    fn lanes(
        &self,
        since: i64,
        until: i64,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Lane>, StoreError> {
        let mut stmt = self.conn.prepare_cached(LANES)?;
        let rows = stmt.query_map(
            rusqlite::params![after.unwrap_or(i64::MIN), since, until, limit as i64],
            |r| {
                Ok(Lane {
                    id: r.get(0)?,
                    server: r.get(1)?,
                    agent: r.get(2)?,
                    client: r.get(3)?,
                    cwd: r.get(9)?,
                    started: r.get(4)?,
                    ended: r.get(5)?,
                    status: r.get(6)?,
                    approved: r.get(7)?,
                    last_seen: r.get(8)?,
                    bands: Vec::new(),
                    marks: Vec::new(),
                    buckets: Vec::new(),
                    waits: Vec::new(),
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Fills a lane's bands overlapping the window and its rebuild marks in it.
    fn bands(&self, lane: &mut Lane, since: i64, until: i64) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(BANDS)?;
        let all = stmt
            .query_map([lane.id], |r| {
                Ok(Band {
                    epoch: r.get(0)?,
                    seq: r.get(1)?,
                    first: r.get(2)?,
                    last: r.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for pair in all.windows(2) {
            let (from, to) = (&pair[0], &pair[1]);
            if (since..until).contains(&to.first) {
                lane.marks.push(Mark {
                    time: to.first,
                    seq: Some(to.seq),
                    kind: MarkKind::Rebuild {
                        from: from.epoch.clone(),
                        to: to.epoch.clone(),
                    },
                });
            }
        }
        lane.bands = all
            .into_iter()
            .filter(|b| b.first < until && b.last >= since)
            .collect();
        Ok(())
    }

    /// Fills a lane's approval requests that overlap the window: asked before its end, and
    /// answered at or after its start, or never.
    fn waits(&self, lane: &mut Lane, since: i64, until: i64) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(WAITS)?;
        lane.waits = stmt
            .query_map(rusqlite::params![lane.id, since, until], |r| {
                Ok(Wait {
                    approval: r.get(0)?,
                    tool: r.get(1)?,
                    requested: r.get(2)?,
                    seq: r.get(3)?,
                    answered: r.get(4)?,
                    answer: r.get(5)?,
                    answer_seq: r.get(6)?,
                    by: r.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// Grants issued or ended in the window, per lane, until more than `limit` marks.
    fn grant_marks(
        &self,
        lanes: &[Lane],
        since: i64,
        until: i64,
        limit: usize,
    ) -> Result<Vec<Vec<Mark>>, StoreError> {
        let mut issued = self.conn.prepare_cached(GRANTS_ISSUED)?;
        let mut ended = self.conn.prepare_cached(GRANTS_ENDED)?;
        let mut out = Vec::with_capacity(lanes.len());
        let mut total = 0;
        for lane in lanes {
            let mut marks = Vec::new();
            if total < limit {
                let args = rusqlite::params![lane.id, since, until, (limit - total) as i64];
                let mut rows = issued.query(args)?;
                while let Some(r) = rows.next()? {
                    let grant: String = r.get(0)?;
                    let tools: String = r.get(2)?;
                    let tools = serde_json::from_str(&tools).map_err(|e| StoreError::Corrupt {
                        what: format!("journal grant {grant}"),
                        why: format!("tools: {e}"),
                    })?;
                    marks.push(Mark {
                        time: r.get(3)?,
                        seq: Some(r.get(4)?),
                        kind: MarkKind::GrantIssued {
                            grant,
                            epoch: r.get(1)?,
                            tools,
                        },
                    });
                }
            }
            if total + marks.len() < limit {
                let left = limit - total - marks.len();
                let args = rusqlite::params![lane.id, since, until, left as i64];
                let rows = ended.query_map(args, |r| {
                    Ok(Mark {
                        time: r.get(1)?,
                        seq: r.get(2)?,
                        kind: MarkKind::GrantEnded {
                            grant: r.get(0)?,
                            reason: r.get(3)?,
                        },
                    })
                })?;
                for mark in rows {
                    marks.push(mark?);
                }
            }
            total += marks.len();
            out.push(marks);
        }
        Ok(out)
    }

    /// Activity rows in the window (only refusals, with `refused_only`), per lane, until
    /// `limit` of them.
    fn activity_marks(
        &self,
        lanes: &[Lane],
        since: i64,
        until: i64,
        limit: usize,
        refused_only: bool,
    ) -> Result<Vec<Vec<Mark>>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(if refused_only { REFUSALS } else { CALLS })?;
        let mut out = Vec::with_capacity(lanes.len());
        let mut total = 0;
        for lane in lanes {
            let mut marks = Vec::new();
            if total < limit {
                let args = rusqlite::params![lane.id, since, until, (limit - total) as i64];
                let rows = stmt.query_map(args, |r| {
                    let outcome: Option<String> = r.get(5)?;
                    let (tool, epoch, decision) = (r.get(2)?, r.get(3)?, r.get(4)?);
                    Ok(Mark {
                        seq: Some(r.get(0)?),
                        time: r.get(1)?,
                        kind: if outcome.as_deref() == Some("refused") {
                            MarkKind::Refusal {
                                tool,
                                epoch,
                                code: decision,
                            }
                        } else {
                            MarkKind::Call {
                                tool,
                                epoch,
                                decision,
                                outcome,
                            }
                        },
                    })
                })?;
                marks = rows.collect::<Result<_, _>>()?;
            }
            total += marks.len();
            out.push(marks);
        }
        Ok(out)
    }

    /// Fills every lane's buckets; returns their width. Widths are whole multiples of the
    /// widest counting span that fits `buckets` buckets in the window, and buckets start at
    /// multiples of the width, so each counting row falls in exactly one bucket.
    fn buckets(
        &self,
        lanes: &mut [Lane],
        since: i64,
        until: i64,
        buckets: usize,
    ) -> Result<i64, StoreError> {
        let wanted = (until.saturating_sub(since) / buckets as i64).max(1);
        let span = SPANS.iter().rev().copied().find(|s| *s <= wanted);
        let width = span.map_or(wanted, |s| wanted / s * s);
        let from = since - since.rem_euclid(width);
        let to = until.saturating_add((width - until.rem_euclid(width)) % width);
        let read = |r: &rusqlite::Row<'_>| {
            Ok(Bucket {
                start: r.get(0)?,
                calls: r.get(1)?,
                refused: r.get(2)?,
                grants: r.get(3)?,
            })
        };
        match span {
            Some(span) => {
                let mut stmt = self.conn.prepare_cached(SPAN_BUCKETS)?;
                for lane in lanes.iter_mut() {
                    lane.buckets = stmt
                        .query_map(rusqlite::params![lane.id, span, from, to, width], read)?
                        .collect::<Result<_, _>>()?;
                }
            }
            None => {
                // Narrower than a minute: the window is under `buckets` minutes; count rows.
                let mut stmt = self.conn.prepare_cached(ROW_BUCKETS)?;
                for lane in lanes.iter_mut() {
                    lane.buckets = stmt
                        .query_map(rusqlite::params![lane.id, from, to, width], read)?
                        .collect::<Result<_, _>>()?;
                }
            }
        }
        Ok(width)
    }
}

/// Sessions overlapping `[?2, ?3)` after id ?1, oldest first: a walk of the primary key
/// from ?1 (sessions are few: one per agent run).
const LANES: &str = "
    SELECT id, server, agent, client, started, ended, status, approved,
           max(coalesce(last_time, started), coalesce(ended, started)), cwd
    FROM journal_sessions
    WHERE id > ?1 AND started < ?3
      AND (status = 'running'
           OR max(coalesce(last_time, started), coalesce(ended, started)) >= ?2)
    ORDER BY id LIMIT ?4";

/// A session's epochs: the primary key `(session, epoch)`.
const BANDS: &str = "
    SELECT epoch, seq, coalesce(first_time, 0), coalesce(last_time, first_time, 0)
    FROM journal_session_epochs WHERE session = ?1
    ORDER BY first_time, seq";

/// A session's approval requests asked before ?3 and answered at or after ?2 (or not at all):
/// `(session, requested)`. A lane has as many as a person answered in it.
const WAITS: &str = "
    SELECT approval, tool, requested, seq, answered, answer, answer_seq, channel FROM journal_approvals
    WHERE session = ?1 AND requested < ?3 AND (answered IS NULL OR answered >= ?2)
    ORDER BY requested";

/// A session's grants issued in `[?2, ?3)`, at most ?4: `(session, issued)`.
const GRANTS_ISSUED: &str = "
    SELECT grant, epoch, tools, issued, seq FROM journal_grants
    WHERE session = ?1 AND issued >= ?2 AND issued < ?3
    ORDER BY issued LIMIT ?4";

/// A session's grants that ended in `[?2, ?3)`, at most ?4: `(session, ended)`.
const GRANTS_ENDED: &str = "
    SELECT grant, ended, ended_seq, reason FROM journal_grants
    WHERE session = ?1 AND ended >= ?2 AND ended < ?3
    ORDER BY ended LIMIT ?4";

/// A session's Activity rows in `[?2, ?3)`, at most ?4: `(session, time)`.
const CALLS: &str = "
    SELECT seq, time, tool, epoch, decision, outcome FROM journal_activity
    WHERE session = ?1 AND time >= ?2 AND time < ?3
    ORDER BY time, seq LIMIT ?4";

/// [`CALLS`], the refused ones only: the partial index of refused rows.
const REFUSALS: &str = "
    SELECT seq, time, tool, epoch, decision, outcome FROM journal_activity
    WHERE session = ?1 AND time >= ?2 AND time < ?3 AND outcome = 'refused'
    ORDER BY time, seq LIMIT ?4";

/// A session's counts per bucket of width ?5, from its ?2-wide counts starting in
/// `[?3, ?4)`: the primary key `(session, span, start)`.
const SPAN_BUCKETS: &str = "
    SELECT start / ?5 * ?5 AS b, sum(calls), sum(refused), sum(grants)
    FROM journal_activity_buckets
    WHERE session = ?1 AND span = ?2 AND start >= ?3 AND start < ?4
    GROUP BY b ORDER BY b";

/// A session's counts per bucket of width ?4 in `[?2, ?3)`, from its rows:
/// `(session, time)` and `(session, issued)`.
const ROW_BUCKETS: &str = "
    SELECT b, sum(calls), sum(refused), sum(grants) FROM (
        SELECT time / ?4 * ?4 AS b, 1 AS calls, outcome IS 'refused' AS refused, 0 AS grants
        FROM journal_activity WHERE session = ?1 AND time >= ?2 AND time < ?3
        UNION ALL
        SELECT issued / ?4 * ?4, 0, 0, 1
        FROM journal_grants WHERE session = ?1 AND issued >= ?2 AND issued < ?3)
    GROUP BY b ORDER BY b";

fn bound(asked: u32, default: usize, most: usize) -> usize {
    if asked == 0 {
        default
    } else {
        (asked as usize).min(most)
    }
}

fn count(per_lane: &[Vec<Mark>]) -> usize {
    per_lane.iter().map(Vec::len).sum()
}

fn attach(lanes: &mut [Lane], per_lane: Vec<Vec<Mark>>) {
    for (lane, marks) in lanes.iter_mut().zip(per_lane) {
        lane.marks.extend(marks);
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::types::Value as SqlValue;

    use super::*;
    use crate::journal::tests::plan;

    #[test]
    fn every_timeline_read_is_an_index_search() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let cases = [
            (LANES, 4, "USING INTEGER PRIMARY KEY (rowid>?)"),
            (BANDS, 1, "USING PRIMARY KEY (session=?)"),
            (
                WAITS,
                3,
                "journal_approvals_session_requested (session=? AND requested<?)",
            ),
            (
                GRANTS_ISSUED,
                4,
                "journal_grants_session_issued (session=? AND issued>? AND issued<?)",
            ),
            (
                GRANTS_ENDED,
                4,
                "journal_grants_session_ended (session=? AND ended>? AND ended<?)",
            ),
            (
                CALLS,
                4,
                "journal_activity_session_time (session=? AND time>? AND time<?)",
            ),
            (
                REFUSALS,
                4,
                "journal_activity_refused_session (session=? AND time>? AND time<?)",
            ),
            (
                SPAN_BUCKETS,
                5,
                "USING PRIMARY KEY (session=? AND span=? AND start>? AND start<?)",
            ),
            (
                ROW_BUCKETS,
                4,
                "journal_activity_session_time (session=? AND time>? AND time<?)",
            ),
        ];
        for (sql, args, index) in cases {
            let args: Vec<SqlValue> = (0..args).map(SqlValue::Integer).collect();
            let plan = plan(&store, sql, &args);
            assert!(plan.contains(index), "{sql}\n{plan}");
            assert!(!plan.contains("SCAN journal"), "{sql}\n{plan}");
        }
        // The marks come in index order: no sort before the LIMIT.
        for sql in [GRANTS_ISSUED, GRANTS_ENDED, CALLS, REFUSALS] {
            let plan = plan(
                &store,
                sql,
                &(0..4).map(SqlValue::Integer).collect::<Vec<_>>(),
            );
            assert!(!plan.contains("TEMP B-TREE"), "{sql}\n{plan}");
        }
    }
}
