//! Refusals: the stable codes the gate answers a call with, and the tool error each one
//! comes to (a readable sentence and the structured content the agent gets).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::CatalogDigest;
use crate::{ExecutionEpoch, ServerLabel};

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
    /// A request other than a tool call (`resources/read`, `prompts/get`, ...) from an agent
    /// run no human admitted for this server yet: admission comes with its first tool call.
    SessionNotAdmitted,
    /// The session already has as many approval requests waiting for a human as it may.
    ApprovalQueueFull,
    /// A request other than a tool call to a server that per-call approval covers (set on the
    /// server, or on a credential its launch holds): a person is asked about tool calls only.
    EveryUseToolsOnly,
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
            Self::SessionNotAdmitted => "session_not_admitted",
            Self::ApprovalQueueFull => "approval_queue_full",
            Self::EveryUseToolsOnly => "every_use_tools_only",
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
                "the definition of tool '{tool}' changed since this session listed tools (the server was rebuilt or changed its tools); Postern did not make the call. Call it again with the new definition: Postern will ask you to approve it"
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
                "the server was rebuilt or restarted (execution epoch {approved} became {current}) since this call was approved, so Postern did not make it. Call again: Postern will ask you to approve the new code (in its window or menu bar, or `postern approvals`)"
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

    /// `session_not_admitted`: a request other than a tool call (`method`) from an agent run
    /// nobody admitted for `server` yet.
    pub fn session_not_admitted(server: &ServerLabel, method: &str) -> Self {
        Self {
            code: DenyCode::SessionNotAdmitted,
            message: format!(
                "this agent run is not approved for server '{server}' yet, so Postern does not pass its {method}; its first tool call asks a human, and once they approve, {method} goes through"
            ),
            detail: json!({
                "error": "session_not_admitted",
                "server": server.as_str(),
                "method": method,
                "retry": "call a tool of this server first; retry once a human approved it",
            }),
        }
    }

    /// `every_use_tools_only`: per-call approval covers `server` (the settings `set`, on it or
    /// on a credential its launch holds), and Postern asks a person about tool calls only, so
    /// `method` is not passed.
    pub fn every_use_tools_only(
        server: &ServerLabel,
        method: &str,
        set: &[super::SettingTarget],
    ) -> Self {
        let set: Vec<String> = set.iter().map(ToString::to_string).collect();
        Self {
            code: DenyCode::EveryUseToolsOnly,
            message: format!(
                "per-call approval is on for {} and Postern asks a person about tool calls only, so it does not pass {method} to server '{server}'",
                set.join(", ")
            ),
            detail: json!({
                "error": "every_use_tools_only",
                "server": server.as_str(),
                "method": method,
                "everyUse": set,
                "retry": "use this server's tools; a person can turn per-call approval off for it (`postern every-use`) to let such requests through",
            }),
        }
    }

    /// `approval_queue_full`: `waiting` approval requests of this session wait for a human.
    pub fn approval_queue_full(waiting: usize) -> Self {
        Self {
            code: DenyCode::ApprovalQueueFull,
            message: format!(
                "{waiting} approval requests of this session already wait for a human; Postern asks about no more until they are answered"
            ),
            detail: json!({
                "error": "approval_queue_full",
                "waiting": waiting,
                "retry": "wait for the human to answer the open requests, then call again",
            }),
        }
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
