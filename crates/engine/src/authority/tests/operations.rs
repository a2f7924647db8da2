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
        credentials: Vec::new(),
    }
}

fn refusal(verdict: Verdict) -> String {
    match verdict {
        Verdict::Deny(denial) => denial.code.as_str().to_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Per-call approval set on a server, or on a credential its launch holds, covers a read too:
/// no person is asked about reads, so an admitted run's read is refused while it is on (it used
/// to pass on admission alone, and a credentialed server acted for it without the per-call
/// approval the person turned on). A setting on one tool, or on a credential the launch does
/// not hold, leaves reads alone.
#[tokio::test]
async fn per_call_approval_on_a_server_or_its_launchs_credential_refuses_its_reads() {
    use postern_domain::decision::{EveryUse, EveryUseSetting, SettingTarget};
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    add_env_credential(&gate, "deploy-token", "v");
    add_env_credential(&gate, "another", "v");
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);
    let mut read = operation(&a, "resources/read", Direction::ToServer);
    read.credentials = vec!["deploy-token".into()];
    let set = |target: SettingTarget, level: EveryUse| {
        gate.authority
            .set_every_use(EveryUseSetting { target, level }, Some(&gate.proven))
            .expect("set");
    };
    let server = SettingTarget::Server { server: label() };
    let credential = SettingTarget::Credential {
        name: "deploy-token".into(),
    };
    let tool = SettingTarget::Tool {
        server: label(),
        tool: "deploy".into(),
    };
    set(tool, EveryUse::Confirm);
    set(
        SettingTarget::Credential {
            name: "another".into(),
        },
        EveryUse::Confirm,
    );
    assert_eq!(
        gate.authority.authorize_operation(&read),
        Verdict::Allow(decision::Authority::Admitted)
    );
    for target in [server, credential] {
        set(target.clone(), EveryUse::Confirm);
        let Verdict::Deny(denial) = gate.authority.authorize_operation(&read) else {
            panic!("{target} lets the read through");
        };
        assert_eq!(denial.code.as_str(), "every_use_tools_only");
        assert_eq!(denial.detail["everyUse"], json!([target.to_string()]));
        assert!(gate.authority.approvals().is_empty(), "no card for a read");
        // What follows a call a person was asked about is not refused.
        let mut result = read.clone();
        result.method = "tasks/result".into();
        assert!(matches!(
            gate.authority.authorize_operation(&result),
            Verdict::Allow(_)
        ));
        set(target, EveryUse::Off);
    }
    assert_eq!(
        gate.authority.authorize_operation(&read),
        Verdict::Allow(decision::Authority::Admitted)
    );
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
    gate.authority.unlock(gate.prove()).expect("unlocked");
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
