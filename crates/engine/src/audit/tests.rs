//! The engine's audit log against a real SQLite file and the in-memory secret store.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use postern_domain::{AuditEvent, CallOutcome, ExecutionEpoch, ServerLabel};
use postern_gateway::audit::{AuditSink, Durable};
use postern_store::{ActivityFilter, SessionFilter, Store};
use postern_vault::{MemoryStore, SecretStore};
use serde_json::json;

use super::*;
use crate::Home;

fn label() -> ServerLabel {
    "fixture".parse().expect("label")
}

fn epoch() -> ExecutionEpoch {
    ExecutionEpoch::new(1_700_000_000_000, 42)
}

fn intent(session: u64, call: i64) -> AuditEvent {
    AuditEvent::ToolCallIntent {
        session,
        server: label(),
        epoch: epoch(),
        call: json!(call),
        tool: "echo".into(),
        arguments: json!({"text": format!("secret-argument-{call}")}),
        authority: None,
    }
}

fn result(session: u64, call: i64) -> AuditEvent {
    AuditEvent::ToolCallResult {
        session,
        server: label(),
        epoch: epoch(),
        call: json!(call),
        tool: "echo".into(),
        outcome: CallOutcome::Ok,
        duration_ms: 3,
    }
}

fn started(session: u64) -> AuditEvent {
    AuditEvent::SessionStarted {
        session,
        server: label(),
        client: Some("test-agent 1".into()),
        agent: None,
    }
}

/// Appends durably and waits for the outcome.
fn durable(log: &AuditLog, event: AuditEvent) -> Result<(), String> {
    awaited(|done| log.record_durable(event, done))
}

/// Appends durably from a caller with nothing else open, and waits for the outcome.
fn durable_alone(log: &AuditLog, event: AuditEvent) -> Result<(), String> {
    awaited(|done| log.record_durable_alone(event, done))
}

/// Hands `append` a `done` and waits for what it is told.
fn awaited(append: impl FnOnce(Durable)) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    append(Box::new(move |outcome| {
        let _ = tx.send(outcome);
    }));
    rx.recv().expect("done is always called")
}

struct Fixture {
    _dir: tempfile::TempDir,
    home: Home,
    secrets: Arc<MemoryStore>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        Fixture {
            _dir: dir,
            home,
            secrets: Arc::new(MemoryStore::new()),
        }
    }

    fn open(&self) -> AuditLog {
        AuditLog::open(
            self.home.path(),
            Arc::clone(&self.secrets) as Arc<dyn SecretStore>,
        )
    }

    fn sql(&self, sql: &str) {
        let db = self.home.path().join(postern_store::DB_FILE);
        let conn = rusqlite::Connection::open(&db).expect("sqlite");
        postern_store::attach_journals(&conn, &db).expect("attach");
        conn.execute_batch(sql).expect("sql");
    }

    fn anchor(&self) -> String {
        let bytes = self.secrets.get(ANCHOR).expect("get").expect("anchor");
        String::from_utf8(bytes.expose().clone()).expect("utf8")
    }

    /// A log with `n` calls in one session, closed.
    fn with_calls(&self, n: i64) -> AuditLog {
        let log = self.open();
        durable(&log, started(1)).expect("session");
        for call in 1..=n {
            durable(&log, intent(1, call)).expect("intent");
            log.record(result(1, call));
        }
        log.close("test");
        log
    }
}

/// A panic while a caller commits (here, in the waiter it tells on its own thread) shuts the
/// log: what comes after is refused at once, and closing it still returns (the writer thread
/// is woken to stop, not left asleep for the close to wait on for ever).
#[test]
fn a_panic_while_a_caller_commits_shuts_the_log_and_its_close_returns() {
    let fx = Fixture::new();
    let log = Arc::new(fx.open());
    durable(&log, started(1)).expect("session");
    // Committed on this thread (the log was idle), or, rarely, by the writer thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        log.record_durable_alone(intent(1, 1), Box::new(|_| panic!("a waiter that panics")));
    }));
    assert!(durable(&log, intent(1, 2)).is_err(), "refused once shut");
    assert!(
        matches!(log.status().state, AuditState::Unavailable { .. }),
        "the status says the log takes nothing: {:?}",
        log.status().state
    );

    let (tx, rx) = mpsc::channel();
    let closing = Arc::clone(&log);
    std::thread::spawn(move || {
        closing.close("test");
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the log closes after a panic while a caller committed");
}

#[test]
fn concurrent_durable_appends_are_committed_chained_anchored_and_projected() {
    let fx = Fixture::new();
    let log = Arc::new(fx.open());
    assert_eq!(log.status().state, AuditState::Ready);
    durable(&log, started(1)).expect("session");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..25 {
                    let call = t * 100 + i;
                    durable(&log, intent(1, call)).expect("intent is durable");
                    log.record(result(1, call));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    log.close("test");
    let status = log.status();
    assert_eq!(status.state, AuditState::Closed);
    // engine_started + session + 200 intents + 200 results + engine_stopped.
    let head = status.head.expect("head");
    assert!(head.starts_with("403:"), "{head}");
    assert_eq!(status.anchored.as_deref(), Some(head.as_str()));
    assert_eq!(fx.anchor(), head);
    // Closed: durable appends are refused with a code.
    let refused = durable(&log, intent(1, 9999)).expect_err("closed");
    assert!(refused.starts_with("audit_closed:"), "{refused}");

    let report = verify(&fx.home, &*fx.secrets, None, true).expect("verifies");
    assert_eq!(report.records, 403);
    assert!(report.bodies_opened);
    assert_eq!(report.head.map(|h| h.to_string()), Some(head));

    let store = Store::open(fx.home.path()).expect("store");
    let sessions = store.sessions(&SessionFilter::default()).expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].calls, 200);
    assert_eq!(sessions[0].status, "ended");
    assert_eq!(sessions[0].epochs, vec![epoch().to_string()]);
    assert_eq!(calls_completed_ok(&store), 200);
}

/// How many calls Activity shows (up to 500), each asserted completed `ok` by its result.
fn calls_completed_ok(store: &Store) -> usize {
    let page = store
        .activity(&ActivityFilter {
            limit: 500,
            ..ActivityFilter::default()
        })
        .expect("activity");
    assert!(page.iter().all(|r| r.outcome.as_deref() == Some("ok")));
    page.len()
}

#[test]
fn lone_callers_commit_on_their_threads_in_queue_order_beside_the_writer() {
    let fx = Fixture::new();
    let log = Arc::new(fx.open());
    // Sessions whose calls come one at a time (each commits on its own thread when the log
    // is idle) beside one with many open (queued for the writer), each after its start.
    let threads: Vec<_> = (1..=6u64)
        .map(|session| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                log.record(started(session));
                for call in 0..30 {
                    let event = intent(session, call);
                    match session {
                        6 => durable(&log, event),
                        _ => durable_alone(&log, event),
                    }
                    .expect("intent is durable");
                    log.record(result(session, call));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    log.close("test");

    // The log's order is the order the events were queued in: each session's start before
    // its first call, each call's intent before its result; no gap, the chain verifies.
    let mut export = Vec::new();
    assert_eq!(
        super::export(&fx.home, &*fx.secrets, None, false, &mut export).expect("export"),
        2 + 6 * 61
    );
    let mut seen: std::collections::HashMap<u64, Vec<&str>> = Default::default();
    let lines: Vec<serde_json::Value> = export
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("json"))
        .collect();
    for line in &lines {
        if let Some(session) = line["event"]["session"].as_u64() {
            seen.entry(session)
                .or_default()
                .push(line["kind"].as_str().expect("kind"));
        }
    }
    for session in 1..=6u64 {
        let kinds = &seen[&session];
        assert_eq!(kinds[0], "session_started", "session {session}");
        assert_eq!(kinds.len(), 61, "session {session}");
        assert!(
            kinds[1..]
                .chunks(2)
                .all(|pair| pair == ["tool_call_intent", "tool_call_result"]),
            "session {session}: {kinds:?}"
        );
    }

    // The journals were projected (at the close), every call completed by its result.
    let store = Store::open(fx.home.path()).expect("store");
    let sessions = store.sessions(&SessionFilter::default()).expect("sessions");
    assert_eq!(sessions.len(), 6);
    assert!(sessions.iter().all(|s| s.calls == 30 && s.failed == 0));
    assert_eq!(calls_completed_ok(&store), 180);
}

/// What nobody waits for still gets there of itself, within moments and with no flush or
/// close: a call's result into the log (the writer thread's linger), its row into Activity (the
/// journals' window) and the head into the keychain (the anchor's interval). Each of those
/// threads is woken only when something is due before it would look again of itself.
#[test]
fn results_nobody_waits_for_reach_the_log_activity_and_the_anchor_of_themselves() {
    let fx = Fixture::new();
    let log = fx.open();
    durable(&log, started(1)).expect("session");
    for call in 1..=3 {
        durable_alone(&log, intent(1, call)).expect("intent is durable");
        log.record(result(1, call));
        std::thread::sleep(Duration::from_millis(20));
    }
    // And after a pause (the writer thread then waits with no deadline), a session's start.
    std::thread::sleep(Duration::from_millis(300));
    log.record(started(2));
    // engine_started, the sessions, three intents and three results.
    let store = Store::open(fx.home.path()).expect("store");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let head = log.status().head.unwrap_or_default();
        let anchored = log.status().anchored.unwrap_or_default();
        let completed = store
            .activity(&ActivityFilter::default())
            .expect("activity")
            .iter()
            .filter(|row| row.outcome.as_deref() == Some("ok"))
            .count();
        if head.starts_with("9:") && anchored == head && completed == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "head {head:?}, anchored {anchored:?}, completed calls {completed}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(fx.anchor(), log.status().head.expect("head"));
    log.close("test");
}

#[test]
fn a_flush_brings_the_journals_up_to_date_at_once() {
    let fx = Fixture::new();
    let log = fx.open();
    let store = Store::open(fx.home.path()).expect("store");
    let calls = |store: &Store| {
        store
            .activity(&ActivityFilter::default())
            .expect("activity")
            .len()
    };
    log.record(started(1));
    for call in 1..=3 {
        durable_alone(&log, intent(1, call)).expect("intent is durable");
        // The journals trail the log by a few milliseconds; `postern activity` asks for a
        // flush first, and sees every call.
        log.flush();
        assert_eq!(calls(&store), call as usize);
    }
    log.close("test");
}

#[test]
fn a_failed_transaction_refuses_its_batch_and_the_chain_continues_without_a_gap() {
    let fx = Fixture::new();
    let log = fx.open();
    durable(&log, started(1)).expect("session");
    // A row taking the next record's number (no repair of the schema undoes it).
    fx.sql(
        "INSERT INTO audit_log (seq, time, kind, header, sealed, hash)
         VALUES (3, 0, 'injected', x'', x'', x'');",
    );
    let refused = durable(&log, intent(1, 1)).expect_err("the batch fails");
    assert!(refused.starts_with("audit_write_failed:"), "{refused}");
    assert!(refused.contains("UNIQUE constraint failed"), "{refused}");
    assert_eq!(log.status().failed_batches, 1);
    fx.sql("DELETE FROM audit_log WHERE kind = 'injected';");
    // The chain was rolled back: the next record takes seq 3 again (under a fresh ephemeral
    // key: the failed commit's seal would refuse a number it sealed) and the log verifies.
    durable(&log, intent(1, 2)).expect("after the failure");
    log.close("test");
    let report = verify(&fx.home, &*fx.secrets, None, true).expect("verifies");
    assert_eq!(report.records, 4);
}

#[test]
fn a_tampered_row_quarantines_the_log_at_its_seq_and_calls_are_refused() {
    let fx = Fixture::new();
    fx.with_calls(3);
    fx.sql("UPDATE audit_log SET sealed = CAST(zeroblob(80) AS BLOB) WHERE seq = 4;");

    let err = verify(&fx.home, &*fx.secrets, None, false).expect_err("tampered");
    assert!(
        matches!(
            err,
            AuditError::Verification {
                seq: 4,
                code: "audit_chain_broken",
                ..
            }
        ),
        "{err:?}"
    );

    let log = fx.open();
    assert!(
        matches!(log.status().state, AuditState::Quarantined { seq: 4, .. }),
        "{:?}",
        log.status()
    );
    let refused = durable(&log, intent(2, 1)).expect_err("quarantined");
    assert!(refused.starts_with("audit_quarantined:"), "{refused}");
    assert!(
        refused.contains("audit log failed verification at seq 4"),
        "{refused}"
    );
    assert!(refused.contains("run `postern audit verify`"), "{refused}");
    log.record(result(2, 1));
    assert_eq!(log.status().dropped, 2);
}

#[test]
fn a_cut_tail_is_caught_by_the_anchor_and_reanchor_accepts_it() {
    let fx = Fixture::new();
    fx.with_calls(3);
    let anchored = fx.anchor();
    assert!(anchored.starts_with("9:"), "{anchored}");
    fx.sql("DELETE FROM audit_log WHERE seq > 6;");

    let err = verify(&fx.home, &*fx.secrets, None, false).expect_err("truncated");
    assert!(
        err.to_string().contains("the log ends at record 6"),
        "{err}"
    );
    assert!(
        matches!(
            err,
            AuditError::Verification {
                seq: 7,
                code: "audit_log_truncated",
                ..
            }
        ),
        "{err:?}"
    );
    let log = fx.open();
    assert!(matches!(
        log.status().state,
        AuditState::Quarantined { seq: 7, .. }
    ));
    drop(log);

    // A human accepts the log as it is: the log says so in a record of its own (a narrowing
    // that voids every seal written before it), anchored, and it opens again.
    let head = reanchor(&fx.home, Arc::clone(&fx.secrets) as _, None).expect("reanchor");
    // The re-anchoring's record follows the cut head; its writer's stop follows it.
    assert_eq!(head.seq().get(), 8);
    assert_eq!(fx.anchor(), head.to_string());
    // The journals that showed the cut records are projected again from the log as it is.
    verify(&fx.home, &*fx.secrets, None, true).expect("the journals follow the accepted log");
    let mut out = Vec::new();
    export(&fx.home, &*fx.secrets, None, false, &mut out).expect("export");
    let text = String::from_utf8(out).expect("utf8");
    let record: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|l| l["seq"] == 7)
        .expect("record 7");
    assert_eq!(record["seq"], 7);
    let what = record["event"]["what"].as_str().expect("what");
    assert!(
        what.starts_with("audit log re-anchored by a human at 6:")
            && what.ends_with(&format!("(from the anchor {anchored})")),
        "{what}"
    );
    assert_eq!(
        record["event"]["narrowing"],
        json!({"narrowed": "lostRecords"})
    );
    let log = fx.open();
    assert_eq!(log.status().state, AuditState::Ready);
    durable(&log, intent(1, 10)).expect("appends again");
    log.close("test");
    verify(&fx.home, &*fx.secrets, None, true).expect("verifies");
}

/// The red team's move (2026-12-06): the Sessions and Activity views read the journals, which
/// carry no seal of their own, so the agent edits them in SQLite: a call it made shown as
/// another, a call deleted, one made up. `postern audit verify` projects the log anew and
/// compares: each edit fails it, naming the row and what the log gives instead; a rebuild
/// from the log puts them right.
#[test]
fn journals_edited_behind_the_log_fail_verification_until_rebuilt() {
    let fx = Fixture::new();
    fx.with_calls(3);
    let report = verify(&fx.home, &*fx.secrets, None, true).expect("verifies");
    assert_eq!(report.journals, JournalCheck::Matched { through: 9 });
    let unopened = verify(&fx.home, &*fx.secrets, None, false).expect("verifies");
    assert_eq!(unopened.journals, JournalCheck::NotChecked);

    let edits = [
        (
            "UPDATE journal.journal_activity SET tool = 'innocent' WHERE seq = 5;",
            "journal_activity: they show `seq=5",
        ),
        (
            "DELETE FROM journal.journal_activity WHERE seq = 3;",
            "journal_activity: they show `seq=5",
        ),
        (
            "INSERT INTO journal.journal_activity (seq, time, session, server, tool, call,
                 decision) VALUES (100, 1, 2, 'x', 'made-up', '1', 'allowed');",
            "the log gives no such row",
        ),
        (
            "UPDATE journal.journal_sessions SET calls = 0;",
            "journal_sessions: they show `id=",
        ),
    ];
    for (edit, says) in edits {
        fx.sql(edit);
        let err = verify(&fx.home, &*fx.secrets, None, true).expect_err(edit);
        assert!(
            matches!(
                err,
                AuditError::Verification {
                    code: "audit_journals_differ",
                    ..
                }
            ),
            "{edit}: {err:?}"
        );
        assert!(err.to_string().contains(says), "{edit}: {err}");
        rebuild_journals(&fx.home, &*fx.secrets, None).expect("rebuild");
        verify(&fx.home, &*fx.secrets, None, true).expect("rebuilt from the log");
    }

    // The log cut back with its anchor written to match (ARCHITECTURE.md, "What the gate cannot
    // stop"): the journals left as they were still show what was cut.
    fx.sql("DELETE FROM audit_log WHERE seq > 6;");
    let head = verify(&fx.home, &*fx.secrets, None, false)
        .expect_err("cut")
        .to_string();
    assert!(head.contains("the log ends at record 6"), "{head}");
    let six = postern_store::Store::open(fx.home.path())
        .expect("store")
        .audit_head()
        .expect("head")
        .expect("a record");
    fx.secrets
        .set(
            ANCHOR,
            format!(
                "6:{}",
                six.1.iter().map(|b| format!("{b:02x}")).collect::<String>()
            )
            .as_bytes(),
        )
        .expect("the anchor rewritten");
    let err = verify(&fx.home, &*fx.secrets, None, true).expect_err("journals ahead");
    assert!(
        matches!(
            err,
            AuditError::Verification {
                seq: 7,
                code: "audit_journals_ahead",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("they hold records through 9, the log ends at 6"),
        "{err}"
    );
}

/// `postern audit verify` while the engine goes on appending and projecting: the journals are
/// read before the log, so they never seem to go past it (which would read as records cut),
/// and each run compares them as far as they go.
#[test]
fn verifying_while_the_log_grows_compares_the_journals_as_far_as_they_go() {
    let fx = Fixture::new();
    let log = Arc::new(fx.open());
    durable(&log, started(1)).expect("session");
    log.flush();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut call = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                call += 1;
                durable(&log, intent(1, call)).expect("intent");
                log.record(result(1, call));
                log.flush();
            }
            call
        })
    };
    for _ in 0..10 {
        let report = verify(&fx.home, &*fx.secrets, None, true).expect("verifies while growing");
        assert!(
            matches!(report.journals, JournalCheck::Matched { through } if through > 0),
            "{:?}",
            report.journals
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.join().expect("writer") > 0);
    log.close("test");
}

#[test]
fn without_a_keychain_the_log_is_unavailable_and_calls_are_refused() {
    let fx = Fixture::new();
    fx.secrets.set_unavailable(true);
    let log = fx.open();
    assert!(matches!(log.status().state, AuditState::Unavailable { .. }));
    let refused = durable(&log, intent(1, 1)).expect_err("unavailable");
    assert!(refused.starts_with("audit_unavailable:"), "{refused}");
    assert!(refused.contains("keychain"), "{refused}");
    // Nothing was written, and no key was made behind the keychain's back.
    fx.secrets.set_unavailable(false);
    assert!(fx.secrets.get(OPENING_KEY).expect("get").is_none());
}

#[test]
fn a_missing_anchor_or_key_or_a_foreign_key_quarantines_a_non_empty_log() {
    let fx = Fixture::new();
    fx.with_calls(1);
    fx.secrets.delete(ANCHOR).expect("delete");
    assert!(matches!(
        fx.open().status().state,
        AuditState::Quarantined { seq: 1, .. }
    ));

    let fx = Fixture::new();
    fx.with_calls(1);
    let key = fx.secrets.get(OPENING_KEY).expect("get").expect("key");
    fx.secrets.delete(OPENING_KEY).expect("delete");
    assert!(matches!(
        fx.open().status().state,
        AuditState::Quarantined { .. }
    ));
    let other = OpeningKey::from_bytes([7; 32]);
    fx.secrets
        .set(OPENING_KEY, other.expose_base64().as_bytes())
        .expect("set");
    let state = fx.open().status().state;
    assert!(
        matches!(&state, AuditState::Quarantined { reason, .. } if reason.contains("does not match")),
        "{state:?}"
    );
    fx.secrets.set(OPENING_KEY, key.expose()).expect("restore");
    assert_eq!(fx.open().status().state, AuditState::Ready);
}

#[test]
fn the_journals_are_rebuilt_from_the_log_when_missing() {
    let fx = Fixture::new();
    fx.with_calls(4);
    let store = Store::open(fx.home.path()).expect("store");
    let before = store
        .activity(&ActivityFilter::default())
        .expect("activity");
    let sessions_before = store.sessions(&SessionFilter::default()).expect("sessions");
    assert_eq!(before.len(), 4);
    fx.sql(
        "DELETE FROM journal_activity; DELETE FROM journal_sessions;
         DELETE FROM journal_session_epochs; DELETE FROM journal_meta;",
    );
    assert!(
        store
            .activity(&ActivityFilter::default())
            .expect("activity")
            .is_empty()
    );
    let log = fx.open();
    assert_eq!(log.status().state, AuditState::Ready);
    log.close("test");
    let after = store
        .activity(&ActivityFilter::default())
        .expect("activity");
    assert_eq!(after, before);
    // The new run's start/stop records changed nothing in the old session but its status.
    let sessions_after = store.sessions(&SessionFilter::default()).expect("sessions");
    assert_eq!(sessions_after[0].id, sessions_before[0].id);
    assert_eq!(sessions_after[0].calls, 4);

    // 11 records of the first run, engine_started and engine_stopped of the second.
    assert_eq!(
        rebuild_journals(&fx.home, &*fx.secrets, None).expect("rebuild"),
        13
    );
    assert_eq!(
        store
            .activity(&ActivityFilter::default())
            .expect("activity"),
        before
    );
}

#[test]
fn the_opening_key_is_sealed_at_unlock_and_journals_left_behind_catch_up_with_it() {
    let fx = Fixture::new();
    let before = {
        fx.with_calls(2);
        Store::open(fx.home.path())
            .expect("store")
            .activity(&ActivityFilter::default())
            .expect("activity")
    };
    assert_eq!(before.len(), 2);
    let vault = postern_vault::VaultKey::generate().expect("vault key");

    // The first unlock seals the plain key: the keychain alone opens nothing any more.
    let log = fx.open();
    log.adopt(&vault);
    log.close("test");
    assert!(opening_key_sealed(&*fx.secrets));
    let stored = fx.secrets.get(OPENING_KEY).expect("get").expect("key");
    assert!(
        OpeningKey::from_base64(&String::from_utf8_lossy(stored.expose())).is_err(),
        "the keychain holds no usable key"
    );
    assert_eq!(
        export(&fx.home, &*fx.secrets, None, false, &mut Vec::new())
            .expect_err("sealed")
            .code(),
        "audit_key_sealed"
    );
    let other = postern_vault::VaultKey::generate().expect("another key");
    assert!(export(&fx.home, &*fx.secrets, Some(&other), false, &mut Vec::new()).is_err());
    let report = verify(&fx.home, &*fx.secrets, None, true).expect("the chain verifies");
    assert!(!report.bodies_opened, "{report:?}");
    assert!(
        verify(&fx.home, &*fx.secrets, Some(&vault), true)
            .expect("verifies")
            .bodies_opened
    );

    // The journals go missing (a migration that rebuilds them); the engine starts locked,
    // so it cannot open the log to rebuild them: it appends meanwhile, and they catch up,
    // in order and with what came meanwhile, at the unlock.
    fx.sql(
        "DELETE FROM journal_activity; DELETE FROM journal_sessions;
         DELETE FROM journal_session_epochs; DELETE FROM journal_meta;",
    );
    let log = fx.open();
    assert_eq!(log.status().state, AuditState::Ready);
    durable(&log, intent(1, 3)).expect("appends while the journals wait");
    log.record(result(1, 3));
    log.flush();
    let store = Store::open(fx.home.path()).expect("store");
    assert!(
        store
            .activity(&ActivityFilter::default())
            .expect("activity")
            .is_empty(),
        "nothing is projected out of order"
    );
    log.adopt(&vault);
    log.flush();
    let after = store
        .activity(&ActivityFilter::default())
        .expect("activity");
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(
        &after[1..],
        &before[..],
        "newest first, the old calls as they were"
    );
    durable(&log, intent(1, 4)).expect("appends");
    log.flush();
    assert_eq!(
        store
            .activity(&ActivityFilter::default())
            .expect("activity")
            .len(),
        4,
        "appends project again"
    );
    log.close("test");
    let mut out = Vec::new();
    export(&fx.home, &*fx.secrets, Some(&vault), true, &mut out).expect("export");
    assert!(
        String::from_utf8(out)
            .expect("utf8")
            .contains("secret-argument-4")
    );
}

#[test]
fn export_shows_argument_shapes_unless_asked_for_values() {
    let fx = Fixture::new();
    fx.with_calls(2);
    let mut out = Vec::new();
    let n = export(&fx.home, &*fx.secrets, None, false, &mut out).expect("export");
    assert_eq!(n, 7);
    let text = String::from_utf8(out).expect("utf8");
    assert!(!text.contains("secret-argument"), "{text}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines[0]["kind"], "engine_started");
    assert_eq!(lines[2]["event"]["arguments"], json!({"text": "string"}));
    assert_eq!(lines[2]["seq"], 3);

    let mut out = Vec::new();
    export(&fx.home, &*fx.secrets, None, true, &mut out).expect("export");
    assert!(
        String::from_utf8(out)
            .expect("utf8")
            .contains("secret-argument-1")
    );
}

#[test]
fn the_status_serializes_for_shells() {
    use ts_rs::TS;
    let state = AuditState::Quarantined {
        seq: 4,
        reason: "record 4: chain hash does not match".into(),
    };
    let json = serde_json::to_value(&state).expect("json");
    assert_eq!(json["state"], "quarantined");
    assert_eq!(json["seq"], 4);
    assert_eq!(
        serde_json::from_value::<AuditState>(json).expect("back"),
        state
    );
    let decl = AuditState::decl();
    assert!(decl.contains(r#""state": "quarantined""#), "{decl}");
}

/// What an unlock takes again from the log (`narrowings_between`): from the seal's head when
/// the log continues from it; read from the first record when it does not (review 14, N4: a
/// head of the same number as the writer's but another hash is another log, whose narrowings
/// were all skipped), never skipping one.
#[test]
fn narrowings_are_read_from_the_seals_head_only_when_the_log_continues_from_it() {
    let fx = Fixture::new();
    let log = fx.open();
    let unbound = postern_domain::Narrowing::ServerRemoved { server: label() };
    durable(
        &log,
        AuditEvent::ConfigChanged {
            what: "server removed".into(),
            server: Some(label()),
            narrowing: Some(unbound.clone()),
        },
    )
    .expect("narrowing");
    let after: Head = log.head().expect("head");
    durable(&log, started(1)).expect("more");
    let to: Head = log.head().expect("head");
    log.close("test");
    let store = Store::open(fx.home.path()).expect("store");
    let vault = postern_vault::VaultKey::generate().expect("key");
    let read = |from: Option<Head>| {
        narrowings_between(&store, &*fx.secrets, &vault, from, to).expect("narrowings")
    };
    let other = |at: Head| Head::new(at.seq(), postern_audit::ChainHash::GENESIS);
    assert_eq!(read(None), std::slice::from_ref(&unbound));
    assert_eq!(read(Some(after)), [], "the log continues from after it");
    assert_eq!(read(Some(to)), []);
    // A log that does not continue from the seal's head lost records: the seal vouches for
    // nothing, and every narrowing the log holds follows.
    let lost = [postern_domain::Narrowing::LostRecords, unbound];
    assert_eq!(read(Some(other(after))), lost, "does not chain");
    assert_eq!(read(Some(other(to))), lost, "the same number, another hash");
}

#[test]
fn a_row_whose_index_columns_disagree_with_its_header_fails_every_read_of_the_log() {
    // The columns are what the Activity queries and a kind filter go by: a narrowing's row
    // relabelled there would be another kind to anything that trusted the column.
    let fx = Fixture::new();
    let log = fx.open();
    durable(
        &log,
        AuditEvent::ConfigChanged {
            what: "server removed".into(),
            server: Some(label()),
            narrowing: Some(postern_domain::Narrowing::ServerRemoved { server: label() }),
        },
    )
    .expect("narrowing");
    let to: Head = log.head().expect("head");
    log.close("test");
    fx.sql(&format!(
        "UPDATE audit_log SET kind = 'session_started' WHERE seq = {};",
        to.seq().get()
    ));
    let mismatch = |err: &AuditError| {
        matches!(err, AuditError::Verification { seq, code: "audit_columns_mismatch", .. }
            if *seq == to.seq().get())
    };

    let err = verify(&fx.home, &*fx.secrets, None, false).expect_err("verify");
    assert!(mismatch(&err), "{err:?}");
    let store = Store::open(fx.home.path()).expect("store");
    let vault = postern_vault::VaultKey::generate().expect("key");
    let err = narrowings_between(&store, &*fx.secrets, &vault, None, to).expect_err("unlock");
    assert!(mismatch(&err), "{err:?}");
}
