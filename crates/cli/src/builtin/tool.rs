//! The `http_request` tool as an agent sees it: its definition, its arguments, its results and
//! errors, and the redaction every answer goes through.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use postern_vault::Secret;
use serde_json::{Map, Value, json};
use ureq::http::{HeaderName, HeaderValue, Method};

use super::fetch::{MAX_BODY, MAX_REDIRECTS, TOTAL_TIMEOUT};
use super::target::{Target, agent_headers};
use crate::mcp_server::{error_result, text_result};

/// The tool's name.
pub const NAME: &str = "http_request";

/// Response headers an agent gets back. Anything else (`set-cookie` above all: a session a
/// credential opened is authority the gate never saw) stays out.
const SHOWN_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-language",
    "content-disposition",
    "location",
    "etag",
    "last-modified",
    "cache-control",
    "expires",
    "age",
    "retry-after",
    "www-authenticate",
    "link",
    "allow",
];

/// The replacement for a credential's value found in an answer.
const REDACTED: &str = "[redacted: Postern credential]";

/// The tool's definition for `tools/list`.
pub fn definition() -> Value {
    json!({
        "name": NAME,
        "title": "HTTP request",
        "description": format!(
            "Make one HTTP request and get back the status, selected response headers and the body as text \
             (at most {} KiB; a longer body is truncated, with a note). HTTPS only, except to loopback hosts \
             (localhost, 127.0.0.0/8, ::1), which may use plain http. When a human has bound a credential to \
             Postern for the URL's host, Postern adds it as a header (Authorization, or the header the \
             credential names); you never see its value, and it is redacted from the answer if the server \
             echoes it. A request that carries a credential never follows a redirect: the 3xx answer comes \
             back with its Location. Other requests follow up to {MAX_REDIRECTS} redirects to https URLs. \
             The request times out after {} s. Every call goes through Postern's approval gate and audit log.",
            MAX_BODY / 1024,
            TOTAL_TIMEOUT.as_secs()
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "The absolute URL: https://…, or http:// to a loopback host."
                },
                "method": {
                    "type": "string",
                    "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                    "default": "GET"
                },
                "headers": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Extra request headers. A header a bound credential sets is replaced by the credential."
                },
                "body": {
                    "type": "string",
                    "description": "The request body (not with GET or HEAD)."
                }
            },
            "required": ["url"],
            "additionalProperties": false
        },
        "annotations": {
            "title": "HTTP request",
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": false,
            "openWorldHint": true
        }
    })
}

/// A refusal or a failure, as a tool error with a stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The stable code (`invalid_url`, `https_required`, `timeout`, …).
    pub code: &'static str,
    /// One readable sentence.
    pub message: String,
}

impl ToolError {
    /// An error with `code` and `message`.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The `tools/call` result: `isError`, the sentence and the detail as text, the detail
    /// as structured content.
    pub fn to_result(&self, redactor: &Redactor) -> Value {
        error_result(self.code, &redactor.apply(&self.message))
    }
}

/// One request, as the agent asked for it.
#[derive(Debug)]
pub struct HttpCall {
    /// Where.
    pub target: Target,
    /// How.
    pub method: Method,
    /// The agent's own headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body, for methods that carry one.
    pub body: Option<String>,
}

impl HttpCall {
    /// Reads the `arguments` of a call; refuses unknown or ill-typed ones.
    pub fn parse(arguments: &Value) -> Result<HttpCall, ToolError> {
        let empty = Map::new();
        let args = match arguments {
            Value::Object(args) => args,
            Value::Null => &empty,
            _ => return Err(invalid("the arguments must be an object")),
        };
        if let Some(unknown) = args
            .keys()
            .find(|k| !["url", "method", "headers", "body"].contains(&k.as_str()))
        {
            return Err(invalid(format!(
                "unknown argument '{unknown}' (url, method, headers, body)"
            )));
        }
        let url = match args.get("url") {
            Some(Value::String(url)) => url,
            Some(_) => return Err(invalid("'url' must be a string")),
            None => return Err(invalid("'url' is required")),
        };
        let method = match args.get("method") {
            None | Some(Value::Null) => Method::GET,
            Some(Value::String(m)) => match m.to_ascii_uppercase().as_str() {
                "GET" => Method::GET,
                "POST" => Method::POST,
                "PUT" => Method::PUT,
                "PATCH" => Method::PATCH,
                "DELETE" => Method::DELETE,
                "HEAD" => Method::HEAD,
                _ => {
                    return Err(invalid(format!(
                        "method '{m}' is not one of GET, POST, PUT, PATCH, DELETE, HEAD"
                    )));
                }
            },
            Some(_) => return Err(invalid("'method' must be a string")),
        };
        let headers = match args.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(headers)) => agent_headers(headers)?,
            Some(_) => return Err(invalid("'headers' must be an object of strings")),
        };
        let body = match args.get("body") {
            None | Some(Value::Null) => None,
            Some(Value::String(body)) => Some(body.clone()),
            Some(_) => return Err(invalid("'body' must be a string")),
        };
        if body.is_some() && matches!(method, Method::GET | Method::HEAD) {
            return Err(invalid(format!("a {method} request cannot have a body")));
        }
        let target = Target::parse(url)?;
        Ok(HttpCall {
            target,
            method,
            headers,
            body,
        })
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new("invalid_arguments", message)
}

/// A header a credential adds, as the gateway handed it over for this one call.
pub struct Injected {
    /// The header.
    pub header: HeaderName,
    /// Its value (`Bearer …`, `Basic …`, or the credential itself).
    pub value: Secret<String>,
    /// The hosts the credential may go to.
    pub hosts: Vec<String>,
}

impl fmt::Debug for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injected")
            .field("header", &self.header)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Injected {
    /// Reads the gateway's `_meta["postern/inject"]` list.
    pub fn parse_all(list: &Value) -> Result<Vec<Injected>, ToolError> {
        let broken = || {
            ToolError::new(
                "internal_error",
                "Postern handed over a malformed credential",
            )
        };
        let list = list.as_array().ok_or_else(broken)?;
        list.iter()
            .map(|item| {
                let header = item
                    .get("header")
                    .and_then(Value::as_str)
                    .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok())
                    .ok_or_else(broken)?;
                let value = item
                    .get("value")
                    .and_then(Value::as_str)
                    .ok_or_else(broken)?;
                let hosts = item
                    .get("hosts")
                    .and_then(Value::as_array)
                    .ok_or_else(broken)?
                    .iter()
                    .map(|h| h.as_str().map(str::to_owned).ok_or_else(broken))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Injected {
                    header,
                    value: Secret::new(value.to_owned()),
                    hosts,
                })
            })
            .collect()
    }
}

/// Removes injected credential values (and their forms a server might echo: the token of a
/// `Bearer` value, the decoded `user:password` of a `Basic` one) from anything the agent gets.
pub struct Redactor {
    needles: Vec<Secret<String>>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} needles)", self.needles.len())
    }
}

impl Redactor {
    /// Shorter forms than this are not searched for (they would mangle ordinary text).
    const MIN_LEN: usize = 4;

    /// A redactor for the values of `injected`.
    pub fn new(injected: &[Injected]) -> Redactor {
        let mut needles: Vec<Secret<String>> = Vec::new();
        for i in injected {
            let value = i.value.expose();
            needles.push(Secret::new(value.clone()));
            if let Some((scheme, rest)) = value.split_once(' ') {
                needles.push(Secret::new(rest.to_owned()));
                if scheme.eq_ignore_ascii_case("basic")
                    && let Some(decoded) = BASE64
                        .decode(rest)
                        .ok()
                        .and_then(|d| String::from_utf8(d).ok())
                {
                    if let Some((_, password)) = decoded.split_once(':') {
                        needles.push(Secret::new(password.to_owned()));
                    }
                    needles.push(Secret::new(decoded));
                }
            }
        }
        needles.retain(|n| n.expose().len() >= Self::MIN_LEN);
        // Longest first, so a value is replaced whole before its parts are looked for.
        needles.sort_by_key(|n| std::cmp::Reverse(n.expose().len()));
        Redactor { needles }
    }

    /// A redactor for a request that carries no credential.
    pub fn none() -> Redactor {
        Redactor {
            needles: Vec::new(),
        }
    }

    /// `text` with every value replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for needle in &self.needles {
            if out.contains(needle.expose().as_str()) {
                out = out.replace(needle.expose().as_str(), REDACTED);
            }
        }
        out
    }

    /// [`Redactor::apply`] for text that was cut short: a value cut in two at the end is
    /// removed too.
    pub fn apply_truncated(&self, text: &str) -> String {
        let mut out = self.apply(text);
        for needle in &self.needles {
            let needle = needle.expose();
            let longest = (Self::MIN_LEN..needle.len())
                .rev()
                .filter(|&n| needle.is_char_boundary(n))
                .find(|&n| out.ends_with(&needle[..n]));
            if let Some(n) = longest {
                out.truncate(out.len() - n);
                out.push_str(REDACTED);
            }
        }
        out
    }
}

/// What came back.
#[derive(Debug)]
pub struct Reply {
    /// The URL that answered (after any redirects followed).
    pub url: String,
    /// The status code.
    pub status: u16,
    /// The response headers in [`SHOWN_HEADERS`], in order.
    pub headers: Vec<(String, String)>,
    /// The body (at most [`MAX_BODY`] bytes of it).
    pub body: Vec<u8>,
    /// Whether the body was longer than [`MAX_BODY`].
    pub truncated: bool,
    /// Redirects followed, in order.
    pub followed: Vec<String>,
    /// A redirect that was not followed, and why.
    pub unfollowed: Option<&'static str>,
}

impl Reply {
    /// Whether a response header is one an agent is shown.
    pub fn shown(name: &str) -> bool {
        SHOWN_HEADERS.contains(&name)
            || name.starts_with("x-ratelimit-")
            || name.starts_with("ratelimit")
    }

    /// The `tools/call` result: the status line, headers and body as text; status, headers
    /// and notes as structured content. Everything passes through `redactor`.
    pub fn to_result(&self, redactor: &Redactor) -> Value {
        let reason = ureq::http::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), redactor.apply(v)))
            .collect();
        let (text_body, utf8) = match std::str::from_utf8(&self.body) {
            Ok(text) => (text.to_owned(), true),
            Err(_) => (String::from_utf8_lossy(&self.body).into_owned(), false),
        };
        let body = if self.truncated {
            redactor.apply_truncated(&text_body)
        } else {
            redactor.apply(&text_body)
        };
        let mut notes: Vec<String> = Vec::new();
        if self.truncated {
            notes.push(format!(
                "the body was truncated to its first {} KiB",
                MAX_BODY / 1024
            ));
        }
        if !utf8 {
            notes.push("the body is not UTF-8 text: invalid bytes were replaced".into());
        }
        if let Some(why) = self.unfollowed {
            notes.push(format!("redirect not followed: {why}"));
        }
        let mut text = format!("HTTP {} {reason}\n", self.status);
        for (k, v) in &headers {
            text.push_str(&format!("{k}: {v}\n"));
        }
        for note in &notes {
            text.push_str(&format!("[postern: {note}]\n"));
        }
        text.push('\n');
        text.push_str(&body);
        let header_map: Map<String, Value> = headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut detail = json!({
            "status": self.status,
            "url": redactor.apply(&self.url),
            "headers": header_map,
            "bodyBytes": self.body.len(),
            "truncated": self.truncated,
        });
        if !self.followed.is_empty() {
            detail["redirectsFollowed"] = json!(self.followed);
        }
        if let Some(why) = self.unfollowed {
            detail["redirectNotFollowed"] = json!(why);
        }
        if !notes.is_empty() {
            detail["notes"] = json!(notes);
        }
        text_result(&text, Some(detail), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn injected(header: &str, value: &str) -> Injected {
        Injected {
            header: HeaderName::from_bytes(header.as_bytes()).expect("header"),
            value: Secret::new(value.into()),
            hosts: vec!["localhost".into()],
        }
    }

    #[test]
    fn arguments_are_checked() {
        let call = HttpCall::parse(&json!({"url": "https://localhost/x"})).expect("minimal");
        assert_eq!(call.method, Method::GET);
        assert!(call.body.is_none() && call.headers.is_empty());
        let call = HttpCall::parse(&json!({"url": "https://a.example/", "method": "post", "body": "{}", "headers": {"Content-Type": "application/json"}}))
            .expect("post");
        assert_eq!(call.method, Method::POST);
        for (bad, code) in [
            (json!({}), "invalid_arguments"),
            (json!([]), "invalid_arguments"),
            (json!({"url": 1}), "invalid_arguments"),
            (
                json!({"url": "https://a.example/", "method": "TRACE"}),
                "invalid_arguments",
            ),
            (
                json!({"url": "https://a.example/", "body": "x"}),
                "invalid_arguments",
            ),
            (
                json!({"url": "https://a.example/", "method": "HEAD", "body": "x"}),
                "invalid_arguments",
            ),
            (
                json!({"url": "https://a.example/", "extra": true}),
                "invalid_arguments",
            ),
            (
                json!({"url": "https://a.example/", "headers": ["x"]}),
                "invalid_arguments",
            ),
            (json!({"url": "http://a.example/"}), "https_required"),
            (json!({"url": "nope"}), "invalid_url"),
        ] {
            assert_eq!(
                HttpCall::parse(&bad).expect_err("refused").code,
                code,
                "{bad}"
            );
        }
    }

    #[test]
    fn the_gateways_injection_list_is_read_strictly() {
        let list =
            json!([{"header": "Authorization", "value": "Bearer abc", "hosts": ["localhost"]}]);
        let parsed = Injected::parse_all(&list).expect("parsed");
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].header.as_str(), "authorization");
        assert!(
            !format!("{parsed:?}").contains("abc"),
            "Debug never shows a value"
        );
        for bad in [
            json!({}),
            json!([{"header": "A"}]),
            json!([{"header": "A", "value": "v", "hosts": [1]}]),
        ] {
            assert!(Injected::parse_all(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn injected_values_and_their_forms_are_redacted() {
        let basic = format!("Basic {}", BASE64.encode("alice:s3cret-pass"));
        let r = Redactor::new(&[
            injected("Authorization", "Bearer tok-123456"),
            injected("X-Key", "key-abcdef"),
            injected("Authorization", &basic),
        ]);
        let echoed = format!(
            "auth=Bearer tok-123456 raw=tok-123456 key=key-abcdef basic={basic} user=alice:s3cret-pass pw=s3cret-pass"
        );
        let out = r.apply(&echoed);
        for secret in ["tok-123456", "key-abcdef", "s3cret-pass", &basic[6..]] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains("auth=[redacted: Postern credential]"), "{out}");
        // A value cut by truncation is removed too.
        assert_eq!(
            r.apply_truncated("…token tok-1234"),
            "…token [redacted: Postern credential]"
        );
        assert_eq!(Redactor::none().apply("tok-123456"), "tok-123456");
    }

    #[test]
    fn a_reply_shows_status_selected_headers_and_body() {
        let reply = Reply {
            url: "https://localhost/".into(),
            status: 302,
            headers: vec![("location".into(), "https://127.0.0.1/next".into())],
            body: b"moved".to_vec(),
            truncated: false,
            followed: vec![],
            unfollowed: Some("a credential was injected"),
        };
        let result = reply.to_result(&Redactor::none());
        let text = result["content"][0]["text"].as_str().expect("text");
        assert!(
            text.starts_with("HTTP 302 Found\nlocation: https://127.0.0.1/next\n"),
            "{text}"
        );
        assert!(text.ends_with("\n\nmoved"), "{text}");
        assert_eq!(result["structuredContent"]["status"], 302);
        assert_eq!(
            result["structuredContent"]["redirectNotFollowed"],
            "a credential was injected"
        );
        assert_eq!(result["isError"], false);
        assert!(Reply::shown("content-type") && Reply::shown("x-ratelimit-remaining"));
        assert!(!Reply::shown("set-cookie") && !Reply::shown("authorization"));
    }
}
