//! A person who answers after the agent stopped waiting (its client's timeout) still decides
//! the call: the card stays open, the identical retry joins it or is decided by the answer
//! already given, and nothing else rides on it (issue 14 item 3).

use super::super::RETRY_WINDOW_MS;
use super::*;

/// The person approves `card` for this call only, in the app's window.
fn approve_this_call(gate: &Gate, card: &ApprovalCard) {
    gate.authority
        .answer(
            card.id,
            Reply::Approve {
                choice: Some(GrantChoice::ThisCall),
            },
            Some(&gate.proven),
            postern_domain::AnswerChannel::Window,
        )
        .expect("the approval is taken");
}

#[tokio::test]
async fn an_answer_after_the_agent_gave_up_decides_its_identical_retry_once() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let call = deploy(&a);
    let id = call.request.call;
    let (card, rx) = gate.carded(call);
    assert_eq!(
        gate.authority.withdraw(SESSION, id, Withdrawn::Cancelled),
        Withdrawal::Withdrawn
    );
    assert!(rx.await.is_err(), "the cancelled call is never answered");
    let open = gate.authority.approvals();
    assert_eq!(open.len(), 1, "the card stays open");
    assert!(
        open[0].agent_stopped_waiting,
        "and says the agent stopped waiting"
    );

    approve_this_call(&gate, &card);
    assert!(
        gate.authority.grants().is_empty(),
        "nothing else rides on it"
    );

    // The same call again: through at once, on that approval, with no second card.
    let retried = gate.decided_now(deploy(&a));
    assert!(matches!(retried, Verdict::Allow(_)), "{retried:?}");
    // Once only, and only the identical call.
    let (_again, _rx) = gate.carded(deploy(&a));
    let mut other = deploy(&a);
    other.arguments = json!({"branch": "prod"});
    let (_other, _rx) = gate.carded(other);

    let events = gate.events();
    assert_eq!(
        of_type(&events, "approval_requested").len(),
        3,
        "{events:#?}"
    );
    let ended = of_type(&events, "grant_ended");
    assert!(
        ended
            .iter()
            .any(|e| e["reason"] == "used by the identical retry of the call it was approved for"),
        "{events:#?}"
    );
}

#[tokio::test]
async fn the_identical_retry_joins_the_open_card_and_a_late_denial_refuses_it() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let call = deploy(&a);
    let id = call.request.call;
    let (card, _rx) = gate.carded(call);
    gate.authority.withdraw(SESSION, id, Withdrawn::Cancelled);

    // The retry comes before the person answered: it waits on the same card.
    let mut rx = gate.ask(deploy(&a));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "it waits");
    let open = gate.authority.approvals();
    assert_eq!(open.len(), 1, "no second card");
    assert!(!open[0].agent_stopped_waiting, "the retry waits on it");
    approve_this_call(&gate, &card);
    assert!(matches!(rx.try_recv(), Ok(Verdict::Allow(_))));

    // A denial given after the agent gave up refuses the identical retry, within the window.
    let call = deploy(&a);
    let id = call.request.call;
    let (card, _rx) = gate.carded(call);
    gate.authority.withdraw(SESSION, id, Withdrawn::Cancelled);
    gate.authority
        .answer(
            card.id,
            Reply::Deny,
            None,
            postern_domain::AnswerChannel::Window,
        )
        .expect("a late denial is taken");
    let refused = denied(gate.decided_now(deploy(&a)));
    assert_eq!(refused.code, DenyCode::ApprovalDenied);
    // Past the window, a retry asks again.
    let call = deploy(&a);
    let id = call.request.call;
    let (card, _rx) = gate.carded(call);
    gate.authority.withdraw(SESSION, id, Withdrawn::Cancelled);
    gate.authority
        .answer(
            card.id,
            Reply::Deny,
            None,
            postern_domain::AnswerChannel::Window,
        )
        .expect("deny");
    gate.clock.advance(RETRY_WINDOW_MS + 1);
    let (_fresh, _rx) = gate.carded(deploy(&a));
}

/// A late "this call only" that released a credential the call's launch lacked (review 11,
/// F1): it is the approved call's alone. A relaunch for another reason does not let a call
/// with other arguments (never shown to a person) through on it; the identical retry, on the
/// launch still without the credential, makes the relaunch and goes through there, once.
#[tokio::test]
async fn a_late_approval_releasing_a_credential_carries_only_the_call_it_was_given_for() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    gate.authority
        .set_every_use(
            EveryUseSetting {
                target: SettingTarget::Tool {
                    server: label(),
                    tool: "deploy".into(),
                },
                level: EveryUse::Confirm,
            },
            None,
        )
        .expect("every-use");
    let call = |at: &Launch, branch: &str, lacking: bool| {
        let mut call = deploy(at);
        call.request.credentials = ["inventory-api".to_owned()].into();
        if lacking {
            call.withheld = vec!["inventory-api".to_owned()];
        }
        call.arguments = json!({ "branch": branch });
        call
    };
    let a = launch(1, b"v1");
    let first = call(&a, "main", true);
    let id = first.request.call;
    let (card, _rx) = gate.carded(first);
    gate.authority.withdraw(SESSION, id, Withdrawn::Cancelled);
    approve_this_call(&gate, &card);

    // The server restarted for another reason: the same code, the credential now released.
    let b = launch(2, b"v1");
    let (_card, _rx) = gate.carded(call(&b, "evil", false));
    // The identical retry where the credential is still missing: relaunched at once.
    assert_eq!(gate.decided_now(call(&a, "main", true)), Verdict::Relaunch);
    // Once: a relaunch that still lacks it (the keychain could not give it) asks.
    let (_card, _rx) = gate.carded(call(&launch(3, b"v1"), "main", true));
    // On the relaunch it goes through on the approval, once.
    let retried = gate.decided_now(call(&b, "main", false));
    assert!(
        matches!(retried, Verdict::Allow(decision::Authority::Grant(_))),
        "{retried:?}"
    );
    let (_again, _rx) = gate.carded(call(&b, "main", false));
    let events = gate.events();
    assert_eq!(
        of_type(&events, "approval_requested").len(),
        4,
        "{events:#?}"
    );
}
