//! The journals as shells read them: the Sessions timeline, the Activity feed, the Sessions
//! journal, and one audit record opened for a clicked mark. These types cross the app's IPC
//! boundary (their TypeScript twins are generated with the rest, see
//! [`crate::typescript_bindings`]).
//!
//! Every read opens its own read-only connection to the home's database
//! ([`Store::open_read_only`]: about 0.1 ms), never the engine's shared one: a query on a
//! million rows neither waits for nor holds up the audit writer (WAL lets readers and the
//! writer proceed together) or the gate, which uses the shared connection.

use postern_audit::{ChainHash, Head, RawRecord, Seq, Verifier};
use postern_store::{Store, StoreError};
use postern_vault::SecretStore;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::audit::{open_record, read_key, redacted};
use crate::{EngineError, Home};

/// Which part of the timeline to read (see `postern_store::TimelineQuery`). Zoom and pan
/// are the same query over another window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase", default)]
pub struct TimelineQuery {
    /// Window start, unix ms (default: the first session's start).
    #[ts(type = "number | null")]
    pub since: Option<i64>,
    /// Window end, exclusive, unix ms (default: just after the last record of any session).
    #[ts(type = "number | null")]
    pub until: Option<i64>,
    /// Only sessions with a larger id: the previous page's last lane.
    #[ts(type = "number | null")]
    pub lanes_after: Option<i64>,
    /// Most lanes (0: 100; at most 1,000).
    pub max_lanes: u32,
    /// Most call, refusal and grant marks (0: 2,000; at most 20,000).
    pub max_marks: u32,
    /// Buckets across the window when the marks do not fit (0: 200; at most 2,000).
    pub buckets: u32,
}

/// The timeline of a window: one lane per agent session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// The window start, unix ms.
    #[ts(type = "number")]
    pub since: i64,
    /// The window end (exclusive), unix ms.
    #[ts(type = "number")]
    pub until: i64,
    /// The sessions overlapping the window, oldest first.
    pub lanes: Vec<TimelineLane>,
    /// More sessions overlap the window: ask again with `lanesAfter` set to the last lane's id.
    pub more_lanes: bool,
    /// Which kinds of marks are all given one by one; the others are only counted, in the
    /// lanes' buckets. Rebuilds are always marks.
    pub complete: MarksComplete,
    /// The width of every bucket (ms), when the lanes have buckets.
    #[ts(type = "number | null")]
    pub bucket_width: Option<i64>,
}

/// Which kinds of marks a [`Timeline`] gives in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct MarksComplete {
    /// Every call (and so every refusal).
    pub calls: bool,
    /// Every refusal.
    pub refusals: bool,
    /// Every grant issued or ended.
    pub grants: bool,
}

/// One agent session on the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TimelineLane {
    /// The journal session id (what `ActivityFilter.session` takes).
    #[ts(type = "number")]
    pub id: i64,
    /// The server label.
    pub server: String,
    /// The agent process as the engine identified it (chain and pid), for display.
    pub agent: Option<String>,
    /// The agent's self-reported client name (display only).
    pub client: Option<String>,
    /// Start, unix ms.
    #[ts(type = "number")]
    pub started: i64,
    /// End, unix ms, when it ended cleanly.
    #[ts(type = "number | null")]
    pub ended: Option<i64>,
    /// Its last record, unix ms: where an interrupted lane stops.
    #[ts(type = "number")]
    pub last_seen: i64,
    /// `running` (the lane goes on to now), `ended` or `interrupted`.
    pub status: String,
    /// Who admitted the agent run: `human` or `observe`.
    pub approved: Option<String>,
    /// Its epochs overlapping the window, in order.
    pub bands: Vec<EpochBand>,
    /// Its marks in the window, by time.
    pub marks: Vec<TimelineMark>,
    /// Its counts per bucket (`bucketWidth` wide), by start, when not every mark is given;
    /// buckets with nothing in them are left out.
    pub buckets: Vec<TimelineBucket>,
}

/// An execution epoch of a session's server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct EpochBand {
    /// The epoch.
    pub epoch: String,
    /// The first record naming it in the session, unix ms.
    #[ts(type = "number")]
    pub first: i64,
    /// The last record naming it in the session, unix ms.
    #[ts(type = "number")]
    pub last: i64,
    /// The seq of the first record naming it (its audit entry).
    #[ts(type = "number")]
    pub seq: i64,
}

/// Something that happened on a lane; `seq` is the audit record to open for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum TimelineMark {
    /// A call that went through (`allowed`, `observed`), or a result with no intent on record
    /// (`no_intent`).
    Call {
        #[ts(type = "number")]
        time: i64,
        #[ts(type = "number")]
        seq: i64,
        tool: String,
        epoch: Option<String>,
        decision: String,
        /// `ok`, `tool_error`, ...; `null` while no result is recorded.
        outcome: Option<String>,
    },
    /// A call refused before it was forwarded.
    Refusal {
        #[ts(type = "number")]
        time: i64,
        #[ts(type = "number")]
        seq: i64,
        tool: String,
        epoch: Option<String>,
        /// The stable refusal code (`approval_denied`, `catalog_stale`, ...).
        code: String,
    },
    /// A human gave a grant.
    GrantIssued {
        #[ts(type = "number")]
        time: i64,
        #[ts(type = "number")]
        seq: i64,
        grant: String,
        epoch: String,
        /// The `ToolScope`.
        #[ts(type = "unknown")]
        tools: serde_json::Value,
    },
    /// A grant stopped applying.
    GrantEnded {
        #[ts(type = "number")]
        time: i64,
        /// `null` for a grant that ended before the journals recorded which record ended it.
        #[ts(type = "number | null")]
        seq: Option<i64>,
        grant: String,
        reason: Option<String>,
    },
    /// The session's server moved to another epoch (a rebuild, a restart).
    Rebuild {
        #[ts(type = "number")]
        time: i64,
        #[ts(type = "number")]
        seq: i64,
        from: String,
        to: String,
    },
}

/// Counts in `[start, start + bucketWidth)` on one lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TimelineBucket {
    /// Unix ms.
    #[ts(type = "number")]
    pub start: i64,
    /// Calls, refusals included.
    #[ts(type = "number")]
    pub calls: i64,
    /// Calls refused before forwarding.
    #[ts(type = "number")]
    pub refused: i64,
    /// Grants issued.
    #[ts(type = "number")]
    pub grants: i64,
}

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
    /// `allowed`, `observed`, `denied` (any refusal), or one refusal code.
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

/// One audit record, for a clicked mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its sequence number.
    #[ts(type = "number")]
    pub seq: u64,
    /// Its time, unix ms (from the clear header).
    #[ts(type = "number")]
    pub time: i64,
    /// Its event kind (from the clear header).
    pub kind: String,
    /// The header's format version.
    pub version: u8,
    /// Its chain hash, hex.
    pub hash: String,
    /// What is wrong with the record as stored, checked against the previous record only
    /// (the header, the seq, the link to the previous hash): `null` when nothing is. The
    /// Integrity view's full verification is what vouches for the whole log.
    pub problem: Option<String>,
    /// The event, when it could be opened.
    pub body: AuditBody,
}

/// A record's body: opened (tool-call arguments shown by their shape only), or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum AuditBody {
    /// The event, as JSON, its `arguments` replaced by their shape.
    Opened {
        #[ts(type = "unknown")]
        event: serde_json::Value,
    },
    /// Not opened, and why (the vault is locked, the key is not in the keychain, ...).
    Sealed { reason: String },
}

/// The timeline of a window of the home's journals.
pub fn timeline(home: &Home, query: &TimelineQuery) -> Result<Timeline, EngineError> {
    let timeline = reader(home)?.timeline(&postern_store::TimelineQuery {
        since: query.since,
        until: query.until,
        lanes_after: query.lanes_after,
        max_lanes: query.max_lanes,
        max_marks: query.max_marks,
        buckets: query.buckets,
    })?;
    Ok(Timeline {
        since: timeline.since,
        until: timeline.until,
        lanes: timeline.lanes.into_iter().map(lane).collect(),
        more_lanes: timeline.more_lanes,
        complete: MarksComplete {
            calls: timeline.complete.calls,
            refusals: timeline.complete.refusals,
            grants: timeline.complete.grants,
        },
        bucket_width: timeline.bucket_width,
    })
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
    Ok(rows
        .into_iter()
        .map(|r| ActivityRow {
            seq: r.seq,
            time: r.time,
            session: r.session,
            server: r.server,
            epoch: r.epoch,
            tool: r.tool,
            call: r.call,
            decision: r.decision,
            outcome: r.outcome,
            duration_ms: r.duration_ms,
        })
        .collect())
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

/// Audit record `seq` of the home's log (`None`: no such record), its body opened with the
/// opening key from `key` (the keychain the engine was started with), or `Err(why not)`.
pub fn audit_entry(
    home: &Home,
    seq: u64,
    key: Result<&dyn SecretStore, String>,
) -> Result<Option<AuditEntry>, EngineError> {
    let Ok(wanted) = i64::try_from(seq) else {
        return Ok(None);
    };
    let store = reader(home)?;
    let mut previous: Option<Vec<u8>> = None;
    let mut found: Option<Row> = None;
    store.audit_records_between((wanted - 2).max(0), wanted, |row| {
        if row.seq == wanted {
            found = Some(Row {
                time: row.time,
                kind: row.kind.to_owned(),
                header: row.header.to_vec(),
                sealed: row.sealed.to_vec(),
                hash: row.hash.to_vec(),
            });
        } else {
            previous = Some(row.hash.to_vec());
        }
        Ok::<(), StoreError>(())
    })?;
    let Some(row) = found else {
        return Ok(None);
    };
    let raw = RawRecord::new(&row.header, &row.sealed, &row.hash);
    let header = postern_audit::Header::decode(&row.header).ok();
    let problem = check(seq, previous.as_deref(), raw, &row);
    let body = match key {
        Err(why) => AuditBody::Sealed { reason: why },
        Ok(secrets) => match read_key(secrets) {
            Ok(Some(key)) => match open_record(raw, &key).and_then(|o| redacted(&o.event)) {
                Ok(event) => AuditBody::Opened { event },
                Err(e) => AuditBody::Sealed {
                    reason: e.to_string(),
                },
            },
            Ok(None) => AuditBody::Sealed {
                reason: "the audit opening key is not in the keychain".into(),
            },
            Err(e) => AuditBody::Sealed {
                reason: e.to_string(),
            },
        },
    };
    Ok(Some(AuditEntry {
        seq,
        time: header.as_ref().map_or(row.time, |h| h.time().as_millis()),
        kind: header
            .as_ref()
            .map_or(row.kind.clone(), |h| h.kind().as_str().to_owned()),
        version: header.as_ref().map_or(0, |h| h.version()),
        hash: ChainHash::from_slice(&row.hash)
            .map_or_else(|_| "(malformed)".to_owned(), |h| h.to_string()),
        problem,
        body,
    }))
}

/// A stored audit row, owned.
struct Row {
    time: i64,
    kind: String,
    header: Vec<u8>,
    sealed: Vec<u8>,
    hash: Vec<u8>,
}

/// Verifies one record against the previous one's hash (the audit crate's verifier, resumed
/// there), and that the index columns agree with its header.
fn check(seq: u64, previous: Option<&[u8]>, raw: RawRecord<'_>, row: &Row) -> Option<String> {
    let mut verifier = match (seq, previous) {
        (1, _) => Verifier::new(),
        (_, Some(hash)) => match ChainHash::from_slice(hash) {
            Ok(hash) => Verifier::resume(Head::new(Seq::new(seq - 1), hash)),
            Err(e) => return Some(format!("the previous record's hash is malformed: {e}")),
        },
        (_, None) => return Some(format!("record {} is missing", seq - 1)),
    };
    if let Err(e) = verifier.push(raw) {
        return Some(format!("{} ({})", e, e.code()));
    }
    match postern_audit::Header::decode(&row.header) {
        Ok(h) if h.time().as_millis() == row.time && h.kind().as_str() == row.kind => None,
        Ok(_) => Some("the time or kind column disagrees with the record's header".into()),
        Err(e) => Some(e.to_string()),
    }
}

fn reader(home: &Home) -> Result<Store, EngineError> {
    Ok(Store::open_read_only(home.path())?)
}

fn lane(lane: postern_store::Lane) -> TimelineLane {
    TimelineLane {
        id: lane.id,
        server: lane.server,
        agent: lane.agent,
        client: lane.client,
        started: lane.started,
        ended: lane.ended,
        last_seen: lane.last_seen,
        status: lane.status,
        approved: lane.approved,
        bands: lane
            .bands
            .into_iter()
            .map(|b| EpochBand {
                epoch: b.epoch,
                first: b.first,
                last: b.last,
                seq: b.seq,
            })
            .collect(),
        marks: lane.marks.into_iter().map(mark).collect(),
        buckets: lane
            .buckets
            .into_iter()
            .map(|b| TimelineBucket {
                start: b.start,
                calls: b.calls,
                refused: b.refused,
                grants: b.grants,
            })
            .collect(),
    }
}

fn mark(mark: postern_store::Mark) -> TimelineMark {
    use postern_store::MarkKind;
    let (time, seq) = (mark.time, mark.seq.unwrap_or_default());
    match mark.kind {
        MarkKind::Call {
            tool,
            epoch,
            decision,
            outcome,
        } => TimelineMark::Call {
            time,
            seq,
            tool,
            epoch,
            decision,
            outcome,
        },
        MarkKind::Refusal { tool, epoch, code } => TimelineMark::Refusal {
            time,
            seq,
            tool,
            epoch,
            code,
        },
        MarkKind::GrantIssued {
            grant,
            epoch,
            tools,
        } => TimelineMark::GrantIssued {
            time,
            seq,
            grant,
            epoch,
            tools,
        },
        MarkKind::GrantEnded { grant, reason } => TimelineMark::GrantEnded {
            time,
            seq: mark.seq,
            grant,
            reason,
        },
        MarkKind::Rebuild { from, to } => TimelineMark::Rebuild {
            time,
            seq,
            from,
            to,
        },
    }
}

#[cfg(test)]
mod tests;
