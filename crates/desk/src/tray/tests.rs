use postern_domain::decision::DenyCode;
use postern_gateway::authorize::Verdict;

use super::*;
use crate::sample::{self, gate};
use crate::surface::Order;
use crate::testing::{ask, desk, running_desk, wait_for};

fn ids(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e {
            Entry::Note(text) => format!("note {text}"),
            Entry::Request { label, calm, .. } => {
                format!(
                    "request {label}: {}",
                    if *calm { "approve" } else { "review" }
                )
            }
            Entry::Action(action) => action.id().to_owned(),
            Entry::Separator => "-".to_owned(),
        })
        .collect()
}

#[test]
fn ids_round_trip() {
    for action in MenuAction::ALL {
        let command = MenuCommand::Action(action);
        assert_eq!(MenuCommand::from_id(&command.id()), Some(command));
    }
    let id = sample::card().id;
    for command in [
        MenuCommand::Approve(id),
        MenuCommand::Review(id),
        MenuCommand::Deny(id),
    ] {
        assert_eq!(MenuCommand::from_id(&command.id()), Some(command));
    }
    assert_eq!(MenuCommand::from_id("nope"), None);
    assert_eq!(MenuCommand::from_id("approve:not-an-id"), None);
}

const COUNTS: Counts = Counts {
    servers: 2,
    agents: 1,
};

#[test]
fn the_menu_follows_the_gate() {
    assert_eq!(ids(&entries(None, COUNTS, &[])), ["open", "-", "quit"]);
    assert_eq!(
        ids(&entries(Some(&gate(VaultState::Ready, 0)), COUNTS, &[])),
        [
            "note Unlocked",
            "note 2 servers · 1 agent · 0 grants",
            "-",
            "lock",
            "open",
            "-",
            "quit"
        ]
    );
    assert_eq!(
        ids(&entries(Some(&gate(VaultState::Locked, 0)), COUNTS, &[])),
        ["note Postern is locked", "unlock", "-", "open", "-", "quit"]
    );
    assert_eq!(
        ids(&entries(
            Some(&gate(VaultState::Quarantined, 0)),
            COUNTS,
            &[]
        )),
        [
            "note The audit log failed verification",
            "-",
            "open",
            "-",
            "quit"
        ]
    );

    // A request the egress broker refused is said until the person dismisses it.
    let mut leaked = gate(VaultState::Ready, 0);
    leaked.leaks.push(postern_engine::LeakNotice {
        server: "ci".into(),
        credentials: vec!["deploy-token".into()],
        host: "evil.example".into(),
        at_ms: 1,
        count: 1,
    });
    assert_eq!(
        ids(&entries(Some(&leaked), COUNTS, &[]))[..5],
        [
            "note Unlocked",
            "note 2 servers · 1 agent · 0 grants",
            "-",
            "note ⚠ 1 refused request: a credential headed elsewhere",
            "-",
        ]
    );

    // A flagged request is reviewed, never approved in one step; a calm one may be.
    let flagged = Approval::of(sample::card());
    let mut calm = flagged.clone();
    calm.card.risks.clear();
    calm.card.tool.name = "status".into();
    assert_eq!(
        ids(&entries(
            Some(&gate(VaultState::Ready, 2)),
            COUNTS,
            &[flagged, calm]
        )),
        [
            "note Unlocked",
            "note 2 servers · 1 agent · 0 grants",
            "-",
            "note 2 approvals waiting",
            "request ⚠ claude-code 2.1.3 · deployer · deploy: review",
            "request claude-code 2.1.3 · deployer · status: approve",
            "review",
            "-",
            "lock",
            "open",
            "-",
            "quit",
        ]
    );
}

#[test]
fn tooltip_and_title_say_the_state_and_the_count() {
    assert_eq!(tooltip(None), "Postern: no engine");
    assert_eq!(tooltip(Some(&gate(VaultState::Ready, 0))), "Postern: ready");
    assert_eq!(
        tooltip(Some(&gate(VaultState::Ready, 1))),
        "Postern: 1 approval waiting"
    );
    assert_eq!(
        tooltip(Some(&gate(VaultState::Ready, 3))),
        "Postern: 3 approvals waiting"
    );
    assert_eq!(
        tooltip(Some(&gate(VaultState::Locked, 0))),
        "Postern: locked"
    );
    assert_eq!(
        title(Some(&gate(VaultState::Ready, 3))).as_deref(),
        Some("3")
    );
    assert_eq!(title(Some(&gate(VaultState::Ready, 0))), None);
    assert_eq!(title(Some(&gate(VaultState::Locked, 3))), None);
}

#[test]
fn open_and_unlock_show_the_status_window() {
    let (desk, surface) = desk();
    on_menu_event(&desk, "open");
    on_menu_event(&desk, "unlock");
    assert_eq!(surface.orders(), [Order::ShowMain, Order::ShowMain]);
}

#[test]
fn approve_from_the_tray_approves_nothing_without_the_passphrase() {
    let (desk, surface, _home) = running_desk();
    let mut verdict = ask(&desk, "now");
    wait_for(|| surface.approvals_open());
    let authority = desk.shell().authority().unwrap();
    let [card] = authority.approvals().try_into().expect("one request");

    // A click is not a proof of presence: the approval window (with its passphrase field)
    // is where approving happens, and the call keeps waiting.
    on_menu_event(&desk, &MenuCommand::Approve(card.id).id());

    assert!(verdict.try_recv().is_err(), "the call still waits");
    assert_eq!(authority.approvals().len(), 1);
    assert!(surface.approvals_open());
    let shown = surface.tray().expect("the tray was drawn");
    assert_eq!(
        shown.title.as_deref(),
        Some("1"),
        "the count beside the icon"
    );
    assert_eq!(shown.look, Look::Waiting);
    assert!(
        surface
            .orders()
            .contains(&Order::OpenApprovals { focus: true }),
        "a human chose: the window takes the focus"
    );
    // The window shows the request chosen first, once.
    let focus = &desk.focus;
    assert_eq!(
        focus.take(),
        Some(approvals::Chosen {
            id: card.id,
            review: false
        })
    );
    on_menu_event(&desk, &MenuCommand::Review(card.id).id());
    assert_eq!(focus.take().map(|c| c.review), Some(true));
    assert_eq!(focus.take(), None);
    crate::testing::block_on(desk.shell().shutdown());
}

#[test]
fn deny_from_the_tray_refuses_the_call() {
    let (desk, _surface, _home) = running_desk();
    let mut verdict = ask(&desk, "now");
    let authority = desk.shell().authority().unwrap();
    let [card] = authority.approvals().try_into().expect("one request");

    on_menu_event(&desk, &MenuCommand::Deny(card.id).id());

    match verdict.try_recv() {
        Ok(Verdict::Deny(denial)) => assert_eq!(denial.code, DenyCode::ApprovalDenied),
        other => panic!("denied: {other:?}"),
    }
    // The audit log says it was the tray.
    let denied = crate::testing::audit_event(&desk, "approval_denied");
    assert_eq!(denied["by"], "tray", "{denied}");
    crate::testing::block_on(desk.shell().shutdown());
}

#[test]
fn lock_from_the_tray_refuses_waiting_calls_and_unlock_asks_for_the_passphrase() {
    let (desk, _surface, _home) = running_desk();
    let mut verdict = ask(&desk, "now");
    let authority = desk.shell().authority().unwrap();

    on_menu_event(&desk, "lock");

    assert_eq!(authority.vault(), VaultState::Locked);
    match verdict.try_recv() {
        Ok(Verdict::Deny(denial)) => assert_eq!(denial.code, DenyCode::VaultLocked),
        other => panic!("refused: {other:?}"),
    }
    // Unlocking takes the passphrase: the tray opens the window's lock screen.
    on_menu_event(&desk, "unlock");
    assert_eq!(authority.vault(), VaultState::Locked);
    crate::testing::block_on(desk.shell().shutdown());
}

#[test]
fn quit_stops_the_engine() {
    let (desk, surface, _home) = running_desk();

    on_menu_event(&desk, "quit");

    wait_for(|| surface.orders().contains(&Order::Exit));
    assert!(matches!(
        desk.shell().view(),
        crate::EngineView::Stopped { .. }
    ));
}

#[test]
fn review_opens_no_empty_approval_window() {
    let (desk, surface, _home) = running_desk();

    on_menu_event(&desk, "review");

    assert!(!surface.approvals_open());
    crate::testing::block_on(desk.shell().shutdown());
}
