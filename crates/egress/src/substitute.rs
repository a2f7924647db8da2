//! What the broker does with one request: the decision is a function of the request's head,
//! its destination and the launch's placeholders, with no I/O.
//!
//! - A placeholder in a header, toward one of its credential's hosts: replaced by the value
//!   (in headers only; the URL and the body are never rewritten).
//! - A placeholder anywhere in the head (a header, the request target) toward any other host:
//!   a leak attempt. The request is refused whole; nothing is replaced in it.
//! - After a leak attempt the launch is frozen: no request of it gets a value again.
//! - A value itself in the head (never the launch's to hold: it was guessed, or learned
//!   elsewhere) is refused like a leak: the broker's answers would otherwise tell a guess right
//!   from wrong.
//!
//! - A placeholder in a request whose `Host` header names another host or port than the
//!   destination: a leak attempt too (a front that routes by `Host`, a CDN's, a PaaS router's,
//!   an ingress's, would hand the value to whichever tenant the server's code named).
//! - A placeholder in plain HTTP to a host other than loopback: a leak attempt (the value would
//!   cross the network in clear), as the built-in `http_request` refuses it.
//!
//! The destination is where the broker connects (the CONNECT target, or the absolute URL's
//! host), never the `Host` header, which the server's code writes.

use std::net::IpAddr;

use hyper::Uri;
use hyper::header::{FORWARDED, HOST, HeaderMap, HeaderValue};
use hyper::http::uri::Authority;
use postern_domain::credential::{
    ROUTING_HEADERS, covers, is_this_machine, kept_parts, names_a_site,
};
use postern_vault::Secret;

/// A credential a launch holds as a placeholder.
pub struct Brokered {
    /// Its scope name (for the audit log).
    pub credential: String,
    /// What the launch holds in its place.
    pub placeholder: String,
    /// The value the broker puts in its place.
    pub value: Secret<String>,
    /// The hosts it may go to (lower case, `host` or `host:port`, as `CredentialHost` keeps
    /// them).
    pub hosts: Vec<String>,
    /// Other forms of the value that must not come back to the launch either (a basic
    /// credential's decoded `user:password` and password).
    pub forms: Vec<Secret<String>>,
}

impl std::fmt::Debug for Brokered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Brokered")
            .field("credential", &self.credential)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Brokered {
    /// Whether its value may go where `route` goes: one of its hosts, on the port that host
    /// names if it names one.
    fn allows(&self, route: Route<'_>) -> bool {
        self.hosts.iter().any(|h| {
            covers(h, route.host, route.port)
                || route.address.is_some_and(|a| covers(h, a, route.port))
        })
    }
}

/// Where a request goes: the host and port the broker connects to, and whether over TLS.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    /// The host, lower case, an IPv6 address without brackets.
    pub host: &'a str,
    /// The port.
    pub port: u16,
    /// TLS to the host (the broker verifies its certificate).
    pub tls: bool,
    /// For a request to this machine by name (`localhost`): the address of this machine a
    /// brokered credential is bound to on this port, where the broker connects if the request
    /// carries its value ([`local_address`]).
    pub address: Option<&'a str>,
}

/// The one address of this machine that `launch`'s credentials are bound to on `port`, for a
/// request to `host` when `host` names this machine (`localhost`: two addresses, 127.0.0.1 and
/// ::1, which two processes can hold on the same port). Its request then goes to the address
/// the person named, never to whichever the resolver lists first. `None` for any other host,
/// or when the credentials name no such address, or more than one.
pub fn local_address<'a>(host: &str, port: u16, launch: &'a [Brokered]) -> Option<&'a str> {
    if !is_this_machine(host) || host.parse::<IpAddr>().is_ok() {
        return None;
    }
    let mut addresses = launch.iter().flat_map(|b| &b.hosts).filter_map(|entry| {
        let (address, bound) = kept_parts(entry)?;
        (bound?.parse() == Ok(port)
            && address.parse::<IpAddr>().is_ok()
            && is_this_machine(address))
        .then_some(address)
    });
    let first = addresses.next()?;
    addresses.all(|a| a == first).then_some(first)
}

impl Route<'_> {
    /// Whether a header that names the site a request is for (`Host`, and those fronts route
    /// by too: `Forwarded: host=` and every other that may name a site, `names_a_site`:
    /// `X-Forwarded-Host`, `X-Original-Host`, ...) names another host, or another port,
    /// than this route. One that cannot be read, or that carries user information
    /// (`evil.example@host`: a front may read the part before the `@` as the host), counts as
    /// another; one without a port names the host alone, as clients write it for the scheme's
    /// own port and some for any.
    fn addressed_elsewhere(&self, headers: &HeaderMap) -> bool {
        let forwarded = headers
            .get_all(FORWARDED)
            .iter()
            .flat_map(|value| forwarded_hosts(value.as_bytes()));
        // The headers known to name a site are held to the destination whatever they say;
        // another with `host` in its name only when its value looks like a host (a dotted name,
        // an address, a port): `X-Use-Hostname: true` is not one.
        let known = |name: &str| name == HOST || ROUTING_HEADERS.contains(&name);
        let routing = headers
            .iter()
            .filter(|(name, _)| {
                *name != FORWARDED && (*name == HOST || names_a_site(name.as_str()))
            })
            .flat_map(|(name, value)| {
                value
                    .as_bytes()
                    .split(|b| *b == b',')
                    .map(<[u8]>::to_vec)
                    .filter(|v| known(name.as_str()) || v.iter().any(|b| b".:[".contains(b)))
                    .collect::<Vec<_>>()
            });
        routing.chain(forwarded).any(|value| !self.is(&value))
    }

    /// Whether `authority` (a header's text) names this route's host (and port, if any).
    fn is(&self, authority: &[u8]) -> bool {
        let Some(authority) = std::str::from_utf8(authority)
            .ok()
            .map(|text| text.trim().trim_matches('"'))
            .filter(|text| !text.contains('@'))
            .and_then(|text| text.parse::<Authority>().ok())
        else {
            return false;
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        same_host(host, self.host) && authority.port_u16().is_none_or(|p| p == self.port)
    }

    /// Whether a value would cross the network in clear: plain HTTP to a host that is not
    /// loopback.
    fn in_clear(&self) -> bool {
        !self.tls && !is_loopback(self.host)
    }
}

/// The `host=` values of a `Forwarded` header (RFC 7239), quotes left for [`Route::is`].
fn forwarded_hosts(value: &[u8]) -> Vec<Vec<u8>> {
    value
        .split(|b| *b == b',' || *b == b';')
        .filter_map(|pair| {
            let pair = pair.trim_ascii();
            let at = pair.iter().position(|b| *b == b'=')?;
            // (`host = x`, spaced as RFC 7239 does not allow, as a lenient front reads it.)
            pair[..at]
                .trim_ascii()
                .eq_ignore_ascii_case(b"host")
                .then(|| pair[at + 1..].to_vec())
        })
        .collect()
}

/// Host names compared as DNS compares them: case aside, and a final dot aside.
fn same_host(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// `localhost`, or an address in 127.0.0.0/8 or `::1`.
fn is_loopback(host: &str) -> bool {
    same_host(host, "localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why a request carrying placeholders is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Toward a host the credentials are not bound to.
    OtherHost,
    /// Its `Host` header names another host or port than where it goes.
    HostHeader,
    /// In plain HTTP to a host that is not loopback.
    InClear,
    /// It carries a value itself.
    Value,
    /// The launch is frozen after an earlier leak attempt.
    Frozen,
}

impl Refused {
    /// Why, in words, after "it carries the placeholder of X".
    pub fn reason(self, host: &str) -> String {
        match self {
            Refused::OtherHost => format!("toward {host}, where it may not go"),
            Refused::HostHeader => format!(
                "toward {host} with a Host header that names another host or port: a front that routes by Host would hand the value to another site"
            ),
            Refused::InClear => format!(
                "toward {host} in plain HTTP, where the value would cross the network in clear: credential values go over HTTPS only (plain HTTP only to loopback)"
            ),
            Refused::Value => format!("toward {host}, with a credential's value itself in it"),
            Refused::Frozen => format!(
                "toward {host}, and this launch is frozen after an earlier request that tried to send one where it may not go"
            ),
        }
    }
}

/// What becomes of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Forward it; these credentials' values were put in its headers.
    Forward {
        /// The credentials substituted (each once).
        substituted: Vec<String>,
        /// The placeholders replaced: the answer gives these back where the values are.
        placeholders: Vec<String>,
    },
    /// Refuse it: it carries these credentials' placeholders toward a host they are not bound
    /// to (or the launch is frozen).
    Leak {
        /// The credentials whose placeholders it carries.
        credentials: Vec<String>,
        /// Why it is refused.
        why: Refused,
    },
}

/// Decides `headers` and `target` going by `route`, replacing placeholders in `headers` when
/// the request may go. With `frozen`, any placeholder is refused.
pub fn decide(
    headers: &mut HeaderMap,
    target: &Uri,
    route: Route<'_>,
    launch: &[Brokered],
    frozen: bool,
) -> Outcome {
    let target = target.to_string();
    let guessed: Vec<String> = launch
        .iter()
        .filter(|b| {
            let value = b.value.expose();
            !value.is_empty()
                && (target.contains(value.as_str())
                    || headers
                        .values()
                        .any(|v| contains(v.as_bytes(), value.as_bytes())))
        })
        .map(|b| b.credential.clone())
        .collect();
    if !guessed.is_empty() {
        return Outcome::Leak {
            credentials: guessed,
            why: Refused::Value,
        };
    }
    let carried: Vec<&Brokered> = launch
        .iter()
        .filter(|b| {
            target.contains(&b.placeholder)
                || headers
                    .values()
                    .any(|v| contains(v.as_bytes(), b.placeholder.as_bytes()))
        })
        .collect();
    let why = if carried.is_empty() {
        None
    } else if frozen {
        Some(Refused::Frozen)
    } else if carried.iter().any(|b| !b.allows(route)) {
        Some(Refused::OtherHost)
    } else if route.addressed_elsewhere(headers) {
        Some(Refused::HostHeader)
    } else if route.in_clear() {
        Some(Refused::InClear)
    } else {
        None
    };
    if let Some(why) = why {
        let credentials = carried
            .iter()
            .filter(|b| why != Refused::OtherHost || !b.allows(route))
            .map(|b| b.credential.clone())
            .collect();
        return Outcome::Leak { credentials, why };
    }
    let mut substituted = Vec::new();
    let mut placeholders = Vec::new();
    for brokered in carried {
        let mut replaced = false;
        for value in headers.values_mut() {
            let Ok(text) = value.to_str() else { continue };
            if !text.contains(&brokered.placeholder) {
                continue;
            }
            let swapped = text.replace(&brokered.placeholder, brokered.value.expose());
            if let Ok(mut new) = HeaderValue::from_str(&swapped) {
                new.set_sensitive(true);
                *value = new;
                replaced = true;
            }
        }
        if replaced {
            substituted.push(brokered.credential.clone());
            placeholders.push(brokered.placeholder.clone());
        }
    }
    Outcome::Forward {
        substituted,
        placeholders,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACEHOLDER: &str = "ghp_PLACEHOLDERplaceholder0123456789ab";

    fn launch() -> Vec<Brokered> {
        vec![Brokered {
            credential: "github".into(),
            placeholder: PLACEHOLDER.into(),
            value: Secret::new("ghp_realvalue".into()),
            hosts: vec!["api.github.com".into()],
            forms: Vec::new(),
        }]
    }

    fn headers(auth: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_str(auth).unwrap());
        headers.insert("accept", HeaderValue::from_static("*/*"));
        headers
    }

    fn uri(text: &str) -> Uri {
        text.parse().unwrap()
    }

    fn tls(host: &str) -> Route<'_> {
        Route {
            host,
            port: 443,
            tls: true,
            address: None,
        }
    }

    #[test]
    fn the_value_goes_in_the_headers_toward_a_bound_host_only() {
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        let outcome = decide(
            &mut h,
            &uri("/user"),
            tls("API.GitHub.com"),
            &launch(),
            false,
        );
        assert_eq!(
            outcome,
            Outcome::Forward {
                substituted: vec!["github".into()],
                placeholders: vec![PLACEHOLDER.into()],
            }
        );
        assert_eq!(h["authorization"], "Bearer ghp_realvalue");
        assert!(h["authorization"].is_sensitive());
        assert_eq!(h["accept"], "*/*");
    }

    #[test]
    fn a_placeholder_toward_another_host_is_a_leak_and_nothing_is_replaced() {
        let mut h = headers(&format!("token {PLACEHOLDER}"));
        let outcome = decide(&mut h, &uri("/"), tls("evil.example"), &launch(), false);
        assert_eq!(
            outcome,
            Outcome::Leak {
                credentials: vec!["github".into()],
                why: Refused::OtherHost,
            }
        );
        assert!(h["authorization"].to_str().unwrap().contains(PLACEHOLDER));

        let mut h = headers("none");
        let in_url = uri(&format!("/collect?t={PLACEHOLDER}"));
        assert!(matches!(
            decide(&mut h, &in_url, tls("evil.example"), &launch(), false),
            Outcome::Leak { .. }
        ));
    }

    #[test]
    fn the_value_itself_in_a_request_is_refused_even_toward_its_host() {
        let mut h = headers("Bearer ghp_realvalue");
        assert!(matches!(
            decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false),
            Outcome::Leak { .. }
        ));
        let mut h = headers("none");
        let guess = uri("/search?q=ghp_realvalue");
        assert!(matches!(
            decide(&mut h, &guess, tls("api.github.com"), &launch(), false),
            Outcome::Leak { .. }
        ));
    }

    #[test]
    fn a_request_without_placeholders_passes_untouched_and_a_frozen_launch_gets_no_value() {
        let mut h = headers("Basic Zm9vOmJhcg==");
        assert_eq!(
            decide(&mut h, &uri("/"), tls("example.com"), &launch(), false),
            Outcome::Forward {
                substituted: vec![],
                placeholders: vec![],
            }
        );
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        assert!(matches!(
            decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), true),
            Outcome::Leak { .. }
        ));
        assert!(h["authorization"].to_str().unwrap().contains(PLACEHOLDER));
    }

    #[test]
    fn a_value_goes_only_where_the_host_header_says_it_goes() {
        let with_host = |host: &str| {
            let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
            h.insert(HOST, HeaderValue::from_str(host).unwrap());
            h
        };
        for same in ["api.github.com", "API.GitHub.com.", "api.github.com:443"] {
            let mut h = with_host(same);
            let outcome = decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false);
            assert!(matches!(outcome, Outcome::Forward { .. }), "{same}");
            assert_eq!(h["authorization"], "Bearer ghp_realvalue", "{same}");
        }
        for other in [
            "evil.tenant.example",
            "api.github.com:8443",
            "not a host",
            "evil.tenant.example@api.github.com",
        ] {
            let mut h = with_host(other);
            let outcome = decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false);
            assert_eq!(
                outcome,
                Outcome::Leak {
                    credentials: vec!["github".into()],
                    why: Refused::HostHeader,
                },
                "{other}"
            );
            assert!(
                h["authorization"].to_str().unwrap().contains(PLACEHOLDER),
                "nothing replaced for {other}"
            );
        }
        // The headers fronts route by besides Host.
        for (name, value) in [
            ("x-forwarded-host", "evil.tenant.example"),
            (
                "forwarded",
                "for=1.2.3.4;host=evil.tenant.example;proto=https",
            ),
            ("forwarded", "host=\"evil.tenant.example\""),
            ("forwarded", "for=1.2.3.4; host =evil.tenant.example"),
            ("x-original-host", "evil.tenant.example"),
            ("x-host", "evil.tenant.example"),
            ("x-forwarded-server", "evil.tenant.example"),
            ("x-http-host-override", "evil.tenant.example"),
            ("x-forwarded-host-override", "evil.tenant.example"),
            ("x-forwarded-host-override", "10.0.0.7"),
        ] {
            let mut h = with_host("api.github.com");
            h.insert(name, HeaderValue::from_static(value));
            let outcome = decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false);
            assert!(
                matches!(
                    outcome,
                    Outcome::Leak {
                        why: Refused::HostHeader,
                        ..
                    }
                ),
                "{name}: {value}: {outcome:?}"
            );
        }
        let mut h = with_host("api.github.com");
        h.insert(
            "forwarded",
            HeaderValue::from_static("for=1.2.3.4;host=api.github.com"),
        );
        let outcome = decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false);
        assert!(matches!(outcome, Outcome::Forward { .. }), "{outcome:?}");
        // A header with `host` in its name whose value is no host is the server's business.
        let mut h = with_host("api.github.com");
        h.insert("x-use-hostname", HeaderValue::from_static("true"));
        let outcome = decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false);
        assert!(matches!(outcome, Outcome::Forward { .. }), "{outcome:?}");
        // No placeholder, no value: the Host header is the server's business.
        let mut h = headers("none");
        h.insert(HOST, HeaderValue::from_static("elsewhere.example"));
        assert!(matches!(
            decide(&mut h, &uri("/"), tls("api.github.com"), &launch(), false),
            Outcome::Forward { .. }
        ));
    }

    #[test]
    fn a_value_crosses_the_network_only_over_tls_and_plain_http_only_to_loopback() {
        let plain = |host| Route {
            host,
            port: 80,
            tls: false,
            address: None,
        };
        let mut launch = launch();
        launch[0].hosts = vec![
            "api.github.com".into(),
            "localhost:80".into(),
            "127.0.0.1:80".into(),
        ];
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        assert_eq!(
            decide(&mut h, &uri("/"), plain("api.github.com"), &launch, false),
            Outcome::Leak {
                credentials: vec!["github".into()],
                why: Refused::InClear,
            }
        );
        assert!(h["authorization"].to_str().unwrap().contains(PLACEHOLDER));
        for loopback in ["localhost", "127.0.0.1"] {
            let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
            let outcome = decide(&mut h, &uri("/"), plain(loopback), &launch, false);
            assert!(matches!(outcome, Outcome::Forward { .. }), "{loopback}");
            assert_eq!(h["authorization"], "Bearer ghp_realvalue");
        }
        let mut h = headers("none");
        assert!(matches!(
            decide(&mut h, &uri("/"), plain("example.com"), &launch, false),
            Outcome::Forward { .. }
        ));
        // Bound to one port on this machine: another port there is another site.
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        let other_port = Route {
            port: 8081,
            ..plain("localhost")
        };
        assert_eq!(
            decide(&mut h, &uri("/"), other_port, &launch, false),
            Outcome::Leak {
                credentials: vec!["github".into()],
                why: Refused::OtherHost,
            }
        );
        assert!(h["authorization"].to_str().unwrap().contains(PLACEHOLDER));
    }

    /// `localhost` is two addresses: a request to it carrying a value goes to the one address
    /// of this machine its credential names on that port, and is decided as going there.
    #[test]
    fn a_value_for_this_machine_by_name_goes_to_the_address_its_credential_names() {
        let mut launch = launch();
        launch[0].hosts = vec!["127.0.0.1:8080".into()];
        assert_eq!(local_address("localhost", 8080, &launch), Some("127.0.0.1"));
        assert_eq!(
            local_address("app.localhost", 8080, &launch),
            Some("127.0.0.1")
        );
        assert_eq!(
            local_address("localhost", 8081, &launch),
            None,
            "another port"
        );
        assert_eq!(
            local_address("127.0.0.1", 8080, &launch),
            None,
            "an address already"
        );
        assert_eq!(local_address("api.github.com", 8080, &launch), None);
        let mut both = self::launch();
        both[0].hosts = vec!["127.0.0.1:8080".into(), "[::1]:8080".into()];
        assert_eq!(
            local_address("localhost", 8080, &both),
            None,
            "which one: neither"
        );
        both[0].hosts = vec!["[::1]:8080".into()];
        assert_eq!(local_address("localhost", 8080, &both), Some("::1"));

        let route = |address| Route {
            host: "localhost",
            port: 8080,
            tls: false,
            address,
        };
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        h.insert(HOST, HeaderValue::from_static("localhost:8080"));
        let outcome = decide(&mut h, &uri("/"), route(Some("127.0.0.1")), &launch, false);
        assert!(matches!(outcome, Outcome::Forward { .. }), "{outcome:?}");
        assert_eq!(h["authorization"], "Bearer ghp_realvalue");
        // A credential kept loosely as `localhost`, beside one bound to the address, goes
        // there too (to the address).
        let mut loose = self::launch();
        loose[0].hosts = vec!["localhost".into()];
        loose.push(Brokered {
            credential: "local".into(),
            placeholder: "ghp_OTHERplaceholder0123456789abcdef".into(),
            value: Secret::new("other-value".into()),
            hosts: vec!["127.0.0.1:8080".into()],
            forms: Vec::new(),
        });
        assert_eq!(local_address("localhost", 8080, &loose), Some("127.0.0.1"));
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        let outcome = decide(&mut h, &uri("/"), route(Some("127.0.0.1")), &loose, false);
        assert!(matches!(outcome, Outcome::Forward { .. }), "{outcome:?}");
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        assert_eq!(
            decide(&mut h, &uri("/"), route(None), &launch, false),
            Outcome::Leak {
                credentials: vec!["github".into()],
                why: Refused::OtherHost,
            },
            "by name without an address bound: refused"
        );
    }
}
