//! Where the data path asks whether a `tools/call` may go: the engine plugs in the decision
//! ladder, grants and human approvals; the gateway only needs this seam. A decision may
//! take as long as a human does: the session keeps serving pings and other calls meanwhile.

use std::collections::BTreeSet;
use std::sync::Arc;

use postern_domain::catalog::Catalog;
use postern_domain::decision::{Authority, Denial};
use postern_domain::{AgentIdentity, Credential, Digest, ExecutionRecord, ServerConfig};
use postern_domain::{CallId, Caller, Request, ServerLabel};
use postern_vault::Secret;
use serde_json::Value;
use url::{Host, Url};

/// The `_meta` key of a `tools/call` to the built-in server that carries the headers to
/// inject. The gateway removes any the agent sent and adds its own; the builtin takes it out
/// before anything else reads the call.
pub const INJECT_META: &str = "postern/inject";

/// One `tools/call` waiting for the gate's decision: everything the ladder and an approval
/// card need.
#[derive(Debug, Clone)]
pub struct CallToAuthorize {
    /// The session the call came through.
    pub session: u64,
    /// The agent process behind it, as identified at connection (the request's caller says
    /// whether it is still that process).
    pub agent: Option<AgentIdentity>,
    /// The client's name and version from its `initialize` (self-reported, for display).
    pub client: Option<String>,
    /// The call as the ladder sees it.
    pub request: Request,
    /// The execution record of the epoch that would run it (shared with the session's
    /// launch: a call does not copy it).
    pub record: Arc<ExecutionRecord>,
    /// That epoch's catalog.
    pub catalog: Arc<Catalog>,
    /// The call's `arguments` as the agent sent them.
    pub arguments: Value,
    /// Credentials bound to the server that this launch was not given (an approval releases
    /// them: the server is relaunched with them).
    pub withheld: Vec<String>,
}

/// A request other than a tool call that would reach a server (`resources/read`,
/// `prompts/get`, a method the server's configuration passes, ...), or a request a server
/// sends the agent (`sampling/createMessage`, `elicitation/create`, `roots/list`): decided
/// at once, never by a human (`domain::decision::decide_operation`).
#[derive(Debug, Clone)]
pub struct OperationToAuthorize {
    /// The session it came through.
    pub session: u64,
    /// Its server.
    pub server: ServerLabel,
    /// Who is asking: the agent run (for a server's request, the run it would reach).
    pub caller: Caller,
    /// The method.
    pub method: String,
    /// Which way it goes.
    pub direction: Direction,
    /// The credentials the server's running launch holds (per-call approval set on one of
    /// them covers the request).
    pub credentials: Vec<String>,
}

/// Which way a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the agent to its server: the vault, the caller and admission decide.
    ToServer,
    /// From the server to the agent: only the vault and the audit log decide.
    ToAgent,
}

/// A launch's way out through the egress broker (issue 15): kept as long as its process
/// runs (dropping it closes the way), told the launch's epoch once the process started.
pub trait LaunchEgress: Send + Sync + std::fmt::Debug {
    /// The launch's process started under `epoch`.
    fn started(&self, epoch: postern_domain::ExecutionEpoch);

    /// Where a confined launch reaches the broker from inside its sandbox (its port and Unix
    /// socket); `None` when it cannot.
    fn way_out(&self) -> Option<postern_supervisor::WayOut> {
        None
    }

    /// Lends `credential`'s `value` to one call of the launch (the built-in `http_request`) as
    /// a placeholder the broker swaps back toward `hosts` only, for as long as the returned
    /// [`Lent::hold`] lives (or the engine takes it back). `forms` are other forms of the value
    /// that answers must not carry either (a basic credential's `user:password`).
    fn lend(
        &self,
        credential: &str,
        value: &Secret<String>,
        forms: Vec<Secret<String>>,
        hosts: &[String],
    ) -> Lent;
}

/// A credential lent to one call as a placeholder ([`LaunchEgress::lend`]).
#[derive(Debug)]
pub struct Lent {
    /// What the call carries in the value's place.
    pub placeholder: String,
    /// Keeps the placeholder good; dropped with the call, it is taken back.
    pub hold: Hold,
}

/// Something kept alive for as long as a forwarded call is open.
pub type Hold = Arc<dyn std::any::Any + Send + Sync>;

/// What a server launch is given.
#[derive(Debug, Default)]
pub struct Release {
    /// Environment variables holding credential values, or their placeholders and the
    /// variables that send the launch's HTTP(S) through the egress broker.
    pub env: Vec<(String, Secret<String>)>,
    /// The launch's way out through the broker, when it holds placeholders (or is the
    /// built-in server, whose calls borrow them).
    pub egress: Option<Arc<dyn LaunchEgress>>,
    /// The credential scopes released.
    pub released: Vec<String>,
    /// Those of `released` held as placeholders, for the broker to replace.
    pub brokered: Vec<String>,
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

/// One header an allowed call to the built-in `http_request` carries: a credential as its kind
/// formats it (`Authorization: Bearer …`, `Authorization: Basic …`, a named header) with a
/// placeholder where the value goes, which the egress broker swaps back toward the credential's
/// hosts only (the builtin checks the URL against them too).
#[derive(Debug)]
pub struct InjectedHeader {
    /// The credential scope it comes from (for the audit log).
    pub credential: String,
    /// The header's name.
    pub header: String,
    /// The header's value, a placeholder in it.
    pub value: Secret<String>,
    /// The credential's hosts.
    pub hosts: Vec<String>,
    /// Keeps the placeholder good while the call is open.
    pub hold: Option<Hold>,
}

/// Why the credentials of an allowed call could not be supplied (the call is refused: it was
/// approved as a call that uses them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    /// The vault locked after the call was allowed.
    #[error("the vault is locked")]
    VaultLocked,
    /// A value could not be read (missing from the keychain, or the keychain refused); the
    /// sentence names the credential, never its value.
    #[error("{0}")]
    Unavailable(String),
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

/// What withdrawing a call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdrawal {
    /// It was still undecided (its approval request, if any, is gone): `done` is never called.
    Withdrawn,
    /// The gate had already decided it: `done` was called, or is being called, with the
    /// verdict, which the caller may still act on.
    AlreadyDecided,
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

    /// Decides a request other than a tool call, at once: [`Verdict::Allow`] or
    /// [`Verdict::Deny`], never [`Verdict::Relaunch`].
    fn authorize_operation(&self, operation: &OperationToAuthorize) -> Verdict;

    /// The call no longer waits: drop its open approval request, if any. Says whether the
    /// call was still undecided (then `done` is not called after this) or its verdict was
    /// already given (a lock or a human's answer got there first).
    fn withdraw(&self, session: u64, call: CallId, why: Withdrawn) -> Withdrawal;

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

    /// The headers an allowed call to the built-in server carries: `credentials` (the call's
    /// credential scope) that are bound to `server` and may go to `to`, read from the
    /// keychain (blocking) and lent to the call through `egress`, the launch's way out, as
    /// placeholders. None by default.
    fn inject(
        &self,
        _server: &ServerLabel,
        _to: &Destination,
        _credentials: &BTreeSet<String>,
        _egress: Option<Arc<dyn LaunchEgress>>,
    ) -> Result<Vec<InjectedHeader>, InjectError> {
        Ok(Vec::new())
    }
}

/// Where an `http_request` goes, as a credential's hosts are matched against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The host as credentials name it (WHATWG-normalised, IPv6 without brackets).
    pub host: String,
    /// The port (the scheme's own when the URL names none).
    pub port: u16,
}

impl Destination {
    /// Whether `credential` may go here ([`Credential::allows`]).
    pub fn allows(&self, credential: &Credential) -> bool {
        credential.allows(&self.host, self.port)
    }
}

/// Where an `http_request` URL goes, when a credential may be sent there: an `https` URL's
/// host and port, or an `http` URL's when the host is loopback (127.0.0.0/8, ::1,
/// `localhost`). `None` for any other URL, or one with user information (the builtin refuses
/// those, so nothing is released for them). The host is WHATWG-normalised (lower case, IPv4
/// shorthands expanded, IDNA), IPv6 without brackets; the builtin connects to this same parse.
pub fn credential_host(url: &str) -> Option<Destination> {
    let url = Url::parse(url).ok()?;
    if !url.username().is_empty() || url.password().is_some() {
        return None; // the builtin refuses credentials in the URL itself
    }
    let host = match url.scheme() {
        "https" => host_text(&url)?,
        "http" if is_loopback(&url) => host_text(&url)?,
        _ => return None,
    };
    Some(Destination {
        host,
        port: url.port_or_known_default()?,
    })
}

/// A URL's host as credentials name it: a domain or an IP address, IPv6 without brackets.
pub fn host_text(url: &Url) -> Option<String> {
    Some(match url.host()? {
        Host::Domain(domain) => domain.to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    })
}

/// Whether a URL's host is loopback: 127.0.0.0/8, ::1, or exactly `localhost`.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The credential scope of a call to the built-in `http_request` with `arguments`: the bound
/// header credentials whose hosts include the URL's host. Empty when the URL names no host a
/// credential may go to (see [`credential_host`]).
pub fn http_request_scope(bound: &[Credential], arguments: &Value) -> BTreeSet<String> {
    let Some(to) = arguments
        .get("url")
        .and_then(Value::as_str)
        .and_then(credential_host)
    else {
        return BTreeSet::new();
    };
    bound
        .iter()
        .filter(|c| c.env_var().is_none() && to.allows(c))
        .map(|c| c.name.to_string())
        .collect()
}

/// Lets every call through, journaled as observed (tests of the data path alone).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize(&self, _call: CallToAuthorize, done: Decided) {
        done(Verdict::Allow(Authority::Observed));
    }

    fn authorize_operation(&self, _operation: &OperationToAuthorize) -> Verdict {
        Verdict::Allow(Authority::Observed)
    }

    fn withdraw(&self, _session: u64, _call: CallId, _why: Withdrawn) -> Withdrawal {
        Withdrawal::AlreadyDecided // decided the moment it was asked
    }

    fn session_ended(&self, _session: u64, _agent: Option<&AgentIdentity>) {}
}

#[cfg(test)]
mod tests {
    use postern_domain::Injection;
    use postern_domain::credential::CredentialHost;
    use serde_json::json;

    use super::*;

    fn credential(name: &str, injection: Injection, hosts: &[&str]) -> Credential {
        Credential {
            name: name.parse().expect("name"),
            injection,
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            every_use: false,
            version: 1,
            created_at: 0,
            rotated_at: None,
        }
    }

    #[test]
    fn a_credential_goes_only_to_https_or_loopback_hosts() {
        for (url, host) in [
            ("https://API.example.com/v1", Some(("api.example.com", 443))),
            ("https://localhost:8443/", Some(("localhost", 8443))),
            ("http://localhost:8080/", Some(("localhost", 8080))),
            ("http://127.0.0.1:1/", Some(("127.0.0.1", 1))),
            ("http://127.1/", Some(("127.0.0.1", 80))),
            ("http://[::1]:80/", Some(("::1", 80))),
            ("https://[::1]/", Some(("::1", 443))),
            ("http://api.example.com/", None),
            ("http://localhost.evil.net/", None),
            ("http://10.0.0.1/", None),
            ("ftp://localhost/", None),
            ("file:///etc/passwd", None),
            ("not a url", None),
            ("https://user:pw@api.example.com/", None),
            ("https://localhost@evil.net/", None),
        ] {
            let to = credential_host(url);
            assert_eq!(
                to.as_ref().map(|to| (to.host.as_str(), to.port)),
                host,
                "{url}"
            );
        }
    }

    /// A host `postern credential add` accepts is, as stored, what an https URL to it names
    /// (what the scope and the builtin compare with): an accepted host can match.
    fn url_host_of(host: &CredentialHost) -> Option<String> {
        let kept = host.as_str();
        let authority = if kept.parse::<std::net::Ipv6Addr>().is_ok() {
            format!("[{kept}]:8443")
        } else if kept.starts_with('[') || kept.contains(':') {
            kept.to_owned()
        } else {
            format!("{kept}:8443")
        };
        let to = credential_host(&format!("https://{authority}/x?y"))?;
        let credential = credential("c", Injection::Bearer, &[kept]);
        to.allows(&credential).then(|| kept.to_owned())
    }

    #[test]
    fn an_accepted_credential_host_is_the_host_its_urls_name() {
        for typed in [
            "api.github.com",
            "API.GitHub.com",
            "my_host.internal",
            "127.0.0.1:3000",
            "[::1]:1",
            "2001:DB8:0::1",
            "[2001:db8::2]:8443",
            "api.example.com:8443",
            "xn--bcher-kva.example",
            "-a-.example",
            "ab--cd.example",
            "a.xn--p1ai",
        ] {
            let host: CredentialHost = typed.parse().expect(typed);
            assert_eq!(
                url_host_of(&host).as_deref(),
                Some(host.as_str()),
                "{typed}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_accepted_credential_host_is_the_host_its_urls_name(
            typed in "(xn--)?[a-zA-Z0-9._:\\[\\]%ü-]{1,24}"
        ) {
            if let Ok(host) = typed.parse::<CredentialHost>() {
                let named = url_host_of(&host);
                proptest::prop_assert_eq!(named.as_deref(), Some(host.as_str()));
            }
        }
    }

    #[test]
    fn the_scope_is_the_bound_header_credentials_for_the_urls_host() {
        let bound = [
            credential("api", Injection::Bearer, &["api.example.com"]),
            credential("local", Injection::Basic, &["localhost:9", "127.0.0.1:9"]),
            credential(
                "key",
                Injection::Header {
                    name: "X-Key".into(),
                },
                &["api.example.com"],
            ),
            credential(
                "env",
                Injection::Env {
                    var: "TOKEN".into(),
                },
                &["api.example.com"],
            ),
        ];
        let scope = |url: &str| -> Vec<String> {
            http_request_scope(&bound, &json!({ "url": url }))
                .into_iter()
                .collect()
        };
        assert_eq!(scope("https://api.example.com/x"), ["api", "key"]);
        assert_eq!(scope("https://API.EXAMPLE.COM./x"), Vec::<String>::new());
        assert_eq!(scope("http://localhost:9/"), ["local"]);
        assert_eq!(scope("http://localhost:10/"), Vec::<String>::new());
        assert_eq!(scope("http://localhost/"), Vec::<String>::new());
        assert_eq!(scope("http://api.example.com/x"), Vec::<String>::new());
        assert_eq!(scope("https://example.com/"), Vec::<String>::new());
        assert!(http_request_scope(&bound, &json!({})).is_empty());
        assert!(http_request_scope(&bound, &json!({"url": 7})).is_empty());
    }
}
