//! JSON-RPC messages as the gateway sees them: the parsed value, just enough typed
//! structure to route it, and the line Postern forwards, which is its own serialization of
//! that value ([`crate::framing::encode`]), never the peer's bytes: what was decided is
//! what goes on.

use std::fmt;
use std::hash::{Hash, Hasher};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::framing::{self, FrameError, Line, MAX_FRAME, parse_object, top_level_id};

/// What an id must be, as a refusal says it.
const ID_RULE: &str =
    "a request id must be a string or an integer between -2^53 and 2^53 (not 1.0 or 1e0)";

/// JSON-RPC error codes the gateway itself uses.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid JSON-RPC message.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Method not found (also the legacy answer to `server/discover`).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid params.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error: used when the server cannot answer (it exited, or never started).
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// The largest magnitude of a number id: 2^53, the integers every JSON reader (a
/// JavaScript one included) holds exactly.
pub const MAX_NUMBER_ID: u64 = 1 << 53;

/// A request id: a string, or an integer within ±2^53, kept exactly as sent.
///
/// Other numbers are not ids here: `1.0`, `1e0` or 2^60 would be the same id as another to
/// a peer that converts numbers (Python's and JavaScript's SDKs do), so two sides could
/// disagree on which answer belongs to which request.
#[derive(Debug, Clone)]
pub struct Id {
    value: Value,
}

impl Id {
    /// Reads an id; `None` for null, objects, arrays, booleans, and numbers that are not
    /// integers within ±[`MAX_NUMBER_ID`].
    pub fn from_value(value: &Value) -> Option<Self> {
        let valid = match value {
            Value::String(_) => true,
            Value::Number(n) => n
                .as_i64()
                .map(i64::unsigned_abs)
                .or_else(|| n.as_u64())
                .is_some_and(|magnitude| magnitude <= MAX_NUMBER_ID),
            _ => false,
        };
        valid.then(|| Self {
            value: value.clone(),
        })
    }

    /// The id as JSON, same type and value as received.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// Two ids are the same request to Postern when a peer could take them for the same: `7` and
/// `"7"` (the Python and TypeScript SDKs look requests up by the id's text), so one cannot be
/// open while the other is.
impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Id {}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// An id as requests are matched: an integer, whether it came as a number or as its digits.
#[derive(PartialEq, Eq, Hash)]
enum IdKey<'a> {
    Integer(i64),
    Text(&'a str),
}

impl Id {
    fn key(&self) -> IdKey<'_> {
        match &self.value {
            Value::Number(n) => n.as_i64().map_or(IdKey::Text(""), IdKey::Integer),
            Value::String(s) => match canonical_integer(s) {
                Some(n) => IdKey::Integer(n),
                None => IdKey::Text(s),
            },
            _ => IdKey::Text(""),
        }
    }
}

/// The integer a string spells the way JSON writes it (`7`, `-12`, not `07` or `+7`).
fn canonical_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    canonical.then(|| s.parse().ok()).flatten()
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value)
    }
}

/// What a message is, for routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Has an id and a method: expects a response.
    Request { id: Id, method: String },
    /// Has a method and no id.
    Notification { method: String },
    /// Has an id and a result or an error.
    Response { id: Id },
}

/// One parsed message and the line Postern forwards for it.
#[derive(Debug, Clone)]
pub struct Message {
    /// The message as Postern forwards it: [`crate::framing::encode`] of `body`, without
    /// its newline. Never the peer's bytes.
    pub line: Bytes,
    /// The parsed object (duplicate keys, carriage returns and inexact numbers already
    /// refused).
    pub body: Map<String, Value>,
    /// Its routing kind.
    pub kind: Kind,
}

/// The params of a `tools/call` as MCP defines them: the tool to call and, optionally, its
/// arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolCall<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its arguments, when any were sent (`null` counts as none).
    pub arguments: Option<&'a Map<String, Value>>,
}

/// Why a line is not a JSON-RPC message, with the id when one could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The id of the offending message, when it had a readable one.
    pub id: Option<Id>,
    /// The JSON-RPC error code to answer with.
    pub code: i64,
    /// A human-readable reason.
    pub reason: String,
}

impl Message {
    /// Parses and classifies one line.
    pub fn parse(raw: Bytes) -> Result<Self, Rejected> {
        let body = parse_object(&raw).map_err(|e| Rejected {
            // A refused line still names its request when its id can be read, so that the
            // agent's call is answered rather than left to its timeout; not when it holds
            // two ids (which one is meant is the question) or is not an object at all.
            id: match &e {
                FrameError::NotObject(_) => None,
                FrameError::DuplicateKey(key) if key == "id" => None,
                _ => top_level_id(&raw).as_ref().and_then(Id::from_value),
            },
            code: match e {
                FrameError::NotJson(_) => code::PARSE_ERROR,
                _ => code::INVALID_REQUEST,
            },
            reason: e.to_string(),
        })?;
        Self::from_body(body)
    }

    /// Classifies a parsed object and serializes the line that forwards it.
    pub fn from_body(body: Map<String, Value>) -> Result<Self, Rejected> {
        let id_value = body.get("id");
        let id = id_value.and_then(Id::from_value);
        let invalid = |reason: &str| Rejected {
            id: id.clone(),
            code: code::INVALID_REQUEST,
            reason: reason.to_owned(),
        };
        if body.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("missing \"jsonrpc\": \"2.0\""));
        }
        let kind = match (body.get("method"), id_value) {
            (Some(Value::String(method)), None) => Kind::Notification {
                method: method.clone(),
            },
            (Some(Value::String(method)), Some(_)) => match &id {
                Some(id) => Kind::Request {
                    id: id.clone(),
                    method: method.clone(),
                },
                None => return Err(invalid(ID_RULE)),
            },
            (Some(_), _) => return Err(invalid("\"method\" must be a string")),
            (None, Some(_)) => match (&id, body.contains_key("result"), body.contains_key("error"))
            {
                (Some(id), true, false) | (Some(id), false, true) => {
                    Kind::Response { id: id.clone() }
                }
                (None, _, _) => return Err(invalid(ID_RULE)),
                _ => {
                    return Err(invalid(
                        "a response needs exactly one of \"result\" and \"error\"",
                    ));
                }
            },
            (None, None) => {
                return Err(invalid("neither a request, a notification nor a response"));
            }
        };
        let line = framing::encode(&body);
        Ok(Self { line, body, kind })
    }

    /// Parses and classifies one line from a [`LineReader`](crate::framing::LineReader); a
    /// line over the size cap is rejected.
    pub fn from_line(line: Line) -> Result<Self, Rejected> {
        match line {
            Line::Frame(raw) => Self::parse(raw),
            Line::Oversize { len, id } => Err(Rejected::oversize(len, id.as_ref())),
        }
    }

    /// The `params` object, when present.
    pub fn params(&self) -> Option<&Value> {
        self.body.get("params")
    }

    /// Reads the params as a `tools/call`'s: an object with a string `name` and, if any, an
    /// object of `arguments`. The error is the sentence of a -32602 (invalid params) answer.
    pub fn tool_call(&self) -> Result<ToolCall<'_>, String> {
        let params = match self.params() {
            Some(Value::Object(params)) => params,
            Some(other) => {
                return Err(format!(
                    "tools/call params must be an object, not {}",
                    json_kind(other)
                ));
            }
            None => {
                return Err("tools/call params must be an object, and none were sent".into());
            }
        };
        let name = match params.get("name") {
            Some(Value::String(name)) => name,
            Some(other) => {
                return Err(format!(
                    "tools/call params \"name\" must be a string (the tool to call), not {}",
                    json_kind(other)
                ));
            }
            None => return Err("tools/call params need a \"name\": the tool to call".into()),
        };
        let arguments = match params.get("arguments") {
            Some(Value::Object(arguments)) => Some(arguments),
            None | Some(Value::Null) => None,
            Some(other) => {
                return Err(format!(
                    "tools/call params \"arguments\" must be an object, not {}",
                    json_kind(other)
                ));
            }
        };
        Ok(ToolCall { name, arguments })
    }
}

/// What kind of JSON value this is, for a sentence ("a string", "an array", ...).
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Rejected {
    /// A line of `len` bytes, over the size cap, with the top-level id read from it (so the
    /// request it carried is not left hanging).
    pub fn oversize(len: usize, id: Option<&Value>) -> Self {
        Self {
            id: id.and_then(Id::from_value),
            code: code::INVALID_REQUEST,
            reason: format!(
                "message of {len}+ bytes exceeds Postern's {} MiB limit",
                MAX_FRAME >> 20
            ),
        }
    }

    /// The error response that answers the rejected line.
    pub fn answer(&self) -> Bytes {
        error(self.id.as_ref(), self.code, &self.reason, None)
    }
}

/// Serializes a success response.
pub fn result(id: &Id, result: Value) -> Bytes {
    encode(&json!({"jsonrpc": "2.0", "id": id.value(), "result": result}))
}

/// Serializes an error response; `id` is null when the request's id was unreadable.
pub fn error(id: Option<&Id>, code: i64, message: &str, data: Option<Value>) -> Bytes {
    let mut err = json!({"code": code, "message": message});
    if let Some(data) = data {
        err["data"] = data;
    }
    encode(
        &json!({"jsonrpc": "2.0", "id": id.map_or(Value::Null, |i| i.value().clone()), "error": err}),
    )
}

/// Serializes a request.
pub fn request(id: &Value, method: &str, params: Value) -> Bytes {
    encode(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// Serializes a notification.
pub fn notification(method: &str, params: Option<Value>) -> Bytes {
    let mut msg = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        msg["params"] = params;
    }
    encode(&msg)
}

/// `notifications/tools/list_changed`: the agent lists tools again (a new catalog, a new
/// epoch, an engine back).
pub fn tools_list_changed() -> Bytes {
    notification("notifications/tools/list_changed", None)
}

fn encode(value: &Value) -> Bytes {
    framing::encode(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Kind, Rejected> {
        Message::parse(Bytes::copy_from_slice(s.as_bytes())).map(|m| m.kind)
    }

    #[test]
    fn classifies_requests_notifications_and_responses() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#),
            Ok(Kind::Request { method, .. }) if method == "tools/list"
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Kind::Notification { .. })
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Ok(Kind::Response { .. })
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}"#),
            Ok(Kind::Response { .. })
        ));
    }

    #[test]
    fn ids_keep_their_type_but_match_as_a_peer_would() {
        let s = Id::from_value(&json!("1")).expect("id");
        let n = Id::from_value(&json!(1)).expect("id");
        // A peer that looks requests up by the id's text takes them for one request.
        assert_eq!(s, n);
        for other in [
            json!("01"),
            json!("1.0"),
            json!(" 1"),
            json!("-0"),
            json!(2),
        ] {
            assert_ne!(Id::from_value(&other).expect("id"), n, "{other}");
        }
        assert_eq!(
            String::from_utf8_lossy(&result(&s, json!({}))),
            r#"{"jsonrpc":"2.0","id":"1","result":{}}"#
        );
        assert_eq!(
            String::from_utf8_lossy(&result(&n, json!({}))),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
    }

    #[test]
    fn rejects_malformed_messages_with_the_id_when_readable() {
        let r = parse(r#"{"jsonrpc":"2.0","id":9}"#).expect_err("no result or error");
        assert_eq!(
            (r.id.map(|i| i.to_string()), r.code),
            (Some("9".into()), code::INVALID_REQUEST)
        );
        assert_eq!(
            parse(r#"{"id":1,"method":"x"}"#)
                .expect_err("no jsonrpc")
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#)
                .expect_err("null id")
                .code,
            code::INVALID_REQUEST
        );
        assert_eq!(
            parse("garbage").expect_err("not json").code,
            code::PARSE_ERROR
        );
    }

    #[test]
    fn reads_tool_call_params_and_says_what_is_wrong_with_them() {
        let call = |params: &str| {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
            let msg = Message::parse(Bytes::from(line)).expect("a request");
            msg.tool_call()
                .map(|c| (c.name.to_owned(), c.arguments.cloned()))
        };
        assert_eq!(
            call(r#"{"name":"echo","arguments":{"text":"hi"}}"#),
            Ok(("echo".into(), json!({"text": "hi"}).as_object().cloned()))
        );
        assert_eq!(call(r#"{"name":"echo"}"#), Ok(("echo".into(), None)));
        assert_eq!(
            call(r#"{"name":"echo","arguments":null}"#),
            Ok(("echo".into(), None))
        );
        assert_eq!(
            call(r#""notanobject""#),
            Err("tools/call params must be an object, not a string".into())
        );
        assert_eq!(
            call(r#"{"name":42}"#),
            Err(
                r#"tools/call params "name" must be a string (the tool to call), not a number"#
                    .into()
            )
        );
        assert_eq!(
            call(r#"{"name":"echo","arguments":[1]}"#),
            Err(r#"tools/call params "arguments" must be an object, not an array"#.into())
        );
    }

    #[test]
    fn number_ids_are_integers_within_2_to_the_53() {
        for (id, ok) in [
            ("1", true),
            ("-7", true),
            ("9007199254740992", true),
            ("-9007199254740992", true),
            ("9007199254740993", false),
            ("1152921504606846976", false),
            ("1.0", false),
            ("1e0", false),
            ("\"1.0\"", true),
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            match parse(&line) {
                Ok(Kind::Request { id: parsed, .. }) if ok => {
                    assert_eq!(parsed.value().to_string(), id);
                }
                Err(refused) if !ok => {
                    assert_eq!(refused.code, code::INVALID_REQUEST, "{id}");
                    assert!(refused.reason.contains("2^53"), "{}", refused.reason);
                }
                other => panic!("{id}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_forwarded_line_is_postern_s_own_serialization() {
        let msg = Message::parse(Bytes::from_static(
            b"{ \"jsonrpc\" : \"2.0\",\t\"id\": 5, \"method\":\"x\", \"params\": {\"b\":1e2,\"a\":\"\xe2\x80\xa8\"} }",
        ))
        .expect("a request");
        assert_eq!(
            std::str::from_utf8(&msg.line).expect("utf-8"),
            r#"{"jsonrpc":"2.0","id":5,"method":"x","params":{"b":100.0,"a":"\u2028"}}"#
        );
    }

    /// Review 11, F4: every refusal of a line whose one top-level id can be read answers
    /// that id; two ids, or an array, answer none.
    #[test]
    fn a_refused_line_names_its_request_when_its_id_can_be_read() {
        let id = |line: &[u8]| {
            Message::parse(Bytes::copy_from_slice(line))
                .expect_err("refused")
                .id
        };
        let seven = Id::from_value(&json!(7));
        assert_eq!(
            id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","method":"ping"}"#),
            seven
        );
        assert_eq!(
            id(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"a\":\"\xff\"}}"),
            seven
        );
        assert_eq!(id(br#"{"jsonrpc":"2.0","id":7,"method":"ping""#), seven);
        assert_eq!(
            id(br#"{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}"#),
            None
        );
        assert_eq!(id(br#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#), None);
    }

    #[test]
    fn a_line_refused_for_a_carriage_return_still_names_its_request() {
        let refused = parse("{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\r\"method\":\"ping\"}")
            .expect_err("refused");
        assert_eq!(refused.id, Id::from_value(&json!("s1")));
        assert_eq!(refused.code, code::INVALID_REQUEST);
        assert!(
            refused.reason.contains("carriage return"),
            "{}",
            refused.reason
        );
    }
}
