//! What a human approved outlives the engine: after a restart, a card for a server rebuilt
//! while Postern was down still says what changed since the approved launch.

use super::*;

#[tokio::test]
async fn a_card_after_a_restart_compares_with_the_launch_approved_before_it() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);

    // Another engine on the same home (the app restarted), and the server rebuilt meanwhile.
    gate.audit.close("restart");
    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    let b = launch(2, b"v2");
    let (card, _rx) = restarted.carded(deploy(&b));
    assert_eq!(card.epoch.since, entry_changed_since(&a));
}
