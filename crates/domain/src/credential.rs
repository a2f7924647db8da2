//! Credentials as Postern knows them without their values: a scope name, how the value is
//! injected, which hosts it may go to, whether every use needs a human. Values live only in
//! the OS keychain (issue 6); nothing here can hold one.
//!
//! A new credential's injection and hosts are what a person typed: [`CredentialSpec::new`]
//! turns them into a checked spec, refusing what could never work (a URL or a wildcard as a
//! host, a header name HTTP cannot carry, a variable name no shell can set, hosts on an env
//! credential) with what to give instead. [`Credential`] itself is the stored shape, read back
//! as it was written.

mod host;
mod placeholder;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use host::{CredentialHost, HostError, covers, is_this_machine, kept_parts, loosely_here};
pub use placeholder::{MIN_RANDOM_CHARS, placeholder, randomness_needed};

use crate::server::{EnvName, EnvNameError};

/// A credential scope's name, e.g. `inventory-api-staging`: 1 to 40 characters of
/// `a-z 0-9 - _ .`, starting with a letter or digit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CredentialName(String);

impl CredentialName {
    /// The longest name accepted (the keychain item adds a prefix and a version).
    pub const MAX_LEN: usize = 40;

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a string is not a credential name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a credential name is 1 to {max} characters of a-z, 0-9, '-', '_', '.', starting with a letter or digit; got {0:?}",
    max = CredentialName::MAX_LEN
)]
pub struct CredentialNameError(pub String);

impl FromStr for CredentialName {
    type Err = CredentialNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=Self::MAX_LEN).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(CredentialNameError(s.to_owned()))
        }
    }
}

impl TryFrom<String> for CredentialName {
    type Error = CredentialNameError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<CredentialName> for String {
    fn from(name: CredentialName) -> Self {
        name.0
    }
}

impl fmt::Display for CredentialName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a credential's value reaches the code that uses it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Injection {
    /// As an environment variable of a stdio server, at launch.
    Env {
        /// The variable's name.
        var: String,
    },
    /// As `Authorization: Bearer <value>` on the built-in `http_request`.
    Bearer,
    /// As a named header on the built-in `http_request`.
    Header {
        /// The header's name.
        name: String,
    },
    /// As `Authorization: Basic <base64(value)>` (the value is `user:password`).
    Basic,
}

/// A credential's metadata: everything but its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    /// The scope name grants and cards use.
    pub name: CredentialName,
    /// How it is injected.
    pub injection: Injection,
    /// The hosts an HTTP request may carry it to: for a header kind, through the built-in
    /// `http_request`; for an env kind, through the egress broker, which puts the value in
    /// place of the launch's placeholder (none: the env value itself reaches the server).
    pub hosts: Vec<String>,
    /// Every call that would use it needs a human.
    pub every_use: bool,
    /// Bumped by each rotation; the keychain item is per version.
    pub version: u32,
    /// When it was added (unix ms).
    pub created_at: u64,
    /// When it was last rotated (unix ms).
    pub rotated_at: Option<u64>,
}

impl Credential {
    /// The keychain item holding this version's value.
    pub fn keychain_item(&self) -> String {
        keychain_item(&self.name, self.version)
    }

    /// Whether a launch gets a placeholder in its place, the egress broker putting the value
    /// in requests to its hosts (an env credential with hosts).
    pub fn brokered(&self) -> bool {
        matches!(self.injection, Injection::Env { .. }) && !self.hosts.is_empty()
    }

    /// The environment variable it is released as, for the env kind.
    pub fn env_var(&self) -> Option<&str> {
        match &self.injection {
            Injection::Env { var } => Some(var),
            _ => None,
        }
    }

    /// Whether a request to `host` on `port` may carry it: one of its hosts is that host (case
    /// aside) and names that port or none ([`covers`]).
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.hosts.iter().any(|h| covers(h, host, port))
    }
}

/// Headers the built-in `http_request` frames itself or never sends (it uses no proxy), in
/// lower case: a credential cannot be sent as one, and an agent cannot set one.
pub const CLIENT_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// Headers that name the site a request is for, which fronts (proxies, load balancers) route
/// by as they route by `Host`, in lower case: an agent cannot set one on the built-in
/// `http_request`, whose URL alone says where a request goes, and a credential cannot be one.
pub const ROUTING_HEADERS: &[&str] = &[
    "x-forwarded-host",
    "forwarded",
    "x-original-host",
    "x-host",
    "x-forwarded-server",
    "x-http-host-override",
];

/// Whether a header (its name in lower case) may name the site a request is for: one of
/// [`ROUTING_HEADERS`], or any other with `host` in its name but `Host` itself (fronts have
/// invented many: `X-Original-Host`, `X-Forwarded-Host-Override`, ...).
pub fn names_a_site(name: &str) -> bool {
    ROUTING_HEADERS.contains(&name) || (name != "host" && name.contains("host"))
}

/// A new credential's injection and hosts, checked ([`CredentialSpec::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialSpec {
    injection: Injection,
    hosts: Vec<CredentialHost>,
}

/// Why a credential's injection or hosts were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// An env credential's variable is not a variable name.
    #[error(transparent)]
    EnvName(#[from] EnvNameError),
    /// An env credential would set a variable that decides which code the server runs.
    #[error(
        "a credential cannot set {0}: it decides which programs (PATH) or libraries (LD_*, DYLD_*) the server runs, no place for a secret. If you mean it, set it in the server's own environment (postern server add --env)"
    )]
    LoaderVariable(String),
    /// A header credential without a host to go to.
    #[error(
        "a header credential (bearer, header, basic) needs at least one host it may be sent to"
    )]
    NoHosts,
    /// One of the hosts.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A header name that is not an HTTP token.
    #[error(
        "{0:?} is not an HTTP header name: a name is letters, digits and any of !#$%&'*+-.^_`|~ (no spaces, no ':')"
    )]
    HeaderName(String),
    /// A header the built-in `http_request` sets itself or never sends.
    #[error(
        "the built-in http_request cannot send a credential as {0:?}: it sets that header itself, never sends it, or takes where a request goes from its URL alone (one of {list}, {routing})",
        list = CLIENT_HEADERS.join(", "),
        routing = ROUTING_HEADERS.join(", ")
    )]
    ClientHeader(String),
}

/// Why a value cannot be a credential's (never showing the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The value is empty.
    #[error("the credential's value is empty")]
    Empty,
    /// The value holds a NUL byte.
    #[error("the credential's value contains a NUL byte")]
    Nul,
    /// A header kind's value with line breaks or other control characters.
    #[error(
        "the credential's value has control characters (a line break, a tab, ...), which an HTTP header cannot carry"
    )]
    ControlCharacters,
    /// A basic credential's value without `:`.
    #[error(
        "a basic credential's value is user:password, and this one has no ':' (the value is not shown)"
    )]
    NotUserPassword,
}

impl CredentialSpec {
    /// Checks a new credential's injection and hosts: an env credential's variable name
    /// ([`EnvName`], not PATH, LD_* or DYLD_*), its hosts optional (with hosts, the server
    /// gets a placeholder and the egress broker puts the value in requests to those hosts;
    /// without, the value itself, exposed to the server's code); a header credential's header
    /// name (an HTTP token, not one of [`CLIENT_HEADERS`]) and at least one host, each a bare
    /// host name or IP address ([`CredentialHost`]), duplicates dropped.
    pub fn new(injection: Injection, hosts: &[String]) -> Result<Self, SpecError> {
        match &injection {
            Injection::Env { var } => {
                let name: EnvName = var.parse()?;
                if is_loader_variable(name.as_str()) {
                    return Err(SpecError::LoaderVariable(name.into()));
                }
            }
            Injection::Header { name } => {
                if name.is_empty() || !name.bytes().all(is_token_byte) {
                    return Err(SpecError::HeaderName(name.clone()));
                }
                let lower = name.to_ascii_lowercase();
                if CLIENT_HEADERS.contains(&lower.as_str()) || names_a_site(&lower) {
                    return Err(SpecError::ClientHeader(name.clone()));
                }
            }
            Injection::Bearer | Injection::Basic => {}
        }
        let mut parsed: Vec<CredentialHost> = Vec::with_capacity(hosts.len());
        for host in hosts {
            let host: CredentialHost = host.parse()?;
            if !parsed.contains(&host) {
                parsed.push(host);
            }
        }
        if injection.is_header() && parsed.is_empty() {
            return Err(SpecError::NoHosts);
        }
        Ok(Self {
            injection,
            hosts: parsed,
        })
    }

    /// How it is injected.
    pub fn injection(&self) -> &Injection {
        &self.injection
    }

    /// The hosts it may go to (header kinds), as requests name them.
    pub fn hosts(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.as_str().to_owned()).collect()
    }
}

impl Injection {
    /// Whether it is injected as an HTTP header (bearer, header, basic).
    pub fn is_header(&self) -> bool {
        !matches!(self, Injection::Env { .. })
    }

    /// Whether `value` can be injected this way: not empty, no NUL; for a header kind no
    /// control characters; for basic, `user:password`. The error never shows the value.
    pub fn check_value(&self, value: &str) -> Result<(), ValueError> {
        if value.is_empty() {
            return Err(ValueError::Empty);
        }
        if value.contains('\0') {
            return Err(ValueError::Nul);
        }
        if self.is_header() && value.chars().any(char::is_control) {
            return Err(ValueError::ControlCharacters);
        }
        if *self == Injection::Basic && !value.contains(':') {
            return Err(ValueError::NotUserPassword);
        }
        Ok(())
    }
}

/// Variables that decide which programs or libraries a process runs.
fn is_loader_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper == "PATH" || upper.starts_with("LD_") || upper.starts_with("DYLD_")
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The keychain item for version `version` of `name`.
pub fn keychain_item(name: &CredentialName, version: u32) -> String {
    format!("credential.{name}.v{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_fit_a_keychain_item() {
        for good in ["inventory-api-staging", "a", "x.y_z-1", &"a".repeat(40)] {
            let name: CredentialName = good.parse().expect(good);
            let item = keychain_item(&name, u32::MAX);
            assert!(item.len() <= 64, "{item}");
        }
        for bad in ["", "Inventory", "-x", "a b", "a/b", &"a".repeat(41)] {
            assert!(bad.parse::<CredentialName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_match_exactly_ignoring_case() {
        let c = Credential {
            name: "api".parse().expect("name"),
            injection: Injection::Bearer,
            hosts: vec!["api.example.com".into()],
            every_use: false,
            version: 1,
            created_at: 0,
            rotated_at: None,
        };
        assert!(c.allows("API.example.com", 443));
        assert!(c.allows("api.example.com", 8443));
        assert!(!c.allows("example.com", 443));
        assert!(!c.allows("api.example.com.evil.net", 443));
        let local = Credential {
            hosts: vec!["localhost:8080".into()],
            ..c.clone()
        };
        assert!(local.allows("localhost", 8080));
        assert!(!local.allows("localhost", 8081));
        assert_eq!(c.env_var(), None);
    }

    fn spec(injection: Injection, hosts: &[&str]) -> Result<CredentialSpec, String> {
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        CredentialSpec::new(injection, &hosts).map_err(|e| e.to_string())
    }

    fn env(var: &str) -> Injection {
        Injection::Env { var: var.into() }
    }

    fn header(name: &str) -> Injection {
        Injection::Header { name: name.into() }
    }

    #[test]
    fn a_header_credential_gets_its_hosts_normalised_and_needs_one() {
        let checked = spec(
            Injection::Bearer,
            &[
                "API.GitHub.com",
                "api.github.com",
                "[::1]:8080",
                "[::1]:8080",
            ],
        )
        .expect("valid");
        assert_eq!(checked.hosts(), ["api.github.com", "[::1]:8080"]);
        assert_eq!(checked.injection(), &Injection::Bearer);
        assert_eq!(
            spec(Injection::Basic, &[]),
            Err(
                "a header credential (bearer, header, basic) needs at least one host it may be sent to"
                    .into()
            )
        );
        assert!(
            spec(Injection::Bearer, &["https://api.github.com/"]).is_err_and(
                |e| e.starts_with("give the host alone, e.g. api.github.com, not a URL")
            )
        );
    }

    #[test]
    fn a_header_name_must_be_one_http_can_carry_and_the_client_does_not_set() {
        assert!(spec(header("X-Api-Key"), &["h.example"]).is_ok());
        assert!(spec(header("Authorization"), &["h.example"]).is_ok());
        assert_eq!(
            spec(header("Bad Header"), &["h.example"]),
            Err(
                "\"Bad Header\" is not an HTTP header name: a name is letters, digits and any of !#$%&'*+-.^_`|~ (no spaces, no ':')"
                    .into()
            )
        );
        for bad in ["", "X-Key:", "Ünïcode"] {
            assert!(
                spec(header(bad), &["h.example"])
                    .is_err_and(|e| e.contains("not an HTTP header name")),
                "{bad}"
            );
        }
        assert_eq!(
            spec(header("Host"), &["h.example"]),
            Err(
                "the built-in http_request cannot send a credential as \"Host\": it sets that header itself, never sends it, or takes where a request goes from its URL alone (one of host, content-length, transfer-encoding, connection, keep-alive, proxy-connection, proxy-authorization, te, trailer, upgrade, x-forwarded-host, forwarded, x-original-host, x-host, x-forwarded-server, x-http-host-override)"
                    .into()
            )
        );
        assert!(spec(header("Transfer-Encoding"), &["h.example"]).is_err());
        assert!(spec(header("X-Forwarded-Host"), &["h.example"]).is_err());
        assert!(spec(header("forwarded"), &["h.example"]).is_err());
    }

    #[test]
    fn an_env_credential_needs_a_plain_variable_and_no_hosts() {
        assert_eq!(spec(env("API_TOKEN"), &[]).expect("valid").hosts(), [""; 0]);
        assert_eq!(
            spec(env("BAD NAME"), &[]),
            Err(
                "\"BAD NAME\" is not an environment variable name: use letters, digits and '_', not starting with a digit (e.g. API_TOKEN)"
                    .into()
            )
        );
        for loader in [
            "PATH",
            "Path",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
        ] {
            let refused = spec(env(loader), &[]).expect_err(loader);
            assert!(
                refused.starts_with(&format!("a credential cannot set {loader}: it decides")),
                "{refused}"
            );
        }
        assert!(spec(env("PATHS_FILE"), &[]).is_ok());
        // Hosts on an env credential: the server gets a placeholder, the broker the value.
        assert!(spec(env("API_TOKEN"), &["example.com"]).is_ok());
        assert!(
            spec(env("API_TOKEN"), &["https://example.com/"])
                .expect_err("a URL")
                .contains("give the host alone")
        );
    }

    #[test]
    fn a_value_is_checked_for_its_kind_without_being_shown() {
        assert_eq!(Injection::Basic.check_value("alice:pw"), Ok(()));
        let refused = Injection::Basic
            .check_value("hunter2")
            .expect_err("no colon");
        assert_eq!(refused, ValueError::NotUserPassword);
        assert!(!refused.to_string().contains("hunter2"));
        assert_eq!(
            Injection::Bearer.check_value("tok\r\nX-Injected: 1"),
            Err(ValueError::ControlCharacters)
        );
        assert_eq!(env("T").check_value("multi\nline"), Ok(()));
        assert_eq!(env("T").check_value(""), Err(ValueError::Empty));
        assert_eq!(env("T").check_value("a\0b"), Err(ValueError::Nul));
    }
}
