//! The Sessions timeline: which window to read, and its lanes (one per agent session) with
//! their epoch bands, marks and buckets.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::reader;
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
    /// The agent's working directory.
    pub cwd: Option<String>,
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
    /// Its approval requests overlapping the window: while each was open, the agent waited
    /// for a person.
    pub waits: Vec<ApprovalWait>,
}

/// An approval request on a lane, from the request to its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalWait {
    /// The approval id.
    pub approval: String,
    /// The tool the call was for.
    pub tool: String,
    /// When it was asked, unix ms.
    #[ts(type = "number")]
    pub requested: i64,
    /// The request's audit record.
    #[ts(type = "number")]
    pub seq: i64,
    /// When it was answered, unix ms; `null` while open (or never: the engine stopped first).
    #[ts(type = "number | null")]
    pub answered: Option<i64>,
    /// `granted`, `denied` or `expired`.
    pub answer: Option<String>,
    /// The answer's audit record.
    #[ts(type = "number | null")]
    pub answer_seq: Option<i64>,
    /// Where the person answered: `window`, `tray`, `terminal`; `null` when nobody did, or
    /// the record predates it.
    pub by: Option<String>,
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

fn lane(lane: postern_store::Lane) -> TimelineLane {
    TimelineLane {
        id: lane.id,
        server: lane.server,
        agent: lane.agent,
        client: lane.client,
        cwd: lane.cwd,
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
        waits: lane
            .waits
            .into_iter()
            .map(|w| ApprovalWait {
                approval: w.approval,
                tool: w.tool,
                requested: w.requested,
                seq: w.seq,
                answered: w.answered,
                answer: w.answer,
                answer_seq: w.answer_seq,
                by: w.by,
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
