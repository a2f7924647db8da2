//! The vault locks itself when the user stepped away: idle for the auto-lock time, or the
//! machine slept (its wall clock ran ahead of the monotonic one). Both lock before the first
//! call afterwards is decided, not at the sweeper's next round.

use super::*;

#[tokio::test]
async fn a_call_after_the_idle_time_finds_the_vault_locked() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);
    let idle = gate.authority.settings().auto_lock_ms;

    // Just short of the idle time, the grant still answers, and the call counts as activity.
    gate.clock.advance(idle - 1000);
    assert!(matches!(gate.decided_now(deploy(&a)), Verdict::Allow(_)));
    gate.clock.advance(idle - 1000);
    assert!(matches!(gate.decided_now(deploy(&a)), Verdict::Allow(_)));

    // Idle past it: the next call is refused before anything else is looked at.
    gate.clock.advance(idle + 1000);
    assert_eq!(
        denied(gate.decided_now(deploy(&a))).code,
        DenyCode::VaultLocked
    );
    assert_eq!(gate.authority.vault(), VaultState::Locked);
    assert!(
        gate.authority.grants().is_empty(),
        "the lock ended the grant"
    );

    let events = gate.events();
    let locked = of_type(&events, "vault_locked");
    assert_eq!(locked.len(), 1, "{events:#?}");
    assert_eq!(
        locked[0]["reason"],
        format!("idle for {} min", (idle + 1000) / 60_000)
    );
}

#[tokio::test]
async fn a_machine_that_slept_locks_before_its_next_call_or_sweep() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);

    // Someone sets the clock back, or it drifts a little: not a sleep.
    gate.clock.move_wall(-3_600_000);
    gate.clock.move_wall(30_000);
    assert!(matches!(gate.decided_now(deploy(&a)), Verdict::Allow(_)));
    gate.authority.sweep();
    assert_eq!(gate.authority.vault(), VaultState::Ready);

    // A 20-minute sleep (far below the idle time): the first call after it is refused.
    gate.clock.move_wall(20 * 60_000);
    assert_eq!(
        denied(gate.decided_now(deploy(&a))).code,
        DenyCode::VaultLocked
    );
    assert!(gate.authority.grants().is_empty());

    // Unlocked, the same clocks are no news; another sleep is seen by the sweeper too.
    assert!(gate.authority.unlock(gate.prove()).expect("unlocked"));
    assert!(matches!(
        gate.ask(deploy(&a)).try_recv(),
        Err(TryRecvError::Empty)
    ));
    gate.clock.move_wall(5 * 60_000);
    gate.authority.sweep();
    assert_eq!(gate.authority.vault(), VaultState::Locked);

    let events = gate.events();
    let reasons: Vec<&str> = of_type(&events, "vault_locked")
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert_eq!(
        reasons,
        [
            "the machine slept (its clock moved 20 min ahead)",
            "the machine slept (its clock moved 5 min ahead)"
        ]
    );
}
