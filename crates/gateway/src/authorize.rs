//! Where the data path asks whether a `tools/call` may go: the engine plugs in the decision
//! ladder, grants and human approvals; the gateway only needs this seam. A decision may
//! take as long as a human does: the session keeps serving pings and other calls meanwhile.

use std::sync::Arc;

use postern_domain::catalog::Catalog;
use postern_domain::decision::{Authority, Denial};
use postern_domain::{AgentIdentity, Digest, ExecutionRecord, ServerConfig};
use postern_domain::{CallId, Request};
use postern_vault::Secret;
use serde_json::Value;

/// One `tools/call` waiting for the gate's decision: everything the ladder and an approval
/// card need.
#[derive(Debug, Clone)]
pub struct CallToAuthorize {
    /// The session the call came through.
    pub session: u64,
    /// The agent process behind it, as identified at connection (the request's caller says
    /// whether it is still that process).
    pub agent: Option<AgentIdentity>,
    /// The call as the ladder sees it.
    pub request: Request,
    /// The execution record of the epoch that would run it.
    pub record: ExecutionRecord,
    /// That epoch's catalog.
    pub catalog: Arc<Catalog>,
    /// The call's `arguments` as the agent sent them.
    pub arguments: Value,
    /// Credentials bound to the server that this launch was not given (an approval releases
    /// them: the server is relaunched with them).
    pub withheld: Vec<String>,
}

/// What a server launch is given.
#[derive(Debug, Default)]
pub struct Release {
    /// Environment variables holding credential values.
    pub env: Vec<(String, Secret<String>)>,
    /// The credential scopes released.
    pub released: Vec<String>,
    /// The credential scopes bound but not released, and why.
    pub withheld: Vec<String>,
    /// Why they were withheld (one sentence).
    pub reason: Option<String>,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forward it, on this authority.
    Allow(Authority),
    /// Refuse it with this tool error.
    Deny(Denial),
    /// A human released credentials this launch was not given: relaunch the server with
    /// them (a new epoch of the same code) and decide the call again there.
    Relaunch,
}

/// Called once with the decision (never, if the call was withdrawn first).
pub type Decided = Box<dyn FnOnce(Verdict) + Send>;

/// Why an undecided call stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdrawn {
    /// The agent sent `notifications/cancelled` for it.
    Cancelled,
    /// The agent disconnected.
    Disconnected,
    /// The server's epoch ended while it waited: a decision would be about other code.
    EpochEnded,
    /// The server's catalog changed while it waited: the card showed other definitions.
    CatalogChanged,
}

impl Withdrawn {
    /// The reason as the audit log records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "the agent cancelled the call",
            Self::Disconnected => "the agent disconnected",
            Self::EpochEnded => "the server's execution epoch ended while the request was open",
            Self::CatalogChanged => "the server's catalog changed while the request was open",
        }
    }
}

/// Decides tool calls; implemented by the engine.
pub trait Authorizer: Send + Sync + 'static {
    /// Decides `call`, now or once a human answered, and calls `done` with the verdict.
    fn authorize(&self, call: CallToAuthorize, done: Decided);

    /// The call no longer waits: drop its open approval request, if any. `done` is not
    /// called after this.
    fn withdraw(&self, session: u64, call: CallId, why: Withdrawn);

    /// The session ended (its agent may still run other sessions).
    fn session_ended(&self, session: u64, agent: Option<&AgentIdentity>);

    /// The credentials a launch of `config` for this session gets, decided on the identity
    /// the host just captured (blocking: it may read the OS keychain). None by default.
    fn release(
        &self,
        _session: u64,
        _agent: Option<&AgentIdentity>,
        _config: &ServerConfig,
        _identity: &Digest,
    ) -> Release {
        Release::default()
    }
}

/// Lets every call through, journaled as observed (tests of the data path alone).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize(&self, _call: CallToAuthorize, done: Decided) {
        done(Verdict::Allow(Authority::Observed));
    }

    fn withdraw(&self, _session: u64, _call: CallId, _why: Withdrawn) {}

    fn session_ended(&self, _session: u64, _agent: Option<&AgentIdentity>) {}
}
