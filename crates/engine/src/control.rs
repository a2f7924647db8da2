//! The CLI's management requests on the engine's socket. Anything that widens authority or
//! destroys configuration ([`ControlCommand::need`]) takes effect only with the person's proof
//! of presence, checked by [`Authority::prove`] (issue 13). Before that, as a first filter, a
//! request from inside a connected agent's process tree or from under a shim is refused: a
//! filter for honest mistakes, not a boundary (a process can leave the tree).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use postern_domain::decision::{EveryUse, EveryUseSetting, SettingTarget};
use postern_domain::{
    AnswerChannel, ApprovalId, CredentialName, CredentialSpec, GrantId, ServerLabel,
};
use postern_gateway::control::ControlHandler;
use postern_gateway::hello::{ControlCommand, WireProof};
use postern_gateway::{Command, Sessions};
use postern_store::Store;
use postern_vault::Secret;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::answer::{ControlAnswer, ControlOutcome, ControlRefusal};
use crate::authority::{PresenceError, Proof, SettingsUpdate};
use crate::{AuditLog, Authority, Home, record_config_changes, restart, status};

/// Answers the CLI's management requests on the socket.
pub(crate) struct Control {
    pub home: Home,
    pub store: Arc<Mutex<Store>>,
    pub sessions: Sessions,
    pub commands: broadcast::Sender<Command>,
    pub audit: Arc<AuditLog>,
    pub authority: Authority,
}

impl ControlHandler for Control {
    fn handle(
        &self,
        command: ControlCommand,
        proof: Option<WireProof>,
        peer: Option<u32>,
    ) -> Value {
        // An OS proof is for the process the socket says sent the request, never one the
        // request names.
        let proof = match proof {
            None => Ok(None),
            Some(WireProof::Passphrase(text)) => Ok(Some(Proof::passphrase(text.0.clone()))),
            Some(WireProof::Os) => Proof::os_for_peer(peer).map(Some),
        };
        let outcome = match proof
            .map_err(Refusal::Presence)
            .and_then(|proof| self.answer(command, proof, peer))
        {
            Ok(answer) => ControlOutcome::Answer(answer),
            Err(refusal) => ControlOutcome::Refused(refusal.into()),
        };
        serde_json::to_value(outcome).unwrap_or_else(|e| {
            let refusal = ControlRefusal {
                error: format!("the answer could not be written: {e}"),
                code: None,
            };
            serde_json::to_value(ControlOutcome::Refused(refusal)).unwrap_or_default()
        })
    }
}

impl Control {
    fn answer(
        &self,
        command: ControlCommand,
        proof: Option<Proof>,
        peer: Option<u32>,
    ) -> Result<ControlAnswer, Refusal> {
        let authority = &self.authority;
        let what = command.act();
        if command.need().needs_proof() {
            self.human_only(peer, &what)?;
        }
        if let ControlCommand::SetPassphrase { passphrase } = &command {
            let passphrase = Secret::new(passphrase.0.clone());
            authority.set_passphrase(&passphrase, proof.as_ref())?;
            return Ok(ControlAnswer::SetPassphrase {
                vault: authority.vault(),
            });
        }
        let mut proven = if command.need().needs_proof() {
            Some(authority.prove(proof.as_ref(), &what)?)
        } else {
            None
        };
        match command {
            ControlCommand::Status => status(
                &self.home,
                &self.store,
                &self.sessions,
                &self.audit,
                authority,
            )
            .map(|s| ControlAnswer::Status(Box::new(s)))
            .map_err(|e| Refusal::Failed(e.to_string())),
            ControlCommand::ConfigChanged => Ok(ControlAnswer::ConfigChanged {
                recorded: record_config_changes(&self.store, &self.audit),
            }),
            ControlCommand::Restart { server } => {
                let label: ServerLabel = server.parse().map_err(|e| format!("{e}"))?;
                Ok(ControlAnswer::Restart {
                    restarted: restart(&self.sessions, &self.commands, &label),
                })
            }
            ControlCommand::Approvals => Ok(ControlAnswer::Approvals(authority.approvals())),
            ControlCommand::Answer { approval, reply } => {
                let id: ApprovalId = approval
                    .parse()
                    .map_err(|_| format!("'{approval}' is not an approval id"))?;
                authority
                    .answer(id, reply, proven.as_ref(), AnswerChannel::Terminal)
                    .map_err(|e| e.to_string())?;
                Ok(ControlAnswer::Answer { approval })
            }
            ControlCommand::Grants => Ok(ControlAnswer::Grants(authority.grants())),
            ControlCommand::Revoke { grant } => {
                let id: GrantId = grant
                    .parse()
                    .map_err(|_| format!("'{grant}' is not a grant id"))?;
                if !authority.revoke(id) {
                    return Err(format!("no live grant {grant}").into());
                }
                Ok(ControlAnswer::Revoke { grant })
            }
            ControlCommand::RevokeRun { run } => {
                let revoked: Vec<String> = authority
                    .revoke_run(run)
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                Ok(ControlAnswer::RevokeRun { revoked })
            }
            ControlCommand::Lock => Ok(ControlAnswer::Lock {
                changed: authority.lock("locked from the CLI"),
            }),
            ControlCommand::Unlock => {
                let proven = proven.take().ok_or_else(|| proof_missing(&what))?;
                Ok(ControlAnswer::Unlock {
                    changed: authority.unlock(proven),
                })
            }
            ControlCommand::Settings {
                session_mode,
                approval_timeout_ms,
                auto_lock_ms,
            } => {
                // Plain clicks are the app's (a terminal always asks for the passphrase).
                let update = SettingsUpdate {
                    session_mode,
                    approval_timeout_ms,
                    auto_lock_ms,
                    click_window_ms: None,
                };
                if update == SettingsUpdate::default() {
                    return Ok(ControlAnswer::Settings(authority.settings()));
                }
                let settings = authority
                    .update_settings(update, proven.as_ref())
                    .map_err(|e| e.to_string())?;
                Ok(ControlAnswer::Settings(settings))
            }
            ControlCommand::CredentialAdd {
                name,
                injection,
                hosts,
                every_use,
                value,
            } => {
                let proven = proven.as_ref().ok_or_else(|| proof_missing(&what))?;
                let name = credential_name(&name)?;
                let spec = CredentialSpec::new(injection, &hosts).map_err(|e| e.to_string())?;
                let value = Secret::new(value.0.clone());
                let added = authority
                    .add_credential(proven, &name, spec, every_use, value)
                    .map_err(|e| e.to_string())?;
                Ok(ControlAnswer::CredentialAdd(added))
            }
            ControlCommand::CredentialRotate { name, value } => {
                let proven = proven.as_ref().ok_or_else(|| proof_missing(&what))?;
                let name = credential_name(&name)?;
                let rotated = authority
                    .rotate_credential(proven, &name, Secret::new(value.0.clone()))
                    .map_err(|e| e.to_string())?;
                Ok(ControlAnswer::CredentialRotate(rotated))
            }
            ControlCommand::CredentialRemove { name } => {
                // Its value is deleted from the keychain: nothing brings it back.
                let proven = proven.as_ref().ok_or_else(|| proof_missing(&what))?;
                let name = credential_name(&name)?;
                authority
                    .remove_credential(proven, &name)
                    .map_err(|e| e.to_string())?;
                Ok(ControlAnswer::CredentialRemove {
                    name: name.to_string(),
                })
            }
            ControlCommand::Bind { server, credential } => {
                let proven = proven.as_ref().ok_or_else(|| proof_missing(&what))?;
                let label: ServerLabel = server.parse().map_err(|e| format!("{e}"))?;
                let name = credential_name(&credential)?;
                let bound = authority
                    .bind(proven, &label, &name)
                    .map_err(|e| e.to_string())?;
                Ok(ControlAnswer::Bind { changed: bound })
            }
            ControlCommand::Unbind { server, credential } => {
                let label: ServerLabel = server.parse().map_err(|e| format!("{e}"))?;
                let name = credential_name(&credential)?;
                let unbound = authority.unbind(&label, &name).map_err(|e| e.to_string())?;
                Ok(ControlAnswer::Unbind { changed: unbound })
            }
            ControlCommand::Prove { .. } => Ok(ControlAnswer::Prove),
            ControlCommand::SetPassphrase { .. } => unreachable!("answered above"),
            ControlCommand::EveryUse { set } => {
                let mut warning = None;
                if let Some(setting) = set {
                    warning = unknown_tool_warning(&self.sessions, authority, &setting);
                    authority
                        .set_every_use(setting, proven.as_ref())
                        .map_err(|e| e.to_string())?;
                }
                Ok(ControlAnswer::EveryUse {
                    settings: authority.every_use(),
                    warning,
                })
            }
        }
    }

    /// Refuses `what` unless the asking process is outside every connected agent's process
    /// tree and is not under a shim.
    fn human_only(&self, peer: Option<u32>, what: &str) -> Result<(), Refusal> {
        let Some(pid) = peer else {
            return Err(Refusal::HumanRequired(format!(
                "refused to {what}: the engine cannot tell which process is asking"
            )));
        };
        let agents: HashSet<(u32, u64)> = self
            .sessions
            .snapshot()
            .iter()
            .filter_map(|s| s.agent.as_ref().map(|a| a.run_key()))
            .collect();
        let chain = postern_supervisor::ancestry(pid);
        if chain.is_empty() {
            return Err(Refusal::HumanRequired(format!(
                "refused to {what}: the asking process (pid {pid}) cannot be identified"
            )));
        }
        for process in &chain {
            if agents.contains(&(process.pid, process.start_time)) || process.is_shim() {
                let name = process.args.first().map_or("?", String::as_str);
                tracing::warn!(
                    pid,
                    agent = process.pid,
                    "refused to {what}: the request came from inside an agent's process tree"
                );
                return Err(Refusal::HumanRequired(format!(
                    "refused to {what}: this command runs inside the process tree of a connected agent ({name}, pid {}); answer from the Postern app or a terminal the agent did not start",
                    process.pid
                )));
            }
        }
        Ok(())
    }
}

/// A warning for per-call approval turned on for a tool the engine cannot vouch for: the
/// server did not offer it when last seen, or the engine has not seen the server's tools.
/// The setting is made anyway: a later catalog may add the tool.
pub(crate) fn unknown_tool_warning(
    sessions: &Sessions,
    authority: &Authority,
    setting: &EveryUseSetting,
) -> Option<String> {
    match (&setting.target, setting.level) {
        (SettingTarget::Tool { server, tool }, EveryUse::Confirm) => {
            unknown_tool(sessions, authority, server, tool)
        }
        _ => None,
    }
}

fn unknown_tool(
    sessions: &Sessions,
    authority: &Authority,
    server: &ServerLabel,
    tool: &str,
) -> Option<String> {
    let newest = sessions
        .snapshot()
        .into_iter()
        .filter(|s| s.server == *server)
        .filter_map(|s| Some((s.record.as_ref().map(|r| r.epoch), s.catalog.clone()?)))
        .max_by_key(|(epoch, _)| *epoch)
        .map(|(_, catalog)| catalog);
    let Some(catalog) = newest.or_else(|| authority.last_approved_catalog(server)) else {
        return Some(format!(
            "Postern has not seen the tools of '{server}' since the engine started, so it cannot check that '{tool}' is one of them; per-call approval is on for it as typed"
        ));
    };
    if catalog.tool(tool).is_some() {
        return None;
    }
    let offered: Vec<&str> = catalog.tools_by_name().map(|t| t.name()).collect();
    Some(format!(
        "'{server}' did not offer a tool named '{tool}' when Postern last saw its tools ({}); per-call approval is on for it anyway, in case a later version adds it",
        if offered.is_empty() {
            "it offered none".to_owned()
        } else {
            format!("it offered: {}", offered.join(", "))
        }
    ))
}

/// The refusal when a request that needs a proof reaches its act without one (cannot happen:
/// `need` says which requests are proven first).
fn proof_missing(what: &str) -> Refusal {
    Refusal::Presence(PresenceError::Required { what: what.into() })
}

fn credential_name(name: &str) -> Result<CredentialName, Refusal> {
    name.parse().map_err(|e| Refusal::Failed(format!("{e}")))
}

/// Why a management request was not carried out.
enum Refusal {
    /// It failed (a bad id, nothing to revoke, a store error).
    Failed(String),
    /// It widens authority and came from inside an agent's process tree (stable code
    /// `human_required`).
    HumanRequired(String),
    /// The person's proof of presence was missing or did not hold.
    Presence(PresenceError),
}

impl From<Refusal> for ControlRefusal {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Failed(error) => ControlRefusal { error, code: None },
            Refusal::HumanRequired(error) => ControlRefusal {
                error,
                code: Some("human_required".into()),
            },
            Refusal::Presence(error) => ControlRefusal {
                error: error.to_string(),
                code: Some(error.code().into()),
            },
        }
    }
}

impl From<PresenceError> for Refusal {
    fn from(error: PresenceError) -> Self {
        Self::Presence(error)
    }
}

impl From<String> for Refusal {
    fn from(error: String) -> Self {
        Self::Failed(error)
    }
}
