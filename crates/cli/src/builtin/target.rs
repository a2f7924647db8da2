//! Where `http_request` may go, and with what: the URL rules (HTTPS only, plain http only to
//! loopback, no credentials in the URL), the agent's own headers, and the check that an
//! injected credential is for the host the request actually goes to.
//!
//! The host is read with the same parse the gateway used to pick the credentials
//! (`postern_gateway::authorize::host_text`), and the request is sent to this very parse, so
//! what was checked is what is connected to.

use postern_gateway::authorize::{host_text, is_loopback};
use ureq::http::{HeaderName, HeaderValue};
use url::Url;

use super::tool::ToolError;

/// Headers an agent may not set: they would change where or how the request is framed, or
/// carry authority the gate does not see (the same list a credential cannot be sent as).
use postern_domain::credential::CLIENT_HEADERS as FORBIDDEN_HEADERS;
use postern_domain::credential::covers;
/// Headers an agent may not set either: fronts route by them as by `Host`, so a request whose
/// URL names a credential's host could be handed to another site behind the same front.
use postern_domain::credential::names_a_site;

/// A URL `http_request` may send to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL, fragment removed.
    pub url: Url,
    /// Its host as credentials name it (lower case; IPv6 without brackets).
    pub host: String,
}

impl Target {
    /// Applies the rules: `https`, or `http` to a loopback host (127.0.0.0/8, ::1,
    /// `localhost`); a host; no user name or password in the URL.
    pub fn parse(text: &str) -> Result<Target, ToolError> {
        let mut url = Url::parse(text).map_err(|e| {
            ToolError::new("invalid_url", format!("'{text}' is not a valid URL ({e})"))
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolError::new(
                "invalid_url",
                "a URL may not carry a user name or password; a human binds credentials to Postern instead",
            ));
        }
        let host = host_text(&url).filter(|h| !h.is_empty()).ok_or_else(|| {
            ToolError::new("invalid_url", format!("the URL '{text}' names no host"))
        })?;
        match url.scheme() {
            "https" => {}
            "http" if is_loopback(&url) => {}
            "http" => {
                return Err(ToolError::new(
                    "https_required",
                    format!(
                        "plain http is allowed only to loopback hosts (localhost, 127.0.0.0/8, ::1); use https://{host}…"
                    ),
                ));
            }
            other => {
                return Err(ToolError::new(
                    "invalid_url",
                    format!(
                        "only https URLs (or http to a loopback host) are allowed, not '{other}:'"
                    ),
                ));
            }
        }
        url.set_fragment(None);
        Ok(Target { url, host })
    }

    /// Whether `other` is on the same origin (scheme, host, port): the agent's own
    /// credentials-like headers are kept across a redirect only then.
    pub fn same_origin(&self, other: &Target) -> bool {
        self.url.origin() == other.url.origin()
    }

    /// The port the request goes to (the scheme's own when the URL names none).
    pub fn port(&self) -> u16 {
        self.url.port_or_known_default().unwrap_or(443)
    }

    /// Whether a credential bound to `hosts` may go to this target: its host, and its port
    /// where the credential's host names one.
    pub fn allowed_for(&self, hosts: &[String]) -> bool {
        hosts.iter().any(|h| covers(h, &self.host, self.port()))
    }
}

/// The agent's `headers` argument as request headers; refuses invalid names and values and
/// the headers in [`FORBIDDEN_HEADERS`].
pub fn agent_headers(
    headers: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<(HeaderName, HeaderValue)>, ToolError> {
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ToolError::new(
                "invalid_arguments",
                format!("'{name}' is not a valid header name"),
            )
        })?;
        if FORBIDDEN_HEADERS.contains(&header.as_str()) {
            return Err(ToolError::new(
                "invalid_arguments",
                format!("the header '{name}' is set by the HTTP client and cannot be given"),
            ));
        }
        if names_a_site(header.as_str()) {
            return Err(ToolError::new(
                "invalid_arguments",
                format!(
                    "the header '{name}' names the site a request is for, which only the URL says here; it cannot be given"
                ),
            ));
        }
        let value = value.as_str().ok_or_else(|| {
            ToolError::new(
                "invalid_arguments",
                format!("the header '{name}' must be a string"),
            )
        })?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            ToolError::new(
                "invalid_arguments",
                format!("the value of header '{name}' has characters a header cannot carry"),
            )
        })?;
        out.push((header, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn code(text: &str) -> &'static str {
        Target::parse(text).map(|_| "ok").unwrap_or_else(|e| e.code)
    }

    #[test]
    fn https_anywhere_plain_http_only_to_loopback() {
        for ok in [
            "https://api.example.com/v1?q=1",
            "https://localhost:8443/",
            "http://localhost/",
            "http://LOCALHOST:8080/x",
            "http://127.0.0.1:9/",
            "http://127.200.3.4/",
            "http://127.1/",
            "http://[::1]:8080/",
            "https://[2001:db8::1]/",
        ] {
            assert_eq!(code(ok), "ok", "{ok}");
        }
        for (bad, expected) in [
            ("http://api.example.com/", "https_required"),
            ("http://localhost.example.com/", "https_required"),
            ("http://10.0.0.1/", "https_required"),
            ("http://[::ffff:127.0.0.1]/", "https_required"),
            ("http://0.0.0.0/", "https_required"),
            ("ftp://localhost/", "invalid_url"),
            ("file:///etc/passwd", "invalid_url"),
            ("data:text/plain,hi", "invalid_url"),
            ("https://user:pw@api.example.com/", "invalid_url"),
            ("https://localhost@evil.example/", "invalid_url"),
            ("/relative", "invalid_url"),
            ("", "invalid_url"),
        ] {
            assert_eq!(code(bad), expected, "{bad}");
        }
    }

    #[test]
    fn the_host_is_normalised_as_credentials_name_it() {
        let host = |u: &str| Target::parse(u).expect(u).host;
        assert_eq!(host("https://API.Example.COM/"), "api.example.com");
        assert_eq!(host("http://127.1:80/"), "127.0.0.1");
        assert_eq!(host("http://[::1]/"), "::1");
        let t = Target::parse("https://api.example.com/x#frag").expect("url");
        assert_eq!(t.url.as_str(), "https://api.example.com/x");
    }

    #[test]
    fn a_credential_goes_only_to_its_own_hosts() {
        let t = Target::parse("https://API.example.com/").expect("url");
        assert!(t.allowed_for(&["api.example.com".into()]));
        assert!(t.allowed_for(&["other".into(), "Api.Example.Com".into()]));
        assert!(!t.allowed_for(&["example.com".into()]));
        assert!(!t.allowed_for(&[]));
        let evil = Target::parse("https://api.example.com.evil.net/").expect("url");
        assert!(!evil.allowed_for(&["api.example.com".into()]));
        // A credential for one port on this machine goes to no other port there.
        let local = |u: &str| Target::parse(u).expect(u);
        let bound = ["127.0.0.1:8080".to_owned()];
        assert!(local("http://127.0.0.1:8080/x").allowed_for(&bound));
        assert!(!local("http://127.0.0.1:8081/x").allowed_for(&bound));
        assert!(!local("http://127.0.0.1/x").allowed_for(&bound));
        assert!(!local("http://localhost:8080/x").allowed_for(&bound));
        assert!(local("https://127.0.0.1:443/").allowed_for(&["127.0.0.1:443".into()]));
        assert!(local("https://127.0.0.1/").allowed_for(&["127.0.0.1:443".into()]));
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let a = Target::parse("https://localhost:1/a").expect("a");
        assert!(a.same_origin(&Target::parse("https://localhost:1/b").expect("b")));
        assert!(!a.same_origin(&Target::parse("https://localhost:2/").expect("port")));
        assert!(!a.same_origin(&Target::parse("https://127.0.0.1:1/").expect("host")));
        assert!(!a.same_origin(&Target::parse("http://localhost:1/").expect("scheme")));
    }

    #[test]
    fn agent_headers_are_checked() {
        let ok =
            json!({"Accept": "application/json", "X-Trace": "1", "Authorization": "Bearer own"});
        assert_eq!(
            agent_headers(ok.as_object().expect("obj"))
                .expect("ok")
                .len(),
            3
        );
        for bad in [
            json!({"Host": "evil.example"}),
            json!({"Content-Length": "1"}),
            json!({"Transfer-Encoding": "chunked"}),
            json!({"X-Bad": "a\r\nInjected: yes"}),
            json!({"bad name": "x"}),
            json!({"X-Num": 1}),
            json!({"X-Forwarded-Host": "evil.tenant.example"}),
            json!({"forwarded": "host=evil.tenant.example"}),
            json!({"X-Original-Host": "evil.tenant.example"}),
            json!({"X-Forwarded-Host-Override": "evil.tenant.example"}),
        ] {
            let err = agent_headers(bad.as_object().expect("obj")).expect_err("refused");
            assert_eq!(err.code, "invalid_arguments", "{bad}");
        }
        let routing = json!({"X-Forwarded-Host": "evil.tenant.example"});
        let err = agent_headers(routing.as_object().expect("obj")).expect_err("refused");
        assert!(err.message.contains("only the URL says"), "{}", err.message);
    }
}
