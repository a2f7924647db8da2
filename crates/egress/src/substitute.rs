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
//! The destination is where the broker connects (the CONNECT target, or the absolute URL's
//! host), never the `Host` header, which the server's code writes.

use hyper::Uri;
use hyper::header::{HeaderMap, HeaderValue};
use postern_vault::Secret;

/// A credential a launch holds as a placeholder.
pub struct Brokered {
    /// Its scope name (for the audit log).
    pub credential: String,
    /// What the launch holds in its place.
    pub placeholder: String,
    /// The value the broker puts in its place.
    pub value: Secret<String>,
    /// The hosts it may go to (lower case, as `CredentialHost` keeps them).
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
    fn allows(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
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
    },
}

/// Decides `headers` and `target` headed for `host`, replacing placeholders in `headers` when
/// the request may go. With `frozen`, any placeholder is refused.
pub fn decide(
    headers: &mut HeaderMap,
    target: &Uri,
    host: &str,
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
    let refused: Vec<String> = carried
        .iter()
        .filter(|b| frozen || !b.allows(host))
        .map(|b| b.credential.clone())
        .collect();
    if !refused.is_empty() {
        return Outcome::Leak {
            credentials: refused,
        };
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

    #[test]
    fn the_value_goes_in_the_headers_toward_a_bound_host_only() {
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        let outcome = decide(&mut h, &uri("/user"), "API.GitHub.com", &launch(), false);
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
        let outcome = decide(&mut h, &uri("/"), "evil.example", &launch(), false);
        assert_eq!(
            outcome,
            Outcome::Leak {
                credentials: vec!["github".into()]
            }
        );
        assert!(h["authorization"].to_str().unwrap().contains(PLACEHOLDER));

        let mut h = headers("none");
        let in_url = uri(&format!("/collect?t={PLACEHOLDER}"));
        assert!(matches!(
            decide(&mut h, &in_url, "evil.example", &launch(), false),
            Outcome::Leak { .. }
        ));
    }

    #[test]
    fn the_value_itself_in_a_request_is_refused_even_toward_its_host() {
        let mut h = headers("Bearer ghp_realvalue");
        assert!(matches!(
            decide(&mut h, &uri("/"), "api.github.com", &launch(), false),
            Outcome::Leak { .. }
        ));
        let mut h = headers("none");
        let guess = uri("/search?q=ghp_realvalue");
        assert!(matches!(
            decide(&mut h, &guess, "api.github.com", &launch(), false),
            Outcome::Leak { .. }
        ));
    }

    #[test]
    fn a_request_without_placeholders_passes_untouched_and_a_frozen_launch_gets_no_value() {
        let mut h = headers("Basic Zm9vOmJhcg==");
        assert_eq!(
            decide(&mut h, &uri("/"), "example.com", &launch(), false),
            Outcome::Forward {
                substituted: vec![],
                placeholders: vec![],
            }
        );
        let mut h = headers(&format!("Bearer {PLACEHOLDER}"));
        assert!(matches!(
            decide(&mut h, &uri("/"), "api.github.com", &launch(), true),
            Outcome::Leak { .. }
        ));
        assert!(h["authorization"].to_str().unwrap().contains(PLACEHOLDER));
    }
}
