//! Agent runs and grants: who was approved, for which code, to do what, until when
//! (issue 5 items 1 and 3; docs/refresh-contract.md §4).
//!
//! A [`Grant`] binds exactly the subject of the article's grant: one agent run, one server
//! label, one execution epoch, a tool scope, a credential scope, when it was issued and how
//! it ends. It never outlives its epoch: [`Grant::covers`] refuses any call at another
//! epoch ([`Coverage::StaleEpoch`]), whatever else matches. Storing, listing and revoking
//! grants happen elsewhere; here a grant is a value and matching is a function.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::catalog::CatalogDigest;
use crate::{AgentIdentity, ExecutionEpoch, ServerLabel};

/// One run of an agent process: its pid and the kernel's start time for it. A reused pid
/// has another start time, so it is another run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRun {
    /// The process id.
    pub pid: u32,
    /// The process start time as the platform's process table reports it (Linux: clock
    /// ticks since boot, `/proc/<pid>/stat` field 22; macOS: microseconds since the epoch,
    /// libproc's `pbi_start_tvsec` and `pbi_start_tvusec`). Only ever compared for equality.
    pub start_time: u64,
}

macro_rules! ulid_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(ulid::Ulid);

        impl $name {
            /// An id from a time (unix ms) and 80 random bits, both passed in so that the
            /// caller owns time and randomness.
            pub fn new(unix_ms: u64, random: u128) -> Self {
                Self(ulid::Ulid::from_parts(unix_ms, random))
            }

            /// The time the id was made at (unix ms).
            pub fn unix_ms(&self) -> u64 {
                self.0.timestamp_ms()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, " {}"), self.0)
            }
        }

        impl FromStr for $name {
            type Err = ulid::DecodeError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                ulid::Ulid::from_string(s).map(Self)
            }
        }

        impl TryFrom<String> for $name {
            type Error = ulid::DecodeError;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.to_string()
            }
        }
    };
}

ulid_id!(
    /// A grant's id (a ULID).
    GrantId,
    "grant"
);
ulid_id!(
    /// An approval request's id (a ULID): what `postern approve <id>` names.
    ApprovalId,
    "approval"
);
ulid_id!(
    /// One `tools/call` as the engine received it (a ULID the engine assigns on arrival;
    /// the agent's JSON-RPC id is not unique enough to bind a grant to).
    CallId,
    "call"
);

/// An approval: this agent run may use these tools, through this exact server launch, with
/// these credential scopes, until the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The grant's id.
    pub id: GrantId,
    /// The agent run it was given to.
    pub agent_run: AgentRun,
    /// The server it applies to.
    pub server_label: ServerLabel,
    /// The launch it applies to: never any other.
    pub execution_epoch: ExecutionEpoch,
    /// Which tools.
    pub tool_scope: ToolScope,
    /// Which credential scopes (by name, never values) calls may use.
    pub credential_scope: BTreeSet<String>,
    /// When it was issued (unix ms).
    pub issued_at: u64,
    /// When it ends.
    pub end: GrantEnd,
}

/// The tools a grant covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolScope {
    /// These tools, by name.
    Tools(BTreeSet<String>),
    /// Every tool of this catalog revision (of the grant's epoch). When the catalog
    /// changes, even under the same epoch, the grant no longer covers anything.
    AllToolsOfCatalog(CatalogDigest),
}

/// How a grant ends (besides its epoch ending, which always ends it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum GrantEnd {
    /// Only this one call.
    ThisCallOnly {
        /// The call.
        call: CallId,
    },
    /// Until the agent run ends (the store drops it then; a new run never matches it).
    UntilRunEnds,
    /// Until this time (unix ms, exclusive): "for N minutes".
    Until {
        /// The end.
        unix_ms: u64,
    },
}

/// A call as the gate sees it: everything a grant is matched against, and what the
/// decision ladder needs besides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// This call.
    pub call: CallId,
    /// Who is calling.
    pub caller: Caller,
    /// The server the call is for.
    pub server: ServerLabel,
    /// The server's current epoch: the code that would run the call.
    pub epoch: ExecutionEpoch,
    /// The tool.
    pub tool: String,
    /// The credential scopes the call would use (names).
    pub credentials: BTreeSet<String>,
    /// The catalog as this session saw it and as it is now.
    pub catalog: CatalogView,
}

/// The agent behind a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Caller {
    /// An agent process the engine identified (and re-checked on this call).
    Identified {
        /// Its run.
        run: AgentRun,
    },
    /// The engine could not tell which process is calling.
    Unidentifiable {
        /// Why, for the refusal and the journal.
        reason: String,
    },
}

/// The catalog revision a session was shown and the current one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogView {
    /// The last `tools/list` result forwarded to this session, if any.
    pub presented: Option<Presented>,
    /// The current revision.
    pub current: CatalogDigest,
    /// How the called tool moved from the presented revision to the current one
    /// ([`Catalog::tool_drift`](crate::catalog::Catalog::tool_drift)).
    pub drift: crate::catalog::ToolDrift,
}

/// A catalog revision forwarded to a session, and the epoch it was fetched from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Presented {
    /// The revision.
    pub revision: CatalogDigest,
    /// The epoch of the server process that listed it.
    pub epoch: ExecutionEpoch,
}

/// Whether a grant covers a call, and exactly why not when it does not. Checked in the
/// order of the variants: the first failing condition is reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Coverage {
    /// The grant covers the call.
    Covered,
    /// The grant is another run's (or the caller is unidentified).
    OtherRun {
        /// The grant's run.
        granted: AgentRun,
        /// The caller's run, if known.
        caller: Option<AgentRun>,
    },
    /// The grant is for another server.
    OtherServer {
        /// The grant's server.
        granted: ServerLabel,
        /// The call's server.
        called: ServerLabel,
    },
    /// The grant is for another launch of the server: authorization is stale.
    StaleEpoch {
        /// The epoch approved.
        approved: ExecutionEpoch,
        /// The server's epoch now.
        current: ExecutionEpoch,
    },
    /// The tool is not in the grant's tool list.
    ToolOutsideScope {
        /// The tool called.
        tool: String,
    },
    /// The grant covers all tools of another catalog revision.
    OtherCatalog {
        /// The revision approved.
        granted: CatalogDigest,
        /// The revision now.
        current: CatalogDigest,
    },
    /// The call would use credential scopes the grant does not name.
    CredentialOutsideScope {
        /// The scopes not granted, sorted.
        missing: Vec<String>,
    },
    /// A "for N minutes" grant whose time is up.
    Expired {
        /// When it ended (unix ms).
        ended_at: u64,
    },
    /// A "this call only" grant for another call: used up by that one.
    UsedUp {
        /// The call it was for.
        call: CallId,
    },
}

impl Grant {
    /// Whether this grant covers `request` at `now` (unix ms), and why not.
    pub fn covers(&self, request: &Request, now: u64) -> Coverage {
        let caller = match &request.caller {
            Caller::Identified { run } => Some(*run),
            Caller::Unidentifiable { .. } => None,
        };
        if caller != Some(self.agent_run) {
            return Coverage::OtherRun {
                granted: self.agent_run,
                caller,
            };
        }
        if self.server_label != request.server {
            return Coverage::OtherServer {
                granted: self.server_label.clone(),
                called: request.server.clone(),
            };
        }
        if self.execution_epoch != request.epoch {
            return Coverage::StaleEpoch {
                approved: self.execution_epoch,
                current: request.epoch,
            };
        }
        self.scope_and_time(request, now, request.catalog.current)
    }

    /// Whether this grant would cover `request` if the call were at the grant's own epoch
    /// (its run and server must match): the authority a call prepared before a restart
    /// relies on. A grant over all tools of a catalog counts as covering any tool here.
    pub fn covers_but_for_epoch(&self, request: &Request, now: u64) -> bool {
        match self.covers(request, now) {
            Coverage::Covered => true,
            Coverage::StaleEpoch { .. } => {
                let catalog = match self.tool_scope {
                    ToolScope::AllToolsOfCatalog(digest) => digest,
                    ToolScope::Tools(_) => request.catalog.current,
                };
                self.scope_and_time(request, now, catalog) == Coverage::Covered
            }
            _ => false,
        }
    }

    /// Whether the grant can still cover some call at `now` (not expired; a this-call-only
    /// grant counts as live until the store drops it).
    pub fn is_live(&self, now: u64) -> bool {
        match self.end {
            GrantEnd::Until { unix_ms } => now < unix_ms,
            GrantEnd::ThisCallOnly { .. } | GrantEnd::UntilRunEnds => true,
        }
    }

    fn scope_and_time(&self, request: &Request, now: u64, catalog: CatalogDigest) -> Coverage {
        match &self.tool_scope {
            ToolScope::Tools(tools) if !tools.contains(&request.tool) => {
                return Coverage::ToolOutsideScope {
                    tool: request.tool.clone(),
                };
            }
            ToolScope::AllToolsOfCatalog(granted) if *granted != catalog => {
                return Coverage::OtherCatalog {
                    granted: *granted,
                    current: catalog,
                };
            }
            _ => {}
        }
        let missing: Vec<String> = request
            .credentials
            .difference(&self.credential_scope)
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Coverage::CredentialOutsideScope { missing };
        }
        match self.end {
            GrantEnd::Until { unix_ms } if now >= unix_ms => {
                Coverage::Expired { ended_at: unix_ms }
            }
            GrantEnd::ThisCallOnly { call } if call != request.call => Coverage::UsedUp { call },
            _ => Coverage::Covered,
        }
    }
}

impl Coverage {
    /// Whether the grant covers the call.
    pub fn is_covered(&self) -> bool {
        matches!(self, Self::Covered)
    }
}

impl AgentRun {
    /// The run of an identified agent process.
    pub fn of(agent: &AgentIdentity) -> Self {
        Self {
            pid: agent.pid,
            start_time: agent.start_time,
        }
    }
}

impl Request {
    /// The caller's run, when it was identified.
    pub fn run(&self) -> Option<AgentRun> {
        match &self.caller {
            Caller::Identified { run } => Some(*run),
            Caller::Unidentifiable { .. } => None,
        }
    }
}

impl fmt::Display for AgentRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} (started {})", self.pid, self.start_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Digest;
    use crate::catalog::ToolDrift;

    fn epoch(n: u128) -> ExecutionEpoch {
        ExecutionEpoch::new(1_700_000_000_000, n)
    }

    fn digest(n: u8) -> CatalogDigest {
        Digest::of(&[n]).to_string().parse().expect("digest")
    }

    fn request() -> Request {
        Request {
            call: CallId::new(1_700_000_000_500, 9),
            caller: Caller::Identified {
                run: AgentRun {
                    pid: 100,
                    start_time: 5,
                },
            },
            server: "inventory".parse().expect("label"),
            epoch: epoch(1),
            tool: "inventory_adjust".into(),
            credentials: ["staging".to_owned()].into(),
            catalog: CatalogView {
                presented: None,
                current: digest(1),
                drift: ToolDrift::Unchanged,
            },
        }
    }

    fn grant() -> Grant {
        Grant {
            id: GrantId::new(1_700_000_000_000, 1),
            agent_run: AgentRun {
                pid: 100,
                start_time: 5,
            },
            server_label: "inventory".parse().expect("label"),
            execution_epoch: epoch(1),
            tool_scope: ToolScope::Tools(["inventory_adjust".to_owned()].into()),
            credential_scope: ["staging".to_owned()].into(),
            issued_at: 1_700_000_000_000,
            end: GrantEnd::UntilRunEnds,
        }
    }

    #[test]
    fn each_condition_reports_itself() {
        let r = request();
        assert_eq!(grant().covers(&r, 0), Coverage::Covered);
        let reused_pid = Grant {
            agent_run: AgentRun {
                pid: 100,
                start_time: 6,
            },
            ..grant()
        };
        assert!(matches!(
            reused_pid.covers(&r, 0),
            Coverage::OtherRun { .. }
        ));
        let stale = Grant {
            execution_epoch: epoch(0),
            ..grant()
        };
        assert_eq!(
            stale.covers(&r, 0),
            Coverage::StaleEpoch {
                approved: epoch(0),
                current: epoch(1)
            }
        );
        assert!(stale.covers_but_for_epoch(&r, 0));
        let minutes = Grant {
            end: GrantEnd::Until { unix_ms: 10 },
            ..grant()
        };
        assert_eq!(minutes.covers(&r, 9), Coverage::Covered);
        assert_eq!(minutes.covers(&r, 10), Coverage::Expired { ended_at: 10 });
        let creds = Request {
            credentials: ["prod".to_owned(), "staging".to_owned()].into(),
            ..request()
        };
        assert_eq!(
            grant().covers(&creds, 0),
            Coverage::CredentialOutsideScope {
                missing: vec!["prod".into()]
            }
        );
    }

    #[test]
    fn ids_round_trip_as_ulid_text() {
        let id = ApprovalId::new(1_700_000_000_000, 7);
        assert_eq!(id.to_string().parse::<ApprovalId>().expect("parse"), id);
        assert_eq!(id.unix_ms(), 1_700_000_000_000);
        let json = serde_json::to_string(&id).expect("json");
        assert_eq!(serde_json::from_str::<ApprovalId>(&json).expect("back"), id);
        assert_eq!(format!("{id:?}"), format!("approval {id}"));
    }
}
