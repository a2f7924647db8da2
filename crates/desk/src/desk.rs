//! The desk: the app's engine, and everything the app keeps about it between calls (the
//! request a person chose in the tray, what was announced, what the tray shows), with the
//! [`Surface`] that draws it. One per app, shared (`Arc`) by the windows' calls, the tray's
//! clicks and the task that follows the engine's changes.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::approvals::{Announced, Focus};
use crate::commands::{self, CommandError, ErrorCode};
use crate::parts::{APPROVAL_WINDOW, STATUS_WINDOW};
use crate::surface::{APPROVALS, MAIN, Surface};
use crate::tray::TrayState;
use crate::{Shell, credentials, journal, permissions, servers};

/// The app's engine and its surface.
pub struct Desk {
    pub(crate) shell: Shell,
    pub(crate) focus: Focus,
    pub(crate) announced: Announced,
    pub(crate) tray: TrayState,
    pub(crate) surface: Arc<dyn Surface>,
    pub(crate) runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk")
            .field("shell", &self.shell)
            .finish_non_exhaustive()
    }
}

impl Desk {
    /// A desk with no engine yet ([`Desk::start`] starts one), drawn by `surface`; its tasks
    /// run on `runtime`.
    pub fn new(surface: Arc<dyn Surface>, runtime: tokio::runtime::Handle) -> Arc<Self> {
        Arc::new(Self {
            shell: Shell::default(),
            focus: Focus::default(),
            announced: Announced::default(),
            tray: TrayState::default(),
            surface,
            runtime,
        })
    }

    /// The engine, or why there is none.
    pub fn shell(&self) -> &Shell {
        &self.shell
    }

    /// Carries out the IPC command `command` for the window labelled `window`, with the
    /// arguments the UI passed (an object, keyed by the camelCase names of the command's
    /// parameters). The answer is the command's result as JSON; a refusal is a
    /// [`CommandError`] as JSON. A window may call only the commands its part needs
    /// ([`allowed`]): the approval window never reaches servers, credentials or settings.
    pub async fn call(
        self: &Arc<Self>,
        window: &str,
        command: &str,
        args: Value,
    ) -> Result<Value, Value> {
        if !allowed(window, command) {
            let refusal = CommandError::new(
                ErrorCode::BadRequest,
                format!("the {window} window may not call {command}"),
            );
            return Err(to_json(&refusal));
        }
        let mut args = Args(args);
        self.dispatch(command, &mut args)
            .await
            .map_err(|e| to_json(&e))
    }

    async fn dispatch(
        self: &Arc<Self>,
        command: &str,
        args: &mut Args,
    ) -> Result<Value, CommandError> {
        let desk = self;
        match command {
            "status" => ok(commands::status(desk)),
            "approvals" => ok(commands::approvals(desk)),
            "approval_focus" => ok(commands::approval_focus(desk)),
            "clicks_until" => ok(commands::clicks_until(desk)),
            "system_auth" => ok(commands::system_auth().await),
            "answer" => json(
                commands::answer(
                    desk,
                    args.take("id")?,
                    args.take("reply")?,
                    args.take("proof")?,
                )
                .await,
            ),
            "lock" => json(commands::lock(desk).await),
            "dismiss_leaks" => json(commands::dismiss_leaks(desk).await),
            "unlock" => json(commands::unlock(desk, args.take("proof")?).await),
            "set_passphrase" => json(
                commands::set_passphrase(desk, args.take("passphrase")?, args.take("proof")?).await,
            ),
            "update_settings" => json(
                commands::update_settings(desk, args.take("change")?, args.take("proof")?).await,
            ),
            "show_approvals" => {
                commands::show_approvals(desk);
                Ok(Value::Null)
            }
            "restart" => json(servers::restart(desk, args.take("label")?).await),
            "add_server" => json(servers::add_server(desk, args.take("server")?).await),
            "import_sources" => ok(servers::import_sources(args.take("path")?).await),
            "import_servers" => {
                json(servers::import_servers(desk, args.take("path")?, args.take("names")?).await)
            }
            "rewire_preview" => json(servers::rewire_preview(desk, args.take("path")?).await),
            "rewire" => json(servers::rewire(desk, args.take("path")?, args.take("names")?).await),
            "agent_snippet" => json(servers::agent_snippet(desk, args.take("labels")?)),
            "credentials" => json(credentials::credentials(desk).await),
            "add_credential" => json(
                credentials::add_credential(desk, args.take("credential")?, args.take("proof")?)
                    .await,
            ),
            "rotate_credential" => json(
                credentials::rotate_credential(
                    desk,
                    args.take("name")?,
                    args.take("value")?,
                    args.take("proof")?,
                )
                .await,
            ),
            "remove_credential" => json(
                credentials::remove_credential(desk, args.take("name")?, args.take("proof")?).await,
            ),
            "bind_credential" => json(
                credentials::bind_credential(
                    desk,
                    args.take("server")?,
                    args.take("name")?,
                    args.take("proof")?,
                )
                .await,
            ),
            "move_to_keychain" => json(
                credentials::move_to_keychain(
                    desk,
                    args.take("server")?,
                    args.take("var")?,
                    args.take("proof")?,
                )
                .await,
            ),
            "unbind_credential" => json(
                credentials::unbind_credential(desk, args.take("server")?, args.take("name")?)
                    .await,
            ),
            "timeline" => json(journal::timeline(desk, args.take("query")?).await),
            "activity" => json(journal::activity(desk, args.take("filter")?).await),
            "sessions_journal" => json(journal::sessions_journal(desk, args.take("filter")?).await),
            "audit_entry" => json(journal::audit_entry(desk, args.take("seq")?).await),
            "verify_audit" => json(journal::verify_audit(desk, args.take("openBodies")?).await),
            "permissions" => json(permissions::permissions(desk)),
            "revoke_grant" => json(permissions::revoke_grant(desk, args.take("id")?).await),
            "revoke_run" => json(permissions::revoke_run(desk, args.take("run")?).await),
            "set_every_use" => json(
                permissions::set_every_use(
                    desk,
                    args.take("target")?,
                    args.take("on")?,
                    args.take("proof")?,
                )
                .await,
            ),
            _ => Err(CommandError::new(
                ErrorCode::BadRequest,
                format!("no command {command}"),
            )),
        }
    }

    /// Routes a click on the tray menu's item `id`.
    pub fn menu_click(self: &Arc<Self>, id: &str) {
        crate::tray::on_menu_event(self, id);
    }

    /// Stops the engine, if this app runs one. Safe to call more than once.
    pub async fn shutdown(&self) {
        self.shell.shutdown().await;
    }

    /// Quits the app: the engine stops, then the surface ends.
    pub async fn quit(&self) {
        self.surface.quitting();
        self.shell.shutdown().await;
        self.surface.exit();
    }
}

/// Whether the window labelled `window` may call `command`: the same split as the windows'
/// capabilities in tauri.conf.json (which Tauri enforces before a call leaves the webview).
pub fn allowed(window: &str, command: &str) -> bool {
    match window {
        MAIN => STATUS_WINDOW.contains(&command),
        APPROVALS => APPROVAL_WINDOW.contains(&command),
        _ => false,
    }
}

/// A command's arguments: an object keyed by the camelCase parameter names. A missing key
/// reads as `null` (an absent optional).
struct Args(Value);

impl Args {
    /// Takes the argument `key` out (a passphrase or a credential's value is moved into its
    /// secret type, not copied). A refusal names the argument, and says what was wrong only
    /// for arguments that carry no secret: serde's sentence quotes the value it could not
    /// take.
    fn take<T: DeserializeOwned>(&mut self, key: &str) -> Result<T, CommandError> {
        let value = self.0.get_mut(key).map(Value::take).unwrap_or(Value::Null);
        serde_json::from_value(value).map_err(|err| {
            let message = if SECRET_ARGS.contains(&key) {
                format!("invalid argument {key}")
            } else {
                format!("invalid argument {key}: {err}")
            };
            CommandError::new(ErrorCode::BadRequest, message)
        })
    }
}

/// The arguments that may carry a passphrase or a credential's value.
const SECRET_ARGS: &[&str] = &["proof", "passphrase", "value", "credential"];

pub(crate) fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn ok<T: Serialize>(value: T) -> Result<Value, CommandError> {
    Ok(to_json(&value))
}

fn json<T: Serialize>(result: Result<T, CommandError>) -> Result<Value, CommandError> {
    result.map(|value| to_json(&value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_secret_argument_is_refused_without_its_value() {
        let mut args = Args(serde_json::json!({"proof": "hunter2-passphrase", "label": 7}));
        let err = args
            .take::<Option<commands::ProofInput>>("proof")
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadRequest);
        assert!(!err.message.contains("hunter2"), "{}", err.message);
        let err = args.take::<String>("label").unwrap_err();
        assert!(err.message.contains("expected a string"), "{}", err.message);
    }

    #[test]
    fn each_window_may_call_only_its_own_commands() {
        assert!(allowed(MAIN, "add_server"));
        assert!(!allowed(MAIN, "answer"));
        assert!(allowed(APPROVALS, "answer"));
        assert!(!allowed(APPROVALS, "add_credential"));
        assert!(!allowed("other", "status"));
    }
}
