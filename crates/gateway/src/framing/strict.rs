//! Strict JSON: a line parsed into exactly the value Postern forwards, and encoded back as one
//! line to every reader.

use std::fmt;

use bytes::Bytes;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

/// Why a line is not an acceptable JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all (or not UTF-8).
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// A carriage return inside the line. JSON takes it for whitespace, but some line
    /// readers (Python's universal newlines, Java's and .NET's `ReadLine`) take it for a line
    /// break: one line to Postern could be several messages to the server.
    #[error(
        "a bare carriage return (CR) at byte offset {0}: some servers read it as a line break, so Postern refuses the line"
    )]
    BareCarriageReturn(usize),
    /// A number a 64-bit float or integer cannot hold exactly: the value forwarded would not
    /// be the value sent.
    #[error(
        "the number {text} at byte offset {offset} cannot be carried exactly (integers must fit in 64 bits, other numbers in a 64-bit float)"
    )]
    InexactNumber {
        /// Where it starts in the line.
        offset: usize,
        /// Its text (at most 40 characters of it).
        text: String,
    },
    /// JSON, but not an object.
    #[error("a JSON-RPC message must be a JSON object, got {0}")]
    NotObject(&'static str),
    /// An object repeats a key. The value checked must be the value forwarded, and
    /// receivers disagree on which duplicate wins, so such messages are refused.
    #[error("duplicate key {0:?} in a JSON object")]
    DuplicateKey(String),
}

/// Parses one line as a JSON object, refusing duplicate keys at any depth, a carriage return
/// anywhere in the line, and numbers that would not survive the trip exactly
/// ([`FrameError`]): what parses is what Postern forwards, re-serialized by
/// [`encode`].
pub fn parse_object(line: &[u8]) -> Result<Map<String, Value>, FrameError> {
    scan(line)?;
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

/// Serializes a value as one line the way Postern forwards every message: compact, keys in
/// the order they were parsed, numbers as parsed (see [`scan`]), and every character some
/// line reader takes for a line break escaped: CR and LF as JSON always escapes them, and
/// U+0085, U+2028 and U+2029, which JSON allows raw inside strings.
pub fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Bytes {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, LineSafe);
    // Serializing a `Value` into a Vec cannot fail (its keys are strings).
    if serde::Serialize::serialize(value, &mut ser).is_err() {
        out.clear();
    }
    Bytes::from(out)
}

/// serde_json's compact formatter, escaping U+0085, U+2028 and U+2029 inside strings too.
struct LineSafe;

impl serde_json::ser::Formatter for LineSafe {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let bytes = fragment.as_bytes();
        if memchr::memchr2(0xC2, 0xE2, bytes).is_none() {
            return writer.write_all(bytes);
        }
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            // U+0085 is C2 85; U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
            let escape = match bytes[i] {
                0xC2 if bytes.get(i + 1) == Some(&0x85) => Some(("\\u0085", 2)),
                0xE2 if bytes.get(i + 1) == Some(&0x80) => match bytes.get(i + 2) {
                    Some(0xA8) => Some(("\\u2028", 3)),
                    Some(0xA9) => Some(("\\u2029", 3)),
                    _ => None,
                },
                _ => None,
            };
            match escape {
                Some((text, len)) => {
                    writer.write_all(&bytes[start..i])?;
                    writer.write_all(text.as_bytes())?;
                    i += len;
                    start = i;
                }
                None => i += 1,
            }
        }
        writer.write_all(&bytes[start..])
    }
}

/// What JSON parsing alone lets through, checked over the raw line: a carriage return
/// anywhere (JSON forbids it raw inside strings and takes it for whitespace outside them),
/// and numbers that would not be forwarded as sent. Integers must fit in 64 bits (`i64` or
/// `u64`); any other number must be exactly the value its nearest 64-bit float prints as
/// (`0.1` is, `1.00000000000000000001` is not). Malformed numbers are left to the parser,
/// which names them better.
pub fn scan(line: &[u8]) -> Result<(), FrameError> {
    if let Some(offset) = line.iter().position(|&b| b == b'\r') {
        return Err(FrameError::BareCarriageReturn(offset));
    }
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b'"' => {
                i += 1;
                // To the closing quote, stepping over escapes.
                while let Some(at) = memchr::memchr2(b'"', b'\\', &line[i.min(line.len())..]) {
                    i += at;
                    if line[i] == b'"' {
                        break;
                    }
                    i += 2;
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < line.len()
                    && matches!(line[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let text = std::str::from_utf8(&line[start..i]).unwrap_or_default();
                if !number_is_exact(text) {
                    return Err(FrameError::InexactNumber {
                        offset: start,
                        text: text.chars().take(40).collect(),
                    });
                }
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Whether a JSON number's text survives parsing and printing (see [`scan`]), judged with the
/// very parser and printer that forward it (serde_json's). Text that is not a number counts as
/// exact: the parser refuses it with its own message.
fn number_is_exact(text: &str) -> bool {
    if !text.contains(['.', 'e', 'E']) {
        if text == "-0" {
            return false; // read back as the float -0.0: an integer would become a float
        }
        return text.parse::<i64>().is_ok()
            || text.parse::<u64>().is_ok()
            || decimal(text).is_none();
    }
    match serde_json::from_str::<f64>(text) {
        Ok(float) if float.is_finite() => match serde_json::Number::from_f64(float) {
            Some(printed) => decimal(text) == decimal(&printed.to_string()),
            None => false,
        },
        _ => true,
    }
}

/// A decimal number's value as (negative, significant digits, power of ten of the last
/// digit), zero as (false, "", 0); `None` when the text is not a JSON-like number.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let trimmed = digits.trim_start_matches('0').trim_end_matches('0');
    if trimmed.is_empty() {
        return Some((false, String::new(), 0));
    }
    let trailing = digits.trim_end_matches('0').len();
    let power = exponent
        .saturating_sub(frac.len() as i64)
        .saturating_add((digits.len() - trailing) as i64);
    Some((negative, trimmed.to_owned(), power))
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
        while let Some(key) = map.next_key::<String>()? {
            // The object's own map tells a key seen before: one lookup, no second set.
            match out.entry(key) {
                Entry::Occupied(seen) => {
                    let key = seen.key();
                    return Err(de::Error::custom(format_args!("{DUPLICATE_PREFIX}{key}")));
                }
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(StrictValue)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_carriage_return_anywhere_is_refused_naming_its_offset() {
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"resources/list\",\"params\":{\"x\":\r{}}}";
        let at = line.iter().position(|&b| b == b'\r').expect("a CR");
        let refused = parse_object(line).expect_err("refused");
        assert_eq!(refused, FrameError::BareCarriageReturn(at));
        assert!(
            refused.to_string().contains(&format!("offset {at}")),
            "{refused}"
        );
    }

    #[test]
    fn numbers_are_carried_exactly_or_refused() {
        for exact in [
            "0",
            "1",
            "-1",
            "-0.0",
            "1.0",
            "0.1",
            "-2.5e-3",
            "1E5",
            "1e+5",
            "0.30000000000000004",
            "9007199254740993",
            "18446744073709551615",
            "-9223372036854775808",
            "1.5e300",
            "0.000001",
            "123456.789",
        ] {
            let line = format!("{{\"n\":{exact}}}");
            let parsed = parse_object(line.as_bytes()).unwrap_or_else(|e| panic!("{exact}: {e}"));
            // What goes on is the same number.
            let again = encode(&parsed);
            let back = parse_object(&again).expect("reparses");
            assert_eq!(parsed, back, "{exact}");
            let sent: f64 = exact.parse().expect("a float");
            let forwarded: f64 = back["n"].to_string().parse().expect("a float");
            assert!(sent == forwarded, "{exact} became {}", back["n"]);
        }
        for inexact in [
            "-0",
            "-26077749241640.313",
            "18446744073709551616",
            "-9223372036854775809",
            "100000000000000000001",
            "1.00000000000000000001",
            "0.1000000000000000000000001",
        ] {
            let line = format!("{{\"a\":[1,{{\"n\":{inexact}}}]}}");
            match parse_object(line.as_bytes()) {
                Err(FrameError::InexactNumber { offset, text }) => {
                    assert_eq!(
                        (offset, text.as_str()),
                        (line.find(inexact).expect("in"), inexact)
                    );
                }
                other => panic!("{inexact}: {other:?}"),
            }
        }
        // Digits inside strings are text, not numbers.
        assert!(parse_object(br#"{"s":"100000000000000000001\"1e999"}"#).is_ok());
    }

    #[test]
    fn encoding_escapes_every_character_a_line_reader_breaks_on() {
        let value =
            serde_json::json!({"k\u{2028}": "a\rb\nc\u{85}d\u{2028}e\u{2029}f\u{7f}g\u{e9}"});
        let line = encode(&value);
        let text = std::str::from_utf8(&line).expect("utf-8");
        assert_eq!(
            text,
            "{\"k\\u2028\":\"a\\rb\\nc\\u0085d\\u2028e\\u2029f\u{7f}g\u{e9}\"}"
        );
        assert_eq!(parse_object(&line).map(Value::Object), Ok(value));
    }

    proptest::proptest! {
        /// Whatever the strings hold, the forwarded line is one line to every line reader,
        /// and parses back to the value decided.
        #[test]
        fn a_forwarded_line_is_one_line_to_any_reader(
            key in "\\PC{0,8}",
            text in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::char::any(),
                    proptest::sample::select(vec!['\r', '\n', '\u{85}', '\u{2028}', '\u{2029}', '\u{0}', '\u{1b}']),
                ],
                0..24,
            ),
        ) {
            let text: String = text.into_iter().collect();
            let value = serde_json::json!({"jsonrpc": "2.0", "id": 1, "params": {key: text}});
            let line = encode(&value);
            let as_text = std::str::from_utf8(&line).expect("utf-8");
            let breaks = ['\r', '\n', '\u{85}', '\u{2028}', '\u{2029}'];
            proptest::prop_assert!(!as_text.contains(breaks), "{}", as_text);
            proptest::prop_assert_eq!(parse_object(&line).map(Value::Object), Ok(value));
        }
    }
}
