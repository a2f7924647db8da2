//! Approval requests as the app presents them: the approval window's queue, the native
//! notification for each new request, and the tray. Whenever the gate changes, [`sync`]
//! brings all three up to date. The cards come from the engine as they are; the only thing
//! added here is the catalog diff as lines, the way `postern` prints it.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use postern_domain::decision::{
    ApprovalCard, ArgumentSource, AskFor, CatalogSince, Reply, argument_name,
};
use postern_domain::text::one_line;
use postern_domain::{AnswerChannel, ApprovalId};
use postern_engine::answer::ControlCommand;
use postern_engine::{Authority, Control, LeakNotice, Origin, SocketProof};
use serde::Serialize;
use ts_rs::TS;

use crate::desk::to_json;
use crate::surface::APPROVALS;
use crate::{Desk, tray};

/// The event the approval window listens to; its payload is the queue (`Approval[]`).
pub const APPROVALS_CHANGED: &str = "approvals-changed";

/// The event that tells the approval window which request to show (its payload: a
/// [`Chosen`]), when a person chose one (the tray's Approve… or Review…).
pub const APPROVALS_FOCUS: &str = "approvals-focus";

/// A request a person chose in the tray, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Chosen {
    /// The request.
    #[ts(type = "string")]
    pub id: ApprovalId,
    /// Review… of a flagged request (the window opens its details), not Approve… of a calm one.
    pub review: bool,
}

/// The request a person chose, until the approval window takes it (a window opened for it is
/// not listening yet when the event goes).
#[derive(Debug, Default)]
pub struct Focus(Mutex<Option<Chosen>>);

impl Focus {
    /// The request chosen, once.
    pub fn take(&self) -> Option<Chosen> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// One open approval request, as the approval window shows it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The engine's card.
    #[ts(type = "ApprovalCard")]
    pub card: ApprovalCard,
    /// What changed in the catalog since the last approved revision, one line per change
    /// (empty unless the catalog changed); a line ending in ` [escalation]` makes a tool
    /// look safer than before.
    pub catalog_changes: Vec<String>,
    /// Whether a change makes a tool look safer than before (an annotation hint flip).
    pub escalation: bool,
}

impl Approval {
    /// The card with its catalog diff spelled out.
    pub fn of(card: ApprovalCard) -> Self {
        let (catalog_changes, escalation) = match &card.catalog {
            CatalogSince::Changed { diff } => (diff.lines(), diff.has_escalation()),
            _ => (Vec::new(), false),
        };
        Self {
            card,
            catalog_changes,
            escalation,
        }
    }
}

/// The open requests, oldest first.
pub fn list(authority: &Authority) -> Vec<Approval> {
    authority
        .approvals()
        .into_iter()
        .map(Approval::of)
        .collect()
}

/// The narrowest approval a card allows, which is what the tray's Approve means: this call
/// only, or (for a card that asks about the agent run alone) admitting the run.
pub fn narrowest(card: &ApprovalCard) -> Reply {
    Reply::Approve {
        choice: card.narrowest(),
    }
}

/// One line naming a request: agent, server, tool (the agent's and the server's words shown
/// as text, never obeyed: a tray menu entry is a one-click Approve).
pub fn summary(card: &ApprovalCard) -> String {
    format!(
        "{} · {} · {}",
        one_line(&card.agent_name),
        card.server,
        one_line(&card.tool.name)
    )
}

/// How many arguments a tray submenu shows, and how long each value may be there.
const MENU_ARGUMENTS: usize = 3;
const MENU_VALUE_CHARS: usize = 48;

/// What a request's tray submenu shows before its choices: its first arguments (the agent's
/// words as text, cut short), then its risk lines, or its calm line.
pub fn menu_lines(card: &ApprovalCard) -> Vec<String> {
    let mut lines: Vec<String> = card
        .arguments
        .iter()
        .take(MENU_ARGUMENTS)
        .map(|a| {
            let name = argument_name(&a.pointer);
            let value = shorten(&a.value.to_string(), MENU_VALUE_CHARS);
            let default = match a.source {
                ArgumentSource::Default => " (default)",
                ArgumentSource::Sent => "",
            };
            one_line(&format!("{name} = {value}{default}")).into_owned()
        })
        .collect();
    if card.arguments.len() > MENU_ARGUMENTS {
        lines.push(format!(
            "and {} more arguments",
            card.arguments.len() - MENU_ARGUMENTS
        ));
    }
    if card.arguments.is_empty() && card.what != AskFor::Session {
        lines.push("no arguments".into());
    }
    if card.risks.is_empty() {
        lines.push("Nothing changed since your approval".into());
    }
    lines.extend(
        card.risks
            .iter()
            .map(|r| format!("⚠ {}", one_line(&r.text))),
    );
    lines
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// Denies a request from the tray (approving takes the passphrase, in the approval window).
pub fn deny_from_tray(control: &Control, id: ApprovalId) {
    let command = ControlCommand::Answer {
        approval: id.to_string(),
        reply: Reply::Deny,
    };
    if let Err(err) = control.request(command, None, Origin::App(AnswerChannel::Tray)) {
        tracing::info!(approval = %id, "answer not taken: {err}");
    }
}

/// Opens the approval window with the focus, because a human asked for it (the tray's
/// Review, the status window's "waiting" button); nothing opens when no request waits, since
/// the window closes only when a waiting queue empties.
pub fn review(desk: &Desk) {
    let waiting = desk
        .shell
        .authority()
        .is_some_and(|authority| !authority.approvals().is_empty());
    if waiting {
        desk.surface.open_approvals(true);
    }
}

/// Opens the approval window with the focus on the request a person chose (the tray's
/// Approve… or Review… of one request).
pub fn review_request(desk: &Desk, chosen: Chosen) {
    *desk.focus.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(chosen);
    review(desk);
    desk.surface
        .emit(APPROVALS_FOCUS, Some(APPROVALS), to_json(&chosen));
}

/// What the app last showed for the gate: the requests it announced, the latest refused
/// request (a leak notice) it announced, and how many proofs over the socket it announced.
#[derive(Debug, Default)]
pub struct Announced {
    ids: Mutex<BTreeSet<ApprovalId>>,
    leaks_until: Mutex<u64>,
    socket_proofs: Mutex<u64>,
}

impl Announced {
    /// The leak notices newer than the last announced, and remembers the newest.
    fn fresh_leaks<'a>(&self, leaks: &'a [LeakNotice]) -> Vec<&'a LeakNotice> {
        let mut until = self
            .leaks_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let fresh: Vec<&LeakNotice> = leaks.iter().filter(|l| l.at_ms > *until).collect();
        *until = leaks
            .iter()
            .map(|l| l.at_ms)
            .max()
            .unwrap_or(*until)
            .max(*until);
        fresh
    }

    /// The proof over the socket, if it is one not announced yet (the engine counts them).
    fn fresh_socket_proof<'a>(&self, proof: Option<&'a SocketProof>) -> Option<&'a SocketProof> {
        let mut seen = self
            .socket_proofs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let proof = proof.filter(|p| p.count > *seen)?;
        *seen = proof.count;
        Some(proof)
    }

    /// Records the open requests; returns those not seen before, in queue order.
    fn update<'a>(&self, open: &'a [Approval]) -> Vec<&'a Approval> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = open.iter().filter(|a| !ids.contains(&a.card.id)).collect();
        *ids = open.iter().map(|a| a.card.id).collect();
        fresh
    }
}

/// Brings the approval window, the notifications and the tray up to date with the gate.
/// Called when the engine starts and whenever its gate changes.
pub fn sync(desk: &Desk) {
    let shell = &desk.shell;
    let (open, gate) = match shell.authority() {
        Some(authority) => (list(&authority), Some(authority.gate_status())),
        None => (Vec::new(), None),
    };
    let counts = shell
        .with_engine(|engine| engine.census().ok())
        .flatten()
        .map(|census| tray::Counts {
            servers: census.servers,
            agents: census.agent_runs,
        })
        .unwrap_or_default();
    desk.surface.emit(APPROVALS_CHANGED, None, to_json(&open));
    let fresh = desk.announced.update(&open);
    for (card, more) in announcements(&fresh) {
        announce(desk, card, more);
    }
    if let Some(gate) = &gate {
        for leak in desk.announced.fresh_leaks(&gate.leaks) {
            announce_leak(desk, leak);
        }
        if let Some(proof) = desk
            .announced
            .fresh_socket_proof(gate.socket_proof.as_ref())
        {
            announce_socket_proof(desk, proof);
        }
    }
    match window_move(open.len(), fresh.len()) {
        // Shown on top, without taking the keyboard focus: keys typed into another app
        // must never answer a request that appeared under them.
        WindowMove::Open => desk.surface.open_approvals(false),
        WindowMove::Close => desk.surface.close_approvals(),
        WindowMove::Keep => {}
    }
    tray::refresh(desk, gate.as_ref(), counts, &open);
}

/// What the approval window does when the queue changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WindowMove {
    /// A new request arrived: open the window, or show it again if it was closed.
    Open,
    /// The queue emptied: the window closes itself.
    Close,
    /// Requests were answered but some still wait (a window closed by hand stays closed).
    Keep,
}

fn window_move(open: usize, fresh: usize) -> WindowMove {
    match (open, fresh) {
        (0, _) => WindowMove::Close,
        (_, 0) => WindowMove::Keep,
        _ => WindowMove::Open,
    }
}

/// What to announce of the requests that just arrived: one notification per agent process and
/// server, with how many more requests came with it, so a burst from one agent is one
/// notification, not one each.
fn announcements<'a>(fresh: &[&'a Approval]) -> Vec<(&'a ApprovalCard, usize)> {
    let mut out: Vec<(&ApprovalCard, usize)> = Vec::new();
    for approval in fresh {
        let card = &approval.card;
        match out
            .iter_mut()
            .find(|(c, _)| c.agent.pid == card.agent.pid && c.server == card.server)
        {
            Some((_, more)) => *more += 1,
            None => out.push((card, 0)),
        }
    }
    out
}

/// A native notification for a new request (and `more` that came with it from the same agent
/// and server). Where no notification service runs (a bare X server), this logs and goes on:
/// the approval window and the tray still show it.
fn announce(desk: &Desk, card: &ApprovalCard, more: usize) {
    let title = match card.what {
        AskFor::Session => "An agent asks to use a server",
        AskFor::Call | AskFor::SessionAndCall => "An agent asks to call a tool",
    };
    let also = match more {
        0 => String::new(),
        1 => " (and 1 more request)".to_owned(),
        n => format!(" (and {n} more requests)"),
    };
    let risk = card
        .risks
        .first()
        .map(|r| format!(" {}", one_line(&r.text)))
        .unwrap_or_default();
    let body = format!(
        "{} wants {} on {}{also}.{risk}",
        one_line(&card.agent_name),
        one_line(&card.tool.name),
        card.server
    );
    if let Err(err) = desk.surface.notify(title, &body) {
        tracing::warn!("cannot show a notification for approval {}: {err}", card.id);
    }
}

/// A native notification for a request the egress broker refused: the person is told at once,
/// and the status window shows it until they dismiss it.
fn announce_leak(desk: &Desk, leak: &LeakNotice) {
    let title = format!("Postern refused a request from {}", leak.server);
    let body = format!(
        "It carried the placeholder of {} toward {}, where it may not go. The server gets it again only when you approve.",
        leak.credentials.join(", "),
        leak.host
    );
    if let Err(err) = desk.surface.notify(&title, &body) {
        tracing::warn!("cannot show a notification for a refused request: {err}");
    }
}

/// A native notification for a proof that came over the socket (a passphrase typed at a
/// terminal): the person who typed it sees what it did; one who did not learns that a program
/// of theirs knows the passphrase (a look-alike prompt in a shell it configured can take it).
fn announce_socket_proof(desk: &Desk, proof: &SocketProof) {
    let title = "Postern: your passphrase was given at a terminal";
    let body = format!(
        "It was used to {}. If that was not you, a program of yours knows your passphrase: change it in Postern's settings.",
        one_line(&proof.what)
    );
    if let Err(err) = desk.surface.notify(title, &body) {
        tracing::warn!("cannot show a notification for a proof over the socket: {err}");
    }
}

#[cfg(test)]
mod tests {
    use postern_domain::decision::GrantChoice;

    use super::*;
    use crate::sample;

    #[test]
    fn a_tray_entry_shows_the_tool_name_as_text_never_obeying_it() {
        let mut card = sample::card();
        card.tool.name = "deploy\u{202e}yolpednu\n2 approvals waiting".into();
        let shown = summary(&card);
        assert!(
            shown.ends_with("· deploy\\u202eyolpednu\\u000a2 approvals waiting"),
            "{shown}"
        );
    }

    #[test]
    fn a_burst_from_one_agent_and_server_is_one_notification_with_a_count() {
        let approval = |pid: u32, server: &str| {
            let mut card = sample::card();
            card.agent.pid = pid;
            card.server = server.parse().expect("label");
            Approval::of(card)
        };
        let burst: Vec<Approval> = (0..5)
            .map(|_| approval(41, "deploy"))
            .chain([approval(41, "time"), approval(42, "deploy")])
            .collect();
        let fresh: Vec<&Approval> = burst.iter().collect();
        let told: Vec<(u32, String, usize)> = announcements(&fresh)
            .into_iter()
            .map(|(card, more)| (card.agent.pid, card.server.to_string(), more))
            .collect();
        assert_eq!(
            told,
            [
                (41, "deploy".to_owned(), 4),
                (41, "time".to_owned(), 0),
                (42, "deploy".to_owned(), 0)
            ]
        );
    }

    #[test]
    fn the_tray_approves_the_narrowest_choice() {
        let mut card = sample::card();
        assert_eq!(
            narrowest(&card),
            Reply::Approve {
                choice: Some(GrantChoice::ThisCall)
            }
        );
        card.what = AskFor::Session;
        card.choices.clear();
        assert_eq!(narrowest(&card), Reply::Approve { choice: None });
        card.what = AskFor::Call;
        card.choices = vec![GrantChoice::UntilRunEnds];
        assert_eq!(
            narrowest(&card),
            Reply::Approve {
                choice: Some(GrantChoice::UntilRunEnds)
            }
        );
    }

    #[test]
    fn a_request_is_named_by_the_agent_s_own_name_server_and_tool() {
        let card = sample::card();
        assert_eq!(summary(&card), "claude-code 2.1.3 · deployer · deploy");
    }

    #[test]
    fn a_tray_submenu_shows_the_first_arguments_and_the_risk_lines() {
        let mut card = sample::card();
        card.arguments[0].value = serde_json::Value::String("x".repeat(200));
        let lines = menu_lines(&card);
        assert_eq!(
            lines[0].chars().count(),
            "branch = ".len() + MENU_VALUE_CHARS
        );
        assert!(lines[0].ends_with('…'), "{}", lines[0]);
        assert_eq!(lines[1], "options = {}");
        assert_eq!(lines[2], "target = \"preview\" (default)");
        assert_eq!(lines[3], "and 1 more arguments");
        assert_eq!(lines.len(), 4 + card.risks.len());
        assert!(lines[4].starts_with("⚠ The code changed"), "{lines:?}");
        card.risks.clear();
        assert_eq!(
            menu_lines(&card).last().map(String::as_str),
            Some("Nothing changed since your approval")
        );
    }

    #[test]
    fn the_window_opens_for_a_new_request_and_closes_with_the_queue() {
        assert_eq!(window_move(1, 1), WindowMove::Open);
        assert_eq!(window_move(3, 1), WindowMove::Open);
        assert_eq!(window_move(2, 0), WindowMove::Keep);
        assert_eq!(window_move(0, 0), WindowMove::Close);
    }

    #[test]
    fn each_request_is_announced_once() {
        let first = Approval::of(sample::card());
        let mut second = first.clone();
        second.card.id = ApprovalId::new(sample::ASKED_AT, 2);
        let announced = Announced::default();

        assert_eq!(announced.update(std::slice::from_ref(&first)).len(), 1);
        let both = [first.clone(), second.clone()];
        let fresh = announced.update(&both);
        assert_eq!(fresh.len(), 1);
        assert_eq!(fresh[0].card.id, second.card.id);
        assert!(announced.update(&both).is_empty());
        assert!(announced.update(&[]).is_empty());
    }
}
