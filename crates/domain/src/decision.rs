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

mod card;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::{CatalogDigest, ToolDrift};
use crate::grant::{Caller, Grant, GrantEnd, GrantId, Request, ToolScope};
use crate::{ExecutionEpoch, ServerLabel};

pub use card::{
    ApprovalCard, Argument, ArgumentSource, CardInputs, CatalogSince, EpochView, IdentitySince,
    ToolView, UntrustedHints, arguments_with_defaults,
};

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
}

/// A refusal: a stable code, a readable sentence, and the structured content the agent
/// gets (`isError: true`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    /// The stable code.
    pub code: DenyCode,
    /// One readable sentence (the tool error's text block).
    pub message: String,
    /// The structured content; its `error` is the code.
    pub detail: Value,
}

/// The stable refusal codes this module produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenyCode {
    /// The vault is locked or unlocking.
    VaultLocked,
    /// The audit log is quarantined.
    AuditQuarantined,
    /// The audit log cannot be written (no keychain, no database): nothing could be
    /// recorded, so nothing is done.
    AuditUnavailable,
    /// The calling process could not be identified.
    SessionUnidentifiable,
    /// The tool's definition changed since the session listed tools.
    CatalogStale,
    /// The tool is in neither the catalog the session was shown nor the current one.
    UnknownTool,
    /// The grant is for an older execution epoch.
    AuthorizationStale,
    /// A human denied the request.
    ApprovalDenied,
    /// Nobody answered in time.
    ApprovalTimeout,
    /// The card stopped applying while open (vault locked or unlocked, epoch or catalog
    /// changed): a decision on it would be about something else.
    ApprovalExpired,
}

/// A question for a human.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    /// What the human decides.
    pub what: AskFor,
    /// The every-use settings that require a decision on this call (empty: none).
    pub every_use: Vec<SettingTarget>,
    /// The grant ends offered for the call (empty when only the session is asked about).
    pub choices: Vec<GrantChoice>,
}

/// What a card decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AskFor {
    /// Admit this agent run for this server (a grant already covers the call).
    Session,
    /// This call (the session is admitted).
    Call,
    /// Admit the session and allow this call, on one card.
    SessionAndCall,
}

/// How long an approved call's grant lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum GrantChoice {
    /// This call only (`--once`).
    ThisCall,
    /// N minutes (`--minutes N`).
    ForMinutes {
        /// N.
        minutes: u32,
    },
    /// Until the agent run ends (`--run`).
    UntilRunEnds,
}

/// A human's reply to a card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "reply",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Reply {
    /// Approve, with a grant end when the card asks about the call.
    Approve {
        /// The end chosen (`None` for a session-only card).
        choice: Option<GrantChoice>,
    },
    /// Deny.
    Deny,
}

/// Whether an open card still describes the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CardState {
    /// Nothing it shows has changed.
    Open,
    /// A lock or unlock, a new epoch or a new catalog since it was shown.
    Invalidated,
}

/// What an answer (or its absence) comes to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "settled",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Settlement {
    /// Still waiting.
    Pending,
    /// The reply does not answer the card (no end, or one not offered); still waiting.
    Unacceptable,
    /// Approved: admit the session if asked, record a grant if one was chosen, and run
    /// the ladder again.
    Approved {
        /// Admit the session.
        admit_session: bool,
        /// The grant end chosen for the call.
        grant: Option<GrantChoice>,
    },
    /// Refused.
    Refused(Denial),
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

/// The structured content of an `authorization_stale` refusal, exactly as the issue and
/// the article give it.
pub fn authorization_stale(approved: ExecutionEpoch, current: ExecutionEpoch) -> Value {
    json!({
        "error": "authorization_stale",
        "reason": "server execution epoch changed",
        "approvedEpoch": approved.to_string(),
        "currentEpoch": current.to_string(),
        "retry": "refresh tool metadata and request authorization",
    })
}

impl DenyCode {
    /// The code as agents and the UI see it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VaultLocked => "vault_locked",
            Self::AuditQuarantined => "audit_quarantined",
            Self::AuditUnavailable => "audit_unavailable",
            Self::SessionUnidentifiable => "session_unidentifiable",
            Self::CatalogStale => "catalog_stale",
            Self::UnknownTool => "unknown_tool",
            Self::AuthorizationStale => "authorization_stale",
            Self::ApprovalDenied => "approval_denied",
            Self::ApprovalTimeout => "approval_timeout",
            Self::ApprovalExpired => "approval_expired",
        }
    }
}

impl Denial {
    /// `vault_locked`: no detail that could name anything from the vault.
    pub fn vault_locked() -> Self {
        Self::simple(
            DenyCode::VaultLocked,
            "Postern's vault is locked; a human must unlock it (postern unlock or the app) before any tool can be called",
            "unlock Postern, then call again",
        )
    }

    /// `audit_quarantined`.
    pub fn audit_quarantined() -> Self {
        Self::simple(
            DenyCode::AuditQuarantined,
            "Postern's audit log failed verification; every call is refused until a human resolves it",
            "do not retry; ask the human to check Postern",
        )
    }

    /// `audit_unavailable`, with why the log cannot be written.
    pub fn audit_unavailable(reason: &str) -> Self {
        let message = format!(
            "Postern cannot write its audit log ({reason}), so it makes no calls until that is fixed"
        );
        Self {
            code: DenyCode::AuditUnavailable,
            detail: json!({
                "error": "audit_unavailable",
                "reason": reason,
                "retry": "do not retry; ask the human to check Postern",
            }),
            message,
        }
    }

    /// `session_unidentifiable`, with why the process could not be identified.
    pub fn session_unidentifiable(reason: &str) -> Self {
        Self {
            code: DenyCode::SessionUnidentifiable,
            message: format!(
                "Postern could not identify the calling agent process ({reason}), so it cannot ask a human to approve it"
            ),
            detail: json!({
                "error": "session_unidentifiable",
                "reason": reason,
                "retry": "not retried: run the agent so that Postern can identify it",
            }),
        }
    }

    /// `catalog_stale` (refresh-contract §3).
    pub fn catalog_stale(tool: &str, presented: CatalogDigest, current: CatalogDigest) -> Self {
        Self {
            code: DenyCode::CatalogStale,
            message: format!(
                "the definition of tool '{tool}' changed since this session listed tools; refresh tools/list and call again"
            ),
            detail: json!({
                "error": "catalog_stale",
                "tool": tool,
                "presentedRevision": presented.to_string(),
                "currentRevision": current.to_string(),
                "retry": "refresh tools/list",
            }),
        }
    }

    /// `authorization_stale`, detail from [`authorization_stale`].
    pub fn authorization_stale(approved: ExecutionEpoch, current: ExecutionEpoch) -> Self {
        Self {
            code: DenyCode::AuthorizationStale,
            message: format!(
                "the server's execution epoch changed from {approved} to {current} since this call was authorized; refresh tool metadata and request authorization"
            ),
            detail: authorization_stale(approved, current),
        }
    }

    /// `approval_denied`.
    pub fn approval_denied() -> Self {
        Self::simple(
            DenyCode::ApprovalDenied,
            "a human denied this call",
            "do not retry unchanged",
        )
    }

    /// `approval_timeout`.
    pub fn approval_timeout() -> Self {
        Self::simple(
            DenyCode::ApprovalTimeout,
            "nobody approved this call in time",
            "call again when a human can answer",
        )
    }

    /// `approval_expired`.
    pub fn approval_expired() -> Self {
        Self::simple(
            DenyCode::ApprovalExpired,
            "the approval request no longer applied (the vault was locked or unlocked, or the server or its catalog changed) before a human answered",
            "refresh tool metadata and call again",
        )
    }

    /// `unknown_tool`: the server offers no such tool.
    pub fn unknown_tool(tool: &str, current: CatalogDigest) -> Self {
        let message = format!("the server offers no tool named '{tool}'");
        Self {
            code: DenyCode::UnknownTool,
            detail: json!({
                "error": "unknown_tool",
                "tool": tool,
                "currentRevision": current.to_string(),
                "retry": "refresh tools/list",
            }),
            message,
        }
    }

    fn simple(code: DenyCode, message: &str, retry: &str) -> Self {
        Self {
            code,
            message: message.to_owned(),
            detail: json!({"error": code.as_str(), "reason": message, "retry": retry}),
        }
    }
}

impl Ask {
    /// Whether the card admits the session.
    pub fn admits_session(&self) -> bool {
        matches!(self.what, AskFor::Session | AskFor::SessionAndCall)
    }

    /// Whether the card decides the call.
    pub fn decides_call(&self) -> bool {
        matches!(self.what, AskFor::Call | AskFor::SessionAndCall)
    }

    /// What a reply (or none yet) comes to at `now`, for a card shown at `asked_at` with a
    /// timeout of `timeout_ms`. An invalidated card and a late reply are refused, whatever
    /// the reply says.
    pub fn settle(
        &self,
        reply: Option<Reply>,
        asked_at: u64,
        now: u64,
        timeout_ms: u64,
        card: CardState,
    ) -> Settlement {
        if card == CardState::Invalidated {
            return Settlement::Refused(Denial::approval_expired());
        }
        if now >= asked_at.saturating_add(timeout_ms) {
            return Settlement::Refused(Denial::approval_timeout());
        }
        match reply {
            None => Settlement::Pending,
            Some(Reply::Deny) => Settlement::Refused(Denial::approval_denied()),
            Some(Reply::Approve { choice }) => {
                let acceptable = match choice {
                    None => !self.decides_call(),
                    Some(c) => self.decides_call() && self.choices.contains(&c),
                };
                if acceptable {
                    Settlement::Approved {
                        admit_session: self.admits_session(),
                        grant: choice,
                    }
                } else {
                    Settlement::Unacceptable
                }
            }
        }
    }

    /// The grant an approval with `choice` records for `request`: this run, server, epoch,
    /// tool and the credential scopes the call would use. `None` when the choice was not
    /// offered or the caller is unidentified.
    pub fn grant(
        &self,
        choice: GrantChoice,
        id: GrantId,
        request: &Request,
        now: u64,
    ) -> Option<Grant> {
        if !self.decides_call() || !self.choices.contains(&choice) {
            return None;
        }
        let end = match choice {
            GrantChoice::ThisCall => GrantEnd::ThisCallOnly { call: request.call },
            GrantChoice::ForMinutes { minutes } => GrantEnd::Until {
                unix_ms: now.saturating_add(u64::from(minutes) * 60_000),
            },
            GrantChoice::UntilRunEnds => GrantEnd::UntilRunEnds,
        };
        Some(Grant {
            id,
            agent_run: request.run()?,
            server_label: request.server.clone(),
            execution_epoch: request.epoch,
            tool_scope: ToolScope::Tools([request.tool.clone()].into()),
            credential_scope: request.credentials.clone(),
            issued_at: now,
            end,
        })
    }
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
