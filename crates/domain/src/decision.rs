//! The gate's decision for one `tools/call`: a pure function over values (issue 5, "the
//! decision ladder is a pure function in the domain crate"; docs/refresh-contract.md §4).
//!
//! [`decide`] walks a fixed ladder and stops at the first rung that decides:
//!
//! 1. **Vault and audit state.** A quarantined audit log refuses with `audit_quarantined`;
//!    a vault that is not ready (locked or unlocking) refuses with `vault_locked`. Nothing
//!    else is looked at first (issue 5 item 7).
//! 2. **Identity.** An agent process the engine could not identify is refused with
//!    `session_unidentifiable` while session approval is on ([`SessionMode::Prompt`]). In
//!    observe mode it may go on, but it can never hold a grant or answer a per-call card,
//!    so rung 5 refuses it when a per-call setting applies.
//! 3. **Epoch staleness of grants.** When this run holds a live grant for this server and
//!    this call, but for an older epoch, and the session has not been shown a catalog from
//!    the current epoch (the call was prepared against the old code) and no grant for the
//!    current epoch covers it, the call is refused with `authorization_stale` carrying both
//!    epochs ([`authorization_stale`]). This happens before anything is forwarded or any
//!    credential injected. Once the agent refreshed its catalog from the new epoch, an old
//!    grant is simply no authority, and the call goes on to ask a human again.
//! 4. **Catalog staleness.** A call to a tool whose definition changed since the revision
//!    this session was shown is refused with `catalog_stale` (refresh-contract §3); a call
//!    to a tool in neither revision with `unknown_tool`, without asking anyone.
//! 5. **Every-use settings.** Per-call approval set on the tool, the server or a
//!    credential the call would use applies even to an approved session; the strictest
//!    applicable setting wins ([`strictest`]). Only a this-call-only grant for this very
//!    call satisfies it; otherwise a human is asked about this call (and the session, if
//!    it is not admitted yet: one card admits both).
//! 6. **Session approval and grants.** In observe mode the session is admitted without a
//!    prompt and the call is allowed (under a grant when one covers it). In prompt mode an
//!    approved session with a covering grant for the current epoch is allowed.
//! 7. **Otherwise ask** a human: for the session, the call, or both, offering the grant
//!    ends a reviewer may choose.
//!
//! A human's answer to an [`Ask`] is settled by [`Ask::settle`] (`approval_denied`,
//! `approval_timeout`, `approval_expired`), and an approval becomes a grant through
//! [`Ask::grant`]; the engine then runs the ladder again.
//!
//! This file holds the ladder, what it looks at and what it decides. The refusals are in
//! `denial`, the question put to a human and how an answer settles it in `approval`, and
//! the card a reviewer sees in `card`; their items are re-exported here.

mod approval;
mod card;
mod denial;
mod risk;

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ServerLabel;
use crate::catalog::ToolDrift;
use crate::grant::{Caller, Grant, GrantEnd, GrantId, Request};

pub use approval::{Ask, AskFor, CardState, GrantChoice, Reply, Settlement};
pub use card::{
    ApprovalCard, Argument, ArgumentSource, CardInputs, CatalogSince, EpochView, IdentitySince,
    ToolView, UntrustedHints, agent_name, arguments_with_defaults,
};
pub use denial::{Denial, DenyCode, authorization_stale};
pub use risk::{Risk, RiskLine, Severity, argument_name};

/// How long a human has to answer an approval request by default (`approval_timeout`).
pub const APPROVAL_TIMEOUT_MS: u64 = 120_000;

/// The "for N minutes" ends a card offers.
pub const OFFERED_MINUTES: [u32; 2] = [15, 60];

/// The vault's (and the audit log's) state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VaultState {
    /// Locked: secrets are not in memory.
    Locked,
    /// A human is unlocking it.
    Unlocking,
    /// Unlocked and verified.
    Ready,
    /// The audit log failed verification: nothing runs until a human acts.
    Quarantined,
}

/// The session approval setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionMode {
    /// A new agent run needs a human decision (the default).
    #[default]
    Prompt,
    /// A new agent run is admitted and journaled without a prompt.
    Observe,
}

// The app's settings form and the CLI's `postern settings` send it as it is (`SettingsChange`
// in the UI's bindings); the engine checks the bounds and whether it widens.
/// A change to the settings; fields left `null` keep their value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
#[ts(rename = "SettingsChange")]
pub struct SettingsUpdate {
    /// `prompt` (a human admits each new agent run) or `observe`.
    #[ts(type = "\"prompt\" | \"observe\" | null")]
    pub session_mode: Option<SessionMode>,
    /// How long a human has to answer an approval request (ms, at least 1000).
    #[ts(type = "number | null")]
    pub approval_timeout_ms: Option<u64>,
    /// Lock the vault after this long without a call or an answer (ms; 0: never).
    #[ts(type = "number | null")]
    pub auto_lock_ms: Option<u64>,
    /// Plain clicks approve for this long after the passphrase (ms; 0: never).
    #[ts(type = "number | null")]
    pub click_window_ms: Option<u64>,
}

/// Whether a human admitted this agent run for this server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionStatus {
    /// Admitted.
    Approved,
    /// Not (yet) admitted.
    NotApproved,
}

/// A per-call ("every use") approval level. Ordered: the greater is the stricter.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum EveryUse {
    /// No per-call approval: session approval and grants apply.
    #[default]
    Off,
    /// A human approves every call; standing grants do not count.
    Confirm,
}

/// What an every-use setting is set on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum SettingTarget {
    /// One tool of one server.
    Tool {
        /// The server.
        server: ServerLabel,
        /// The tool.
        tool: String,
    },
    /// Every tool of a server.
    Server {
        /// The server.
        server: ServerLabel,
    },
    /// Every call that would use a credential scope.
    Credential {
        /// The credential scope's name.
        name: String,
    },
}

impl fmt::Display for SettingTarget {
    /// As a person reads it: `tool deploy of inventory`, `every tool of inventory`,
    /// `every call using credential github`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tool { server, tool } => write!(f, "tool {tool} of {server}"),
            Self::Server { server } => write!(f, "every tool of {server}"),
            Self::Credential { name } => write!(f, "every call using credential {name}"),
        }
    }
}

/// One every-use setting.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EveryUseSetting {
    /// Where it is set.
    pub target: SettingTarget,
    /// The level.
    pub level: EveryUse,
}

/// Everything the ladder looks at. Time is passed in.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The vault and audit state.
    pub vault: VaultState,
    /// The session approval setting.
    pub mode: SessionMode,
    /// Whether this agent run is admitted for this server.
    pub session: SessionStatus,
    /// Every-use settings (all of them; [`strictest`] picks those that apply).
    pub every_use: &'a [EveryUseSetting],
    /// The grants on record (any run, server, epoch: the ladder matches them).
    pub grants: &'a [Grant],
    /// The call.
    pub request: &'a Request,
    /// Now (unix ms).
    pub now: u64,
}

/// What the gate does with a call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "decision",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Decision {
    /// Forward the call.
    Allow {
        /// On what authority.
        authority: Authority,
    },
    /// Refuse it with a tool error.
    Deny(Denial),
    /// Hold it and ask a human.
    AskHuman(Ask),
}

/// Why a call is allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "grant", rename_all = "camelCase")]
pub enum Authority {
    /// A grant covers it (a this-call-only grant is used up by it).
    Grant(GrantId),
    /// Observe mode admitted it without a grant; it is journaled.
    Observed,
    /// A request other than a tool call (`resources/read`, `prompts/get`, ...) from an agent
    /// run a human admitted for this server: admission is all it needs.
    Admitted,
}

/// The decision ladder (see the module docs for the order and the reasons).
pub fn decide(inputs: &Inputs<'_>) -> Decision {
    let Inputs {
        vault,
        mode,
        session,
        every_use,
        grants,
        request,
        now,
    } = *inputs;

    // 1. Vault and audit state, before anything else is looked at.
    match vault {
        VaultState::Quarantined => return Decision::Deny(Denial::audit_quarantined()),
        VaultState::Locked | VaultState::Unlocking => {
            return Decision::Deny(Denial::vault_locked());
        }
        VaultState::Ready => {}
    }

    // 2. Identity.
    let run = match (&request.caller, mode) {
        (Caller::Identified { run }, _) => Some(*run),
        (Caller::Unidentifiable { reason }, SessionMode::Prompt) => {
            return Decision::Deny(Denial::session_unidentifiable(reason));
        }
        (Caller::Unidentifiable { .. }, SessionMode::Observe) => None,
    };

    // 3. Epoch staleness of grants: before catalog staleness, because a call prepared
    //    against old code must learn that its authority is gone, whatever its schema did.
    let covering = covering_grants(grants, request, now);
    let refreshed = request
        .catalog
        .presented
        .is_some_and(|p| p.epoch == request.epoch);
    if run.is_some() && covering.is_empty() && !refreshed {
        let stale = grants
            .iter()
            .filter(|g| g.covers_but_for_epoch(request, now))
            .max_by_key(|g| (g.issued_at, g.id));
        if let Some(stale) = stale {
            return Decision::Deny(Denial::authorization_stale(
                stale.execution_epoch,
                request.epoch,
            ));
        }
    }

    // 4. Catalog staleness.
    if let Some(presented) = request.catalog.presented
        && request.catalog.drift.is_stale()
    {
        return Decision::Deny(Denial::catalog_stale(
            &request.tool,
            presented.revision,
            request.catalog.current,
        ));
    }

    //    A tool the server does not offer is refused without asking anyone.
    if request.catalog.drift == ToolDrift::Unknown {
        return Decision::Deny(Denial::unknown_tool(&request.tool, request.catalog.current));
    }

    // 5. Every-use settings.
    let (level, sources) = strictest(every_use, request);
    let admitted = match mode {
        SessionMode::Observe => true,
        SessionMode::Prompt => session == SessionStatus::Approved,
    };
    if level == EveryUse::Confirm {
        let Some(_) = run else {
            return Decision::Deny(Denial::session_unidentifiable(
                "an unidentified process cannot be approved per call",
            ));
        };
        let this_call = covering
            .iter()
            .find(|g| matches!(g.end, GrantEnd::ThisCallOnly { call } if call == request.call));
        return match (this_call, admitted) {
            (Some(g), true) => allow(g),
            (Some(_), false) => ask(AskFor::Session, Vec::new(), Vec::new()),
            (None, true) => ask(AskFor::Call, sources, vec![GrantChoice::ThisCall]),
            (None, false) => ask(AskFor::SessionAndCall, sources, vec![GrantChoice::ThisCall]),
        };
    }

    // 6. Session approval and grants.
    let best = covering.first().copied();
    match (mode, best, admitted) {
        (SessionMode::Observe, Some(g), _) => allow(g),
        (SessionMode::Observe, None, _) => Decision::Allow {
            authority: Authority::Observed,
        },
        (SessionMode::Prompt, Some(g), true) => allow(g),
        // 7. Otherwise ask.
        (SessionMode::Prompt, Some(_), false) => ask(AskFor::Session, Vec::new(), Vec::new()),
        (SessionMode::Prompt, None, true) => ask(AskFor::Call, Vec::new(), all_choices()),
        (SessionMode::Prompt, None, false) => {
            ask(AskFor::SessionAndCall, Vec::new(), all_choices())
        }
    }
}

/// The gate's decision for a request other than a tool call that reaches a server
/// (`resources/read`, `prompts/get`, `completion/complete`, `tasks/*`, a method a server's
/// configuration passes; docs/refresh-contract.md §10): the ladder's first two rungs, then
/// admission. No grant covers such a request and no human is asked about it: the vault must
/// be ready, the caller identified while session approval is on, and the agent run admitted
/// for the server (observe mode admits every run).
pub fn decide_operation(
    vault: VaultState,
    mode: SessionMode,
    session: SessionStatus,
    caller: &Caller,
    server: &ServerLabel,
    method: &str,
) -> Result<Authority, Denial> {
    match vault {
        VaultState::Quarantined => return Err(Denial::audit_quarantined()),
        VaultState::Locked | VaultState::Unlocking => return Err(Denial::vault_locked()),
        VaultState::Ready => {}
    }
    match (caller, mode, session) {
        (Caller::Unidentifiable { reason }, SessionMode::Prompt, _) => {
            Err(Denial::session_unidentifiable(reason))
        }
        (_, SessionMode::Observe, _) => Ok(Authority::Observed),
        (Caller::Identified { .. }, SessionMode::Prompt, SessionStatus::Approved) => {
            Ok(Authority::Admitted)
        }
        (Caller::Identified { .. }, SessionMode::Prompt, SessionStatus::NotApproved) => {
            Err(Denial::session_not_admitted(server, method))
        }
    }
}

/// The per-call approval settings (any level but off) that cover `method`, a request other
/// than a tool call, to `server` from a launch holding `credentials`: those set on the server
/// or on one of those credentials (a setting on one tool covers that tool only). A person is
/// asked about tool calls only, so such a request is refused while any applies
/// ([`Denial::every_use_tools_only`]). None covers a request that only follows or stops what
/// was decided before: a task's status, result or cancellation (the task came from a call a
/// person was asked about), an unsubscription, a log level.
pub fn every_use_on_operation(
    settings: &[EveryUseSetting],
    server: &ServerLabel,
    method: &str,
    credentials: &[String],
) -> Vec<SettingTarget> {
    let follows = matches!(
        method,
        "tasks/get"
            | "tasks/result"
            | "tasks/cancel"
            | "resources/unsubscribe"
            | "logging/setLevel"
    );
    if follows {
        return Vec::new();
    }
    let mut set: Vec<SettingTarget> = settings
        .iter()
        .filter(|s| s.level != EveryUse::Off)
        .filter(|s| match &s.target {
            SettingTarget::Tool { .. } => false,
            SettingTarget::Server { server: on } => on == server,
            SettingTarget::Credential { name } => credentials.contains(name),
        })
        .map(|s| s.target.clone())
        .collect();
    set.sort();
    set.dedup();
    set
}

/// The strictest every-use level among the settings that apply to `request` (set on its
/// tool, its server, or a credential scope it would use), and where each setting at that
/// level is set (sorted). No applicable setting: [`EveryUse::Off`] and no sources.
pub fn strictest(
    settings: &[EveryUseSetting],
    request: &Request,
) -> (EveryUse, Vec<SettingTarget>) {
    let applicable: Vec<&EveryUseSetting> = settings
        .iter()
        .filter(|s| applies(&s.target, request))
        .collect();
    let level = applicable.iter().map(|s| s.level).max().unwrap_or_default();
    if level == EveryUse::Off {
        return (level, Vec::new());
    }
    let sources: BTreeSet<SettingTarget> = applicable
        .into_iter()
        .filter(|s| s.level == level)
        .map(|s| s.target.clone())
        .collect();
    (level, sources.into_iter().collect())
}

/// The grants that cover `request` now, narrowest first: a this-call-only grant for this
/// call, then "for N minutes" grants by end, then until-the-run-ends; ties by id.
fn covering_grants<'g>(grants: &'g [Grant], request: &Request, now: u64) -> Vec<&'g Grant> {
    let mut covering: Vec<&Grant> = grants
        .iter()
        .filter(|g| g.covers(request, now).is_covered())
        .collect();
    covering.sort_by_key(|g| {
        let rank = match g.end {
            GrantEnd::ThisCallOnly { .. } => (0, 0),
            GrantEnd::Until { unix_ms } => (1, unix_ms),
            GrantEnd::UntilRunEnds => (2, 0),
        };
        (rank, g.id)
    });
    covering
}

fn applies(target: &SettingTarget, request: &Request) -> bool {
    match target {
        SettingTarget::Tool { server, tool } => *server == request.server && *tool == request.tool,
        SettingTarget::Server { server } => *server == request.server,
        SettingTarget::Credential { name } => request.credentials.contains(name),
    }
}

fn allow(grant: &Grant) -> Decision {
    Decision::Allow {
        authority: Authority::Grant(grant.id),
    }
}

fn ask(what: AskFor, every_use: Vec<SettingTarget>, choices: Vec<GrantChoice>) -> Decision {
    Decision::AskHuman(Ask {
        what,
        every_use,
        choices,
    })
}

/// What a session's agent knows of the catalog it calls, for the ladder: the catalog it was
/// shown and the epoch it was shown under (`shown`), or, once a call of the current epoch was
/// refused as stale (`told` is that epoch), the current catalog (`current`): that refusal told
/// the agent, so at most one call per session and epoch change is refused as stale, whether or
/// not the client ever re-lists (refresh-contract §4, issue 14). The gateway keeps `told`.
pub fn known_catalog<C>(
    shown: Option<(C, crate::ExecutionEpoch)>,
    current: Option<(C, crate::ExecutionEpoch)>,
    told: Option<crate::ExecutionEpoch>,
) -> Option<(C, crate::ExecutionEpoch)> {
    match (current, told) {
        (Some((catalog, epoch)), Some(told)) if told == epoch => Some((catalog, epoch)),
        _ => shown,
    }
}

/// Every grant end a card about a call offers: this call, each of [`OFFERED_MINUTES`], the run.
pub fn all_choices() -> Vec<GrantChoice> {
    let mut choices = vec![GrantChoice::ThisCall];
    choices.extend(
        OFFERED_MINUTES
            .iter()
            .map(|&minutes| GrantChoice::ForMinutes { minutes }),
    );
    choices.push(GrantChoice::UntilRunEnds);
    choices
}
