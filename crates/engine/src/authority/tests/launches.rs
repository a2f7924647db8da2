//! The approval card names the launch a call would run under by its number among its
//! server's launches ("launch 3"), which the engine reads from the journal.

use postern_domain::AuditEvent;
use postern_gateway::audit::AuditSink;

use super::*;

#[tokio::test]
async fn a_card_numbers_its_launch_among_the_launches_of_its_server() {
    let gate = Gate::new();
    // Two earlier launches of the server, in the journal.
    let session = |server: &str| AuditEvent::SessionStarted {
        session: 9,
        server: server.parse().expect("label"),
        client: None,
        agent: None,
    };
    gate.audit.record(session("deployer"));
    for n in [1, 2] {
        gate.audit.record(AuditEvent::ServerStarted {
            session: 9,
            record: Box::new(launch(n, b"v1").record),
        });
    }
    gate.audit.flush();

    let third = launch(3, b"v2");
    let (card, _rx) = gate.carded(deploy(&third));
    assert_eq!(card.epoch.launch, Some(3));
    assert_eq!(card.epoch.started_at_ms, third.record.started_at_ms);
}
