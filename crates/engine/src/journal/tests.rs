//! The journal views against a log the engine's own audit writer wrote (a real SQLite file,
//! the in-memory secret store).

use std::sync::Arc;

use postern_domain::{AuditEvent, CallOutcome, ExecutionEpoch, ServerLabel};
use postern_gateway::audit::AuditSink;
use postern_vault::{MemoryStore, SecretStore};
use serde_json::json;

use super::*;
use crate::{AuditLog, Engine};

fn label() -> ServerLabel {
    "fixture".parse().expect("label")
}

fn epoch(n: u128) -> ExecutionEpoch {
    ExecutionEpoch::new(1_700_000_000_000, n)
}

/// A home whose log holds: engine_started (1), a session (2), a call with an argument (3),
/// its result (4), a restart into a second epoch (5), a refused call (6), and the end (7).
/// The log's opening key from the keychain (plain: no vault key in these tests).
fn opening(secrets: &Arc<dyn SecretStore>) -> Result<postern_audit::OpeningKey, String> {
    crate::audit::read_key(&**secrets, None)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no opening key".to_owned())
}

fn written() -> (tempfile::TempDir, Home, Arc<dyn SecretStore>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home::at(dir.path().join("home"));
    home.prepare().expect("home");
    let secrets: Arc<dyn SecretStore> = Arc::new(MemoryStore::new());
    let log = AuditLog::open(home.path(), Arc::clone(&secrets));
    for event in [
        AuditEvent::SessionStarted {
            session: 1,
            server: label(),
            client: Some("agent".into()),
            agent: None,
        },
        AuditEvent::ToolCallIntent {
            session: 1,
            server: label(),
            epoch: epoch(1),
            call: json!(1),
            tool: "echo".into(),
            arguments: json!({"text": "a secret argument", "times": 2}),
            authority: None,
        },
        AuditEvent::ToolCallResult {
            session: 1,
            server: label(),
            epoch: epoch(1),
            call: json!(1),
            tool: "echo".into(),
            outcome: CallOutcome::Ok,
            duration_ms: 4,
        },
        AuditEvent::ServerReplaced {
            session: 1,
            server: label(),
            old_epoch: epoch(1),
            new_epoch: Some(epoch(2)),
            reason: "restart".into(),
        },
        AuditEvent::AuthorizationDenied {
            session: 1,
            server: label(),
            epoch: Some(epoch(2)),
            call: json!(2),
            tool: "echo".into(),
            code: "catalog_stale".into(),
            detail: json!({}),
        },
        AuditEvent::SessionEnded {
            session: 1,
            server: label(),
            reason: "agent left".into(),
        },
    ] {
        log.record(event);
    }
    log.flush();
    log.close("test");
    (dir, home, secrets)
}

#[test]
fn the_views_read_the_journals_the_writer_projected() {
    let (_dir, home, _) = written();
    let got = timeline(&home, &TimelineQuery::default()).expect("timeline");
    assert_eq!(got.lanes.len(), 1);
    let lane = &got.lanes[0];
    assert_eq!(
        (lane.id, lane.server.as_str(), lane.status.as_str()),
        (2, "fixture", "ended")
    );
    let epochs: Vec<_> = lane.bands.iter().map(|b| b.epoch.clone()).collect();
    assert_eq!(epochs, vec![epoch(1).to_string(), epoch(2).to_string()]);
    let kinds: Vec<_> = lane
        .marks
        .iter()
        .map(|m| match m {
            TimelineMark::Call { seq, .. } => ("call", *seq),
            TimelineMark::Refusal { seq, .. } => ("refusal", *seq),
            TimelineMark::Rebuild { seq, .. } => ("rebuild", *seq),
            TimelineMark::GrantIssued { seq, .. } => ("grantIssued", *seq),
            TimelineMark::GrantEnded { .. } => ("grantEnded", 0),
        })
        .collect();
    assert_eq!(kinds, vec![("call", 3), ("rebuild", 5), ("refusal", 6)]);
    let json = serde_json::to_value(&got).expect("json");
    assert_eq!(json["lanes"][0]["marks"][2]["kind"], "refusal");
    assert_eq!(json["lanes"][0]["marks"][2]["code"], "catalog_stale");

    let denied = activity(
        &home,
        &ActivityFilter {
            decision: Some("denied".into()),
            ..ActivityFilter::default()
        },
    )
    .expect("activity");
    assert_eq!(denied.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![6]);
    let sessions = sessions(&home, &SessionFilter::default()).expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].epochs.len(), 2);
    // IPC filters arrive as camelCase JSON with any field left out.
    let filter: ActivityFilter =
        serde_json::from_value(json!({"server": "fixture", "before": 6})).expect("filter");
    assert_eq!(
        activity(&home, &filter)
            .expect("page")
            .iter()
            .map(|r| r.seq)
            .collect::<Vec<_>>(),
        vec![3]
    );
}

#[test]
fn an_entry_shows_its_header_and_its_body_with_arguments_by_shape() {
    let (_dir, home, secrets) = written();
    let entry = audit_entry(&home, 3, opening(&secrets))
        .expect("entry")
        .expect("exists");
    assert_eq!((entry.seq, entry.kind.as_str()), (3, "tool_call_intent"));
    assert_eq!(entry.problem, None);
    assert_eq!(entry.hash.len(), 64);
    let AuditBody::Opened { event } = &entry.body else {
        panic!("not opened: {entry:?}");
    };
    assert_eq!(event["tool"], "echo");
    assert_eq!(
        event["arguments"],
        json!({"text": "string", "times": "number"})
    );
    assert!(
        !serde_json::to_string(&entry)
            .expect("json")
            .contains("a secret argument")
    );

    // Without the key, or with a keychain that lacks it: the header only, and why.
    let sealed = audit_entry(&home, 3, Err("the vault is locked".into()))
        .expect("entry")
        .expect("exists");
    assert_eq!(
        sealed.body,
        AuditBody::Sealed {
            reason: "the vault is locked".into()
        }
    );
    assert_eq!(
        (sealed.time, sealed.kind.as_str()),
        (entry.time, "tool_call_intent")
    );
    let other_key = postern_audit::OpeningKey::generate(&mut getrandom::SysRng).expect("key");
    let other = audit_entry(&home, 3, Ok(other_key))
        .expect("entry")
        .expect("exists");
    assert!(matches!(other.body, AuditBody::Sealed { .. }), "{other:?}");
    assert_eq!(
        audit_entry(&home, 99, opening(&secrets)).expect("entry"),
        None
    );
}

#[test]
fn an_entry_names_its_call_and_its_session_by_the_journal_id() {
    let (_dir, home, secrets) = written();
    let open = |seq| {
        audit_entry(&home, seq, opening(&secrets))
            .expect("entry")
            .expect("exists")
    };
    let sealed = |seq| {
        audit_entry(&home, seq, Err("the vault is locked".into()))
            .expect("entry")
            .expect("exists")
    };
    // The intent and, even sealed, the result: the same call, its outcome and its agent.
    for entry in [open(3), sealed(4)] {
        let call = entry.call.as_ref().expect("a call");
        assert_eq!(
            (call.seq, call.tool.as_str(), call.outcome.as_deref()),
            (3, "echo", Some("ok"))
        );
        assert_eq!(call.duration_ms, Some(4));
        let session = entry.session.expect("a session");
        assert_eq!(
            (session.id, session.agent.client.as_deref()),
            (2, Some("agent"))
        );
    }
    // A record of another kind: its session from its opened body (the engine's number 1
    // in that run is journal session 2), none while sealed.
    let replaced = open(5);
    assert_eq!(replaced.call, None);
    assert_eq!(replaced.session.map(|s| s.id), Some(2));
    assert_eq!(sealed(5).session, None);
}

#[test]
fn an_edited_record_is_shown_with_its_problem() {
    let (_dir, home, secrets) = written();
    let conn = rusqlite::Connection::open(home.path().join(postern_store::DB_FILE)).expect("db");
    conn.execute(
        "UPDATE audit_log SET sealed = zeroblob(length(sealed)) WHERE seq = 4",
        [],
    )
    .expect("edit");
    let entry = audit_entry(&home, 4, opening(&secrets))
        .expect("entry")
        .expect("exists");
    let problem = entry.problem.expect("a problem");
    assert!(problem.contains("audit_chain_broken"), "{problem}");
    assert!(matches!(entry.body, AuditBody::Sealed { .. }));
    // Its neighbours are fine on their own.
    let next = audit_entry(&home, 5, opening(&secrets))
        .expect("entry")
        .expect("exists");
    assert_eq!(next.problem, None);
}

#[tokio::test]
async fn the_engine_opens_bodies_only_while_the_vault_is_unlocked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secrets: Arc<dyn SecretStore> = Arc::new(MemoryStore::new());
    let engine = Engine::start_with_secrets(Home::at(dir.path()), Arc::clone(&secrets))
        .await
        .expect("engine");
    // An engine starts locked: bodies open once the person proved their presence.
    engine
        .authority()
        .set_passphrase(&postern_vault::Secret::new("a passphrase".into()), None)
        .expect("passphrase");
    // The first passphrase sealed the log's opening key under the vault key: the keychain
    // alone no longer opens a body.
    assert!(crate::audit::opening_key_sealed(&*secrets));
    assert_eq!(
        crate::audit::read_key(&*secrets, None).unwrap_err().code(),
        "audit_key_sealed"
    );
    // Record 1 is the run's engine_started; wait until it is committed.
    let mut entry = None;
    for _ in 0..200 {
        entry = engine.audit_entry(1, Some(&*secrets)).expect("entry");
        if entry.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let entry = entry.expect("engine_started is recorded");
    assert!(
        matches!(&entry.body, AuditBody::Opened { event } if event["type"] == "engine_started"),
        "{entry:?}"
    );
    assert!(engine.authority().lock("test"));
    let locked = engine
        .audit_entry(1, Some(&*secrets))
        .expect("entry")
        .expect("exists");
    assert!(
        matches!(&locked.body, AuditBody::Sealed { reason } if reason.contains("locked")),
        "{locked:?}"
    );
    let timeline = engine
        .timeline(&TimelineQuery::default())
        .expect("timeline");
    assert!(timeline.lanes.is_empty());
    engine.shutdown().await;
}

#[test]
fn the_typescript_bindings_declare_the_journal_types_with_numbers() {
    let ts = crate::typescript_bindings();
    for name in [
        "Timeline",
        "TimelineMark",
        "ActivityFilter",
        "AuditEntry",
        "AuditBody",
    ] {
        assert!(
            ts.contains(&format!("export type {name} = ")),
            "{name} missing"
        );
    }
    assert!(!ts.contains("bigint"), "i64 fields must be numbers:\n{ts}");
    assert!(ts.contains("\"kind\": \"refusal\""), "{ts}");
}
