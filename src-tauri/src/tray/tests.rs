use postern_domain::decision::{DenyCode, SessionMode};
use postern_engine::Settings;
use postern_gateway::authorize::Verdict;
use tauri::Manager;
use tauri::menu::MenuItemKind;

use super::*;
use crate::sample;
use crate::testing::{app, ask, running_app, wait_for};

fn gate(vault: VaultState, approvals: u32) -> GateStatus {
    GateStatus {
        vault,
        approvals,
        grants: 0,
        settings: Settings {
            session_mode: SessionMode::Prompt,
            ..Default::default()
        },
        passphrase_set: true,
        clicks_until_ms: None,
        config_warning: None,
        leaks: Vec::new(),
    }
}

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

/// A request's submenu: its title, its items (id, text, enabled), and the ids of its choices.
fn submenu(
    item: &MenuItemKind<tauri::test::MockRuntime>,
) -> (String, Vec<(String, String, bool)>, Vec<String>) {
    let MenuItemKind::Submenu(request) = item else {
        panic!("a submenu: {:?}", item.id())
    };
    let inner = request
        .items()
        .unwrap()
        .iter()
        .map(|i| match i {
            MenuItemKind::MenuItem(m) => (
                m.id().as_ref().to_owned(),
                m.text().unwrap(),
                m.is_enabled().unwrap(),
            ),
            other => (other.id().as_ref().to_owned(), String::new(), false),
        })
        .collect::<Vec<(String, String, bool)>>();
    let choices = inner
        .iter()
        .filter(|(id, _, _)| id.contains(':'))
        .map(|(id, _, _)| id.clone())
        .collect();
    (request.text().unwrap(), inner, choices)
}

#[test]
fn the_menu_holds_a_submenu_per_request_its_arguments_and_risks_before_the_choices() {
    let app = app();
    let card = sample::card();
    let mut calm = card.clone();
    calm.id = ApprovalId::new(sample::ASKED_AT, 7);
    calm.risks.clear();
    let entries = entries(
        Some(&gate(VaultState::Ready, 2)),
        COUNTS,
        &[Approval::of(card.clone()), Approval::of(calm.clone())],
    );
    let menu = menu(app.handle(), &entries).unwrap();
    let items = menu.items().unwrap();
    let ids: Vec<_> = items.iter().map(|i| i.id().as_ref().to_owned()).collect();
    assert_eq!(ids.len(), 12, "{ids:?}");
    assert_eq!(ids[4], format!("request:{}", card.id));

    let (label, inner, choices) = submenu(&items[4]);
    assert_eq!(label, "⚠ claude-code 2.1.3 · deployer · deploy");
    let texts: Vec<&str> = inner.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        &texts[..3],
        [
            "branch = \"main\"",
            "options = {}",
            "target = \"preview\" (default)"
        ]
    );
    assert!(
        texts.iter().any(|t| t.starts_with("⚠ The code changed")),
        "{texts:?}"
    );
    assert!(
        inner
            .iter()
            .filter(|(id, _, _)| id.contains(':'))
            .all(|(_, _, on)| *on)
    );
    assert!(
        inner
            .iter()
            .filter(|(_, t, _)| t.starts_with('⚠'))
            .all(|(_, _, on)| !*on),
        "lines are text, not choices"
    );
    assert_eq!(
        choices,
        [format!("review:{}", card.id), format!("deny:{}", card.id)]
    );

    let (label, _, choices) = submenu(&items[5]);
    assert_eq!(label, "claude-code 2.1.3 · deployer · deploy");
    assert_eq!(
        choices,
        [format!("approve:{}", calm.id), format!("deny:{}", calm.id)]
    );
}

#[test]
fn open_shows_a_hidden_window() {
    let app = app();
    let window = tauri::WebviewWindowBuilder::new(&app, window::MAIN, Default::default())
        .visible(false)
        .build()
        .unwrap();
    on_menu_event(app.handle(), "open");
    assert!(window.is_visible().unwrap());
}

#[test]
fn approve_from_the_tray_approves_nothing_without_the_passphrase() {
    let (app, _home) = running_app();
    let mut verdict = ask(&app, "now");
    wait_for(|| app.get_webview_window(window::APPROVALS).is_some());
    let authority = app.state::<Shell>().authority().unwrap();
    let [card] = authority.approvals().try_into().expect("one request");

    // A click is not a proof of presence: the approval window (with its passphrase field)
    // is where approving happens, and the call keeps waiting.
    on_menu_event(app.handle(), &MenuCommand::Approve(card.id).id());

    assert!(verdict.try_recv().is_err(), "the call still waits");
    assert_eq!(authority.approvals().len(), 1);
    assert!(app.get_webview_window(window::APPROVALS).is_some());
    // The window shows the request chosen first, once.
    let focus = app.state::<approvals::Focus>();
    assert_eq!(
        focus.take(),
        Some(approvals::Chosen {
            id: card.id,
            review: false
        })
    );
    on_menu_event(app.handle(), &MenuCommand::Review(card.id).id());
    assert_eq!(focus.take().map(|c| c.review), Some(true));
    assert_eq!(focus.take(), None);
    tauri::async_runtime::block_on(app.state::<Shell>().shutdown());
}

#[test]
fn deny_from_the_tray_refuses_the_call() {
    let (app, _home) = running_app();
    let mut verdict = ask(&app, "now");
    let authority = app.state::<Shell>().authority().unwrap();
    let [card] = authority.approvals().try_into().expect("one request");

    on_menu_event(app.handle(), &MenuCommand::Deny(card.id).id());

    match verdict.try_recv() {
        Ok(Verdict::Deny(denial)) => assert_eq!(denial.code, DenyCode::ApprovalDenied),
        other => panic!("denied: {other:?}"),
    }
    // The audit log says it was the tray.
    let denied = crate::testing::audit_event(&app, "approval_denied");
    assert_eq!(denied["by"], "tray", "{denied}");
    tauri::async_runtime::block_on(app.state::<Shell>().shutdown());
}

#[test]
fn lock_from_the_tray_refuses_waiting_calls_and_unlock_asks_for_the_passphrase() {
    let (app, _home) = running_app();
    let mut verdict = ask(&app, "now");
    let authority = app.state::<Shell>().authority().unwrap();

    on_menu_event(app.handle(), "lock");

    assert_eq!(authority.vault(), VaultState::Locked);
    match verdict.try_recv() {
        Ok(Verdict::Deny(denial)) => assert_eq!(denial.code, DenyCode::VaultLocked),
        other => panic!("refused: {other:?}"),
    }
    // Unlocking takes the passphrase: the tray opens the window's lock screen.
    on_menu_event(app.handle(), "unlock");
    assert_eq!(authority.vault(), VaultState::Locked);
    tauri::async_runtime::block_on(app.state::<Shell>().shutdown());
}

#[test]
fn quit_stops_the_engine() {
    let (app, _home) = running_app();

    // After stopping the engine, Quit calls `app.exit(0)`, which the mock runtime does not
    // implement: that spawned task ends in a logged panic once the engine is stopped.
    on_menu_event(app.handle(), "quit");

    wait_for(|| {
        matches!(
            app.state::<Shell>().view(),
            crate::EngineView::Stopped { .. }
        )
    });
}

#[test]
fn review_opens_no_empty_approval_window() {
    let (app, _home) = running_app();

    on_menu_event(app.handle(), "review");

    assert!(app.get_webview_window(window::APPROVALS).is_none());
    tauri::async_runtime::block_on(app.state::<Shell>().shutdown());
}
