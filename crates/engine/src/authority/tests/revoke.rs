//! A human takes back what they granted: one grant, or every grant of an agent run, each
//! recorded in the audit log; the run's next identical call asks again.

use super::*;

/// The parent of the test process (cargo's harness): a live agent run other than ours.
fn other_run_call(at: &Launch) -> CallToAuthorize {
    let pid = std::os::unix::process::parent_id();
    let agent = AgentIdentity {
        pid,
        start_time: postern_supervisor::process_start_time(pid).expect("parent's start time"),
        executable: None,
        chain: vec!["cargo".into()],
        cwd: None,
    };
    let mut call = deploy(at);
    call.request.caller = Caller::Identified {
        run: AgentRun::of(&agent),
    };
    call.agent = Some(agent);
    call.session = SESSION + 1;
    call
}

#[tokio::test]
async fn revoking_a_run_ends_its_grants_only_and_its_next_call_asks_again() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let deploy_grant = gate.approve(deploy(&a), GrantChoice::UntilRunEnds);
    let status_grant = gate.approve(
        call_to("status", &a, &a),
        GrantChoice::ForMinutes { minutes: 15 },
    );
    let theirs = gate.approve(other_run_call(&a), GrantChoice::UntilRunEnds);
    assert_eq!(gate.authority.grants().len(), 3);

    let mut revoked = gate.authority.revoke_run(AgentRun::of(&me()));
    revoked.sort();
    let mut mine = vec![deploy_grant, status_grant];
    mine.sort();
    assert_eq!(revoked, mine);
    let left: Vec<_> = gate.authority.grants().iter().map(|g| g.id).collect();
    assert_eq!(left, [theirs], "another run's grant stays");
    assert!(gate.authority.revoke_run(AgentRun::of(&me())).is_empty());

    // The same call again: the run is still admitted, so only the call is asked about.
    let (card, _rx) = gate.carded(deploy(&a));
    assert_eq!(card.what, AskFor::Call);
    // The other run's call still goes through on its grant.
    assert_eq!(
        gate.decided_now(other_run_call(&a)),
        Verdict::Allow(decision::Authority::Grant(theirs))
    );

    // One grant by its id, once.
    assert!(gate.authority.revoke(theirs));
    assert!(!gate.authority.revoke(theirs));
    assert!(gate.authority.grants().is_empty());

    let events = gate.events();
    let ended = of_type(&events, "grant_ended");
    let mut said: Vec<(String, String)> = ended
        .iter()
        .map(|e| {
            (
                e["grant"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    said.sort();
    let mut expected: Vec<(String, String)> = [deploy_grant, status_grant, theirs]
        .iter()
        .map(|id| (id.to_string(), "revoked by a human".to_owned()))
        .collect();
    expected.sort();
    assert_eq!(said, expected, "{events:#?}");
}
