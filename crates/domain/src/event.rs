//! What the audit log records: every decision and transition the engine makes
//! (docs/refresh-contract.md; the audit-log issue). Events are values; sealing, the hash
//! chain and storage are elsewhere. Secrets never appear here: credentials by scope
//! name, environment by variable name.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use std::collections::BTreeSet;

use crate::catalog::CatalogDigest;
use crate::decision::{
    AskFor, Authority, EveryUseSetting, GrantChoice, SessionMode, SettingTarget,
};
use crate::grant::{AgentRun, ApprovalId, Grant, GrantId};
use crate::{AgentIdentity, CredentialName, ExecutionEpoch, ExecutionRecord, ServerLabel};

/// One audited event. The `type` tag is the event kind stored in the record header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuditEvent {
    /// An agent connected (through its shim).
    SessionStarted {
        session: u64,
        server: ServerLabel,
        /// The agent's self-reported client name (display only).
        client: Option<String>,
        /// The agent process, as the kernel's process table describes it.
        #[serde(default)]
        agent: Option<AgentIdentity>,
    },
    /// An agent session ended.
    SessionEnded {
        session: u64,
        server: ServerLabel,
        reason: String,
    },
    /// A server process was launched: a new epoch and what it runs.
    ServerStarted {
        session: u64,
        record: Box<ExecutionRecord>,
    },
    /// An epoch ended: the process exited, was restarted, or replaced its own worker.
    ServerReplaced {
        session: u64,
        server: ServerLabel,
        old_epoch: ExecutionEpoch,
        /// The next epoch when it is already known (an in-place replacement).
        new_epoch: Option<ExecutionEpoch>,
        reason: String,
    },
    /// Identity artifacts changed on disk under a running epoch.
    ArtifactsChanged {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        changed: Vec<PathBuf>,
        action: String,
    },
    /// The engine fetched a catalog revision.
    CatalogRefreshed {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        revision: CatalogDigest,
        tools: usize,
        /// One line per change from the previous revision.
        changes: Vec<String>,
    },
    /// An agent was shown a catalog revision (a forwarded tools/list answer).
    CatalogPresented {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        revision: CatalogDigest,
    },
    /// A tools/call is about to be forwarded: durable before the server sees it.
    ToolCallIntent {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        /// The JSON-RPC id as the agent sent it.
        call: Value,
        tool: String,
        /// The arguments (sealed; exports redact them to their shape by default).
        arguments: Value,
        /// On what authority it goes: the grant, or observe mode.
        #[serde(default)]
        authority: Option<Authority>,
    },
    /// How a forwarded tools/call ended.
    ToolCallResult {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        call: Value,
        tool: String,
        outcome: CallOutcome,
        duration_ms: u64,
    },
    /// A call was refused before anything was forwarded.
    AuthorizationDenied {
        session: u64,
        server: ServerLabel,
        epoch: Option<ExecutionEpoch>,
        call: Value,
        tool: String,
        /// The stable code (`catalog_stale`, `authorization_stale`, `vault_locked`, ...).
        code: String,
        /// The structured detail the agent was given.
        detail: Value,
    },
    /// An agent run was admitted for a server: by a human, or by observe mode.
    SessionApproved {
        session: u64,
        server: ServerLabel,
        agent_run: AgentRun,
        /// `human` or `observe`.
        by: String,
    },
    /// The gate asked a human: the full subject of the grant it would give.
    ApprovalRequested {
        approval: ApprovalId,
        session: u64,
        server: ServerLabel,
        agent_run: Option<AgentRun>,
        epoch: ExecutionEpoch,
        tool: String,
        credentials: BTreeSet<String>,
        what: AskFor,
        every_use: Vec<SettingTarget>,
        choices: Vec<GrantChoice>,
        /// When it times out (unix ms).
        expires_at: u64,
    },
    /// A human approved: the session admitted, and the grant recorded, if any.
    ApprovalGranted {
        approval: ApprovalId,
        session: u64,
        admitted_session: bool,
        grant: Option<Box<Grant>>,
        /// Where the person answered; `None` in records written before it was kept.
        #[serde(default)]
        by: Option<AnswerChannel>,
    },
    /// A human denied.
    ApprovalDenied {
        approval: ApprovalId,
        session: u64,
        /// Where the person answered; `None` in records written before it was kept.
        #[serde(default)]
        by: Option<AnswerChannel>,
    },
    /// A request ended without a decision: timed out, withdrawn (the agent cancelled or
    /// left), or invalidated (a lock, unlock, or a new epoch while it was open).
    ApprovalExpired {
        approval: ApprovalId,
        session: u64,
        /// The stable code the call got, if it was still waiting.
        code: String,
        reason: String,
    },
    /// Credentials were handed to a server launch (scope names, never values).
    CredentialReleased {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        credentials: Vec<String>,
    },
    /// Credentials bound to a server were not handed to a launch, and why.
    CredentialWithheld {
        session: u64,
        server: ServerLabel,
        epoch: ExecutionEpoch,
        credentials: Vec<String>,
        reason: String,
    },
    /// The egress broker put credential values in a request of a launch, in place of its
    /// placeholders, toward a host they are bound to (names and the host, never a value).
    CredentialSubstituted {
        server: ServerLabel,
        epoch: Option<ExecutionEpoch>,
        credentials: Vec<String>,
        host: String,
    },
    /// A launch sent credential placeholders toward a host they are not bound to (or after
    /// such a request): refused, the launch frozen, the release approvals withdrawn.
    CredentialLeakAttempt {
        server: ServerLabel,
        epoch: Option<ExecutionEpoch>,
        credentials: Vec<String>,
        host: String,
    },
    /// A grant stopped applying before its epoch did: used, revoked, expired with its
    /// run, or dropped by a lock.
    GrantEnded { grant: GrantId, reason: String },
    /// The vault was locked: grants ended, approvals withdrawn, calls refused.
    VaultLocked { reason: String },
    /// A human unlocked the vault.
    VaultUnlocked,
    /// A proof of presence failed (a wrong passphrase): the act was refused, and the next
    /// try waits `retry_after_ms`. Many in a row are someone guessing.
    ProofRefused {
        what: String,
        failures: u32,
        retry_after_ms: u64,
    },
    /// Settings in the store were found wider than the engine last wrote them (edited behind
    /// its back): the stricter values are in force.
    ConfigTampered { what: String },
    /// Configuration changed (a server added, replaced, removed).
    ConfigChanged {
        what: String,
        server: Option<ServerLabel>,
        /// What the change narrowed, when it narrowed authority (which takes no proof, so
        /// it may happen while the vault is locked and its seal cannot be written).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        narrowing: Option<Narrowing>,
    },
    /// An engine opened the log: the first record of each engine run. Session numbers start
    /// again at 1 after it, and sessions of earlier runs still open are over (a crash).
    EngineStarted { version: String, pid: u32 },
    /// The engine stopped cleanly: the last record of its run.
    EngineStopped { reason: String },
}

/// A change that narrows authority. It takes no proof of presence, so a person may make it
/// while the vault is locked, when the engine cannot seal it: the engine then takes it again
/// from the log at the next unlock (every one recorded after the seal it opens), so that a
/// store put back behind the engine's back, and an engine restarted meanwhile, do not undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "narrowed", rename_all = "camelCase")]
pub enum Narrowing {
    /// A credential unbound from a server.
    #[serde(rename_all = "camelCase")]
    Unbound {
        server: ServerLabel,
        credential: CredentialName,
    },
    /// Per-call approval turned on.
    #[serde(rename_all = "camelCase")]
    EveryUseOn { setting: EveryUseSetting },
    /// A credential removed, and its bindings with it (a removal takes a proof; recorded so
    /// that an older seal put back does not vouch for them again).
    #[serde(rename_all = "camelCase")]
    CredentialRemoved { credential: CredentialName },
    /// A server removed, and its bindings and approved launch with it (likewise).
    #[serde(rename_all = "camelCase")]
    ServerRemoved { server: ServerLabel },
    /// The settings after a change that widened none of them: at least this strict from then
    /// on.
    #[serde(rename_all = "camelCase")]
    Settings {
        session_mode: SessionMode,
        auto_lock_ms: u64,
        click_window_ms: u64,
    },
    /// Records are lost from the log (a person accepted it as it is after it was cut, `postern
    /// audit reanchor`; or a seal names a head the log does not continue from): what they
    /// narrowed cannot be read again, so a seal older than this vouches for no binding, no
    /// approved launch and no setting wider than the defaults.
    LostRecords,
}

/// Where a person answered an approval request: what the audit log keeps of who approved,
/// beside the proof of presence every approval needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerChannel {
    /// The app's approval window (also when the tray's Approve… or Review… opened it).
    Window,
    /// The app's tray menu (its Deny; an approval from the tray opens the window).
    Tray,
    /// The `postern` CLI on the person's terminal (`postern approve`, `postern deny`): a
    /// management request on the engine's socket.
    Terminal,
}

impl AnswerChannel {
    /// The stable name stored in the journals (`window`, `tray`, `terminal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Window => "window",
            Self::Tray => "tray",
            Self::Terminal => "terminal",
        }
    }
}

/// How a tools/call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true`.
    ToolError,
    /// A JSON-RPC error.
    Error,
    /// The epoch ended before an answer (refresh-contract §5).
    EpochTransition,
    /// The agent cancelled it.
    Cancelled,
}

impl AuditEvent {
    /// The event kind: the `type` tag, as stored in the record header.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SessionStarted { .. } => "session_started",
            Self::SessionEnded { .. } => "session_ended",
            Self::ServerStarted { .. } => "server_started",
            Self::ServerReplaced { .. } => "server_replaced",
            Self::ArtifactsChanged { .. } => "artifacts_changed",
            Self::CatalogRefreshed { .. } => "catalog_refreshed",
            Self::CatalogPresented { .. } => "catalog_presented",
            Self::ToolCallIntent { .. } => "tool_call_intent",
            Self::ToolCallResult { .. } => "tool_call_result",
            Self::AuthorizationDenied { .. } => "authorization_denied",
            Self::SessionApproved { .. } => "session_approved",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalGranted { .. } => "approval_granted",
            Self::ApprovalDenied { .. } => "approval_denied",
            Self::ApprovalExpired { .. } => "approval_expired",
            Self::CredentialReleased { .. } => "credential_released",
            Self::CredentialWithheld { .. } => "credential_withheld",
            Self::CredentialSubstituted { .. } => "credential_substituted",
            Self::CredentialLeakAttempt { .. } => "credential_leak_attempt",
            Self::GrantEnded { .. } => "grant_ended",
            Self::VaultLocked { .. } => "vault_locked",
            Self::VaultUnlocked => "vault_unlocked",
            Self::ProofRefused { .. } => "proof_refused",
            Self::ConfigTampered { .. } => "config_tampered",
            Self::ConfigChanged { .. } => "config_changed",
            Self::EngineStarted { .. } => "engine_started",
            Self::EngineStopped { .. } => "engine_stopped",
        }
    }
}

/// The shape of a JSON value with every leaf value replaced by its type name: what
/// exports show of arguments unless asked for values.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Null => Value::String("null".into()),
        Value::Bool(_) => Value::String("boolean".into()),
        Value::Number(_) => Value::String("number".into()),
        Value::String(_) => Value::String("string".into()),
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_kind_is_the_serialized_tag() {
        let event = AuditEvent::SessionEnded {
            session: 1,
            server: "time".parse().expect("label"),
            reason: "agent left".into(),
        };
        let json = serde_json::to_value(&event).expect("json");
        assert_eq!(json["type"], event.kind());
        assert_eq!(
            serde_json::from_value::<AuditEvent>(json).expect("back"),
            event
        );
    }

    #[test]
    fn an_answer_says_where_the_person_gave_it_and_older_records_still_read() {
        let approval: ApprovalId = "01JQ7R8SVB0000000000000000".parse().expect("id");
        let event = AuditEvent::ApprovalGranted {
            approval,
            session: 3,
            admitted_session: true,
            grant: None,
            by: Some(AnswerChannel::Terminal),
        };
        let json = serde_json::to_value(&event).expect("json");
        assert_eq!(json["by"], "terminal");
        assert_eq!(
            serde_json::from_value::<AuditEvent>(json).expect("back"),
            event
        );
        // A record from before the channel was kept reads back with it unknown.
        let old =
            json!({"type": "approval_denied", "approval": approval.to_string(), "session": 3});
        assert_eq!(
            serde_json::from_value::<AuditEvent>(old).expect("old record"),
            AuditEvent::ApprovalDenied {
                approval,
                session: 3,
                by: None
            }
        );
    }

    #[test]
    fn shape_keeps_structure_and_drops_values() {
        let args = json!({"branch": "main", "target": "production", "count": 3, "tags": ["a", true], "x": null});
        assert_eq!(
            shape(&args),
            json!({"branch": "string", "target": "string", "count": "number", "tags": ["string", "boolean"], "x": "null"})
        );
    }
}
