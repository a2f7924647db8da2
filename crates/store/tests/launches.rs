//! Launches numbered per server, from the journal: three launches of one server (two in one
//! session, one after an engine restart) and one of another number 1, 2, 3 and 1, and keep
//! their numbers when the store is opened again and when the journals are rebuilt from the
//! log.

mod common;

use common::{Log, label, record};
use postern_domain::{AuditEvent, ExecutionEpoch, ServerLabel};
use postern_store::Store;

/// An epoch made `t` ms into the scenario, with `random` as its random part: launch order is
/// time order, whatever the random parts say.
fn epoch(t: u64, random: u128) -> ExecutionEpoch {
    ExecutionEpoch::new(1_700_000_000_000 + t, random)
}

fn started(session: u64, server: &str, epoch: ExecutionEpoch) -> AuditEvent {
    AuditEvent::ServerStarted {
        session,
        record: record(server, epoch),
    }
}

fn session(session: u64, server: &str) -> AuditEvent {
    AuditEvent::SessionStarted {
        session,
        server: label(server),
        client: None,
        agent: None,
    }
}

fn engine() -> AuditEvent {
    AuditEvent::EngineStarted {
        version: "t".into(),
        pid: 1,
    }
}

/// `(server, epoch, number)`: what the scenario's launches must be numbered.
fn expected() -> Vec<(ServerLabel, ExecutionEpoch, u32)> {
    vec![
        (label("fixture"), epoch(1, 900), 1),
        (label("time"), epoch(2, 5), 1),
        (label("fixture"), epoch(3, 1), 2),
        (label("fixture"), epoch(4, 500), 3),
        // Not journaled yet (its server_started record is still on its way): the next one.
        (label("fixture"), epoch(5, 7), 4),
        // A server never launched before.
        (label("other"), epoch(6, 7), 1),
    ]
}

fn scenario() -> Vec<AuditEvent> {
    vec![
        engine(),
        session(1, "fixture"),
        started(1, "fixture", epoch(1, 900)),
        session(2, "time"),
        started(2, "time", epoch(2, 5)),
        AuditEvent::ServerReplaced {
            session: 1,
            server: label("fixture"),
            old_epoch: epoch(1, 900),
            new_epoch: Some(epoch(3, 1)),
            reason: "restart".into(),
        },
        // The engine restarts; session numbers start again.
        engine(),
        session(1, "fixture"),
        started(1, "fixture", epoch(4, 500)),
    ]
}

fn numbers(store: &Store) -> Vec<(ServerLabel, ExecutionEpoch, u32)> {
    expected()
        .into_iter()
        .map(|(server, epoch, _)| {
            let n = store.launch_number(&server, epoch).expect("launch number");
            (server, epoch, n)
        })
        .collect()
}

#[test]
fn launches_are_numbered_per_server_across_restarts_and_rebuilds() {
    let events = scenario();
    let all = 0..events.len();
    let mut log = Log::write(events, &[all]);
    assert_eq!(numbers(&log.store), expected());
    // Another engine opening the same file.
    let reopened = Store::open(log.home()).expect("reopen");
    assert_eq!(numbers(&reopened), expected());
    log.rebuild_identically();
    assert_eq!(numbers(&log.store), expected());
}

#[test]
fn the_running_engines_sessions_are_found_by_their_number_under_their_journal_id() {
    let events = scenario();
    // The first engine run, before the restart: its sessions #1 and #2 are records 2 and 4.
    let before_restart = 0..6;
    let first = Log::write(events[..6].to_vec(), &[before_restart]);
    assert_eq!(
        first.store.current_run_sessions().expect("sessions"),
        [((1, "fixture".into()), 2), ((2, "time".into()), 4)].into()
    );
    // After the restart only the new run's session #1 (record 8) is the engine's.
    let all = 0..events.len();
    let log = Log::write(events, &[all]);
    assert_eq!(
        log.store.current_run_sessions().expect("sessions"),
        [((1, "fixture".into()), 8)].into()
    );
}
