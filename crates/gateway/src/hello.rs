//! The first exchange on the engine's socket: the shim names the server it wants and,
//! when it reconnects, the agent's `initialize` params so the session resumes.

use postern_domain::Injection;
use postern_domain::decision::{EveryUseSetting, Reply, SessionMode, SettingsUpdate};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the socket protocol.
pub const SOCKET_PROTOCOL: u32 = 1;

/// The shim's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Always [`SOCKET_PROTOCOL`].
    pub postern: u32,
    /// The server label the agent launched `postern mcp <label>` for.
    pub server: String,
    /// The agent's `initialize` params when the agent already initialized (a
    /// reconnect): the engine then treats the session as initialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Value>,
    /// The shim will hand the agent's stdin and stdout to the engine once accepted
    /// (`crate::handoff`), rather than carry each line itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handoff: bool,
}

/// The engine's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Welcome {
    /// The session is open; MCP messages follow, one per line, both ways.
    Accepted {
        /// The session's id, for logs.
        session: u64,
        /// The engine resumes a session whose stdio is handed over with `resume` (an engine
        /// from before it did not say so, and would not: a shim then carries the lines itself).
        #[serde(default)]
        resumes: bool,
    },
    /// The engine will not serve this connection.
    Refused {
        /// Why, for the agent's user.
        error: String,
    },
}

/// What the engine tells a shim that handed it the agent's stdio, one per line after the
/// [`Welcome`]: whether it took them, then what the shim needs should the engine go away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "handoff", rename_all = "lowercase")]
pub enum HandoffNote {
    /// The engine reads the agent's stdin and writes its stdout from now on.
    Taken,
    /// The engine did not take them; the shim carries the lines itself.
    Refused {
        /// Why, for the shim's log.
        error: String,
    },
    /// The agent's `initialize` params: the shim resumes with them if the engine goes away.
    Initialize {
        /// The params, as the agent sent them.
        params: Value,
    },
    /// The agent closed its stdin: the session is over and the shim may exit.
    Ended,
    /// The engine stopped while the agent was not reading, perhaps in the middle of a line:
    /// the shim ends that line before writing its own.
    Cut,
    /// The engine stopped holding the start of the agent's next line, read from its stdin: the
    /// shim reads these bytes first.
    Unread {
        /// The bytes, as read.
        bytes: Vec<u8>,
    },
}

/// A management request on the engine's socket (the CLI's `server status`, `server
/// restart`), instead of a [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlRequest {
    /// Always [`SOCKET_PROTOCOL`].
    pub postern: u32,
    /// What to do.
    pub control: ControlCommand,
    /// The person's proof of presence, for a command that widens authority or destroys
    /// configuration or evidence ([`ControlCommand::need`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<WireProof>,
}

/// A proof of presence as the CLI sends it. `Debug` never shows a passphrase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WireProof {
    /// The Postern passphrase the person typed on the controlling terminal
    /// (`{"passphrase": "..."}`).
    Passphrase(SecretText),
    /// Ask the OS to authenticate the person (`"os"`): polkit, for the process that sent the
    /// request. It names no process: the engine takes the sender from the socket's peer
    /// credentials, never from the request.
    Os,
}

/// The authority a management request needs (issue 13): reading and narrowing need no
/// proof; widening authority and destroying configuration or evidence need a person's proof
/// of presence, checked by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// Reads state, or records what is already so.
    Read,
    /// Takes authority away (lock, deny, revoke, per-call approval on).
    Narrow,
    /// Gives authority (approve, unlock, observe mode, a credential, per-call approval off).
    Widen,
    /// Destroys configuration or evidence (a credential's value, a server).
    Destroy,
}

impl Need {
    /// Whether a person's proof of presence is needed.
    pub fn needs_proof(self) -> bool {
        self >= Need::Widen
    }
}

/// What a [`ControlRequest`] asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "camelCase")]
pub enum ControlCommand {
    /// The engine's status (the same value the app shows).
    Status,
    /// Restart every running process of a server.
    Restart {
        /// The server label.
        server: String,
    },
    /// The configuration changed (the CLI wrote it): record the queued changes in the
    /// audit log now rather than at the next start.
    ConfigChanged,
    /// Bring the journals up to date with the audit log (they trail it by a few
    /// milliseconds), before reading them.
    Journals,
    /// Open approval requests (their cards).
    Approvals,
    /// A human's answer to an approval request. Refused from inside an agent's process tree.
    Answer {
        /// The request's id.
        approval: String,
        /// Approve (with a grant end) or deny.
        reply: Reply,
    },
    /// Live grants.
    Grants,
    /// End a grant now.
    Revoke {
        /// The grant's id.
        grant: String,
    },
    /// End every grant of one agent run now.
    RevokeRun {
        /// The agent run.
        run: postern_domain::AgentRun,
    },
    /// Lock the vault.
    Lock,
    /// Unlock the vault. Refused from inside an agent's process tree.
    Unlock,
    /// Read, and optionally change, the settings (fields left out keep their value). A change
    /// that widens needs the person's proof; whether it widens is the engine's to say, against
    /// the settings in force.
    Settings {
        /// The change (none: only read).
        #[serde(flatten)]
        change: SettingsUpdate,
    },
    /// Add a credential (its value goes to the OS keychain). Refused from inside an agent's
    /// process tree.
    CredentialAdd {
        /// The scope name.
        name: String,
        /// How it is injected.
        injection: Injection,
        /// Hosts it may be sent to (header kinds).
        #[serde(default)]
        hosts: Vec<String>,
        /// Every call using it needs a human.
        #[serde(default)]
        every_use: bool,
        /// The value.
        value: SecretText,
    },
    /// Replace a credential's value (a new version). Refused from inside an agent's process
    /// tree.
    CredentialRotate {
        /// The scope name.
        name: String,
        /// The new value.
        value: SecretText,
    },
    /// Remove a credential and its value.
    CredentialRemove {
        /// The scope name.
        name: String,
    },
    /// Bind a credential to a server. Refused from inside an agent's process tree.
    Bind {
        /// The server label.
        server: String,
        /// The credential's scope name.
        credential: String,
    },
    /// Move a server's plain environment variable (as an imported agent configuration had it)
    /// into the keychain: an environment credential bound to the server.
    MoveToKeychain {
        /// The server label.
        server: String,
        /// The variable's name.
        var: String,
    },
    /// Unbind a credential from a server.
    Unbind {
        /// The server label.
        server: String,
        /// The credential's scope name.
        credential: String,
    },
    /// Checks the proof of presence for `what` only a person may do (removing or replacing a
    /// server, which the CLI then does in the store): answered `prove`, else
    /// refused like any request that needs a proof.
    Prove {
        /// What it is about to do, for the refusal: "remove server 'x'".
        what: String,
    },
    /// Sets the Postern passphrase: the first one (no proof; the vault unlocks), or a new
    /// one (the proof carries the current one).
    SetPassphrase {
        /// The new passphrase.
        passphrase: SecretText,
    },
    /// Dismiss the notices of requests the egress broker refused (a person saw them; the
    /// approvals they withdrew stay withdrawn).
    DismissLeaks,
    /// Read every-use settings, or set one (`off` clears it). A change is refused from
    /// inside an agent's process tree.
    EveryUse {
        /// The setting to apply, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        set: Option<EveryUseSetting>,
    },
}

impl ControlCommand {
    /// The act, in words, for refusals, prompts and the audit log ("approve a request").
    pub fn act(&self) -> String {
        match self {
            ControlCommand::Answer { .. } => "approve a request".into(),
            ControlCommand::Unlock => "unlock the vault".into(),
            ControlCommand::Settings { .. } => "widen the settings".into(),
            ControlCommand::EveryUse { .. } => "turn per-call approval off".into(),
            ControlCommand::CredentialAdd { name, .. } => format!("add credential '{name}'"),
            ControlCommand::CredentialRotate { name, .. } => {
                format!("rotate credential '{name}'")
            }
            ControlCommand::CredentialRemove { name } => format!("remove credential '{name}'"),
            ControlCommand::Bind { server, credential } => {
                format!("bind credential '{credential}' to '{server}'")
            }
            ControlCommand::MoveToKeychain { server, var } => {
                format!("move variable {var} of '{server}' into the keychain")
            }
            ControlCommand::SetPassphrase { .. } => "set the Postern passphrase".into(),
            ControlCommand::Prove { what } => what.clone(),
            ControlCommand::Status => "read the status".into(),
            ControlCommand::Restart { server } => format!("restart '{server}'"),
            ControlCommand::ConfigChanged => "record configuration changes".into(),
            ControlCommand::Journals => "bring the journals up to date".into(),
            ControlCommand::Approvals => "list approval requests".into(),
            ControlCommand::Grants => "list grants".into(),
            ControlCommand::Revoke { grant } => format!("revoke grant {grant}"),
            ControlCommand::RevokeRun { run } => {
                format!("revoke every grant of the agent run of pid {}", run.pid)
            }
            ControlCommand::Lock => "lock the vault".into(),
            ControlCommand::DismissLeaks => "dismiss the leak notices".into(),
            ControlCommand::Unbind { server, credential } => {
                format!("unbind credential '{credential}' from '{server}'")
            }
        }
    }

    /// The request's name on the wire (its `command` tag), which the answer's name repeats.
    pub fn name(&self) -> &'static str {
        match self {
            ControlCommand::Status => "status",
            ControlCommand::Restart { .. } => "restart",
            ControlCommand::ConfigChanged => "configChanged",
            ControlCommand::Journals => "journals",
            ControlCommand::Approvals => "approvals",
            ControlCommand::Answer { .. } => "answer",
            ControlCommand::Grants => "grants",
            ControlCommand::Revoke { .. } => "revoke",
            ControlCommand::RevokeRun { .. } => "revokeRun",
            ControlCommand::Lock => "lock",
            ControlCommand::Unlock => "unlock",
            ControlCommand::Settings { .. } => "settings",
            ControlCommand::CredentialAdd { .. } => "credentialAdd",
            ControlCommand::CredentialRotate { .. } => "credentialRotate",
            ControlCommand::CredentialRemove { .. } => "credentialRemove",
            ControlCommand::Bind { .. } => "bind",
            ControlCommand::MoveToKeychain { .. } => "moveToKeychain",
            ControlCommand::Unbind { .. } => "unbind",
            ControlCommand::Prove { .. } => "prove",
            ControlCommand::SetPassphrase { .. } => "setPassphrase",
            ControlCommand::EveryUse { .. } => "everyUse",
            ControlCommand::DismissLeaks => "dismissLeaks",
        }
    }

    /// The authority this request needs, at most. Settings that could widen (observe mode, any
    /// auto-lock time, a plain-click window) and every-use `off` are widening; the rest of
    /// those are narrowing. Whether a settings change does widen is the engine's to say,
    /// against the settings in force: a shorter auto-lock narrows and needs no proof.
    pub fn need(&self) -> Need {
        use postern_domain::decision::EveryUse;
        match self {
            ControlCommand::Status
            | ControlCommand::Approvals
            | ControlCommand::Grants
            | ControlCommand::ConfigChanged
            | ControlCommand::Journals => Need::Read,
            ControlCommand::Restart { .. }
            | ControlCommand::Revoke { .. }
            | ControlCommand::RevokeRun { .. }
            | ControlCommand::Lock
            | ControlCommand::Unbind { .. } => Need::Narrow,
            ControlCommand::Answer { reply, .. } => match reply {
                Reply::Approve { .. } => Need::Widen,
                Reply::Deny => Need::Narrow,
            },
            ControlCommand::Settings { change } => {
                let widens = change.session_mode == Some(SessionMode::Observe)
                    || change.auto_lock_ms.is_some()
                    || change.click_window_ms.is_some_and(|ms| ms > 0);
                if widens {
                    Need::Widen
                } else if *change == SettingsUpdate::default() {
                    Need::Read
                } else {
                    Need::Narrow
                }
            }
            ControlCommand::EveryUse { set } => match set {
                None => Need::Read,
                Some(setting) if setting.level == EveryUse::Off => Need::Widen,
                Some(_) => Need::Narrow,
            },
            ControlCommand::Unlock
            | ControlCommand::CredentialAdd { .. }
            | ControlCommand::CredentialRotate { .. }
            | ControlCommand::Bind { .. }
            | ControlCommand::MoveToKeychain { .. }
            | ControlCommand::SetPassphrase { .. } => Need::Widen,
            // A leak notice is the person's live warning that a server tried to send a
            // credential where it may not go: clearing it destroys evidence (the app's own
            // window clears it with a click, `engine::control`).
            ControlCommand::CredentialRemove { .. }
            | ControlCommand::Prove { .. }
            | ControlCommand::DismissLeaks => Need::Destroy,
        }
    }
}

/// The first line on the engine's socket.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum Opening {
    Session(Hello),
    Control(ControlRequest),
}

/// A secret in a management request: serialized as itself, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretText(pub String);

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretText(<redacted>)")
    }
}

impl Drop for SecretText {
    fn drop(&mut self) {
        // A Secret zeroizes what it holds when dropped.
        drop(postern_vault::Secret::new(std::mem::take(&mut self.0)));
    }
}

#[cfg(test)]
mod tests {
    use postern_domain::decision::{EveryUse, GrantChoice, SettingTarget};

    use super::*;

    /// An engine from before `resumes` welcomes without it: a shim reads that it does not
    /// resume a handed-over session (and carries the lines itself).
    #[test]
    fn a_welcome_without_resumes_does_not_resume() {
        let old: Welcome = serde_json::from_str(r#"{"status":"accepted","session":3}"#).unwrap();
        assert_eq!(
            old,
            Welcome::Accepted {
                session: 3,
                resumes: false
            }
        );
        let now = serde_json::to_value(Welcome::Accepted {
            session: 3,
            resumes: true,
        })
        .unwrap();
        assert_eq!(now["resumes"], true);
    }

    /// The authority every management request needs: read and narrow go without a proof,
    /// widen and destroy need the person's (issue 13).
    #[test]
    fn every_request_states_the_authority_it_needs() {
        let secret = || SecretText("v".into());
        let every_use = |level| ControlCommand::EveryUse {
            set: Some(EveryUseSetting {
                target: SettingTarget::Credential { name: "api".into() },
                level,
            }),
        };
        let settings = |mode, timeout, lock| ControlCommand::Settings {
            change: SettingsUpdate {
                session_mode: mode,
                approval_timeout_ms: timeout,
                auto_lock_ms: lock,
                click_window_ms: None,
            },
        };
        let clicks = |ms| ControlCommand::Settings {
            change: SettingsUpdate {
                click_window_ms: Some(ms),
                ..SettingsUpdate::default()
            },
        };
        let s = || "x".to_owned();
        let table = [
            (ControlCommand::Status, Need::Read),
            (ControlCommand::Approvals, Need::Read),
            (ControlCommand::Grants, Need::Read),
            (ControlCommand::ConfigChanged, Need::Read),
            (ControlCommand::Journals, Need::Read),
            (ControlCommand::EveryUse { set: None }, Need::Read),
            (settings(None, None, None), Need::Read),
            (ControlCommand::Restart { server: s() }, Need::Narrow),
            (ControlCommand::Revoke { grant: s() }, Need::Narrow),
            (
                ControlCommand::RevokeRun {
                    run: postern_domain::AgentRun {
                        pid: 1,
                        start_time: 2,
                    },
                },
                Need::Narrow,
            ),
            (ControlCommand::Lock, Need::Narrow),
            (ControlCommand::DismissLeaks, Need::Destroy),
            (
                ControlCommand::Unbind {
                    server: s(),
                    credential: s(),
                },
                Need::Narrow,
            ),
            (
                ControlCommand::Answer {
                    approval: s(),
                    reply: Reply::Deny,
                },
                Need::Narrow,
            ),
            (every_use(EveryUse::Confirm), Need::Narrow),
            (
                settings(Some(SessionMode::Prompt), None, None),
                Need::Narrow,
            ),
            (settings(None, Some(30_000), None), Need::Narrow),
            (clicks(0), Need::Narrow),
            (
                ControlCommand::Answer {
                    approval: s(),
                    reply: Reply::Approve {
                        choice: Some(GrantChoice::ThisCall),
                    },
                },
                Need::Widen,
            ),
            (ControlCommand::Unlock, Need::Widen),
            (
                settings(Some(SessionMode::Observe), None, None),
                Need::Widen,
            ),
            (settings(None, None, Some(60_000)), Need::Widen),
            (clicks(60_000), Need::Widen),
            (
                ControlCommand::MoveToKeychain {
                    server: s(),
                    var: s(),
                },
                Need::Widen,
            ),
            (every_use(EveryUse::Off), Need::Widen),
            (
                ControlCommand::CredentialAdd {
                    name: s(),
                    injection: Injection::Bearer,
                    hosts: vec![],
                    every_use: false,
                    value: secret(),
                },
                Need::Widen,
            ),
            (
                ControlCommand::CredentialRotate {
                    name: s(),
                    value: secret(),
                },
                Need::Widen,
            ),
            (
                ControlCommand::Bind {
                    server: s(),
                    credential: s(),
                },
                Need::Widen,
            ),
            (
                ControlCommand::SetPassphrase {
                    passphrase: secret(),
                },
                Need::Widen,
            ),
            (
                ControlCommand::CredentialRemove { name: s() },
                Need::Destroy,
            ),
            (ControlCommand::Prove { what: s() }, Need::Destroy),
        ];
        assert!(
            !Need::Narrow.needs_proof() && Need::Widen.needs_proof() && Need::Destroy.needs_proof()
        );
        for (command, need) in table {
            assert_eq!(command.need(), need, "{command:?}");
            assert!(!command.act().is_empty());
            let wire = serde_json::to_value(&command).expect("a request serializes");
            assert_eq!(wire["command"], command.name(), "{command:?}");
            let back: ControlCommand =
                serde_json::from_value(wire).expect("a request reads back as itself");
            assert_eq!(back, command);
        }
    }

    /// The passphrase proof keeps the wire shape it always had; the OS proof is a bare word
    /// that names no process (the engine takes the sender from peer credentials).
    #[test]
    fn a_proof_on_the_wire_is_a_passphrase_or_the_word_os() {
        let passphrase = WireProof::Passphrase(SecretText("p".into()));
        assert_eq!(
            serde_json::to_value(&passphrase).expect("json"),
            serde_json::json!({"passphrase": "p"})
        );
        assert_eq!(
            serde_json::to_value(WireProof::Os).expect("json"),
            serde_json::json!("os")
        );
        let forged: Result<WireProof, _> =
            serde_json::from_value(serde_json::json!({"os": {"pid": 1}}));
        assert!(forged.is_err(), "an OS proof carries no pid");
    }
}
