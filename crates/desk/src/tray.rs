//! The tray (menu-bar) icon and its menu. Its look says the gate's state at a glance
//! (ready, approvals waiting, locked); its menu starts with a status block (the lock, servers,
//! agents, grants), then lists each waiting request as a submenu that shows its first
//! arguments and its risk lines before any choice: Approve… only for a calm request (no risk
//! line), Review… otherwise, and Deny; then the vault lock, the window and Quit. The menu is a value first
//! ([`entries`]) and a click is routed by item id ([`on_menu_event`]), so tests drive both
//! without a tray host; [`refresh`] rebuilds the icon when the gate changes.

mod icon;

use std::sync::{Arc, Mutex, PoisonError};

pub use icon::{Look, Rgba, image};
use postern_domain::{AnswerChannel, ApprovalId};
use postern_engine::answer::ControlCommand;
use postern_engine::authority::VaultState;
use postern_engine::{GateStatus, Origin};

use crate::Desk;
use crate::approvals::{self, Approval};

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
    pub fn perform(self, desk: &Arc<Desk>) {
        match self {
            Self::Review => approvals::review(desk),
            Self::Lock => {
                if let Some(control) = desk.shell.with_engine(|e| e.control()) {
                    let from = Origin::App(AnswerChannel::Tray);
                    if let Err(err) = control.request(ControlCommand::Lock, None, from) {
                        tracing::warn!("the vault did not lock: {err}");
                    }
                }
            }
            // Unlocking takes the passphrase: the window's lock screen asks for it.
            Self::Unlock | Self::Open => desk.surface.show_main(),
            Self::Quit => {
                let desk = Arc::clone(desk);
                desk.runtime.clone().spawn(async move { desk.quit().await });
            }
        }
    }
}

/// What a menu item id asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuCommand {
    /// A fixed item.
    Action(MenuAction),
    /// Approve a calm request: the approval window, where the passphrase approves it.
    Approve(ApprovalId),
    /// Review a flagged request in the approval window (no one-step approval).
    Review(ApprovalId),
    /// Deny a request.
    Deny(ApprovalId),
}

impl MenuCommand {
    /// The item id.
    pub fn id(self) -> String {
        match self {
            Self::Action(action) => action.id().to_owned(),
            Self::Approve(id) => format!("approve:{id}"),
            Self::Review(id) => format!("review:{id}"),
            Self::Deny(id) => format!("deny:{id}"),
        }
    }

    /// The command for an item id; `None` for ids that are not ours.
    pub fn from_id(id: &str) -> Option<Self> {
        if let Some(approval) = id.strip_prefix("approve:") {
            return approval.parse().ok().map(Self::Approve);
        }
        if let Some(approval) = id.strip_prefix("review:") {
            return approval.parse().ok().map(Self::Review);
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
    /// A waiting request: a submenu titled `label` showing `lines` (its first arguments, then
    /// its risk lines or its calm line), then Approve… for a calm request or Review… for a
    /// flagged one, and Deny.
    Request {
        /// The request.
        id: ApprovalId,
        /// Agent, server, tool; a flagged request's starts with a warning sign.
        label: String,
        /// What the submenu shows before the choices.
        lines: Vec<String>,
        /// Whether nothing on the card calls for a second look (Approve… rather than Review…).
        calm: bool,
    },
    /// A fixed item.
    Action(MenuAction),
    /// A separator.
    Separator,
}

/// How many servers are configured and how many agent runs are connected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Configured servers.
    pub servers: usize,
    /// Connected agent runs.
    pub agents: usize,
}

/// The menu for the gate's state (`None`: no engine runs here), what it serves, and its
/// waiting requests.
pub fn entries(gate: Option<&GateStatus>, counts: Counts, waiting: &[Approval]) -> Vec<Entry> {
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
            out.push(Note("Unlocked".into()));
            out.push(Note(status_line(gate, counts)));
            out.push(Separator);
            if !gate.leaks.is_empty() {
                // The status window says which, until the person dismisses them (Open…).
                let n = gate.leaks.len();
                out.push(Note(format!(
                    "⚠ {n} refused request{}: a credential headed elsewhere",
                    if n == 1 { "" } else { "s" }
                )));
                out.push(Separator);
            }
            if !waiting.is_empty() {
                out.push(Note(waiting_text(waiting.len())));
                out.extend(waiting.iter().map(|a| Entry::Request {
                    id: a.card.id,
                    label: if a.card.is_calm() {
                        approvals::summary(&a.card)
                    } else {
                        format!("⚠ {}", approvals::summary(&a.card))
                    },
                    lines: approvals::menu_lines(&a.card),
                    calm: a.card.is_calm(),
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

/// "2 servers · 1 agent · 3 grants".
fn status_line(gate: &GateStatus, counts: Counts) -> String {
    let n = |count: usize, one: &str| format!("{count} {one}{}", if count == 1 { "" } else { "s" });
    format!(
        "{} · {} · {}",
        n(counts.servers, "server"),
        n(counts.agents, "agent"),
        n(gate.grants as usize, "grant")
    )
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

/// The icon, tooltip, title and menu for the gate now. Rebuilt only when they change.
pub fn refresh(desk: &Desk, gate: Option<&GateStatus>, counts: Counts, waiting: &[Approval]) {
    let shown = Shown {
        look: Look::of(gate),
        tooltip: tooltip(gate),
        title: title(gate),
        entries: entries(gate, counts, waiting),
    };
    let mut last = desk.tray.0.lock().unwrap_or_else(PoisonError::into_inner);
    if last.as_ref() == Some(&shown) {
        return;
    }
    match desk.surface.set_tray(&shown) {
        Ok(()) => *last = Some(shown),
        Err(err) => tracing::warn!("cannot update the tray icon: {err}"),
    }
}

/// The last icon, tooltip, title and menu the tray was given.
#[derive(Debug, Default)]
pub struct TrayState(Mutex<Option<Shown>>);

/// What the tray shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The icon's look ([`image`] draws it).
    pub look: Look,
    /// The tooltip (and the accessible name).
    pub tooltip: String,
    /// The text next to the icon.
    pub title: Option<String>,
    /// The menu.
    pub entries: Vec<Entry>,
}

impl Shown {
    /// What the tray shows before the engine started.
    pub fn initial() -> Self {
        let gate = None;
        Self {
            look: Look::of(gate),
            tooltip: tooltip(gate),
            title: title(gate),
            entries: entries(gate, Counts::default(), &[]),
        }
    }
}

/// Routes a menu click by item id.
pub fn on_menu_event(desk: &Arc<Desk>, id: &str) {
    match MenuCommand::from_id(id) {
        Some(MenuCommand::Action(action)) => action.perform(desk),
        // Approving takes the passphrase: the approval window asks for it, and a flagged
        // request is reviewed there in full.
        Some(MenuCommand::Approve(id)) => {
            approvals::review_request(desk, approvals::Chosen { id, review: false });
        }
        Some(MenuCommand::Review(id)) => {
            approvals::review_request(desk, approvals::Chosen { id, review: true });
        }
        Some(MenuCommand::Deny(approval)) => deny(desk, approval),
        None => tracing::debug!("ignoring menu item {id}"),
    }
}

fn deny(desk: &Desk, approval: ApprovalId) {
    match desk.shell.with_engine(|engine| engine.control()) {
        Some(control) => approvals::deny_from_tray(&control, approval),
        None => tracing::info!("no engine to answer {approval}"),
    }
}

/// macOS draws menu-bar icons as templates (black, recoloured by the system).
pub const TEMPLATE: bool = cfg!(target_os = "macos");

fn waiting_text(n: usize) -> String {
    if n == 1 {
        "1 approval waiting".into()
    } else {
        format!("{n} approvals waiting")
    }
}

#[cfg(test)]
mod tests;
