//! Requests other than tool calls (refresh-contract §10) and the per-session cap on approval
//! requests: decided at once, never by a card.

use postern_gateway::authorize::{Direction, OperationToAuthorize};

use super::*;
use crate::authority::approvals::MAX_OPEN_PER_SESSION;

fn operation(at: &Launch, method: &str, direction: Direction) -> OperationToAuthorize {
    let call = deploy(at);
    OperationToAuthorize {
        session: call.session,
        server: call.request.server,
        caller: call.request.caller,
        method: method.into(),
        direction,
    }
}

fn refusal(verdict: Verdict) -> String {
    match verdict {
        Verdict::Deny(denial) => denial.code.as_str().to_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_read_needs_an_admitted_run_and_an_unlocked_vault_and_never_opens_a_card() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let read = operation(&a, "resources/read", Direction::ToServer);
    assert_eq!(
        refusal(gate.authority.authorize_operation(&read)),
        "session_not_admitted"
    );
    assert!(gate.authority.approvals().is_empty(), "no card for a read");

    // A human admits the run through its first call's card: reads go through.
    gate.approve(deploy(&a), GrantChoice::ThisCall);
    assert_eq!(
        gate.authority.authorize_operation(&read),
        Verdict::Allow(decision::Authority::Admitted)
    );

    gate.authority.lock("test");
    assert_eq!(
        refusal(gate.authority.authorize_operation(&read)),
        "vault_locked"
    );
    let elicit = operation(&a, "elicitation/create", Direction::ToAgent);
    assert_eq!(
        refusal(gate.authority.authorize_operation(&elicit)),
        "vault_locked"
    );
    gate.authority.unlock(gate.prove());
    assert!(matches!(
        gate.authority.authorize_operation(&elicit),
        Verdict::Allow(_)
    ));
}

#[tokio::test]
async fn observe_mode_admits_reads_as_observed() {
    let gate = Gate::observing();
    let a = launch(1, b"v1");
    let read = operation(&a, "prompts/get", Direction::ToServer);
    assert_eq!(
        gate.authority.authorize_operation(&read),
        Verdict::Allow(decision::Authority::Observed)
    );
}

#[tokio::test]
async fn a_session_gets_a_bounded_share_of_waiting_approval_requests() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let mut waiting = Vec::new();
    for _ in 0..MAX_OPEN_PER_SESSION {
        waiting.push(gate.carded(deploy(&a)));
    }
    let refused = gate
        .ask(deploy(&a))
        .try_recv()
        .expect("refused at once, no card");
    assert_eq!(refusal(refused), "approval_queue_full");
    assert_eq!(gate.authority.approvals().len(), MAX_OPEN_PER_SESSION);

    // Another session of the same agent still gets its card.
    let mut other = deploy(&a);
    other.session = SESSION + 1;
    let (_card, _rx) = gate.carded(other);
    drop(waiting);
}
