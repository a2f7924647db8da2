//! The IPC commands the UI calls. Each one delegates to the engine; none holds a rule of
//! its own. Every change is one management request ([`ControlCommand`], the same the CLI
//! sends over the socket) carried out by the engine's [`Control::request`] with the app as
//! its origin; a request that widens authority carries the person's proof of presence (the
//! passphrase typed into this window, or the OS's own authentication), checked there.

use postern_domain::AnswerChannel;
use postern_domain::decision::Reply;
use postern_engine::answer::{ControlAnswer, ControlCommand};
use postern_engine::authority::{PresenceError, Proof};
use postern_engine::{Authority, Control, Home, Origin, Refusal, Settings, SettingsUpdate};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::approvals::{self, Approval};
use std::sync::Arc;

use crate::{Desk, view::EngineView};

/// The engine's status, or why this app has no engine. `invoke("status")` in the UI.
pub fn status(desk: &Desk) -> EngineView {
    desk.shell.view()
}

/// The open approval requests, oldest first (none while no engine runs).
pub fn approvals(desk: &Desk) -> Vec<Approval> {
    desk.shell
        .authority()
        .map(|authority| approvals::list(&authority))
        .unwrap_or_default()
}

/// The request a person chose in the tray, once (`null`: none): the approval window shows it
/// first (with its details open when it was Review…).
pub fn approval_focus(desk: &Desk) -> Option<approvals::Chosen> {
    desk.focus.take()
}

/// Until when (unix ms) a plain Allow in the approval window counts as the person's proof
/// (the plain-click setting, after the passphrase); `null`: every Allow needs the passphrase.
pub fn clicks_until(desk: &Desk) -> Option<u64> {
    desk.shell
        .authority()
        .and_then(|authority| authority.gate_status().clicks_until_ms)
}

/// The OS authentication the engine can ask for (the approval window's "Use system
/// authentication"), or `null`.
pub async fn system_auth() -> Option<String> {
    tokio::task::spawn_blocking(|| postern_engine::os_auth::available().ok().map(str::to_owned))
        .await
        .ok()
        .flatten()
}

/// A human's answer to a request; the waiting call goes on or is refused at once. An
/// approval carries the passphrase (or, within the plain-click window the settings may
/// open after it, nothing); a denial needs none.
pub async fn answer(
    desk: &Arc<Desk>,
    id: String,
    reply: Reply,
    proof: Option<ProofInput>,
) -> Result<(), CommandError> {
    let command = ControlCommand::Answer {
        approval: id,
        reply,
    };
    request(desk, command, proof, AnswerChannel::Window)
        .await
        .map(drop)
}

/// Locks the vault. Returns whether it was unlocked.
pub async fn lock(desk: &Arc<Desk>) -> Result<bool, CommandError> {
    match request(desk, ControlCommand::Lock, None, AnswerChannel::Window).await? {
        ControlAnswer::Lock { changed } => Ok(changed),
        other => Err(unexpected(&other)),
    }
}

/// Unlocks the vault with the passphrase. Returns whether it was locked.
pub async fn unlock(desk: &Arc<Desk>, proof: Option<ProofInput>) -> Result<bool, CommandError> {
    match request(desk, ControlCommand::Unlock, proof, AnswerChannel::Window).await? {
        ControlAnswer::Unlock { changed } => Ok(changed),
        other => Err(unexpected(&other)),
    }
}

/// Sets the first passphrase (no proof; the vault unlocks), or a new one (the proof carries
/// the current one).
pub async fn set_passphrase(
    desk: &Arc<Desk>,
    passphrase: crate::credentials::SecretValue,
    proof: Option<ProofInput>,
) -> Result<(), CommandError> {
    let command = ControlCommand::SetPassphrase {
        passphrase: passphrase.into_text(),
    };
    request(desk, command, proof, AnswerChannel::Window)
        .await
        .map(drop)
}

/// Changes settings; returns them as they now are. A change that widens (observe mode, a
/// longer auto-lock, plain clicks) carries the passphrase.
pub async fn update_settings(
    desk: &Arc<Desk>,
    change: SettingsUpdate,
    proof: Option<ProofInput>,
) -> Result<Settings, CommandError> {
    let command = ControlCommand::Settings { change };
    match request(desk, command, proof, AnswerChannel::Window).await? {
        ControlAnswer::Settings(settings) => Ok(settings),
        other => Err(unexpected(&other)),
    }
}

/// Clears the notices of requests the egress broker refused (the person saw them). Returns how
/// many there were.
pub async fn dismiss_leaks(desk: &Arc<Desk>) -> Result<u32, CommandError> {
    match request(
        desk,
        ControlCommand::DismissLeaks,
        None,
        AnswerChannel::Window,
    )
    .await?
    {
        ControlAnswer::DismissLeaks { dismissed } => {
            Ok(u32::try_from(dismissed).unwrap_or(u32::MAX))
        }
        other => Err(unexpected(&other)),
    }
}

/// Carries out one management request on the running engine, from this app's `channel`,
/// with the proof the window offered. No proof for an approval is a plain click (taken only
/// within the plain-click window the settings may open after a proof).
pub(crate) async fn request(
    desk: &Desk,
    command: ControlCommand,
    proof: Option<ProofInput>,
    channel: AnswerChannel,
) -> Result<ControlAnswer, CommandError> {
    let control = control(desk)?;
    blocking(move || {
        let proof = match proof {
            // System authentication shows the OS's dialog: blocking work.
            Some(input) => input.into_proof().map_err(presence)?,
            None if matches!(
                command,
                ControlCommand::Answer {
                    reply: Reply::Approve { .. },
                    ..
                }
            ) =>
            {
                Some(Proof::Click)
            }
            None => None,
        };
        control
            .request(command, proof, Origin::App(channel))
            .map_err(refused)
    })
    .await
}

/// An answer of another kind than the request's (cannot happen: the engine answers each
/// request with the variant of its name).
pub(crate) fn unexpected(answer: &ControlAnswer) -> CommandError {
    CommandError::new(
        ErrorCode::Failed,
        format!("the engine answered '{}' to another request", answer.name()),
    )
}

/// A refused management request as the window shows it.
pub(crate) fn refused(refusal: Refusal) -> CommandError {
    match refusal {
        Refusal::Presence(err) => presence(err),
        Refusal::Invalid(message) => CommandError::new(ErrorCode::BadRequest, message),
        Refusal::NotOpen(message) => CommandError::new(ErrorCode::NotOpen, message),
        Refusal::Unacceptable(message) => CommandError::new(ErrorCode::Unacceptable, message),
        Refusal::Settings(message) => CommandError::new(ErrorCode::SettingsRefused, message),
        Refusal::Failed(message) | Refusal::HumanRequired(message) => {
            CommandError::new(ErrorCode::Refused, message)
        }
        Refusal::Credential(error) => CommandError::new(ErrorCode::Refused, error.to_string()),
    }
}

/// The person's proof of presence from this window: the passphrase typed into it, or
/// `{ system: true }` for the OS's own authentication (polkit's dialog, Touch ID) of this
/// process, which stands in for the passphrase while the vault is unlocked. The passphrase is
/// never shown by `Debug` and zeroized when dropped.
#[derive(Debug, Deserialize, TS)]
#[ts(rename = "Proof")]
pub struct ProofInput {
    /// The Postern passphrase.
    #[ts(optional, type = "string")]
    passphrase: Option<crate::credentials::SecretValue>,
    /// Ask the OS to authenticate the person instead.
    #[serde(default)]
    #[ts(optional)]
    system: Option<bool>,
}

impl ProofInput {
    /// The proof this input offers (`None`: neither a passphrase nor system authentication).
    fn into_proof(self) -> Result<Option<Proof>, PresenceError> {
        if self.system == Some(true) {
            return Proof::os_for_this_process().map(Some);
        }
        Ok(self
            .passphrase
            .map(|p| Proof::typed_in_app(p.into_secret())))
    }
}

/// A refused proof as the window shows it.
pub(crate) fn presence(err: PresenceError) -> CommandError {
    let code = match &err {
        PresenceError::Required { .. } => ErrorCode::ProofRequired,
        PresenceError::NotSet => ErrorCode::PassphraseNotSet,
        PresenceError::AlreadySet => ErrorCode::PassphraseAlreadySet,
        PresenceError::TooShort => ErrorCode::PassphraseTooShort,
        PresenceError::Wrong { .. } => ErrorCode::PassphraseWrong,
        PresenceError::Backoff { .. } => ErrorCode::ProofBackoff,
        PresenceError::KeyReplaced => ErrorCode::VaultKeyReplaced,
        PresenceError::OsNeedsPassphrase { .. } => ErrorCode::OsAuthNeedsPassphrase,
        PresenceError::OsUnavailable(_) => ErrorCode::OsAuthUnavailable,
        PresenceError::OsNoAgent => ErrorCode::OsAuthNoAgent,
        PresenceError::OsDismissed { .. } => ErrorCode::OsAuthDismissed,
        PresenceError::OsDenied { .. } => ErrorCode::OsAuthDenied,
        _ => ErrorCode::Failed,
    };
    CommandError::new(code, err.to_string())
}

/// Opens the approval window and gives it the focus (a human asked for it), when requests
/// wait.
pub fn show_approvals(desk: &Desk) {
    approvals::review(desk);
}

/// Why a command was not carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CommandError {
    /// What kind of failure, as a stable code.
    pub code: ErrorCode,
    /// The engine's sentence, for people.
    pub message: String,
}

impl CommandError {
    /// A refusal with its code and sentence.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// No engine runs in this app (it is starting, another engine owns the home, ...).
    pub fn no_engine() -> Self {
        Self::new(ErrorCode::NoEngine, "no Postern engine runs in this app")
    }
}

/// The kinds of [`CommandError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No engine runs in this app.
    NoEngine,
    /// The request was answered, timed out or withdrawn meanwhile.
    NotOpen,
    /// The answer does not fit the card.
    Unacceptable,
    /// The request was malformed.
    BadRequest,
    /// The engine refused the settings.
    SettingsRefused,
    /// The engine refused the operation; the message says why (a credential name taken, a
    /// server configured already, a header credential bound to a stdio server, ...).
    Refused,
    /// Reading or writing failed (the database, the keychain); the message says what.
    Failed,
    /// The act needs the person's passphrase, and none was given.
    ProofRequired,
    /// The passphrase is wrong; the message says when the next try is heard.
    PassphraseWrong,
    /// Too many wrong passphrases in a row; the message says how long to wait.
    ProofBackoff,
    /// No passphrase was chosen yet (the first-run step).
    PassphraseNotSet,
    /// A first passphrase was offered where one exists.
    PassphraseAlreadySet,
    /// The new passphrase is too short.
    PassphraseTooShort,
    /// The keychain's vault key was replaced behind Postern's back.
    VaultKeyReplaced,
    /// System authentication where only the passphrase will do (the vault is locked, or the
    /// passphrase is being changed).
    OsAuthNeedsPassphrase,
    /// System authentication is not available here (no polkitd, ...).
    OsAuthUnavailable,
    /// No authentication agent could ask the person.
    OsAuthNoAgent,
    /// The person closed the system's dialog.
    OsAuthDismissed,
    /// The system's authentication failed (a wrong password).
    OsAuthDenied,
}

/// The running engine's management API.
pub(crate) fn control(desk: &Desk) -> Result<Control, CommandError> {
    desk.shell
        .with_engine(|engine| engine.control())
        .ok_or_else(CommandError::no_engine)
}

/// The running engine's gate.
pub(crate) fn authority(desk: &Desk) -> Result<Authority, CommandError> {
    desk.shell.authority().ok_or_else(CommandError::no_engine)
}

/// The running engine's home.
pub(crate) fn running_home(desk: &Desk) -> Result<Home, CommandError> {
    desk.shell.home().ok_or_else(CommandError::no_engine)
}

/// Runs blocking work (the keychain, SQLite) off the async runtime's threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CommandError> + Send + 'static,
) -> Result<T, CommandError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| CommandError::new(ErrorCode::Failed, e.to_string()))?
}

#[cfg(test)]
mod tests {
    use postern_domain::decision::{DenyCode, GrantChoice};
    use postern_engine::Home;
    use postern_engine::HomeError;
    use postern_engine::authority::VaultState;
    use postern_gateway::authorize::Verdict;
    use serde_json::{Value, json};

    use crate::testing::{ask, desk, invoke, running_desk, stop, wait_for};
    use crate::{EngineView, shell};

    #[test]
    fn status_reports_the_running_engine_over_ipc() {
        let (desk, _surface, home) = running_desk();

        let payload = invoke(&desk, "status", json!({})).unwrap();

        assert_eq!(payload["state"], "running", "{payload}");
        let status = &payload["status"];
        assert_eq!(status["home"], home.path().display().to_string());
        assert!(
            status["socket"].as_str().unwrap().ends_with("engine.sock"),
            "{status}"
        );
        assert!(status["servers"].is_array(), "{status}");
        assert!(status["sessions"].is_array(), "{status}");
        assert_eq!(status["gate"]["vault"], "ready", "{status}");
        stop(&desk);
    }

    #[test]
    fn status_says_when_no_home_could_be_chosen() {
        let (desk, _surface) = desk();
        desk.start(Err(HomeError::NoDefault));

        let payload = invoke(&desk, "status", json!({})).unwrap();

        assert_eq!(payload["state"], "unavailable", "{payload}");
        assert_eq!(payload["reason"], "no_home");
        assert_eq!(payload["home"], Value::Null);
        let refused = invoke(&desk, "lock", json!({})).unwrap_err();
        assert_eq!(refused["code"], "no_engine", "{refused}");
    }

    #[test]
    fn a_second_engine_on_the_same_home_is_reported_as_already_running() {
        let home = tempfile::tempdir().unwrap();
        let first = crate::testing::block_on(shell::test_engine(Home::at(home.path())));
        let first = first.expect("the first engine starts");
        let (desk, _surface) = desk();
        desk.start_with(Ok(Home::at(home.path())), shell::test_hosted);
        wait_for(|| !matches!(desk.shell.view(), EngineView::Starting { .. }));

        let payload = invoke(&desk, "status", json!({})).unwrap();

        assert_eq!(payload["state"], "unavailable", "{payload}");
        assert_eq!(payload["reason"], "already_running");
        assert_eq!(payload["home"], home.path().display().to_string());
        assert!(
            payload["message"]
                .as_str()
                .unwrap()
                .contains("already running"),
            "{payload}"
        );
        crate::testing::block_on(first.shutdown());
    }

    #[test]
    fn the_window_answers_a_request_with_the_choice_it_offers() {
        let (desk, _surface, _home) = running_desk();
        let mut verdict = ask(&desk, "now");

        let listed = invoke(&desk, "approvals", json!({})).unwrap();
        let [approval] = listed.as_array().unwrap().as_slice() else {
            panic!("one request: {listed}")
        };
        let id = approval["card"]["id"].as_str().unwrap();
        assert_eq!(approval["card"]["server"], "clock");
        assert_eq!(approval["card"]["tool"]["name"], "now");
        assert_eq!(approval["catalogChanges"], json!([]));

        let wrong = json!({"id": id, "reply": {"reply": "approve", "choice": {"end": "forMinutes", "minutes": 0}}, "proof": {"passphrase": "postern-app-tests"}});
        let refused = invoke(&desk, "answer", wrong).unwrap_err();
        assert_eq!(refused["code"], "unacceptable", "{refused}");

        let reply = serde_json::to_value(postern_domain::decision::Reply::Approve {
            choice: Some(GrantChoice::UntilRunEnds),
        })
        .unwrap();
        let unproven = invoke(&desk, "answer", json!({"id": id, "reply": reply})).unwrap_err();
        assert_eq!(unproven["code"], "proof_required", "{unproven}");
        let guessed = json!({"id": id, "reply": reply, "proof": {"passphrase": "a guess"}});
        let refused = invoke(&desk, "answer", guessed).unwrap_err();
        assert_eq!(refused["code"], "passphrase_wrong", "{refused}");
        assert!(!refused.to_string().contains("a guess"));
        // The guess made the next try wait a second.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        invoke(
            &desk,
            "answer",
            json!({"id": id, "reply": reply, "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap();

        assert!(matches!(verdict.try_recv(), Ok(Verdict::Allow(_))));
        let grants = desk.shell.authority().unwrap().grants();
        assert_eq!(grants.len(), 1, "a grant until the run ends: {grants:?}");
        // The audit log keeps that the person approved in the approval window.
        let granted = crate::testing::audit_event(&desk, "approval_granted");
        assert_eq!(granted["by"], "window", "{granted}");
        let late = invoke(
            &desk,
            "answer",
            json!({"id": id, "reply": {"reply": "deny"}}),
        );
        assert_eq!(late.unwrap_err()["code"], "not_open");
        let bad = invoke(
            &desk,
            "answer",
            json!({"id": "x", "reply": {"reply": "deny"}}),
        );
        assert_eq!(bad.unwrap_err()["code"], "bad_request");
        stop(&desk);
    }

    #[test]
    fn a_plain_click_approves_only_with_the_setting_on_after_the_passphrase() {
        let (desk, _surface, _home) = running_desk();
        let mut verdict = ask(&desk, "now");
        let listed = invoke(&desk, "approvals", json!({})).unwrap();
        let id = listed[0]["card"]["id"].clone();
        let click = json!({"id": id, "reply": {"reply": "approve", "choice": {"end": "thisCall"}}});

        // Off by default: an Allow without the passphrase is refused, the card stays.
        let refused = invoke(&desk, "answer", click.clone()).unwrap_err();
        assert_eq!(refused["code"], "proof_required", "{refused}");
        assert!(verdict.try_recv().is_err(), "still waiting");

        // On (which takes the passphrase, and counts as one): the same plain click approves.
        let on = json!({"change": {"sessionMode": null, "approvalTimeoutMs": null, "autoLockMs": null, "clickWindowMs": 300000}});
        let refused = invoke(&desk, "update_settings", on.clone()).unwrap_err();
        assert_eq!(refused["code"], "proof_required", "{refused}");
        let mut on = on;
        on["proof"] = json!({"passphrase": "postern-app-tests"});
        invoke(&desk, "update_settings", on).unwrap();
        let status = invoke(&desk, "status", json!({})).unwrap();
        assert!(
            status["status"]["gate"]["clicksUntilMs"].as_u64().is_some(),
            "{status}"
        );
        invoke(&desk, "answer", click).unwrap();
        assert!(matches!(verdict.try_recv(), Ok(Verdict::Allow(_))));
        stop(&desk);
    }

    #[test]
    fn a_denial_from_the_window_refuses_the_call() {
        let (desk, _surface, _home) = running_desk();
        let mut verdict = ask(&desk, "now");
        let listed = invoke(&desk, "approvals", json!({})).unwrap();
        let id = listed[0]["card"]["id"].clone();

        invoke(
            &desk,
            "answer",
            json!({"id": id, "reply": {"reply": "deny"}}),
        )
        .unwrap();

        match verdict.try_recv() {
            Ok(Verdict::Deny(denial)) => assert_eq!(denial.code, DenyCode::ApprovalDenied),
            other => panic!("denied: {other:?}"),
        }
        assert_eq!(invoke(&desk, "approvals", json!({})).unwrap(), json!([]));
        stop(&desk);
    }

    /// `postern unlock` over the engine's socket of the home at `home`, with `passphrase`, as
    /// the CLI sends it (or any process of the user): the engine's answer.
    fn unlock_over_the_socket(home: &std::path::Path, passphrase: &str) -> Value {
        use postern_gateway::control::request_with;
        use postern_gateway::hello::{ControlCommand, SecretText, WireProof};
        let proof = WireProof::Passphrase(SecretText(passphrase.into()));
        let socket = Home::at(home).socket_path();
        crate::testing::block_on(request_with(&socket, ControlCommand::Unlock, Some(proof)))
            .expect("the engine answers")
    }

    /// Unlocks from the app's own window with the tests' passphrase.
    fn unlock_in_the_window(desk: &std::sync::Arc<crate::Desk>) {
        let unlock = json!({"proof": {"passphrase": "postern-app-tests"}});
        assert_eq!(invoke(desk, "unlock", unlock).unwrap(), json!(true));
    }

    /// A process of the user guessing the passphrase over the engine's socket (as an agent
    /// can) makes its own next tries wait, not the person's at the app's window.
    #[test]
    fn guesses_over_the_socket_do_not_keep_the_window_waiting() {
        let (desk, _surface, home) = running_desk();
        let authority = desk.shell.authority().unwrap();
        assert_eq!(invoke(&desk, "lock", json!({})).unwrap(), json!(true));
        let over_the_socket = |passphrase: &str| unlock_over_the_socket(home.path(), passphrase);
        let wrong = over_the_socket("a guess");
        assert_eq!(wrong["refused"]["code"], "passphrase_wrong", "{wrong}");
        // Even the right passphrase over the socket waits now...
        let waiting = over_the_socket("postern-app-tests");
        assert_eq!(waiting["refused"]["code"], "proof_backoff", "{waiting}");
        assert_eq!(authority.vault(), VaultState::Locked);
        // ...while the person at the window unlocks at once.
        unlock_in_the_window(&desk);
        assert_eq!(authority.vault(), VaultState::Ready);
        stop(&desk);
    }

    /// A passphrase given over the socket (typed at a terminal, or by a program that captured
    /// it there) is announced in a notification saying what it did; one typed in the app's own
    /// window is not.
    #[test]
    fn a_passphrase_given_over_the_socket_is_announced() {
        let (desk, surface, home) = running_desk();
        let notes = || -> Vec<(String, String)> {
            surface
                .orders()
                .into_iter()
                .filter_map(|o| match o {
                    crate::surface::Order::Notify { title, body } => Some((title, body)),
                    _ => None,
                })
                .filter(|(title, _)| title.contains("given at a terminal"))
                .collect()
        };
        assert_eq!(invoke(&desk, "lock", json!({})).unwrap(), json!(true));
        unlock_in_the_window(&desk);
        assert!(notes().is_empty(), "the window's own: {:?}", notes());
        assert_eq!(invoke(&desk, "lock", json!({})).unwrap(), json!(true));
        let unlocked = unlock_over_the_socket(home.path(), "postern-app-tests");
        assert!(unlocked.get("refused").is_none(), "{unlocked}");
        wait_for(|| !notes().is_empty());
        let said = notes();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].1.starts_with("It was used to unlock the vault.")
                && !said[0].1.contains("postern-app-tests"),
            "{said:?}"
        );
        stop(&desk);
    }

    #[test]
    fn lock_unlock_and_settings_go_to_the_engine() {
        let (desk, _surface, _home) = running_desk();
        let authority = desk.shell.authority().unwrap();

        assert_eq!(invoke(&desk, "lock", json!({})).unwrap(), json!(true));
        assert_eq!(authority.vault(), VaultState::Locked);
        assert_eq!(invoke(&desk, "lock", json!({})).unwrap(), json!(false));
        let refused = invoke(&desk, "unlock", json!({})).unwrap_err();
        assert_eq!(refused["code"], "proof_required", "{refused}");
        assert_eq!(authority.vault(), VaultState::Locked);
        assert_eq!(
            invoke(
                &desk,
                "unlock",
                json!({"proof": {"passphrase": "postern-app-tests"}})
            )
            .unwrap(),
            json!(true)
        );
        assert_eq!(authority.vault(), VaultState::Ready);

        let change = json!({"change": {"sessionMode": "observe", "approvalTimeoutMs": 30000, "autoLockMs": null}, "proof": {"passphrase": "postern-app-tests"}});
        let settings = invoke(&desk, "update_settings", change).unwrap();
        assert_eq!(
            settings,
            json!({"sessionMode": "observe", "approvalTimeoutMs": 30000, "autoLockMs": 28800000, "clickWindowMs": 0})
        );
        assert_eq!(authority.settings().approval_timeout_ms, 30_000);
        let too_short =
            json!({"change": {"sessionMode": null, "approvalTimeoutMs": 10, "autoLockMs": null}});
        let refused = invoke(&desk, "update_settings", too_short).unwrap_err();
        assert_eq!(refused["code"], "settings_refused");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("between 1 second and 1 day"),
            "{refused}"
        );
        stop(&desk);
    }
}
