//! The journals against scripted scenarios, each then rebuilt from the log:
//!
//! - two engine runs, sessions that end, one cut short by a crash, calls that succeed,
//!   fail, are refused or never answered;
//! - authorization: a session a human admits with a grant that is later revoked, approval
//!   requests granted, denied and expired, a vault locked and unlocked, and an observed
//!   session whose calls go without a grant;
//! - results in later batches than their calls: ids in flight twice, a session ended before
//!   its last result, a session number and call id used again in the next run.

mod common;

use std::collections::BTreeSet;

use common::{Log, epoch, label};
use postern_audit::Seq;
use postern_domain::decision::{AskFor, Authority, GrantChoice};
use postern_domain::{
    AgentIdentity, AgentRun, AnswerChannel, ApprovalId, AuditEvent, CallOutcome, Grant, GrantEnd,
    GrantId, ToolScope,
};
use postern_store::{
    ActivityFilter, Agent, Append, Asked, GrantLife, GrantRow, Opened, SessionFilter, Store,
    StoreError,
};
use serde_json::json;

fn intent(session: u64, server: &str, e: u128, call: i64, tool: &str) -> AuditEvent {
    intent_on(session, server, e, call, tool, None)
}

fn intent_on(
    session: u64,
    server: &str,
    e: u128,
    call: i64,
    tool: &str,
    authority: Option<Authority>,
) -> AuditEvent {
    AuditEvent::ToolCallIntent {
        session,
        server: label(server),
        epoch: epoch(e),
        call: json!(call),
        tool: tool.into(),
        arguments: json!({}),
        authority,
    }
}

fn result(session: u64, e: u128, call: i64, outcome: CallOutcome, ms: u64) -> AuditEvent {
    result_on(session, "fixture", e, call, "echo", outcome, ms)
}

fn result_on(
    session: u64,
    server: &str,
    e: u128,
    call: i64,
    tool: &str,
    outcome: CallOutcome,
    ms: u64,
) -> AuditEvent {
    AuditEvent::ToolCallResult {
        session,
        server: label(server),
        epoch: epoch(e),
        call: json!(call),
        tool: tool.into(),
        outcome,
        duration_ms: ms,
    }
}

fn engine_started(pid: u32) -> AuditEvent {
    AuditEvent::EngineStarted {
        version: "t".into(),
        pid,
    }
}

fn session_ended(session: u64, server: &str, reason: &str) -> AuditEvent {
    AuditEvent::SessionEnded {
        session,
        server: label(server),
        reason: reason.into(),
    }
}

fn session(session: u64, server: &str, client: &str) -> AuditEvent {
    AuditEvent::SessionStarted {
        session,
        server: label(server),
        client: Some(client.into()),
        agent: None,
    }
}

/// The scenario; record `i` (1-based) is written at time `i * 1000`.
fn scenario() -> Vec<AuditEvent> {
    vec![
        /* 1 */ engine_started(1),
        /* 2 */ session(1, "fixture", "agent-a"),
        /* 3 */ intent(1, "fixture", 1, 1, "echo"),
        /* 4 */ result(1, 1, 1, CallOutcome::Ok, 5),
        /* 5 */
        AuditEvent::AuthorizationDenied {
            session: 1,
            server: label("fixture"),
            epoch: Some(epoch(1)),
            call: json!(2),
            tool: "echo".into(),
            code: "catalog_stale".into(),
            detail: json!({}),
        },
        /* 6 */ session(2, "time", "agent-b"),
        /* 7 */ intent(2, "time", 2, 1, "get_time"),
        /* 8 */
        AuditEvent::ServerReplaced {
            session: 1,
            server: label("fixture"),
            old_epoch: epoch(1),
            new_epoch: Some(epoch(3)),
            reason: "restart".into(),
        },
        /* 9 */ intent(1, "fixture", 3, 3, "echo"),
        /* 10 */ result(1, 3, 3, CallOutcome::ToolError, 7),
        /* 11 */ session_ended(1, "fixture", "agent left"),
        // The engine crashed; a new run: session 2 of run 1 was interrupted.
        /* 12 */
        engine_started(2),
        /* 13 */ session(1, "fixture", "agent-c"),
        /* 14 */ intent(1, "fixture", 4, 1, "echo"),
        /* 15 */ AuditEvent::EngineStopped {
            reason: "shutdown".into(),
        },
    ]
}

fn run() -> AgentRun {
    AgentRun {
        pid: 4242,
        start_time: 77,
    }
}

fn revoked_grant() -> Grant {
    Grant {
        id: GrantId::new(4_500, 9),
        agent_run: run(),
        server_label: label("deploy"),
        execution_epoch: epoch(1),
        tool_scope: ToolScope::Tools(BTreeSet::from(["ship".to_owned()])),
        credential_scope: BTreeSet::from(["github".to_owned()]),
        issued_at: 4_500,
        end: GrantEnd::UntilRunEnds,
    }
}

fn asked(n: u128, session: u64, server: &str, e: u128, tool: &str) -> AuditEvent {
    AuditEvent::ApprovalRequested {
        approval: ApprovalId::new(1_000, n),
        session,
        server: label(server),
        agent_run: Some(run()),
        epoch: epoch(e),
        tool: tool.into(),
        credentials: BTreeSet::from(["github".to_owned()]),
        what: AskFor::SessionAndCall,
        every_use: Vec::new(),
        choices: vec![GrantChoice::ThisCall, GrantChoice::UntilRunEnds],
        expires_at: 120_000,
    }
}

/// The authorization scenario; record `i` (1-based) is written at time `i * 1000`.
fn authorization() -> Vec<AuditEvent> {
    let grant = revoked_grant();
    vec![
        /* 1 */ engine_started(1),
        /* 2 */
        AuditEvent::SessionStarted {
            session: 1,
            server: label("deploy"),
            client: Some("agent-a".into()),
            agent: Some(AgentIdentity {
                pid: 4242,
                start_time: 77,
                executable: None,
                chain: vec!["bash".into(), "claude".into(), "postern".into()],
                cwd: Some("/home/u/app".into()),
            }),
        },
        /* 3 */ asked(1, 1, "deploy", 1, "ship"),
        /* 4 */
        AuditEvent::SessionApproved {
            session: 1,
            server: label("deploy"),
            agent_run: run(),
            by: "human".into(),
        },
        /* 5 */
        AuditEvent::ApprovalGranted {
            approval: ApprovalId::new(1_000, 1),
            session: 1,
            admitted_session: true,
            grant: Some(Box::new(grant.clone())),
            by: Some(AnswerChannel::Window),
        },
        /* 6 */
        intent_on(1, "deploy", 1, 1, "ship", Some(Authority::Grant(grant.id))),
        /* 7 */ result_on(1, "deploy", 1, 1, "ship", CallOutcome::Ok, 40),
        /* 8 */ asked(2, 1, "deploy", 1, "rollback"),
        /* 9 */
        AuditEvent::ApprovalDenied {
            approval: ApprovalId::new(1_000, 2),
            session: 1,
            by: Some(AnswerChannel::Terminal),
        },
        /* 10 */
        AuditEvent::AuthorizationDenied {
            session: 1,
            server: label("deploy"),
            epoch: Some(epoch(1)),
            call: json!(2),
            tool: "rollback".into(),
            code: "approval_denied".into(),
            detail: json!({}),
        },
        /* 11 */
        AuditEvent::GrantEnded {
            grant: grant.id,
            reason: "revoked".into(),
        },
        /* 12 */
        AuditEvent::SessionStarted {
            session: 2,
            server: label("time"),
            client: Some("agent-b".into()),
            agent: None,
        },
        /* 13 */
        AuditEvent::SessionApproved {
            session: 2,
            server: label("time"),
            agent_run: AgentRun {
                pid: 5151,
                start_time: 3,
            },
            by: "observe".into(),
        },
        /* 14 */ intent_on(2, "time", 2, 1, "get_time", Some(Authority::Observed)),
        /* 15 */
        AuditEvent::ApprovalGranted {
            approval: ApprovalId::new(1_000, 3),
            session: 2,
            admitted_session: true,
            grant: None,
            by: None,
        },
        /* 16 */
        AuditEvent::VaultLocked {
            reason: "idle".into(),
        },
        /* 17 */
        AuditEvent::ApprovalExpired {
            approval: ApprovalId::new(1_000, 4),
            session: 2,
            code: "approval_expired".into(),
            reason: "the vault was locked".into(),
        },
        /* 18 */ AuditEvent::VaultUnlocked,
        // A grant ends once: a later end does not rewrite it, an unknown grant is no error.
        /* 19 */
        AuditEvent::GrantEnded {
            grant: grant.id,
            reason: "epoch ended".into(),
        },
        /* 20 */
        AuditEvent::GrantEnded {
            grant: GrantId::new(9_000, 1),
            reason: "run ended".into(),
        },
        // A later call under the grant asked nobody; a request nobody answered stays open.
        /* 21 */
        intent_on(1, "deploy", 1, 3, "ship", Some(Authority::Grant(grant.id))),
        /* 22 */ asked(5, 1, "deploy", 1, "ship"),
        // A request that timed out: the refusal it gave is the call that raised it.
        /* 23 */
        asked(6, 2, "time", 2, "get_time"),
        /* 24 */
        AuditEvent::ApprovalExpired {
            approval: ApprovalId::new(1_000, 6),
            session: 2,
            code: "approval_timeout".into(),
            reason: "no answer in time".into(),
        },
        /* 25 */
        AuditEvent::AuthorizationDenied {
            session: 2,
            server: label("time"),
            epoch: Some(epoch(2)),
            call: json!(2),
            tool: "get_time".into(),
            code: "approval_timeout".into(),
            detail: json!({}),
        },
        // A refusal that asked nobody is linked to no request, even an open one.
        /* 26 */
        AuditEvent::AuthorizationDenied {
            session: 1,
            server: label("deploy"),
            epoch: Some(epoch(1)),
            call: json!(4),
            tool: "ship".into(),
            code: "catalog_stale".into(),
            detail: json!({}),
        },
    ]
}

#[test]
fn the_journals_show_approvals_grants_and_observed_calls_and_rebuild_identically() {
    let mut log = Log::write(authorization(), &[0..5, 5..11, 11..20, 20..26]);
    check_authorization(&log.store);
    log.rebuild_identically();
    check_authorization(&log.store);
}

fn check_authorization(store: &Store) {
    let sessions = store.sessions(&SessionFilter::default()).expect("sessions");
    let summary: Vec<_> = sessions
        .iter()
        .map(|s| {
            (
                s.id,
                s.server.as_str(),
                s.approved.as_deref(),
                s.agent.as_deref(),
                s.approvals,
                (s.calls, s.denied, s.failed),
                s.grants.len(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (12, "time", Some("observe"), None, 1, (1, 1, 0), 0),
            (
                2,
                "deploy",
                Some("human"),
                Some("bash -> claude -> postern (pid 4242)"),
                3,
                (2, 2, 0),
                1
            ),
        ]
    );
    let grant = revoked_grant();
    assert_eq!(
        sessions[1].grants,
        vec![GrantRow {
            grant: grant.id.to_string(),
            server: "deploy".into(),
            epoch: epoch(1).to_string(),
            tools: json!({"tools": ["ship"]}),
            credentials: vec!["github".into()],
            end: json!({"kind": "untilRunEnds"}),
            issued: 4_500,
            ended: Some(11_000),
            reason: Some("revoked".into()),
        }]
    );
    // The rows serialize with the same camelCase names the CLI prints.
    let json = serde_json::to_value(&sessions[1]).expect("json");
    assert_eq!(json["approved"], "human");
    assert_eq!(json["grants"][0]["epoch"], epoch(1).to_string());
    assert_eq!(json["grants"][0]["ended"], 11_000);

    let rows: Vec<_> = store
        .activity(&ActivityFilter::default())
        .expect("activity")
        .iter()
        .map(|r| {
            (
                r.seq,
                r.session,
                r.tool.clone(),
                r.decision.clone(),
                r.outcome.clone(),
            )
        })
        .collect();
    let row = |seq, session, tool: &str, decision: &str, outcome: Option<&str>| {
        (
            seq,
            session,
            tool.to_owned(),
            decision.to_owned(),
            outcome.map(str::to_owned),
        )
    };
    assert_eq!(
        rows,
        vec![
            row(26, 2, "ship", "catalog_stale", Some("refused")),
            row(25, 12, "get_time", "approval_timeout", Some("refused")),
            row(21, 2, "ship", "allowed", None),
            row(14, 12, "get_time", "observed", None),
            row(10, 2, "rollback", "approval_denied", Some("refused")),
            row(6, 2, "ship", "allowed", Some("ok")),
        ]
    );
    check_who_and_how(store);
    let f = ActivityFilter::default;
    let decided = |decision: &str| {
        seqs(
            store,
            ActivityFilter {
                decision: Some(decision.into()),
                ..f()
            },
        )
    };
    // An observed call went through: it is not a refusal.
    assert_eq!(decided("denied"), [26, 25, 10]);
    assert_eq!(decided("observed"), [14]);
    assert_eq!(decided("allowed"), [21, 6]);
    // A person was asked about these three calls, and only these.
    assert_eq!(decided("asked"), [25, 10, 6]);
}

/// Who called, on what authority, and whether a person was asked: each Activity row's agent,
/// authority, grant (with its lifetime) and approval request.
fn check_who_and_how(store: &Store) {
    let rows = store
        .activity(&ActivityFilter::default())
        .expect("activity");
    let by_seq = |seq: i64| rows.iter().find(|r| r.seq == seq).expect("row");
    let grant = revoked_grant();

    let first = by_seq(6);
    assert_eq!(
        first.agent,
        Agent {
            client: Some("agent-a".into()),
            process: Some("bash -> claude -> postern (pid 4242)".into()),
            cwd: Some("/home/u/app".into()),
        }
    );
    assert_eq!(first.authority.as_deref(), Some("grant"));
    // Its epoch is deploy's first launch, as the Servers view numbers it.
    assert_eq!(first.launch, Some(1));
    assert_eq!(
        first.grant,
        Some(GrantLife {
            grant: grant.id.to_string(),
            end: Some(json!({"kind": "untilRunEnds"})),
            issued: Some(4_500),
        })
    );
    // Asked at record 3, granted at record 5.
    assert_eq!(
        first.asked,
        Some(Asked {
            approval: ApprovalId::new(1_000, 1).to_string(),
            requested: 3_000,
            answered: Some(5_000),
            answer: Some("granted".into()),
            by: Some("window".into()),
        })
    );
    // The same grant's later call: same authority, nobody asked.
    let later = by_seq(21);
    assert_eq!(
        (
            later.authority.as_deref(),
            later.grant.as_ref().map(|g| &g.grant),
            &later.asked
        ),
        (Some("grant"), Some(&grant.id.to_string()), &None)
    );

    let denied = by_seq(10);
    assert_eq!((denied.authority.as_deref(), &denied.grant), (None, &None));
    assert_eq!(
        denied
            .asked
            .as_ref()
            .map(|a| (a.answered, a.answer.as_deref(), a.by.as_deref())),
        Some((Some(9_000), Some("denied"), Some("terminal")))
    );
    let timed_out = by_seq(25);
    assert_eq!(
        timed_out.asked.as_ref().map(|a| (
            a.requested,
            a.answered,
            a.answer.as_deref(),
            a.by.as_deref()
        )),
        Some((23_000, Some(24_000), Some("expired"), None))
    );
    assert_eq!(timed_out.agent.client.as_deref(), Some("agent-b"));
    assert_eq!(by_seq(26).asked, None);

    let observed = by_seq(14);
    assert_eq!(
        (
            observed.authority.as_deref(),
            &observed.grant,
            &observed.asked
        ),
        (Some("observed"), &None, &None)
    );
    // A clicked record finds its call (the intent, the refusal or the result) and its
    // session, named by the journal id.
    let call_of = |seq| store.activity_of_record(seq).expect("call").map(|r| r.seq);
    assert_eq!(
        (call_of(6), call_of(7), call_of(10), call_of(5)),
        (Some(6), Some(6), Some(10), None)
    );
    let session = store
        .session_of_record(5, 1)
        .expect("session")
        .expect("known");
    assert_eq!((session.id, session.server.as_str()), (2, "deploy"));
    assert_eq!(session.agent, first.agent);
    let other = store
        .session_of_record(23, 2)
        .expect("session")
        .expect("known");
    assert_eq!(
        (other.id, other.agent.client.as_deref()),
        (12, Some("agent-b"))
    );
    assert_eq!(store.session_of_record(23, 9).expect("session"), None);

    let json = serde_json::to_value(first).expect("json");
    assert_eq!(json["agent"]["cwd"], "/home/u/app");
    assert_eq!(json["grant"]["end"]["kind"], "untilRunEnds");
    assert_eq!(json["asked"]["answer"], "granted");

    // The timeline's waits: the three requests of the deploy lane, the open one to the end.
    let timeline = store
        .timeline(&postern_store::TimelineQuery::default())
        .expect("timeline");
    let waits: Vec<_> = timeline
        .lanes
        .iter()
        .map(|l| {
            l.waits
                .iter()
                .map(|w| {
                    (
                        w.tool.as_str(),
                        w.requested,
                        w.answered,
                        w.answer.as_deref(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        waits,
        vec![
            vec![
                ("ship", 3_000, Some(5_000), Some("granted")),
                ("rollback", 8_000, Some(9_000), Some("denied")),
                ("ship", 22_000, None, None),
            ],
            vec![("get_time", 23_000, Some(24_000), Some("expired"))],
        ]
    );
    assert_eq!(timeline.lanes[0].cwd.as_deref(), Some("/home/u/app"));
    // A window after the answered requests still shows the open one.
    let late = store
        .timeline(&postern_store::TimelineQuery {
            since: Some(25_000),
            until: Some(27_000),
            ..Default::default()
        })
        .expect("timeline");
    assert_eq!(
        late.lanes[0]
            .waits
            .iter()
            .map(|w| w.seq)
            .collect::<Vec<_>>(),
        vec![22]
    );
}

fn seqs(store: &Store, filter: ActivityFilter) -> Vec<i64> {
    store
        .activity(&filter)
        .expect("activity")
        .iter()
        .map(|r| r.seq)
        .collect()
}

#[test]
fn the_journals_follow_a_scripted_scenario_and_rebuild_identically() {
    let mut log = Log::write(scenario(), &[0..4, 4..11, 11..15]);
    check(&log.store);

    // Rebuilt from the opened log, the journals are the same.
    log.rebuild_identically();
    check(&log.store);
    // Projecting again adds nothing: events at or before the journals' end are skipped.
    let again = log.records.iter().take(3).map(|r| {
        Ok::<_, StoreError>(Opened {
            seq: r.header().seq(),
            time: r.header().time(),
            event: log.events[0].clone(),
        })
    });
    assert_eq!(log.journals.project(again).expect("project"), 0);
    assert_eq!(log.store.journal_seq().expect("seq"), 15);
    assert_eq!(log.records[14].header().seq(), Seq::new(15));
}

fn check(store: &Store) {
    let sessions = store.sessions(&SessionFilter::default()).expect("sessions");
    let summary: Vec<_> = sessions
        .iter()
        .map(|s| {
            (
                s.id,
                s.run,
                s.session,
                s.server.as_str(),
                s.status.as_str(),
                (s.calls, s.denied, s.failed),
                s.epochs.len(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (13, 12, 1, "fixture", "ended", (1, 0, 0), 1),
            (6, 1, 2, "time", "interrupted", (1, 0, 0), 1),
            (2, 1, 1, "fixture", "ended", (2, 1, 1), 2),
        ]
    );
    assert_eq!(
        sessions[2].epochs,
        vec![epoch(1).to_string(), epoch(3).to_string()]
    );
    assert_eq!(sessions[2].reason.as_deref(), Some("agent left"));
    assert_eq!(sessions[2].ended, Some(11_000));
    assert_eq!(
        sessions[0].reason.as_deref(),
        Some("engine stopped: shutdown")
    );
    assert_eq!(sessions[1].ended, None);
    assert_eq!(sessions[0].client.as_deref(), Some("agent-c"));
    let page = store
        .sessions(&SessionFilter {
            server: Some("fixture".into()),
            before: Some(13),
            ..SessionFilter::default()
        })
        .expect("page");
    assert_eq!(page.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2]);

    let all = store
        .activity(&ActivityFilter::default())
        .expect("activity");
    let rows: Vec<_> = all
        .iter()
        .map(|r| {
            (
                r.seq,
                r.session,
                r.tool.as_str(),
                r.decision.as_str(),
                r.outcome.as_deref(),
                r.duration_ms,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (14, 13, "echo", "allowed", None, None),
            (9, 2, "echo", "allowed", Some("tool_error"), Some(7)),
            (7, 6, "get_time", "allowed", None, None),
            (5, 2, "echo", "catalog_stale", Some("refused"), None),
            (3, 2, "echo", "allowed", Some("ok"), Some(5)),
        ]
    );
    let f = ActivityFilter::default;
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                session: Some(2),
                ..f()
            }
        ),
        [9, 5, 3]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                server: Some("time".into()),
                ..f()
            }
        ),
        [7]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                epoch: Some(epoch(3).to_string()),
                ..f()
            }
        ),
        [9]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                tool: Some("get_time".into()),
                ..f()
            }
        ),
        [7]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                decision: Some("denied".into()),
                ..f()
            }
        ),
        [5]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                decision: Some("catalog_stale".into()),
                ..f()
            }
        ),
        [5]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                decision: Some("allowed".into()),
                ..f()
            }
        ),
        [14, 9, 7, 3]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                since: Some(5_000),
                until: Some(9_000),
                ..f()
            }
        ),
        [7, 5]
    );
    assert_eq!(
        seqs(
            store,
            ActivityFilter {
                before: Some(7),
                ..f()
            }
        ),
        [5, 3]
    );
    assert_eq!(seqs(store, ActivityFilter { limit: 2, ..f() }), [14, 9]);
}

/// Results completing their calls in later batches than their intents: two calls in flight
/// under the same id (the newest is completed first), a result after its session ended, and
/// the same session number and call id in the next engine run, which completes that run's
/// call and not the earlier one.
fn results_across_batches() -> Vec<AuditEvent> {
    vec![
        /* 1 */ engine_started(1),
        /* 2 */ session(1, "fixture", "agent-a"),
        /* 3 */ intent(1, "fixture", 1, 7, "echo"),
        /* 4 */ intent(1, "fixture", 1, 7, "echo"),
        /* 5 */ intent(1, "fixture", 1, 8, "echo"),
        /* 6 */ result(1, 1, 7, CallOutcome::Ok, 1),
        /* 7 */ result(1, 1, 7, CallOutcome::ToolError, 2),
        /* 8 */ session_ended(1, "fixture", "agent left"),
        /* 9 */ result(1, 1, 8, CallOutcome::Cancelled, 3),
        /* 10 */ engine_started(2),
        /* 11 */ session(1, "fixture", "agent-b"),
        /* 12 */ intent(1, "fixture", 2, 7, "echo"),
        /* 13 */ intent(1, "fixture", 2, 9, "echo"),
        /* 14 */ result(1, 2, 7, CallOutcome::Ok, 4),
    ]
}

#[test]
fn results_complete_their_own_calls_across_batches_sessions_and_runs() {
    for batches in [
        &[0..3, 3..5, 5..6, 6..8, 8..9, 9..12, 12..14][..],
        &[0..1, 1..14][..],
        &[0..4, 4..10, 10..13, 13..14][..],
    ] {
        let mut log = Log::write(results_across_batches(), batches);
        let check = |store: &Store| {
            let rows: Vec<_> = store
                .activity(&ActivityFilter::default())
                .expect("activity")
                .iter()
                .map(|r| (r.seq, r.session, r.outcome.clone(), r.duration_ms))
                .collect();
            let done = |o: &str| Some(o.to_owned());
            assert_eq!(
                rows,
                vec![
                    (13, 11, None, None),
                    (12, 11, done("ok"), Some(4)),
                    (5, 2, done("cancelled"), Some(3)),
                    (4, 2, done("ok"), Some(1)),
                    (3, 2, done("tool_error"), Some(2)),
                ],
                "batches {batches:?}"
            );
            let sessions: Vec<_> = store
                .sessions(&SessionFilter::default())
                .expect("sessions")
                .iter()
                .map(|s| (s.id, s.calls, s.failed, s.status.clone(), s.ended))
                .collect();
            // The cancelled call and the tool error count as failed.
            assert_eq!(
                sessions,
                vec![
                    (11, 2, 0, "running".to_owned(), None),
                    (2, 3, 2, "ended".to_owned(), Some(8_000)),
                ],
                "batches {batches:?}"
            );
        };
        check(&log.store);
        log.rebuild_identically();
        check(&log.store);
    }
}

/// What a catch-up read from the log is not projected again when its batch comes by (the
/// journals' thread catches up while the log goes on; the batches committed meanwhile reach it
/// afterwards).
#[test]
fn a_batch_already_in_the_journals_is_not_projected_again() {
    let mut log = Log::write(results_across_batches(), &[0..6, 6..14]);
    let before = common::dump(log.home());
    let batch: Vec<Append<'_>> = log
        .records
        .iter()
        .zip(&log.events)
        .map(|(record, event)| Append { record, event })
        .collect();
    log.journals
        .project_appended(&batch[3..])
        .expect("projected again");
    assert_eq!(common::dump(log.home()), before);
    assert_eq!(log.store.journal_seq().expect("seq"), 14);
}
