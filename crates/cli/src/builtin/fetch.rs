//! Sending one `http_request`: the HTTP client (ureq, rustls), the redirect policy, the size
//! and time bounds.
//!
//! Every request goes out through the engine's egress broker when the engine gave this
//! process one (`POSTERN_EGRESS_PROXY`, and the broker's authority in `POSTERN_EGRESS_CA`, the
//! only one trusted then: the broker verifies the host against the platform's roots). A
//! credential reaches this process only as a placeholder, which the broker replaces toward
//! the credential's hosts; the value never enters it.
//!
//! Redirect policy: a request that carries an injected credential never follows a redirect
//! (the 3xx goes back to the agent with its Location; calling that URL is a new call through
//! the gate, with the credentials of *its* host). Other requests follow at most
//! [`MAX_REDIRECTS`], each only to an `https` URL; the agent's own `Authorization` and
//! `Cookie` headers are dropped when a redirect leaves the origin.

use std::io::Read;
use std::time::Duration;

use ureq::http::{self, HeaderName, HeaderValue, Method, Response, header};
use ureq::tls::{RootCerts, TlsConfig};
use ureq::{Agent, Body};

use super::target::Target;
use super::tool::{HttpCall, Injected, Reply, ToolError};

/// The most body bytes returned (1 MiB); the rest is cut off, with a note.
pub const MAX_BODY: usize = 1024 * 1024;
/// Redirects followed for a request without a credential.
pub const MAX_REDIRECTS: usize = 5;
/// The whole request, redirects included.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Connecting (DNS, TCP, TLS).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client, shared by every call of the process.
#[derive(Debug, Clone)]
pub struct Client {
    agent: Agent,
}

impl Default for Client {
    fn default() -> Self {
        Self::new()
    }
}

/// The engine's egress broker for this process: its proxy and its authority, when the engine
/// named both and they can be used.
fn broker() -> Option<(ureq::Proxy, ureq::tls::Certificate<'static>)> {
    let proxy = std::env::var("POSTERN_EGRESS_PROXY").ok()?;
    let ca = std::env::var_os("POSTERN_EGRESS_CA")?;
    let read = std::fs::read(&ca)
        .map_err(|e| e.to_string())
        .and_then(|pem| ureq::tls::Certificate::from_pem(&pem).map_err(|e| e.to_string()))
        .and_then(|ca| Ok((ureq::Proxy::new(&proxy).map_err(|e| e.to_string())?, ca)));
    match read {
        Ok(broker) => Some(broker),
        Err(why) => {
            // Without the broker no credential can go out: the engine lends them through it.
            eprintln!("postern builtin: the egress broker cannot be used ({why}); going direct");
            None
        }
    }
}

impl Client {
    /// A client that never follows redirects itself (this module does, by its policy) and
    /// returns every status as a response. Through the engine's egress broker when the engine
    /// named one, trusting the broker's authority alone; otherwise direct (no proxy from the
    /// environment: a setting there should not reroute credentials), trusting the platform's
    /// certificate store (`SSL_CERT_FILE` and `SSL_CERT_DIR` replace it on Linux).
    pub fn new() -> Client {
        let (proxy, roots) = match broker() {
            Some((proxy, ca)) => (Some(proxy), RootCerts::new_with_certs(&[ca])),
            None => (None, RootCerts::PlatformVerifier),
        };
        let config = Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .proxy(proxy)
            .timeout_global(Some(TOTAL_TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .user_agent(format!("postern/{}", env!("CARGO_PKG_VERSION")))
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .build();
        Client {
            agent: config.into(),
        }
    }

    /// Sends `call` with `injected` headers, by the redirect policy above.
    pub fn send(&self, call: HttpCall, injected: &[Injected]) -> Result<Reply, ToolError> {
        if let Some(stray) = injected.iter().find(|i| !call.target.allowed_for(&i.hosts)) {
            // The gateway picked the credential for this URL's host: reaching here means the
            // two disagree, and nothing is sent.
            return Err(ToolError::new(
                "credential_host_mismatch",
                format!(
                    "a credential for {} was handed over for a request to {}; nothing was sent",
                    stray.hosts.join(", "),
                    call.target.host
                ),
            ));
        }
        let HttpCall {
            mut target,
            mut method,
            mut headers,
            body,
        } = call;
        let mut body = body.map(String::into_bytes);
        let mut followed = Vec::new();
        loop {
            let response = self.once(&method, &target, &headers, injected, body.as_deref())?;
            let location = redirect_location(&response, &target);
            let Some(location) = location else {
                return read(response, &target, followed, None);
            };
            let why_not = if !injected.is_empty() {
                Some(
                    "the request carried a credential; call the Location URL yourself if you mean to go there",
                )
            } else if followed.len() >= MAX_REDIRECTS {
                Some("too many redirects")
            } else {
                match Target::parse(&location) {
                    Ok(next) if next.url.scheme() == "https" => {
                        if !target.same_origin(&next) {
                            headers.retain(|(name, _)| {
                                name != header::AUTHORIZATION && name != header::COOKIE
                            });
                        }
                        if response.status() == http::StatusCode::SEE_OTHER
                            || (matches!(response.status().as_u16(), 301 | 302)
                                && method == Method::POST)
                        {
                            if method != Method::HEAD {
                                method = Method::GET;
                            }
                            body = None;
                        }
                        followed.push(next.url.to_string());
                        target = next;
                        continue;
                    }
                    _ => Some("only redirects to https URLs are followed"),
                }
            };
            return read(response, &target, followed, why_not);
        }
    }

    fn once(
        &self,
        method: &Method,
        target: &Target,
        headers: &[(HeaderName, HeaderValue)],
        injected: &[Injected],
        body: Option<&[u8]>,
    ) -> Result<Response<Body>, ToolError> {
        let mut request = http::Request::builder()
            .method(method.clone())
            .uri(target.url.as_str());
        for (name, value) in headers {
            if !injected.iter().any(|i| i.header == name) {
                request = request.header(name, value);
            }
        }
        for i in injected {
            let mut value = HeaderValue::from_str(i.value.expose()).map_err(|_| {
                ToolError::new(
                    "internal_error",
                    "a credential's value cannot be sent as a header",
                )
            })?;
            value.set_sensitive(true);
            request = request.header(&i.header, value);
        }
        let sent = match body {
            Some(body) => request.body(body).map(|r| self.agent.run(r)),
            None => request.body(()).map(|r| self.agent.run(r)),
        };
        let sent = sent.map_err(|_| {
            ToolError::new(
                "invalid_url",
                format!("the URL '{}' cannot be requested", target.url),
            )
        })?;
        sent.map_err(|e| transport_error(e, target))
    }
}

/// The absolute URL a redirect response points to, if it is one.
fn redirect_location(response: &Response<Body>, from: &Target) -> Option<String> {
    if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = response.headers().get(header::LOCATION)?.to_str().ok()?;
    from.url.join(location).ok().map(|u| u.to_string())
}

/// Reads the status, shown headers and at most [`MAX_BODY`] bytes of the body.
fn read(
    mut response: Response<Body>,
    target: &Target,
    followed: Vec<String>,
    unfollowed: Option<&'static str>,
) -> Result<Reply, ToolError> {
    let status = response.status().as_u16();
    let mut headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| Reply::shown(name.as_str()))
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    // A Location is shown resolved, so the agent can call it as it is.
    if let Some(location) = redirect_location(&response, target) {
        for (name, value) in &mut headers {
            if name == "location" {
                value.clone_from(&location);
            }
        }
    }
    let mut body = Vec::new();
    response
        .body_mut()
        .as_reader()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| {
            ToolError::new(
                "connection_failed",
                format!("reading the response from {} failed: {e}", target.host),
            )
        })?;
    let truncated = body.len() > MAX_BODY;
    body.truncate(MAX_BODY);
    Ok(Reply {
        url: target.url.to_string(),
        status,
        headers,
        body,
        truncated,
        followed,
        unfollowed,
    })
}

/// A transport failure as a tool error with a stable code.
fn transport_error(error: ureq::Error, target: &Target) -> ToolError {
    let host = &target.host;
    match error {
        ureq::Error::Timeout(what) => ToolError::new(
            "timeout",
            format!("the request to {host} timed out ({what})"),
        ),
        ureq::Error::HostNotFound => {
            ToolError::new("host_not_found", format!("the host {host} was not found"))
        }
        ureq::Error::ConnectionFailed => {
            ToolError::new("connection_failed", format!("could not connect to {host}"))
        }
        ureq::Error::Io(e) => ToolError::new(
            "connection_failed",
            format!("the connection to {host} failed: {e}"),
        ),
        e @ (ureq::Error::Tls(_) | ureq::Error::Rustls(_)) => ToolError::new(
            "tls_failed",
            format!("the TLS connection to {host} failed: {e}"),
        ),
        ureq::Error::BadUri(_) => ToolError::new(
            "invalid_url",
            format!("the URL '{}' cannot be requested", target.url),
        ),
        e => ToolError::new(
            "request_failed",
            format!("the request to {host} failed: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    //! Against a real plain-http server on loopback (the TLS path is covered end to end in
    //! tests/tests/http_request.rs).

    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    use postern_vault::Secret;
    use serde_json::json;

    use super::*;

    /// Serves `responses` in order, one connection each; sends back each request's head.
    fn serve(responses: Vec<String>) -> (u16, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for response in responses {
                let Ok((mut stream, _)) = listener.accept() else {
                    return;
                };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let _ = tx.send(head);
                let _ = stream.write_all(response.as_bytes());
            }
        });
        (port, rx)
    }

    fn response(status: &str, extra: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\nset-cookie: s=1\r\n{extra}\r\n{body}",
            body.len()
        )
    }

    fn call(url: &str) -> HttpCall {
        HttpCall::parse(&json!({"url": url, "headers": {"Authorization": "Bearer agent-own"}}))
            .expect("call")
    }

    fn bearer(value: &str, host: &str) -> Injected {
        Injected {
            header: header::AUTHORIZATION,
            value: Secret::new(format!("Bearer {value}")),
            hosts: vec![host.into()],
        }
    }

    #[test]
    fn the_credential_replaces_the_agents_header_and_a_redirect_comes_back() {
        let (port, heads) = serve(vec![response("302 Found", "location: /elsewhere\r\n", "")]);
        let reply = Client::new()
            .send(
                call(&format!("http://localhost:{port}/a")),
                &[bearer("tok-7f3a", "localhost")],
            )
            .expect("reply");
        let head = heads.recv().expect("request");
        assert!(
            head.contains("authorization: Bearer tok-7f3a\r\n"),
            "{head}"
        );
        assert!(!head.contains("agent-own"), "{head}");
        assert_eq!(reply.status, 302);
        assert!(reply.unfollowed.is_some());
        let location = reply.headers.iter().find(|(k, _)| k == "location");
        assert_eq!(
            location.map(|(_, v)| v.as_str()),
            Some(format!("http://localhost:{port}/elsewhere").as_str()),
            "the Location comes back resolved"
        );
        assert!(heads.try_recv().is_err(), "the redirect was not followed");
    }

    #[test]
    fn without_a_credential_a_redirect_to_plain_http_is_not_followed() {
        let (port, heads) = serve(vec![response(
            "301 Moved Permanently",
            "location: http://127.0.0.1:1/x\r\n",
            "",
        )]);
        let reply = Client::new()
            .send(call(&format!("http://127.0.0.1:{port}/")), &[])
            .expect("reply");
        assert_eq!(reply.status, 301);
        assert_eq!(
            reply.unfollowed,
            Some("only redirects to https URLs are followed")
        );
        assert!(heads.recv().expect("head").contains("agent-own"));
    }

    #[test]
    fn a_credential_for_another_host_sends_nothing() {
        let (port, heads) = serve(vec![response("200 OK", "", "hi")]);
        let err = Client::new()
            .send(
                call(&format!("http://127.0.0.1:{port}/")),
                &[bearer("tok-7f3a", "localhost")],
            )
            .expect_err("refused");
        assert_eq!(err.code, "credential_host_mismatch");
        assert!(!err.message.contains("tok-7f3a"));
        assert!(
            heads.recv_timeout(Duration::from_millis(200)).is_err(),
            "nothing was sent"
        );
    }

    #[test]
    fn bodies_are_bounded_and_cookies_are_not_shown() {
        let big = "x".repeat(MAX_BODY + 10);
        let (port, _heads) = serve(vec![response(
            "200 OK",
            "content-type: text/plain\r\n",
            &big,
        )]);
        let reply = Client::new()
            .send(call(&format!("http://localhost:{port}/big")), &[])
            .expect("reply");
        assert_eq!(reply.status, 200);
        assert!(reply.truncated);
        assert_eq!(reply.body.len(), MAX_BODY);
        let names: Vec<&str> = reply.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["content-length", "content-type"]);
    }

    #[test]
    fn a_refused_connection_is_a_tool_error() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let err = Client::new()
            .send(call(&format!("http://127.0.0.1:{port}/")), &[])
            .expect_err("refused");
        assert_eq!(err.code, "connection_failed", "{err:?}");
    }
}
