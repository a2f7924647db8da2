//! Postern's pure model. Values and rules only: no tokio, no files, no sockets.
//!
//! Everything untrusted (CLI arguments, stored configuration) becomes one of these
//! typed values at the edge, so the rest of the engine never re-validates.

mod agent;
pub mod catalog;
pub mod credential;
pub mod decision;
mod digest;
mod epoch;
mod event;
mod grant;
mod label;
mod server;
pub mod text;

pub use agent::AgentIdentity;
pub use credential::{Credential, CredentialName, CredentialSpec, Injection};
pub use digest::{Digest, DigestError};
pub use epoch::{Artifact, ExecutionEpoch, ExecutionRecord, Pinning, RestartPolicy, Sandbox};
pub use event::{AnswerChannel, AuditEvent, CallOutcome, Narrowing, shape};
pub use grant::{
    AgentRun, ApprovalId, CallId, Caller, CatalogView, Coverage, Grant, GrantEnd, GrantId,
    Presented, Request, ToolScope,
};
pub use label::{LabelError, ServerLabel};
pub use server::{ConfigError, Confinement, EnvName, EnvNameError, EnvVar, ServerConfig};

/// The MCP protocol revision Postern speaks to agents and to upstream servers.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// Legacy (handshake-era) revisions an agent may ask for and get echoed back.
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The label under which Postern's own built-in tools will be served.
pub const BUILTIN_LABEL: &str = "postern";
