//! The Sessions timeline against a scripted scenario: two sessions, a rebuild that gives one
//! lane two epochs, a refusal, a grant issued and ended; marks when they fit, buckets when
//! they do not (counted from the rows, and from the per-span counts), zoom and lane paging;
//! then the same from journals rebuilt from the log.

mod common;

use std::collections::BTreeSet;

use common::{Log, epoch, label};
use postern_domain::decision::Authority;
use postern_domain::{
    AgentRun, ApprovalId, Artifact, AuditEvent, CallOutcome, Digest, ExecutionRecord, Grant,
    GrantEnd, GrantId, Pinning, ToolScope,
};
use postern_store::{Band, Bucket, Complete, Lane, Mark, MarkKind, Timeline, TimelineQuery};
use serde_json::json;

fn record(server: &str, e: u128) -> Box<ExecutionRecord> {
    let artifact = |p: &str| Artifact {
        path: p.into(),
        digest: Digest::of(p.as_bytes()),
    };
    Box::new(ExecutionRecord {
        server_label: label(server),
        epoch: epoch(e),
        launch_command: vec!["/usr/bin/server".into()],
        executable: artifact("/usr/bin/server"),
        wrappers: vec![],
        entry: None,
        lockfiles: vec![],
        extra_paths: vec![],
        runtime: None,
        working_directory: "/work".into(),
        env_names: vec![],
        loader_env: vec![],
        sandbox: None,
        pinning: Pinning::Pinned,
        pid: 100,
        started_at_ms: 0,
    })
}

fn grant() -> Grant {
    Grant {
        id: GrantId::new(5_000, 1),
        agent_run: AgentRun {
            pid: 4242,
            start_time: 7,
        },
        server_label: label("fixture"),
        execution_epoch: epoch(1),
        tool_scope: ToolScope::Tools(BTreeSet::from(["echo".to_owned()])),
        credential_scope: BTreeSet::new(),
        issued_at: 5_000,
        end: GrantEnd::UntilRunEnds,
    }
}

fn intent(session: u64, server: &str, e: u128, call: i64, tool: &str) -> AuditEvent {
    AuditEvent::ToolCallIntent {
        session,
        server: label(server),
        epoch: epoch(e),
        call: json!(call),
        tool: tool.into(),
        arguments: json!({"text": "hello"}),
        authority: Some(Authority::Grant(grant().id)),
    }
}

fn result(session: u64, server: &str, e: u128, call: i64, tool: &str) -> AuditEvent {
    AuditEvent::ToolCallResult {
        session,
        server: label(server),
        epoch: epoch(e),
        call: json!(call),
        tool: tool.into(),
        outcome: CallOutcome::Ok,
        duration_ms: 3,
    }
}

/// Record `i` (1-based) is written at time `i * 1000`.
fn scenario() -> Vec<AuditEvent> {
    vec![
        /* 1 */
        AuditEvent::EngineStarted {
            version: "t".into(),
            pid: 1,
        },
        /* 2 */
        AuditEvent::SessionStarted {
            session: 1,
            server: label("fixture"),
            client: Some("agent-a".into()),
            agent: None,
        },
        /* 3 */
        AuditEvent::ServerStarted {
            session: 1,
            record: record("fixture", 1),
        },
        /* 4 */
        AuditEvent::SessionApproved {
            session: 1,
            server: label("fixture"),
            agent_run: grant().agent_run,
            by: "human".into(),
        },
        /* 5 */
        AuditEvent::ApprovalGranted {
            approval: ApprovalId::new(4_000, 1),
            session: 1,
            admitted_session: true,
            grant: Some(Box::new(grant())),
            by: Some(postern_domain::AnswerChannel::Window),
        },
        /* 6 */ intent(1, "fixture", 1, 1, "echo"),
        /* 7 */ result(1, "fixture", 1, 1, "echo"),
        /* 8 */
        AuditEvent::SessionStarted {
            session: 2,
            server: label("time"),
            client: Some("agent-b".into()),
            agent: None,
        },
        /* 9 */
        AuditEvent::ServerStarted {
            session: 2,
            record: record("time", 2),
        },
        /* 10 */ intent(2, "time", 2, 1, "get_time"),
        /* 11 */
        AuditEvent::ServerReplaced {
            session: 1,
            server: label("fixture"),
            old_epoch: epoch(1),
            new_epoch: Some(epoch(3)),
            reason: "on-change restart".into(),
        },
        /* 12 */
        AuditEvent::AuthorizationDenied {
            session: 1,
            server: label("fixture"),
            epoch: Some(epoch(3)),
            call: json!(2),
            tool: "echo".into(),
            code: "authorization_stale".into(),
            detail: json!({}),
        },
        /* 13 */
        AuditEvent::GrantEnded {
            grant: grant().id,
            reason: "epoch ended".into(),
        },
        /* 14 */ intent(1, "fixture", 3, 3, "echo"),
        /* 15 */ result(1, "fixture", 3, 3, "echo"),
        /* 16 */
        AuditEvent::SessionEnded {
            session: 1,
            server: label("fixture"),
            reason: "agent left".into(),
        },
        /* 17 */ result(2, "time", 2, 1, "get_time"),
        /* 18 */
        AuditEvent::SessionEnded {
            session: 2,
            server: label("time"),
            reason: "agent left".into(),
        },
    ]
}

fn band(e: u128, first: i64, last: i64, seq: i64) -> Band {
    Band {
        epoch: epoch(e).to_string(),
        first,
        last,
        seq,
    }
}

fn mark(time: i64, seq: Option<i64>, kind: MarkKind) -> Mark {
    Mark { time, seq, kind }
}

fn call(seq: i64, tool: &str, e: u128) -> Mark {
    mark(
        seq * 1000,
        Some(seq),
        MarkKind::Call {
            tool: tool.into(),
            epoch: Some(epoch(e).to_string()),
            decision: "allowed".into(),
            outcome: Some("ok".into()),
        },
    )
}

fn refusal() -> Mark {
    mark(
        12_000,
        Some(12),
        MarkKind::Refusal {
            tool: "echo".into(),
            epoch: Some(epoch(3).to_string()),
            code: "authorization_stale".into(),
        },
    )
}

fn grant_marks() -> [Mark; 2] {
    let id = grant().id.to_string();
    [
        mark(
            5_000,
            Some(5),
            MarkKind::GrantIssued {
                grant: id.clone(),
                epoch: epoch(1).to_string(),
                tools: json!({"tools": ["echo"]}),
            },
        ),
        mark(
            13_000,
            Some(13),
            MarkKind::GrantEnded {
                grant: id,
                reason: Some("epoch ended".into()),
            },
        ),
    ]
}

fn rebuild() -> Mark {
    mark(
        11_000,
        Some(11),
        MarkKind::Rebuild {
            from: epoch(1).to_string(),
            to: epoch(3).to_string(),
        },
    )
}

fn lane(id: i64, server: &str, client: &str, times: (i64, i64)) -> Lane {
    Lane {
        id,
        server: server.into(),
        agent: None,
        client: Some(client.into()),
        cwd: None,
        started: times.0,
        ended: Some(times.1),
        last_seen: times.1,
        status: "ended".into(),
        approved: None,
        bands: vec![],
        marks: vec![],
        buckets: vec![],
        waits: vec![],
    }
}

/// Both lanes with their bands, and no marks or buckets.
fn lanes() -> Vec<Lane> {
    vec![
        Lane {
            approved: Some("human".into()),
            bands: vec![band(1, 3_000, 11_000, 3), band(3, 11_000, 15_000, 11)],
            ..lane(2, "fixture", "agent-a", (2_000, 16_000))
        },
        Lane {
            bands: vec![band(2, 9_000, 17_000, 9)],
            ..lane(8, "time", "agent-b", (8_000, 18_000))
        },
    ]
}

const ALL: Complete = Complete {
    calls: true,
    refusals: true,
    grants: true,
};

fn bucket(start: i64, calls: i64, refused: i64, grants: i64) -> Bucket {
    Bucket {
        start,
        calls,
        refused,
        grants,
    }
}

fn timeline(log: &Log, query: TimelineQuery) -> Timeline {
    log.store.timeline(&query).expect("timeline")
}

#[test]
fn the_timeline_draws_lanes_bands_and_every_mark_when_they_fit() {
    let mut log = Log::write(scenario(), &[0..5, 5..12, 12..18]);
    check_whole_range(&log);
    log.rebuild_identically();
    check_whole_range(&log);
}

fn check_whole_range(log: &Log) {
    let [issued, ended] = grant_marks();
    let mut expected = lanes();
    expected[0].marks = vec![
        issued,
        call(6, "echo", 1),
        rebuild(),
        refusal(),
        ended,
        call(14, "echo", 3),
    ];
    expected[1].marks = vec![call(10, "get_time", 2)];
    assert_eq!(
        timeline(log, TimelineQuery::default()),
        Timeline {
            since: 2_000,
            until: 18_001,
            lanes: expected,
            more_lanes: false,
            complete: ALL,
            bucket_width: None,
        }
    );
}

#[test]
fn over_the_mark_bound_calls_become_buckets_counted_from_rows_or_spans() {
    let log = Log::write(scenario(), &[0..9, 9..18]);
    // 3 marks: the two grant marks fit, the four calls do not, the one refusal does.
    let bounded = |since, until, buckets| TimelineQuery {
        since,
        until,
        max_marks: 3,
        buckets,
        ..TimelineQuery::default()
    };
    let got = timeline(&log, bounded(None, None, 4));
    assert_eq!(
        got.complete,
        Complete {
            calls: false,
            refusals: true,
            grants: true,
        }
    );
    let [issued, ended] = grant_marks();
    assert_eq!(
        got.lanes[0].marks,
        vec![issued, rebuild(), refusal(), ended]
    );
    assert_eq!(got.lanes[1].marks, vec![]);
    // 16 s in 4 buckets: narrower than a minute, so counted from the rows, 4 s wide and
    // aligned to multiples of it (the first starts before the window, the last ends after).
    assert_eq!(got.bucket_width, Some(4_000));
    assert_eq!(
        got.lanes[0].buckets,
        vec![bucket(4_000, 1, 0, 1), bucket(12_000, 2, 1, 0)]
    );
    assert_eq!(got.lanes[1].buckets, vec![bucket(8_000, 1, 0, 0)]);

    // Over 200 minutes in 2 buckets: 100 minutes, so whole hours counted per hour.
    let got = timeline(&log, bounded(Some(0), Some(12_000_000), 2));
    assert_eq!(got.bucket_width, Some(3_600_000));
    assert_eq!(got.lanes[0].buckets, vec![bucket(0, 3, 1, 1)]);
    assert_eq!(got.lanes[1].buckets, vec![bucket(0, 1, 0, 0)]);

    // With one mark, not even the grants fit: only rebuilds stay marks.
    let got = timeline(
        &log,
        TimelineQuery {
            max_marks: 1,
            buckets: 4,
            ..TimelineQuery::default()
        },
    );
    assert_eq!(
        got.complete,
        Complete {
            calls: false,
            refusals: true,
            grants: false,
        }
    );
    assert_eq!(got.lanes[0].marks, vec![rebuild(), refusal()]);
    assert_eq!(
        got.lanes[0].buckets,
        vec![bucket(4_000, 1, 0, 1), bucket(12_000, 2, 1, 0)]
    );
}

#[test]
fn a_narrower_window_zooms_and_lanes_come_in_pages() {
    let log = Log::write(scenario(), &[0..9, 9..18]);
    // [11 s, 14 s): the first epoch's band ends where the window starts, the call at 14 s
    // is outside.
    let got = timeline(
        &log,
        TimelineQuery {
            since: Some(11_000),
            until: Some(14_000),
            ..TimelineQuery::default()
        },
    );
    let [_, ended] = grant_marks();
    let mut expected = lanes();
    expected[0].marks = vec![rebuild(), refusal(), ended];
    assert_eq!(got.lanes, expected);
    assert_eq!(got.complete, ALL);

    // After the first lane ended, only the second.
    let got = timeline(
        &log,
        TimelineQuery {
            since: Some(16_500),
            until: Some(20_000),
            ..TimelineQuery::default()
        },
    );
    assert_eq!(got.lanes.iter().map(|l| l.id).collect::<Vec<_>>(), vec![8]);

    let page = |after| {
        timeline(
            &log,
            TimelineQuery {
                lanes_after: after,
                max_lanes: 1,
                ..TimelineQuery::default()
            },
        )
    };
    let first = page(None);
    assert_eq!((first.lanes[0].id, first.more_lanes), (2, true));
    let second = page(Some(2));
    assert_eq!((second.lanes[0].id, second.more_lanes), (8, false));
    assert_eq!(second.lanes[0].marks, vec![call(10, "get_time", 2)]);
}

#[test]
fn the_timeline_serializes_with_camel_case_names_and_tagged_marks() {
    let log = Log::write(scenario(), &[0..9, 9..18]);
    let json = serde_json::to_value(timeline(&log, TimelineQuery::default())).expect("json");
    assert_eq!(json["moreLanes"], false);
    assert_eq!(json["lanes"][0]["lastSeen"], 16_000);
    assert_eq!(json["lanes"][0]["marks"][2]["kind"], "rebuild");
    assert_eq!(json["lanes"][0]["marks"][3]["code"], "authorization_stale");
    assert_eq!(json["lanes"][0]["marks"][0]["kind"], "grantIssued");
}

#[test]
fn an_interrupted_lane_stops_where_it_was_last_seen_and_a_running_one_goes_on() {
    let mut events: Vec<AuditEvent> = scenario().into_iter().take(10).collect();
    // The engine died after record 10; a new run starts at 11 and a session of it runs on.
    events.push(AuditEvent::EngineStarted {
        version: "t".into(),
        pid: 2,
    });
    events.push(AuditEvent::SessionStarted {
        session: 1,
        server: label("time"),
        client: Some("agent-c".into()),
        agent: None,
    });
    let log = Log::write(events, &[0..6, 6..12]);
    let got = timeline(&log, TimelineQuery::default());
    let summary: Vec<_> = got
        .lanes
        .iter()
        .map(|l| (l.id, l.status.as_str(), l.ended, l.last_seen))
        .collect();
    assert_eq!(
        summary,
        vec![
            (2, "interrupted", None, 7_000),
            (8, "interrupted", None, 10_000),
            (12, "running", None, 12_000),
        ]
    );
    assert_eq!(got.lanes[0].bands, vec![band(1, 3_000, 7_000, 3)]);
    // A window after the crash: the interrupted lanes are gone, the running one is there.
    let later = timeline(
        &log,
        TimelineQuery {
            since: Some(60_000),
            until: Some(120_000),
            ..TimelineQuery::default()
        },
    );
    assert_eq!(
        later.lanes.iter().map(|l| l.id).collect::<Vec<_>>(),
        vec![12]
    );
}

#[test]
fn an_empty_window_or_journal_has_no_lanes() {
    let log = Log::write(scenario(), &[0..9, 9..18]);
    let backwards = timeline(
        &log,
        TimelineQuery {
            since: Some(12_000),
            until: Some(11_000),
            ..TimelineQuery::default()
        },
    );
    assert!(backwards.lanes.is_empty());
    let empty = Log::write(
        vec![AuditEvent::EngineStarted {
            version: "t".into(),
            pid: 1,
        }],
        std::slice::from_ref(&(0..1)),
    );
    let got = timeline(&empty, TimelineQuery::default());
    assert_eq!((got.since, got.until, got.lanes.len()), (0, 0, 0));
}
