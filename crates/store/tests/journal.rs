//! The journals against a scripted scenario: two engine runs, sessions that end, one cut
//! short by a crash, calls that succeed, fail, are refused or never answered; then the same
//! journals rebuilt from the log.

use postern_audit::rand_core::{TryCryptoRng, TryRng};
use postern_audit::{Chain, EventKind, OpeningKey, SealedRecord, Seq, UnixMillis};
use postern_domain::{AuditEvent, CallOutcome, ExecutionEpoch, ServerLabel};
use postern_store::{
    ActivityFilter, Append, AuditWriter, Opened, SessionFilter, Store, StoreError,
};
use serde_json::json;

struct Counter(u8);

impl TryRng for Counter {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(u32::from(self.0))
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(u64::from(self.0))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.0 = self.0.wrapping_add(1);
        dst.fill(self.0);
        Ok(())
    }
}

impl TryCryptoRng for Counter {}

fn label(name: &str) -> ServerLabel {
    name.parse().expect("label")
}

fn epoch(n: u128) -> ExecutionEpoch {
    ExecutionEpoch::new(1_700_000_000_000, n)
}

fn intent(session: u64, server: &str, e: u128, call: i64, tool: &str) -> AuditEvent {
    AuditEvent::ToolCallIntent {
        session,
        server: label(server),
        epoch: epoch(e),
        call: json!(call),
        tool: tool.into(),
        arguments: json!({}),
    }
}

fn result(session: u64, e: u128, call: i64, outcome: CallOutcome, ms: u64) -> AuditEvent {
    AuditEvent::ToolCallResult {
        session,
        server: label("fixture"),
        epoch: epoch(e),
        call: json!(call),
        tool: "echo".into(),
        outcome,
        duration_ms: ms,
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
        /* 1 */
        AuditEvent::EngineStarted {
            version: "t".into(),
            pid: 1,
        },
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
        /* 11 */
        AuditEvent::SessionEnded {
            session: 1,
            server: label("fixture"),
            reason: "agent left".into(),
        },
        // The engine crashed; a new run: session 2 of run 1 was interrupted.
        /* 12 */
        AuditEvent::EngineStarted {
            version: "t".into(),
            pid: 2,
        },
        /* 13 */ session(1, "fixture", "agent-c"),
        /* 14 */ intent(1, "fixture", 4, 1, "echo"),
        /* 15 */ AuditEvent::EngineStopped {
            reason: "shutdown".into(),
        },
    ]
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
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer = AuditWriter::open(dir.path()).expect("writer");
    let key = OpeningKey::from_bytes([5; 32]);
    let mut chain = Chain::genesis(key.recipient());
    let mut rng = Counter(0);
    let events = scenario();
    let records: Vec<SealedRecord> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let body = serde_json::to_vec(e).expect("json");
            let time = UnixMillis::new((i as i64 + 1) * 1000);
            let kind = EventKind::parse(e.kind()).expect("kind");
            chain.append(time, kind, &body, &mut rng).expect("seal")
        })
        .collect();
    // In three batches, as the writer would commit them.
    for range in [0..4, 4..11, 11..15] {
        let batch: Vec<Append<'_>> = range
            .map(|i| Append {
                record: &records[i],
                event: &events[i],
            })
            .collect();
        writer.append(&batch).expect("append");
    }
    let store = Store::open(dir.path()).expect("store");
    check(&store);

    // Rebuilt from the opened log, the journals are the same.
    let opened = records.iter().map(|r| {
        let o = r.open(&key).expect("opens");
        Ok::<_, StoreError>(Opened {
            seq: o.header().seq(),
            time: o.header().time(),
            event: serde_json::from_slice(o.body()).expect("event"),
        })
    });
    assert_eq!(writer.project(true, opened).expect("rebuild"), 15);
    check(&store);
    // Projecting again adds nothing: events at or before the journals' end are skipped.
    let again = records.iter().take(3).map(|r| {
        Ok::<_, StoreError>(Opened {
            seq: r.header().seq(),
            time: r.header().time(),
            event: events[0].clone(),
        })
    });
    assert_eq!(writer.project(false, again).expect("project"), 0);
    assert_eq!(store.journal_seq().expect("seq"), 15);
    assert_eq!(records[14].header().seq(), Seq::new(15));
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
