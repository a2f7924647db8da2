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
        config_warning: None,
    }
}

fn ids(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e {
            Entry::Note(text) => format!("note {text}"),
            Entry::Request { label, approve, .. } => format!("request {label}: {approve}"),
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
    for command in [MenuCommand::Approve(id), MenuCommand::Deny(id)] {
        assert_eq!(MenuCommand::from_id(&command.id()), Some(command));
    }
    assert_eq!(MenuCommand::from_id("nope"), None);
    assert_eq!(MenuCommand::from_id("approve:not-an-id"), None);
}

#[test]
fn the_menu_follows_the_gate() {
    assert_eq!(ids(&entries(None, &[])), ["open", "-", "quit"]);
    assert_eq!(
        ids(&entries(Some(&gate(VaultState::Ready, 0)), &[])),
        ["lock", "open", "-", "quit"]
    );
    assert_eq!(
        ids(&entries(Some(&gate(VaultState::Locked, 0)), &[])),
        ["note Postern is locked", "unlock", "-", "open", "-", "quit"]
    );
    assert_eq!(
        ids(&entries(Some(&gate(VaultState::Quarantined, 0)), &[])),
        [
            "note The audit log failed verification",
            "-",
            "open",
            "-",
            "quit"
        ]
    );

    let first = Approval::of(sample::card());
    let mut second = first.clone();
    second.card.what = AskFor::Session;
    second.card.tool.name = "status".into();
    assert_eq!(
        ids(&entries(
            Some(&gate(VaultState::Ready, 2)),
            &[first, second]
        )),
        [
            "note 2 approvals waiting",
            "request claude · deployer · deploy: Approve this call",
            "request claude · deployer · status: Admit this agent run",
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
fn the_menu_holds_a_submenu_per_request() {
    let app = app();
    let card = sample::card();
    let entries = entries(
        Some(&gate(VaultState::Ready, 1)),
        &[Approval::of(card.clone())],
    );
    let menu = menu(app.handle(), &entries).unwrap();
    let items = menu.items().unwrap();
    let ids: Vec<_> = items.iter().map(|i| i.id().as_ref().to_owned()).collect();
    assert_eq!(ids.len(), 8, "{ids:?}");
    assert_eq!(ids[1], format!("request:{}", card.id));
    assert_eq!(
        &ids[2..],
        ["review", &ids[3], "lock", "open", &ids[6], "quit"]
    );
    let MenuItemKind::Submenu(request) = &items[1] else {
        panic!("a submenu: {ids:?}")
    };
    assert_eq!(request.text().unwrap(), "claude · deployer · deploy");
    let inner: Vec<_> = request
        .items()
        .unwrap()
        .iter()
        .map(|i| i.id().as_ref().to_owned())
        .collect();
    assert_eq!(
        inner,
        [format!("approve:{}", card.id), format!("deny:{}", card.id)]
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
