//! The management API, typed both ways: every request is one [`ControlCommand`] (with the
//! authority it needs, [`Need`]), every answer one [`ControlAnswer`] variant of the same name,
//! every refusal a [`ControlRefusal`] with its stable code (docs/errors.md). The CLI sends a
//! request over the engine's socket and reads the answer with [`ask`]; the engine builds the
//! answer in `control.rs`.
//!
//! On the wire an answer line is `{"answer": {"<name>": ...}}` or `{"refused": {"error":
//! "...", "code": "..."}}`. A line of another shape, or an answer named for another request,
//! is a [`ControlError::BadAnswer`] that says so.

use std::path::Path;

use postern_domain::decision::{ApprovalCard, EveryUseSetting, VaultState};
use postern_domain::{Credential, Grant};
pub use postern_gateway::control::ControlError;
pub use postern_gateway::hello::{ControlCommand, Need, SecretText, WireProof};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Settings, Status};

/// The answer to a [`ControlCommand`]: the variant of the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ControlAnswer {
    /// The engine's status.
    Status(Box<Status>),
    /// How many processes of the server were told to restart (0: none was running).
    Restart {
        /// Processes told to restart.
        restarted: usize,
    },
    /// How many queued configuration changes went into the audit log.
    ConfigChanged {
        /// Changes recorded.
        recorded: usize,
    },
    /// The journals hold everything the audit log committed before the request.
    Journals,
    /// The open approval requests.
    Approvals(Vec<ApprovalCard>),
    /// The request was answered.
    Answer {
        /// The request's id.
        approval: String,
    },
    /// The live grants.
    Grants(Vec<Grant>),
    /// The grant ended now, or had ended already.
    Revoke {
        /// The grant's id.
        grant: String,
        /// False when it was not live (it ended meanwhile, or never was).
        changed: bool,
    },
    /// The grants of the agent run that ended.
    RevokeRun {
        /// Their ids.
        revoked: Vec<String>,
    },
    /// The vault is locked.
    Lock {
        /// False when it already was.
        changed: bool,
    },
    /// The vault is unlocked.
    Unlock {
        /// False when it was not locked.
        changed: bool,
    },
    /// The settings now in force.
    Settings(Settings),
    /// The credential added.
    CredentialAdd(Credential),
    /// The credential with its new version.
    CredentialRotate(Credential),
    /// The credential and its value are gone.
    CredentialRemove {
        /// Its scope name.
        name: String,
    },
    /// The credential is bound to the server.
    Bind {
        /// False when it already was.
        changed: bool,
    },
    /// The variable is now a credential in the keychain, bound to the server.
    MoveToKeychain {
        /// The credential's scope name.
        name: String,
    },
    /// The credential is no longer bound to the server.
    Unbind {
        /// False when it was not bound.
        changed: bool,
    },
    /// The proof of presence holds.
    Prove,
    /// The passphrase is set.
    SetPassphrase {
        /// The vault's state after it (a first passphrase unlocks it).
        vault: VaultState,
    },
    /// The leak notices were dismissed.
    DismissLeaks {
        /// How many there were.
        dismissed: usize,
    },
    /// The every-use settings now in force.
    EveryUse {
        /// Where per-call approval is on.
        settings: Vec<EveryUseSetting>,
        /// A warning about the setting just made (a tool the engine cannot vouch for).
        warning: Option<String>,
    },
}

impl ControlAnswer {
    /// The name of the request this answers ([`ControlCommand::name`]).
    pub fn name(&self) -> &'static str {
        match self {
            ControlAnswer::Status(_) => "status",
            ControlAnswer::Restart { .. } => "restart",
            ControlAnswer::ConfigChanged { .. } => "configChanged",
            ControlAnswer::Journals => "journals",
            ControlAnswer::Approvals(_) => "approvals",
            ControlAnswer::Answer { .. } => "answer",
            ControlAnswer::Grants(_) => "grants",
            ControlAnswer::Revoke { .. } => "revoke",
            ControlAnswer::RevokeRun { .. } => "revokeRun",
            ControlAnswer::Lock { .. } => "lock",
            ControlAnswer::Unlock { .. } => "unlock",
            ControlAnswer::Settings(_) => "settings",
            ControlAnswer::CredentialAdd(_) => "credentialAdd",
            ControlAnswer::CredentialRotate(_) => "credentialRotate",
            ControlAnswer::CredentialRemove { .. } => "credentialRemove",
            ControlAnswer::Bind { .. } => "bind",
            ControlAnswer::MoveToKeychain { .. } => "moveToKeychain",
            ControlAnswer::Unbind { .. } => "unbind",
            ControlAnswer::Prove => "prove",
            ControlAnswer::SetPassphrase { .. } => "setPassphrase",
            ControlAnswer::EveryUse { .. } => "everyUse",
            ControlAnswer::DismissLeaks { .. } => "dismissLeaks",
        }
    }
}

/// A management request not carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(deny_unknown_fields)]
#[error("{error}")]
pub struct ControlRefusal {
    /// Why, for the person: the CLI prints it.
    pub error: String,
    /// The stable code (docs/errors.md, "Refusals of management requests"): `human_required`,
    /// `proof_required`, `passphrase_wrong`, ...; none for a plain failure (a bad id, nothing
    /// to revoke, a store error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// One answer line on the socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ControlOutcome {
    /// Done.
    Answer(ControlAnswer),
    /// Not done.
    Refused(ControlRefusal),
}

/// Why [`ask`] has no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// No engine, or no usable answer (a malformed line, an answer to another request).
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The engine refused.
    #[error(transparent)]
    Refused(ControlRefusal),
}

/// Sends `command` (with the person's `proof` when it [needs one](Need::needs_proof)) to the
/// engine at `socket` and reads its answer.
pub async fn ask(
    socket: &Path,
    command: ControlCommand,
    proof: Option<WireProof>,
) -> Result<ControlAnswer, AskError> {
    let name = command.name();
    let line = postern_gateway::control::request_with(socket, command, proof).await?;
    read_answer(name, line)
}

/// The answer to the request named `name` in the engine's answer `line`.
pub fn read_answer(name: &str, line: Value) -> Result<ControlAnswer, AskError> {
    let outcome = ControlOutcome::deserialize(&line).map_err(|e| {
        ControlError::BadAnswer(format!(
            "its answer to `{name}` is not one this postern can read ({e}); is the running engine another version of Postern?"
        ))
    })?;
    match outcome {
        ControlOutcome::Refused(refusal) => Err(AskError::Refused(refusal)),
        ControlOutcome::Answer(answer) if answer.name() != name => Err(ControlError::BadAnswer(
            format!("it answered `{}` to the request `{name}`", answer.name()),
        )
        .into()),
        ControlOutcome::Answer(answer) => Ok(answer),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every answer names the request it answers, on the wire too, and reads back as itself.
    #[test]
    fn answers_round_trip_under_their_request_name() {
        let answers = [
            ControlAnswer::Restart { restarted: 2 },
            ControlAnswer::ConfigChanged { recorded: 1 },
            ControlAnswer::Journals,
            ControlAnswer::Approvals(vec![]),
            ControlAnswer::Answer {
                approval: "a".into(),
            },
            ControlAnswer::Grants(vec![]),
            ControlAnswer::Revoke {
                grant: "g".into(),
                changed: true,
            },
            ControlAnswer::RevokeRun {
                revoked: vec!["g".into()],
            },
            ControlAnswer::Lock { changed: true },
            ControlAnswer::Unlock { changed: false },
            ControlAnswer::CredentialRemove { name: "api".into() },
            ControlAnswer::Bind { changed: true },
            ControlAnswer::Unbind { changed: true },
            ControlAnswer::Prove,
            ControlAnswer::SetPassphrase {
                vault: VaultState::Ready,
            },
            ControlAnswer::EveryUse {
                settings: vec![],
                warning: Some("w".into()),
            },
        ];
        for answer in answers {
            let line = serde_json::to_value(ControlOutcome::Answer(answer.clone())).unwrap();
            let tag = match &line["answer"] {
                Value::String(unit) => unit.clone(),
                Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
                other => panic!("{other}"),
            };
            assert_eq!(tag, answer.name());
            assert_eq!(read_answer(answer.name(), line).unwrap(), answer);
        }
    }

    #[test]
    fn a_refusal_keeps_its_code() {
        let line =
            json!({"refused": {"error": "to unlock the vault, ...", "code": "proof_required"}});
        let Err(AskError::Refused(refusal)) = read_answer("unlock", line) else {
            panic!("not a refusal");
        };
        assert_eq!(refusal.code.as_deref(), Some("proof_required"));
        assert_eq!(refusal.to_string(), "to unlock the vault, ...");
    }

    /// An answer of the wrong shape, or to another request, is an error that says so, never a
    /// default value.
    #[test]
    fn an_answer_of_the_wrong_shape_is_a_clear_error() {
        let cases = [
            // The line before answers were typed: the value alone.
            (json!({"locked": true}), "is not one this postern can read"),
            (
                json!({"answer": {"lock": {"changed": "yes"}}}),
                "is not one this postern can read",
            ),
            (json!({"answer": {"lock": {}}}), "missing field `changed`"),
            (json!({"answer": "teleport"}), "unknown variant `teleport`"),
            (
                json!({"refused": {"reason": "?"}}),
                "is not one this postern can read",
            ),
            (json!([]), "is not one this postern can read"),
            (
                json!({"answer": {"unlock": {"changed": true}}}),
                "it answered `unlock` to the request `lock`",
            ),
        ];
        for (line, expected) in cases {
            let err = read_answer("lock", line.clone()).expect_err(&line.to_string());
            let AskError::Control(ControlError::BadAnswer(_)) = &err else {
                panic!("{line}: {err:?}");
            };
            let message = err.to_string();
            assert!(message.contains(expected), "{line}: {message}");
            assert!(
                message.starts_with("the engine gave no usable answer"),
                "{message}"
            );
        }
    }
}
