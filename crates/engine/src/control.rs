//! Every management request, from the CLI over the engine's socket and from the app hosting
//! the engine, in one place: [`Control::request`] takes one [`ControlCommand`] and gives one
//! [`ControlAnswer`] or a [`Refusal`]. Anything that widens authority or destroys configuration
//! ([`ControlCommand::need`]) takes effect only with the person's proof of presence, checked by
//! [`Authority::prove`] (issue 13). Before that, for requests on the socket, a request from
//! inside a connected agent's process tree or from under a shim is refused: a filter for honest
//! mistakes, not a boundary (a process can leave the tree).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use postern_domain::decision::{EveryUse, EveryUseSetting, Reply, SettingTarget};
use postern_domain::{
    AnswerChannel, ApprovalId, CredentialName, CredentialSpec, GrantId, Injection, ServerLabel,
};
use postern_gateway::control::ControlHandler;
use postern_gateway::hello::{ControlCommand, WireProof};
use postern_gateway::{Command, Sessions};
use postern_store::Store;
use postern_vault::Secret;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::answer::{ControlAnswer, ControlOutcome, ControlRefusal};
use crate::authority::{AnswerError, PresenceError, Proof, Proven, SettingsUpdate};
use crate::{AuditLog, Authority, Home, record_config_changes, restart, status};

/// Answers management requests: the CLI's on the socket, the app's in-process
/// ([`crate::Engine::control`]).
#[derive(Clone)]
pub struct Control {
    pub(crate) home: Home,
    pub(crate) store: Arc<Mutex<Store>>,
    pub(crate) sessions: Sessions,
    pub(crate) commands: broadcast::Sender<Command>,
    pub(crate) audit: Arc<AuditLog>,
    pub(crate) authority: Authority,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// Where a management request comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The engine's socket (the CLI on a terminal): the sending process, as the socket's peer
    /// credentials name it. Requests that need a proof are first filtered by its ancestry.
    Socket {
        /// The sender's pid, if the platform told.
        peer: Option<u32>,
    },
    /// The app hosting this engine, through its window or its tray: the person's own surface
    /// (its proof is typed there, or a plain click inside the window the settings open).
    App(AnswerChannel),
}

impl Origin {
    /// The channel an answer from here is journaled with.
    fn channel(self) -> AnswerChannel {
        match self {
            Origin::Socket { .. } => AnswerChannel::Terminal,
            Origin::App(channel) => channel,
        }
    }
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
            .and_then(|proof| self.request(command, proof, Origin::Socket { peer }))
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
    /// Carries out one management request with the person's proof, if any, from `origin`.
    pub fn request(
        &self,
        command: ControlCommand,
        proof: Option<Proof>,
        origin: Origin,
    ) -> Result<ControlAnswer, Refusal> {
        let what = command.act();
        // A malformed request is refused before anyone is asked for a proof.
        check_shape(&command)?;
        if let Origin::Socket { peer } = origin
            && command.need().needs_proof()
        {
            self.human_only(peer, &what)?;
        }
        let presence = self.presence(&command, proof, origin, &what)?;
        self.carry_out(command, presence, origin, &what)
    }

    /// What the person showed for `command`: checked here, before anything is done, for every
    /// request that needs it.
    fn presence(
        &self,
        command: &ControlCommand,
        proof: Option<Proof>,
        origin: Origin,
        what: &str,
    ) -> Result<Presence, Refusal> {
        let authority = &self.authority;
        Ok(match command {
            // The first passphrase needs no proof, a new one the old: the act checks which.
            ControlCommand::SetPassphrase { .. } => Presence::Offered(proof),
            // Whether a settings change widens is decided against the settings in force (a
            // shorter auto-lock narrows); `update_settings` checks it again under its lock.
            ControlCommand::Settings { change } => match &proof {
                Some(proof) => Presence::Proven(authority.prove(Some(proof), what)?),
                None if authority.settings_widen(change) => {
                    return Err(proof_missing(what));
                }
                None => Presence::NotNeeded,
            },
            // An approval also takes a plain click inside the window the settings may open.
            ControlCommand::Answer {
                reply: Reply::Approve { .. },
                ..
            } => Presence::Proven(authority.prove_approval(proof.as_ref())?),
            // The person's own window clears the leak notices with a click; any other process
            // (one of the agent's, the server's that tried the leak) needs the proof.
            ControlCommand::DismissLeaks if matches!(origin, Origin::App(_)) && proof.is_none() => {
                Presence::NotNeeded
            }
            command if command.need().needs_proof() => {
                Presence::Proven(authority.prove(proof.as_ref(), what)?)
            }
            _ => Presence::NotNeeded,
        })
    }

    /// Does what `command` asks, with what [`Control::presence`] found.
    fn carry_out(
        &self,
        command: ControlCommand,
        presence: Presence,
        origin: Origin,
        what: &str,
    ) -> Result<ControlAnswer, Refusal> {
        let authority = &self.authority;
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
            ControlCommand::ConfigChanged => {
                authority.forget_removed_bindings();
                Ok(ControlAnswer::ConfigChanged {
                    recorded: record_config_changes(&self.store, &self.audit),
                })
            }
            ControlCommand::Journals => {
                self.audit.flush();
                Ok(ControlAnswer::Journals)
            }
            ControlCommand::Restart { server } => {
                let label = server_label(&server)?;
                Ok(ControlAnswer::Restart {
                    restarted: restart(&self.sessions, &self.commands, &label),
                })
            }
            ControlCommand::Approvals => Ok(ControlAnswer::Approvals(authority.approvals())),
            ControlCommand::Answer { approval, reply } => {
                let id = approval_id(&approval)?;
                authority.answer(id, reply, presence.proven(), origin.channel())?;
                Ok(ControlAnswer::Answer { approval })
            }
            ControlCommand::Grants => Ok(ControlAnswer::Grants(authority.grants())),
            ControlCommand::Revoke { grant } => {
                let id: GrantId = grant
                    .parse()
                    .map_err(|_| Refusal::Invalid(format!("'{grant}' is not a grant id")))?;
                let changed = authority.revoke(id);
                Ok(ControlAnswer::Revoke { grant, changed })
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
                changed: authority.lock(match origin.channel() {
                    AnswerChannel::Terminal => "locked from the CLI",
                    AnswerChannel::Window => "locked from the app",
                    AnswerChannel::Tray => "locked from the tray",
                }),
            }),
            ControlCommand::Unlock => Ok(ControlAnswer::Unlock {
                changed: authority
                    .unlock(presence.required(what)?)
                    .map_err(|e| Refusal::Failed(e.to_string()))?,
            }),
            ControlCommand::Settings { change } => {
                if change == SettingsUpdate::default() {
                    return Ok(ControlAnswer::Settings(authority.settings()));
                }
                let settings = authority.update_settings(change, presence.proven())?;
                Ok(ControlAnswer::Settings(settings))
            }
            ControlCommand::CredentialAdd {
                name,
                injection,
                hosts,
                every_use,
                value,
            } => {
                let proven = presence.required(what)?;
                let name = credential_name(&name)?;
                let spec = credential_spec(injection, &hosts)?;
                let value = Secret::new(value.0.clone());
                let added = authority.add_credential(&proven, &name, spec, every_use, value)?;
                Ok(ControlAnswer::CredentialAdd(added))
            }
            ControlCommand::CredentialRotate { name, value } => {
                let proven = presence.required(what)?;
                let name = credential_name(&name)?;
                let rotated =
                    authority.rotate_credential(&proven, &name, Secret::new(value.0.clone()))?;
                Ok(ControlAnswer::CredentialRotate(rotated))
            }
            ControlCommand::CredentialRemove { name } => {
                // Its value is deleted from the keychain: nothing brings it back.
                let proven = presence.required(what)?;
                let name = credential_name(&name)?;
                authority.remove_credential(&proven, &name)?;
                Ok(ControlAnswer::CredentialRemove {
                    name: name.to_string(),
                })
            }
            ControlCommand::Bind { server, credential } => {
                let proven = presence.required(what)?;
                let label = server_label(&server)?;
                let name = credential_name(&credential)?;
                let bound = authority.bind(&proven, &label, &name)?;
                Ok(ControlAnswer::Bind { changed: bound })
            }
            ControlCommand::MoveToKeychain { server, var } => {
                let proven = presence.required(what)?;
                let label = server_label(&server)?;
                let name = authority.move_env_to_keychain(&proven, &label, var.trim())?;
                Ok(ControlAnswer::MoveToKeychain {
                    name: name.to_string(),
                })
            }
            ControlCommand::Unbind { server, credential } => {
                let label = server_label(&server)?;
                let name = credential_name(&credential)?;
                let unbound = authority.unbind(&label, &name)?;
                Ok(ControlAnswer::Unbind { changed: unbound })
            }
            ControlCommand::Prove { .. } => Ok(ControlAnswer::Prove),
            ControlCommand::DismissLeaks => Ok(ControlAnswer::DismissLeaks {
                dismissed: authority.dismiss_leaks(),
            }),
            ControlCommand::SetPassphrase { passphrase } => {
                let Presence::Offered(proof) = presence else {
                    return Err(proof_missing(what));
                };
                let passphrase = Secret::new(passphrase.0.clone());
                authority.set_passphrase(&passphrase, proof.as_ref())?;
                Ok(ControlAnswer::SetPassphrase {
                    vault: authority.vault(),
                })
            }
            ControlCommand::EveryUse { set } => {
                let mut warning = None;
                if let Some(setting) = set {
                    warning = unknown_tool_warning(&self.sessions, authority, &setting);
                    authority.set_every_use(setting, presence.proven())?;
                }
                Ok(ControlAnswer::EveryUse {
                    settings: authority.every_use(),
                    warning,
                })
            }
        }
    }

    /// Refuses `what` unless the asking process is outside every connected agent's process
    /// tree and is not under a shim ([`postern_supervisor::agent_among`]).
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
        if let Some(agent) = postern_supervisor::agent_among(&chain, Some(&agents)) {
            tracing::warn!(
                pid,
                agent = agent.pid,
                "refused to {what}: the request came from inside an agent's process tree"
            );
            return Err(Refusal::HumanRequired(inside_agent_tree(what, agent)));
        }
        Ok(())
    }
}

/// The refusal of an act that needs a person when it is asked from inside an agent's process
/// tree (the engine's check, and the CLI's when no engine answers).
pub fn inside_agent_tree(what: &str, agent: &postern_supervisor::Ancestor) -> String {
    let name = agent.args.first().map_or("?", String::as_str);
    format!(
        "refused to {what}: this command runs inside the process tree of an agent ({name}, pid {}); answer from the Postern app or a terminal the agent did not start",
        agent.pid
    )
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

/// What a request's proof came to, before its act.
enum Presence {
    /// The person proved presence for this act.
    Proven(Proven),
    /// The act needs no proof (it reads or narrows), or takes a click from the app's window.
    NotNeeded,
    /// The act checks the proof itself (a passphrase being set: the first needs none).
    Offered(Option<Proof>),
}

impl Presence {
    /// The proof, where the act takes one when given (a settings change, an answer).
    fn proven(&self) -> Option<&Proven> {
        match self {
            Presence::Proven(proven) => Some(proven),
            Presence::NotNeeded | Presence::Offered(_) => None,
        }
    }

    /// The proof an act cannot go without.
    fn required(self, what: &str) -> Result<Proven, Refusal> {
        match self {
            Presence::Proven(proven) => Ok(proven),
            Presence::NotNeeded | Presence::Offered(_) => Err(proof_missing(what)),
        }
    }
}

/// The refusal of an act that needs the person's proof and has none.
fn proof_missing(what: &str) -> Refusal {
    Refusal::Presence(PresenceError::Required { what: what.into() })
}

fn credential_name(name: &str) -> Result<CredentialName, Refusal> {
    name.trim()
        .parse()
        .map_err(|e| Refusal::Invalid(format!("{e}")))
}

/// Hosts as a person types them (blanks around, empty lines) and the injection, checked.
fn credential_spec(injection: Injection, hosts: &[String]) -> Result<CredentialSpec, Refusal> {
    let hosts: Vec<String> = hosts
        .iter()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .collect();
    CredentialSpec::new(injection, &hosts).map_err(|e| Refusal::Invalid(e.to_string()))
}

/// Refuses a request whose names, labels or credential shape do not parse (the same parses
/// the request's act makes).
fn check_shape(command: &ControlCommand) -> Result<(), Refusal> {
    match command {
        ControlCommand::CredentialAdd {
            name,
            injection,
            hosts,
            ..
        } => {
            credential_name(name)?;
            credential_spec(injection.clone(), hosts).map(drop)
        }
        ControlCommand::CredentialRotate { name, .. }
        | ControlCommand::CredentialRemove { name } => credential_name(name).map(drop),
        ControlCommand::Bind { server, credential }
        | ControlCommand::Unbind { server, credential } => {
            server_label(server)?;
            credential_name(credential).map(drop)
        }
        ControlCommand::Restart { server } | ControlCommand::MoveToKeychain { server, .. } => {
            server_label(server).map(drop)
        }
        ControlCommand::Answer { approval, .. } => approval_id(approval).map(drop),
        _ => Ok(()),
    }
}

fn approval_id(approval: &str) -> Result<ApprovalId, Refusal> {
    approval
        .parse()
        .map_err(|_| Refusal::Invalid(format!("'{approval}' is not an approval request id")))
}

fn server_label(label: &str) -> Result<ServerLabel, Refusal> {
    label
        .trim()
        .parse()
        .map_err(|e| Refusal::Invalid(format!("{e}")))
}

/// Why a management request was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The request is malformed: a bad id, name or label.
    #[error("{0}")]
    Invalid(String),
    /// The engine would not do it (nothing to revoke) or could not (a store error).
    #[error("{0}")]
    Failed(String),
    /// A credential operation was refused (a name taken or unknown, a binding the
    /// configuration does not allow, the keychain's error), with its code when it has one.
    #[error(transparent)]
    Credential(crate::authority::CredentialError),
    /// It widens authority and came from inside an agent's process tree (stable code
    /// `human_required`).
    #[error("{0}")]
    HumanRequired(String),
    /// The person's proof of presence was missing or did not hold.
    #[error(transparent)]
    Presence(PresenceError),
    /// The approval request is no longer open (answered, timed out, withdrawn).
    #[error("{0}")]
    NotOpen(String),
    /// The answer does not fit the card.
    #[error("{0}")]
    Unacceptable(String),
    /// The settings change is out of bounds, or widens without a proof.
    #[error("{0}")]
    Settings(String),
}

impl From<Refusal> for ControlRefusal {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::HumanRequired(error) => ControlRefusal {
                error,
                code: Some("human_required".into()),
            },
            Refusal::Presence(error) => ControlRefusal {
                error: error.to_string(),
                code: Some(error.code().into()),
            },
            Refusal::Credential(error) => ControlRefusal {
                error: error.to_string(),
                code: error.code().map(Into::into),
            },
            Refusal::NotOpen(error) => ControlRefusal {
                error,
                code: Some("not_open".into()),
            },
            Refusal::Unacceptable(error) => ControlRefusal {
                error,
                code: Some("answer_not_offered".into()),
            },
            other => ControlRefusal {
                error: other.to_string(),
                code: None,
            },
        }
    }
}

impl From<PresenceError> for Refusal {
    fn from(error: PresenceError) -> Self {
        Self::Presence(error)
    }
}

impl From<AnswerError> for Refusal {
    fn from(error: AnswerError) -> Self {
        match error {
            AnswerError::Presence(e) => Self::Presence(e),
            AnswerError::NotOpen(_) => Self::NotOpen(error.to_string()),
            AnswerError::Unacceptable(e) => Self::Unacceptable(e),
        }
    }
}

impl From<crate::authority::SettingsError> for Refusal {
    fn from(error: crate::authority::SettingsError) -> Self {
        Self::Settings(error.0)
    }
}

impl From<crate::authority::CredentialError> for Refusal {
    fn from(error: crate::authority::CredentialError) -> Self {
        Self::Credential(error)
    }
}

impl From<String> for Refusal {
    fn from(error: String) -> Self {
        Self::Failed(error)
    }
}
