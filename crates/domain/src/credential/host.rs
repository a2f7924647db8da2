//! A host a credential may be sent to, as a person types it and as the built-in
//! `http_request` and the egress broker compare it.
//!
//! The comparison is exact on the host (case aside), and on the port when the host names one:
//! the gateway and the builtin read a URL's host with the WHATWG parse (lower case,
//! international names in their xn-- form, IPv4 written in full, IPv6 without brackets) and
//! its port (the scheme's own when the URL names none), so a credential for `api.github.com`
//! goes to every port and path of that host and to nothing else, and one for
//! `127.0.0.1:8080` to that port alone. This machine is named by an address and a port
//! (`127.0.0.1:8080`, `[::1]:8080`): any process of the user can listen on another port
//! there, and `localhost` is two addresses, 127.0.0.1 and ::1, which two processes can hold on
//! the same port (a request connects to whichever its resolver lists first). A host is kept
//! here as that same parse leaves it, so it can match; a URL or a wildcard would never equal a
//! URL's host: they are refused, each with what to type instead, rather than stored to
//! silently never match.

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
    /// This machine by name: two addresses (127.0.0.1 and ::1), which two processes can
    /// hold on the same port.
    #[error(
        "{given:?} names this machine, which is two addresses (127.0.0.1 and ::1): another process of yours can listen on the one your service does not, on the same port. Name the address and port your service listens on, e.g. {example}, and use that address in the URLs the credential is sent to"
    )]
    LocalName {
        /// What was given.
        given: String,
        /// An address and port to give instead.
        example: String,
    },
    /// An address of this machine without a port.
    #[error(
        "{given:?} is this machine, where any process of yours can listen on any port: name the port the credential may go to, e.g. {example}"
    )]
    NeedsPort {
        /// What was given.
        given: String,
        /// The host with a port.
        example: String,
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
    /// The host as text (`host`, or `host:port`, an IPv6 address then in brackets).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A credential's host as kept, read back: the host (an IPv6 address without brackets) and the
/// port's text if it names one (`host`, `host:port`, a bare IPv6 address, `[v6]:port`). `None`
/// for what a kept host never is (`[v6]` without a port).
pub fn kept_parts(entry: &str) -> Option<(&str, Option<&str>)> {
    match entry.strip_prefix('[') {
        Some(bracketed) => bracketed
            .split_once("]:")
            .map(|(ip, port)| (ip, Some(port))),
        None if entry.parse::<Ipv6Addr>().is_ok() => Some((entry, None)),
        None => Some(match entry.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (entry, None),
        }),
    }
}

/// Whether `entry`, a credential's host as kept (`host` or `host:port`), covers a request to
/// `host` on `port`: the same host (case aside) and, if the entry names a port, that port.
/// An entry whose port cannot be read covers nothing.
pub fn covers(entry: &str, host: &str, port: u16) -> bool {
    kept_parts(entry).is_some_and(|(name, wanted)| {
        name.eq_ignore_ascii_case(host) && wanted.is_none_or(|p| p.parse() == Ok(port))
    })
}

/// Whether `entry`, a credential's host as kept, names this machine loosely: without a port,
/// or by a name (`localhost`, two addresses). Kept before `credential add` required an address
/// and port here, it goes to whichever process of the user listens where a request for it
/// connects (the credential is added again as `127.0.0.1:PORT` to narrow it).
pub fn loosely_here(entry: &str) -> bool {
    kept_parts(entry).is_some_and(|(host, port)| {
        is_this_machine(host) && (port.is_none() || host.parse::<std::net::IpAddr>().is_err())
    })
}

/// Whether `host` is this machine's own name (`/proc/sys/kernel/hostname`, which Debian's
/// `/etc/hosts` maps to 127.0.1.1), in full or its first label.
fn is_own_name(host: &str) -> bool {
    let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return false;
    };
    let name = name.trim().to_ascii_lowercase();
    let short = name.split('.').next().unwrap_or_default();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    !name.is_empty() && (host == name || host == short || host == format!("{short}.local"))
}

/// Names `/etc/hosts` gives this machine on common systems, besides `localhost`.
const LOCAL_NAMES: [&str; 5] = [
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
    "localhost4",
    "localhost6",
];

/// Whether a host (as URLs name it, IPv6 without brackets) is this machine, where every
/// process of the user can listen: `localhost`, the names under `.localhost` and the other
/// names systems give it ([`LOCAL_NAMES`]), 127.0.0.0/8 and `::1` (IPv4-mapped too), and the
/// unspecified addresses `0.0.0.0` and `::`, which connect here too.
pub fn is_this_machine(host: &str) -> bool {
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    let here = |ip: std::net::IpAddr| ip.is_loopback() || ip.is_unspecified();
    name == "localhost"
        || name.ends_with(".localhost")
        || LOCAL_NAMES.contains(&name.as_str())
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| {
            here(ip)
                || matches!(ip, std::net::IpAddr::V6(v6)
                    if v6.to_ipv4_mapped().is_some_and(|v4| here(v4.into())))
        })
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
        let (host, port) = split_port(given)?;
        let host = match host.parse::<Ipv6Addr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => domain(host).map_err(|e| match e {
                HostError::Invalid { why, .. } => invalid(given, why),
                other => other,
            })?,
        };
        if (is_this_machine(&host) || is_own_name(&host))
            && host.parse::<std::net::IpAddr>().is_err()
        {
            return Err(HostError::LocalName {
                given: given.to_owned(),
                example: format!("127.0.0.1:{}", port.unwrap_or(8080)),
            });
        }
        match port {
            Some(port) if host.contains(':') => Ok(Self(format!("[{host}]:{port}"))),
            Some(port) => Ok(Self(format!("{host}:{port}"))),
            None if is_this_machine(&host) => Err(HostError::NeedsPort {
                given: given.to_owned(),
                example: match host.contains(':') {
                    true => format!("[{host}]:8080"),
                    false => format!("{host}:8080"),
                },
            }),
            None => Ok(Self(host)),
        }
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

/// A host as given and the port after it, if any: `[v6]` or `[v6]:port`, a bare IPv6 address
/// (no port: its colons are its own), `host:port`, or `host`.
fn split_port(given: &str) -> Result<(&str, Option<u16>), HostError> {
    if let Some(rest) = given.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| invalid(given, NOT_IPV6))?;
        inside
            .parse::<Ipv6Addr>()
            .map_err(|_| invalid(given, NOT_IPV6))?;
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inside, Some(port_number(given, port)?))),
                None => Err(invalid(given, NOT_IPV6)),
            },
        };
    }
    if given.parse::<Ipv6Addr>().is_ok() {
        return Ok((given, None));
    }
    match given.split_once(':') {
        Some((host, port)) if !port.contains(':') => Ok((host, Some(port_number(given, port)?))),
        Some(_) => Err(invalid(given, CHARACTERS)),
        None => Ok((given, None)),
    }
}

/// A port as given after a host: 1 to 65535.
fn port_number(given: &str, port: &str) -> Result<u16, HostError> {
    port.parse::<u16>()
        .ok()
        .filter(|p| *p != 0 && port.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| invalid(given, "the port after ':' is a number from 1 to 65535"))
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
        Err(HostError::NeedsPort { example, .. } | HostError::LocalName { example, .. }) => example,
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
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("my_host.internal", "my_host.internal"),
            ("api.example.com:8443", "api.example.com:8443"),
            ("127.0.0.1:3000", "127.0.0.1:3000"),
            ("10.0.0.7", "10.0.0.7"),
            ("[::1]:8080", "[::1]:8080"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("2001:DB8:0:0::1", "2001:db8::1"),
            ("[2001:DB8::1]:443", "[2001:db8::1]:443"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
            ("Bücher.example", "xn--bcher-kva.example"),
            ("127.1:80", "127.0.0.1:80"),
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
                .is_err_and(|e| e.contains("e.g. api.example.com:8443,")),
        );
        assert!(parsed("api.github.com/repos").is_err_and(|e| e.contains("e.g. api.github.com,")));
        assert_eq!(
            parsed("*.github.com"),
            Err(
                "\"*.github.com\" has a wildcard, but a credential's hosts are matched exactly: name each host it may go to, e.g. api.github.com"
                    .into()
            )
        );
        assert!(parsed("https://localhost/x").is_err_and(|e| e.contains("e.g. 127.0.0.1:8080,")),);
    }

    #[test]
    fn an_address_of_this_machine_names_its_port() {
        for given in [
            "127.0.0.1",
            "127.1",
            "127.9.9.9",
            "::1",
            "[::1]",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "[::ffff:7f00:1]",
        ] {
            let refused = parsed(given).expect_err(given);
            assert!(
                refused.contains("any process of yours can listen on any port")
                    && refused.contains(":8080"),
                "{given}: {refused}"
            );
        }
        assert_eq!(
            parsed("127.0.0.1"),
            Err(
                "\"127.0.0.1\" is this machine, where any process of yours can listen on any port: name the port the credential may go to, e.g. 127.0.0.1:8080"
                    .into()
            )
        );
        assert!(parsed("::1").is_err_and(|e| e.contains("e.g. [::1]:8080")));
    }

    /// `localhost` is two addresses: a request connects to whichever the resolver lists
    /// first, and another process can hold the other on the same port.
    #[test]
    fn this_machine_by_name_is_refused_for_an_address() {
        for given in [
            "localhost",
            "LOCALHOST:8080",
            "app.localhost:3000",
            "localhost.localdomain:8080",
            "ip6-localhost:8080",
            "ip6-loopback",
            "localhost6:1",
            "localhost4:1",
        ] {
            let refused = parsed(given).expect_err(given);
            assert!(
                refused.contains("which is two addresses (127.0.0.1 and ::1)"),
                "{given}: {refused}"
            );
        }
        assert_eq!(
            parsed("localhost:3000"),
            Err(
                "\"localhost:3000\" names this machine, which is two addresses (127.0.0.1 and ::1): another process of yours can listen on the one your service does not, on the same port. Name the address and port your service listens on, e.g. 127.0.0.1:3000, and use that address in the URLs the credential is sent to"
                    .into()
            )
        );
    }

    #[test]
    fn an_entry_covers_its_host_and_its_port_if_it_names_one() {
        for (entry, host, port, covered) in [
            ("api.github.com", "api.github.com", 443, true),
            ("api.github.com", "API.GitHub.com", 8443, true),
            ("api.github.com", "github.com", 443, false),
            ("localhost:8080", "localhost", 8080, true),
            ("localhost:8080", "localhost", 8081, false),
            ("localhost:8080", "127.0.0.1", 8080, false),
            ("[::1]:8080", "::1", 8080, true),
            ("[::1]:8080", "::1", 80, false),
            ("2001:db8::1", "2001:db8::1", 1, true),
            // What a kept row cannot say covers nothing.
            ("localhost:x", "localhost", 80, false),
            ("localhost:x", "localhost:x", 80, false),
            ("[::1]", "::1", 80, false),
            // A loopback host kept before ports were named goes on covering every port.
            ("localhost", "localhost", 5000, true),
        ] {
            let loose = loosely_here(entry);
            assert_eq!(loose, entry.starts_with("localhost"), "{entry}");
            assert_eq!(
                covers(entry, host, port),
                covered,
                "{entry} for {host}:{port}"
            );
        }
        for kept_before in [
            "localhost",
            "localhost:8080",
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "app.localhost",
        ] {
            assert!(loosely_here(kept_before), "{kept_before}");
        }
        for exact in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "api.example.com",
            "10.0.0.1",
        ] {
            assert!(!loosely_here(exact), "{exact}");
        }
        for given in [
            "127.0.0.1:8080",
            "[::1]:9",
            "api.example.com",
            "10.1.2.3:22",
        ] {
            let kept = parsed(given).expect(given);
            let (host, port) = match kept.rsplit_once(':') {
                Some((h, p)) if !kept.starts_with("[") || h.ends_with(']') => (
                    h.trim_matches(['[', ']']).to_owned(),
                    p.parse().expect("port"),
                ),
                _ => (kept.clone(), 443),
            };
            assert!(covers(&kept, &host, port), "{kept}");
        }
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
            ("localhost:0", "port after ':'"),
            ("localhost:65536", "port after ':'"),
            ("localhost:+80", "port after ':'"),
            ("localhost:", "port after ':'"),
            ("[::1]x", "IPv6"),
        ] {
            let refused = parsed(given).expect_err(given);
            assert!(refused.contains(why), "{given}: {refused}");
        }
        assert!(parsed(&format!("{}.example", "a".repeat(64))).is_err());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_machines_own_name_is_this_machine() {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("Linux");
        let name = name.trim();
        for given in [format!("{name}:8080"), name.to_owned()] {
            assert!(
                parsed(&given).is_err_and(|e| e.contains("two addresses")),
                "{given}"
            );
        }
    }
}
