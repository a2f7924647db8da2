//! Newline-delimited JSON-RPC framing, shared by every hop (agent to shim, shim to
//! engine, engine to server).
//!
//! One message per line. A line longer than [`MAX_FRAME`] bytes is skipped, never
//! buffered whole: the reader reports it and continues with the next line, so one bad
//! peer message costs one message, not the session.

use std::collections::HashSet;
use std::fmt;

use bytes::{Bytes, BytesMut};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

/// The largest message Postern accepts on any hop: 8 MiB.
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// How many leading bytes of an oversized line are kept, to recover its id.
const OVERSIZE_PREFIX: usize = 512;

/// One item read from a line stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its newline (and without a trailing `\r`).
    Frame(Bytes),
    /// A line over the size cap was skipped; `prefix` holds its first bytes.
    Oversize {
        /// Bytes the line had, as far as it was read (at least `MAX_FRAME + 1`).
        len: usize,
        /// Its first bytes, to recover the id of the message when possible.
        prefix: Bytes,
    },
}

/// Reads newline-delimited lines with a size cap. Blank lines are skipped.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    cap: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader with the standard cap, [`MAX_FRAME`].
    pub fn new(inner: R) -> Self {
        Self::with_cap(inner, MAX_FRAME)
    }

    /// A reader with an explicit cap (tests use small caps).
    pub fn with_cap(inner: R, cap: usize) -> Self {
        Self { inner, cap }
    }

    /// The next line; `None` at end of stream. A final line without a newline counts.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let mut buf = BytesMut::new();
            let mut len = 0usize;
            let mut saw_any = false;
            let terminated = loop {
                let available = self.inner.fill_buf().await?;
                if available.is_empty() {
                    break false;
                }
                saw_any = true;
                let (chunk, done) = match memchr(available) {
                    Some(i) => (&available[..i], Some(i + 1)),
                    None => (available, None),
                };
                let keep = if len <= self.cap {
                    (self.cap + 1 - len).min(chunk.len())
                } else {
                    0
                };
                buf.extend_from_slice(&chunk[..keep]);
                len += chunk.len();
                let consumed = done.unwrap_or(available.len());
                self.inner.consume(consumed);
                if done.is_some() {
                    break true;
                }
            };
            if !saw_any && !terminated {
                return Ok(None);
            }
            if len > self.cap {
                buf.truncate(OVERSIZE_PREFIX);
                return Ok(Some(Line::Oversize {
                    len,
                    prefix: buf.freeze(),
                }));
            }
            if buf.last() == Some(&b'\r') {
                buf.truncate(buf.len() - 1);
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                if terminated {
                    continue;
                }
                return Ok(None);
            }
            return Ok(Some(Line::Frame(buf.freeze())));
        }
    }
}

/// Writes queued lines, each with its newline, flushing whenever the queue runs dry; ends
/// when the queue closes or the writer fails (the receiver is dropped then, so senders see
/// the queue closed).
pub async fn write_lines<W: AsyncWrite + Unpin>(write: W, mut rx: mpsc::UnboundedReceiver<Bytes>) {
    let mut out = BufWriter::new(write);
    while let Some(line) = rx.recv().await {
        if out.write_all(&line).await.is_err() || out.write_all(b"\n").await.is_err() {
            return;
        }
        if rx.is_empty() && out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

fn memchr(haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == b'\n')
}

/// Why a line is not an acceptable JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all (or not UTF-8).
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("a JSON-RPC message must be a JSON object, got {0}")]
    NotObject(&'static str),
    /// An object repeats a key. The value checked must be the value forwarded, and
    /// receivers disagree on which duplicate wins, so such messages are refused.
    #[error("duplicate key {0:?} in a JSON object")]
    DuplicateKey(String),
}

/// Parses one line as a JSON object, refusing duplicate keys at any depth.
pub fn parse_object(line: &[u8]) -> Result<Map<String, Value>, FrameError> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let value = StrictValue.deserialize(&mut de).map_err(|e| {
        let msg = e.to_string();
        match msg.strip_prefix(DUPLICATE_PREFIX) {
            Some(rest) => FrameError::DuplicateKey(trim_location(rest).to_owned()),
            None => FrameError::NotJson(msg),
        }
    })?;
    de.end().map_err(|e| FrameError::NotJson(e.to_string()))?;
    match value {
        Value::Object(map) => Ok(map),
        Value::Array(_) => Err(FrameError::NotObject(
            "an array (batches are not part of MCP since 2025-06-18)",
        )),
        Value::String(_) => Err(FrameError::NotObject("a string")),
        Value::Number(_) => Err(FrameError::NotObject("a number")),
        Value::Bool(_) => Err(FrameError::NotObject("a boolean")),
        Value::Null => Err(FrameError::NotObject("null")),
    }
}

const DUPLICATE_PREFIX: &str = "\u{1}duplicate:";

fn trim_location(s: &str) -> &str {
    // serde_json appends " at line L column C" to custom errors.
    s.rsplit_once(" at line ").map_or(s, |(key, _)| key)
}

/// A `serde_json::Value` seed that fails on duplicate object keys.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!("{DUPLICATE_PREFIX}{key}")));
            }
            let value = map.next_value_seed(StrictValue)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], cap: usize) -> Vec<Line> {
        let mut reader = LineReader::with_cap(input, cap);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.expect("read") {
            out.push(line);
        }
        out
    }

    fn frame(s: &str) -> Line {
        Line::Frame(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[tokio::test]
    async fn splits_lines_skips_blanks_and_strips_carriage_returns() {
        let lines = read_all(b"{\"a\":1}\n\n  \r\n{\"b\":2}\r\n{\"c\":3}", 64).await;
        assert_eq!(
            lines,
            [frame("{\"a\":1}"), frame("{\"b\":2}"), frame("{\"c\":3}")]
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_reported_and_the_next_line_still_arrives() {
        let big = format!("{{\"id\":7,\"x\":\"{}\"}}", "y".repeat(100));
        let input = format!("{big}\n{{\"ok\":true}}\n");
        let lines = read_all(input.as_bytes(), 32).await;
        assert_eq!(lines.len(), 2);
        match &lines[0] {
            Line::Oversize { len, prefix } => {
                assert_eq!(*len, big.len());
                assert!(prefix.starts_with(b"{\"id\":7"));
            }
            other => panic!("expected oversize, got {other:?}"),
        }
        assert_eq!(lines[1], frame("{\"ok\":true}"));
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_accepted() {
        let line = "x".repeat(32);
        assert_eq!(
            read_all(format!("{line}\n").as_bytes(), 32).await,
            [frame(&line)]
        );
    }

    #[test]
    fn parses_objects_and_names_what_else_it_got() {
        assert!(parse_object(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(matches!(
            parse_object(b"not json"),
            Err(FrameError::NotJson(_))
        ));
        assert!(matches!(
            parse_object(b"[1,2]"),
            Err(FrameError::NotObject(_))
        ));
        assert!(matches!(
            parse_object(b"42"),
            Err(FrameError::NotObject("a number"))
        ));
        assert!(matches!(
            parse_object(b"{} {}"),
            Err(FrameError::NotJson(_))
        ));
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert_eq!(
            parse_object(br#"{"id":1,"method":"tools/call","method":"ping"}"#),
            Err(FrameError::DuplicateKey("method".into()))
        );
        assert_eq!(
            parse_object(br#"{"params":{"arguments":{"target":"preview","target":"production"}}}"#),
            Err(FrameError::DuplicateKey("target".into()))
        );
        // Same key in sibling objects is fine.
        assert!(parse_object(br#"{"a":{"k":1},"b":{"k":2}}"#).is_ok());
    }
}
