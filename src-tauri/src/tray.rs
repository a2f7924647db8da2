//! The tray (menu-bar) icon and its menu. Its look says the gate's state at a glance
//! (ready, approvals waiting, locked); its menu lists each waiting request with Approve
//! and Deny, then the vault lock, the window and Quit. The menu is a value first
//! ([`entries`]) and a click is routed by item id ([`on_menu_event`]), so tests drive both
//! without a tray host; [`refresh`] rebuilds the icon when the gate changes.

mod icon;

use std::sync::{Mutex, PoisonError};

use postern_domain::ApprovalId;
use postern_domain::decision::AskFor;
use postern_engine::GateStatus;
use postern_engine::authority::VaultState;
use tauri::{
    AppHandle, Manager, Runtime,
    menu::{IsMenuItem, Menu, MenuItem, PredefinedMenuItem, Submenu},
    tray::{TrayIcon, TrayIconBuilder},
};

pub use icon::{Look, image};

use crate::approvals::{self, Approval};
use crate::{Shell, window};

/// The tray icon's id.
pub const TRAY_ID: &str = "postern";

/// The menu's fixed items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuAction {
    /// Opens (and focuses) the approval window.
    Review,
    /// Locks the vault: every call is refused until a human unlocks.
    Lock,
    /// Unlocks the vault.
    Unlock,
    /// Shows and focuses the status window.
    Open,
    /// Shuts the engine down and exits.
    Quit,
}

impl MenuAction {
    /// Every action.
    pub const ALL: [Self; 5] = [
        Self::Review,
        Self::Lock,
        Self::Unlock,
        Self::Open,
        Self::Quit,
    ];

    /// The menu item id.
    pub fn id(self) -> &'static str {
        match self {
            Self::Review => "review",
            Self::Lock => "lock",
            Self::Unlock => "unlock",
            Self::Open => "open",
            Self::Quit => "quit",
        }
    }

    /// The menu item text.
    pub fn label(self) -> &'static str {
        match self {
            Self::Review => "Review in the approval window…",
            Self::Lock => "Lock vault",
            Self::Unlock => "Unlock vault",
            Self::Open => "Open Postern",
            Self::Quit => "Quit",
        }
    }

    /// Does it. Quitting runs on the async runtime: the engine stops, then the app exits.
    pub fn perform<R: Runtime>(self, app: &AppHandle<R>) {
        match self {
            Self::Review => approvals::review(app),
            Self::Lock => {
                if let Some(authority) = app.state::<Shell>().authority() {
                    authority.lock("locked from the tray");
                }
            }
            // Unlocking takes the passphrase: the window's lock screen asks for it.
            Self::Unlock => {
                if let Err(err) = window::show(app) {
                    tracing::warn!("cannot show the window: {err}");
                }
            }
            Self::Open => {
                if let Err(err) = window::show(app) {
                    tracing::warn!("cannot show the window: {err}");
                }
            }
            Self::Quit => {
                let app = app.clone();
                tauri::async_runtime::spawn(async move {
                    app.state::<Shell>().shutdown().await;
                    app.exit(0);
                });
            }
        }
    }
}

/// What a menu item id asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuCommand {
    /// A fixed item.
    Action(MenuAction),
    /// Approve a request, as narrowly as its card allows ([`approvals::narrowest`]).
    Approve(ApprovalId),
    /// Deny a request.
    Deny(ApprovalId),
}

impl MenuCommand {
    /// The item id.
    pub fn id(self) -> String {
        match self {
            Self::Action(action) => action.id().to_owned(),
            Self::Approve(id) => format!("approve:{id}"),
            Self::Deny(id) => format!("deny:{id}"),
        }
    }

    /// The command for an item id; `None` for ids that are not ours.
    pub fn from_id(id: &str) -> Option<Self> {
        if let Some(approval) = id.strip_prefix("approve:") {
            return approval.parse().ok().map(Self::Approve);
        }
        if let Some(approval) = id.strip_prefix("deny:") {
            return approval.parse().ok().map(Self::Deny);
        }
        MenuAction::ALL
            .into_iter()
            .find(|action| action.id() == id)
            .map(Self::Action)
    }
}

/// One entry of the menu, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A line of text that cannot be clicked.
    Note(String),
    /// A waiting request: a submenu titled `label` holding Approve (`approve` says how
    /// much) and Deny.
    Request {
        /// The request.
        id: ApprovalId,
        /// Agent, server, tool.
        label: String,
        /// The Approve item's text.
        approve: &'static str,
    },
    /// A fixed item.
    Action(MenuAction),
    /// A separator.
    Separator,
}

/// The menu for the gate's state (`None`: no engine runs here) and its waiting requests.
pub fn entries(gate: Option<&GateStatus>, waiting: &[Approval]) -> Vec<Entry> {
    use Entry::{Action, Note, Separator};
    let open_quit = [
        Action(MenuAction::Open),
        Separator,
        Action(MenuAction::Quit),
    ];
    let Some(gate) = gate else {
        return open_quit.to_vec();
    };
    let mut out = Vec::new();
    match gate.vault {
        VaultState::Quarantined => {
            out.push(Note("The audit log failed verification".into()));
            out.push(Separator);
        }
        VaultState::Locked | VaultState::Unlocking => {
            out.push(Note("Postern is locked".into()));
            out.push(Action(MenuAction::Unlock));
            out.push(Separator);
        }
        VaultState::Ready => {
            if !waiting.is_empty() {
                out.push(Note(waiting_text(waiting.len())));
                out.extend(waiting.iter().map(|a| Entry::Request {
                    id: a.card.id,
                    label: approvals::summary(&a.card),
                    approve: match a.card.what {
                        AskFor::Session => "Admit this agent run",
                        AskFor::Call | AskFor::SessionAndCall => "Approve this call",
                    },
                }));
                out.push(Action(MenuAction::Review));
                out.push(Separator);
            }
            out.push(Action(MenuAction::Lock));
        }
    }
    out.extend(open_quit);
    out
}

/// The tooltip (and the accessible name) for the gate's state.
pub fn tooltip(gate: Option<&GateStatus>) -> String {
    match gate.map(|g| (g.vault, g.approvals)) {
        None => "Postern: no engine".into(),
        Some((VaultState::Quarantined, _)) => "Postern: audit log quarantined".into(),
        Some((VaultState::Locked | VaultState::Unlocking, _)) => "Postern: locked".into(),
        Some((VaultState::Ready, 0)) => "Postern: ready".into(),
        Some((VaultState::Ready, n)) => format!("Postern: {}", waiting_text(n as usize)),
    }
}

/// The text next to the icon (macOS menu bar, Linux indicator label): the number of
/// waiting requests, when there are any.
pub fn title(gate: Option<&GateStatus>) -> Option<String> {
    gate.filter(|g| g.vault == VaultState::Ready && g.approvals > 0)
        .map(|g| g.approvals.to_string())
}

/// Creates the tray icon. Where no tray host runs (a bare X server), this succeeds and
/// nothing shows; the windows work the same.
pub fn create<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<TrayIcon<R>> {
    TrayIconBuilder::with_id(TRAY_ID)
        .tooltip(tooltip(None))
        .menu(&menu(app, &entries(None, &[]))?)
        .icon(image(Look::Idle, TEMPLATE))
        .icon_as_template(TEMPLATE)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu_event(app, event.id().as_ref()))
        .build(app)
}

/// The icon, tooltip, title and menu for the gate now. Rebuilt only when they change.
pub fn refresh<R: Runtime>(app: &AppHandle<R>, gate: Option<&GateStatus>, waiting: &[Approval]) {
    let shown = Shown {
        look: Look::of(gate),
        tooltip: tooltip(gate),
        title: title(gate),
        entries: entries(gate, waiting),
    };
    let state = app.state::<TrayState>();
    let mut last = state.0.lock().unwrap_or_else(PoisonError::into_inner);
    if last.as_ref() == Some(&shown) {
        return;
    }
    let Some(tray) = app.tray_by_id(TRAY_ID) else {
        return;
    };
    let applied = menu(app, &shown.entries)
        .and_then(|menu| tray.set_menu(Some(menu)))
        .and_then(|()| tray.set_icon_with_as_template(Some(image(shown.look, TEMPLATE)), TEMPLATE))
        .and_then(|()| tray.set_tooltip(Some(&shown.tooltip)))
        .and_then(|()| tray.set_title(shown.title.as_deref()));
    match applied {
        Ok(()) => *last = Some(shown),
        Err(err) => tracing::warn!("cannot update the tray icon: {err}"),
    }
}

/// The last icon, tooltip, title and menu the tray was given.
#[derive(Debug, Default)]
pub struct TrayState(Mutex<Option<Shown>>);

#[derive(Debug, PartialEq, Eq)]
struct Shown {
    look: Look,
    tooltip: String,
    title: Option<String>,
    entries: Vec<Entry>,
}

/// The menu for `entries`.
pub fn menu<R: Runtime>(app: &AppHandle<R>, entries: &[Entry]) -> tauri::Result<Menu<R>> {
    let menu = Menu::new(app)?;
    for entry in entries {
        let item: Box<dyn IsMenuItem<R>> = match entry {
            Entry::Note(text) => Box::new(MenuItem::new(app, text, false, None::<&str>)?),
            Entry::Request { id, label, approve } => {
                let approve = MenuItem::with_id(
                    app,
                    MenuCommand::Approve(*id).id(),
                    approve,
                    true,
                    None::<&str>,
                )?;
                let deny = MenuItem::with_id(
                    app,
                    MenuCommand::Deny(*id).id(),
                    "Deny",
                    true,
                    None::<&str>,
                )?;
                Box::new(Submenu::with_id_and_items(
                    app,
                    format!("request:{id}"),
                    label,
                    true,
                    &[&approve, &deny],
                )?)
            }
            Entry::Action(action) => Box::new(MenuItem::with_id(
                app,
                action.id(),
                action.label(),
                true,
                None::<&str>,
            )?),
            Entry::Separator => Box::new(PredefinedMenuItem::separator(app)?),
        };
        menu.append(item.as_ref())?;
    }
    Ok(menu)
}

/// Routes a menu click by item id.
pub fn on_menu_event<R: Runtime>(app: &AppHandle<R>, id: &str) {
    match MenuCommand::from_id(id) {
        Some(MenuCommand::Action(action)) => action.perform(app),
        // Approving takes the passphrase: the approval window asks for it.
        Some(MenuCommand::Approve(_)) => approvals::review(app),
        Some(MenuCommand::Deny(approval)) => deny(app, approval),
        None => tracing::debug!("ignoring menu item {id}"),
    }
}

fn deny<R: Runtime>(app: &AppHandle<R>, approval: ApprovalId) {
    match app.state::<Shell>().authority() {
        Some(authority) => approvals::deny_from_tray(&authority, approval),
        None => tracing::info!("no engine to answer {approval}"),
    }
}

/// macOS draws menu-bar icons as templates (black, recoloured by the system).
const TEMPLATE: bool = cfg!(target_os = "macos");

fn waiting_text(n: usize) -> String {
    if n == 1 {
        "1 approval waiting".into()
    } else {
        format!("{n} approvals waiting")
    }
}

#[cfg(test)]
mod tests;
