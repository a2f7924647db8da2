//! The first exchange on the engine's socket: the shim names the server it wants and,
//! when it reconnects, the agent's `initialize` params so the session resumes.

use postern_domain::Injection;
use postern_domain::decision::{EveryUseSetting, Reply, SessionMode};
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
}

/// The engine's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Welcome {
    /// The session is open; MCP messages follow, one per line, both ways.
    Accepted {
        /// The session's id, for logs.
        session: u64,
    },
    /// The engine will not serve this connection.
    Refused {
        /// Why, for the agent's user.
        error: String,
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
    /// Lock the vault.
    Lock,
    /// Unlock the vault. Refused from inside an agent's process tree.
    Unlock,
    /// Read, and optionally change, the settings. A change is refused from inside an
    /// agent's process tree.
    Settings {
        /// The new session approval mode.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_mode: Option<SessionMode>,
        /// The new approval timeout (ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval_timeout_ms: Option<u64>,
        /// The new idle time before the vault locks itself (ms; 0: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auto_lock_ms: Option<u64>,
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
    /// Unbind a credential from a server.
    Unbind {
        /// The server label.
        server: String,
        /// The credential's scope name.
        credential: String,
    },
    /// Whether the asking process may do `what` only a human may (removing or replacing a
    /// server, which the CLI then does in the store): answered `{"human": true}`, else
    /// refused with `human_required` like any human-only request.
    HumanCheck {
        /// What it is about to do, for the refusal: "remove server 'x'".
        what: String,
    },
    /// Read every-use settings, or set one (`off` clears it). A change is refused from
    /// inside an agent's process tree.
    EveryUse {
        /// The setting to apply, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        set: Option<EveryUseSetting>,
    },
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
