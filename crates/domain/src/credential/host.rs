//! A host a header credential may be sent to, as a person types it and as the built-in
//! `http_request` compares it.
//!
//! The comparison is exact on the host alone (case aside): the gateway and the builtin read a
//! URL's host with the WHATWG parse (lower case, international names in their xn-- form, IPv4
//! written in full, IPv6 without brackets) and drop the port, so a credential for
//! `api.github.com` goes to every port and path of that host and to nothing else. A host is
//! kept here as that same parse leaves it, so it can match; a URL, a port or a wildcard would
//! never equal a URL's host: they are refused, each with what to type instead, rather than
//! stored to silently never match.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

/// A host name or IP address as credentials name it: lower case, an IPv6 address without
/// brackets. Compared exactly (ignoring case) with the host of a request's URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CredentialHost(String);

/// The longest DNS name.
const MAX_NAME: usize = 253;
/// The longest label of a DNS name.
const MAX_LABEL: usize = 63;

/// Why a string is not a host a credential can be sent to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing was given.
    #[error("a credential's host cannot be empty")]
    Empty,
    /// A URL (or a host with a path) was given.
    #[error(
        "give the host alone, e.g. {example}, not a URL ({given:?}): a credential goes to every path of its hosts"
    )]
    Url {
        /// What was given.
        given: String,
        /// The host in it (or an example when none can be read).
        example: String,
    },
    /// A wildcard was given.
    #[error(
        "{given:?} has a wildcard, but a credential's hosts are matched exactly: name each host it may go to, e.g. {example}"
    )]
    Wildcard {
        /// What was given.
        given: String,
        /// A host it could stand for.
        example: String,
    },
    /// A port was given.
    #[error(
        "{given:?} has a port, but a credential goes to its host on any port: give {host} alone"
    )]
    Port {
        /// What was given.
        given: String,
        /// The host without the port.
        host: String,
    },
    /// Not a host name or IP address for another reason.
    #[error("{given:?} is not a host name: {why}")]
    Invalid {
        /// What was given.
        given: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl CredentialHost {
    /// The host as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for CredentialHost {
    type Err = HostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let given = s.trim();
        if given.is_empty() {
            return Err(HostError::Empty);
        }
        if given.contains('/') {
            return Err(HostError::Url {
                given: given.to_owned(),
                example: host_of_url(given).unwrap_or_else(|| "api.example.com".into()),
            });
        }
        if given.contains('*') {
            let rest = given.trim_start_matches(['*', '.']);
            let example = format!("api.{rest}")
                .parse::<CredentialHost>()
                .map_or_else(|_| "api.example.com".to_owned(), |h| h.0);
            return Err(HostError::Wildcard {
                given: given.to_owned(),
                example,
            });
        }
        let unbracketed = given
            .strip_prefix('[')
            .and_then(|rest| rest.split_once(']'));
        if let Some((inside, after)) = unbracketed {
            let ip: Ipv6Addr = inside.parse().map_err(|_| invalid(given, NOT_IPV6))?;
            return match after {
                "" => Ok(Self(ip.to_string())),
                _ if is_port(after) => Err(HostError::Port {
                    given: given.to_owned(),
                    host: ip.to_string(),
                }),
                _ => Err(invalid(given, NOT_IPV6)),
            };
        }
        if let Ok(ip) = given.parse::<Ipv6Addr>() {
            return Ok(Self(ip.to_string()));
        }
        if let Some((host, port)) = given.rsplit_once(':') {
            return match host.parse::<CredentialHost>() {
                Ok(host) if is_port(&format!(":{port}")) => Err(HostError::Port {
                    given: given.to_owned(),
                    host: host.0,
                }),
                _ => Err(invalid(given, CHARACTERS)),
            };
        }
        domain(given).map(Self)
    }
}

impl From<CredentialHost> for String {
    fn from(host: CredentialHost) -> Self {
        host.0
    }
}

impl fmt::Display for CredentialHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const CHARACTERS: &str = "a host name is letters, digits, '-', '_' and '.' (or an IP address)";
const NOT_IPV6: &str = "the part in brackets is not an IPv6 address";

fn invalid(given: &str, why: &'static str) -> HostError {
    HostError::Invalid {
        given: given.to_owned(),
        why,
    }
}

/// `:` followed by 1 to 5 digits.
fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .is_some_and(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A domain name (or an IPv4 address in a form URLs accept) as the WHATWG URL parse leaves it:
/// lower case, an international name in its ASCII (xn--) form, `127.1` as `127.0.0.1`.
fn domain(given: &str) -> Result<String, HostError> {
    if given.ends_with('.') {
        return Err(invalid(
            given,
            "drop the final '.': URLs name the host without it",
        ));
    }
    if given.split('.').any(str::is_empty) {
        return Err(invalid(given, "it has an empty part between dots"));
    }
    let parsed = url::Host::parse(given).map_err(|e| {
        invalid(
            given,
            match e {
                url::ParseError::InvalidIpv4Address => {
                    "it ends in a number but is not an IPv4 address (e.g. 127.0.0.1)"
                }
                url::ParseError::IdnaError
                    if given.bytes().all(|b| {
                        !b.is_ascii() || b.is_ascii_alphanumeric() || b"-_.".contains(&b)
                    }) =>
                {
                    "it is not a valid international domain name"
                }
                _ => CHARACTERS,
            },
        )
    })?;
    let host = match parsed {
        url::Host::Domain(name) => name.to_ascii_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    if host.len() > MAX_NAME || host.split('.').any(|l| l.len() > MAX_LABEL) {
        return Err(invalid(
            given,
            "it is longer than a DNS name can be (253 characters, 63 between dots)",
        ));
    }
    Ok(host)
}

/// The host of something URL-shaped (`scheme://user@host:port/path`), when it is one a
/// credential could name.
fn host_of_url(text: &str) -> Option<String> {
    let rest = text.split_once("://").map_or(text, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.parse::<CredentialHost>() {
        Err(HostError::Port { host, .. }) => host,
        parsed => parsed.ok()?.0,
    };
    Some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> Result<String, String> {
        s.parse::<CredentialHost>()
            .map(String::from)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_host_is_kept_as_a_url_would_name_it() {
        for (given, kept) in [
            ("api.github.com", "api.github.com"),
            ("API.GitHub.com", "api.github.com"),
            (" api.github.com ", "api.github.com"),
            ("localhost", "localhost"),
            ("my_host.internal", "my_host.internal"),
            ("127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("2001:DB8:0:0::1", "2001:db8::1"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
            ("Bücher.example", "xn--bcher-kva.example"),
            ("127.1", "127.0.0.1"),
        ] {
            assert_eq!(parsed(given), Ok(kept.to_owned()), "{given}");
        }
    }

    #[test]
    fn a_url_a_wildcard_or_a_port_says_what_to_give_instead() {
        assert_eq!(
            parsed("https://api.github.com/"),
            Err(
                "give the host alone, e.g. api.github.com, not a URL (\"https://api.github.com/\"): a credential goes to every path of its hosts"
                    .into()
            )
        );
        assert!(
            parsed("https://user@API.example.com:8443/v1?q")
                .is_err_and(|e| e.contains("e.g. api.example.com,")),
        );
        assert!(parsed("api.github.com/repos").is_err_and(|e| e.contains("e.g. api.github.com,")));
        assert_eq!(
            parsed("*.github.com"),
            Err(
                "\"*.github.com\" has a wildcard, but a credential's hosts are matched exactly: name each host it may go to, e.g. api.github.com"
                    .into()
            )
        );
        assert_eq!(
            parsed("localhost:8443"),
            Err(
                "\"localhost:8443\" has a port, but a credential goes to its host on any port: give localhost alone"
                    .into()
            )
        );
        assert!(parsed("[::1]:8080").is_err_and(|e| e.contains("give ::1 alone")));
    }

    #[test]
    fn what_a_url_never_names_is_refused() {
        for (given, why) in [
            ("", "cannot be empty"),
            ("a b.example", "letters, digits"),
            ("example.com.", "final '.'"),
            ("a..example", "empty part"),
            ("999.1.1.1", "not an IPv4 address"),
            ("host.0x7f", "not an IPv4 address"),
            ("xn--zz.example", "not a valid international domain name"),
            ("a%20b.example", "letters, digits"),
            ("[nope]", "IPv6"),
            ("a:b:c", "letters, digits"),
        ] {
            let refused = parsed(given).expect_err(given);
            assert!(refused.contains(why), "{given}: {refused}");
        }
        assert!(parsed(&format!("{}.example", "a".repeat(64))).is_err());
    }
}
