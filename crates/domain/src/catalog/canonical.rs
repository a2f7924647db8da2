//! Canonical JSON: the bytes every catalog digest is taken over.
//!
//! Object keys are sorted by their UTF-8 bytes at every depth, there is no whitespace,
//! strings and numbers are written exactly as serde_json writes them, and arrays keep
//! their order. Two values have the same canonical bytes exactly when they differ at most
//! in the order of object keys.

use serde_json::{Map, Value};

/// Appends the canonical bytes of `value` to `out`.
pub(crate) fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map, out),
    }
}

/// Appends the canonical bytes of an object to `out`.
pub(crate) fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
    out.push(b'{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(key, out);
        out.push(b':');
        write(item, out);
    }
    out.push(b'}');
}

/// Whether two values have the same canonical bytes, without building them.
///
/// Differs from `Value`'s `==` only for numbers: `-0.0 == 0.0` there, but they print
/// (and so hash) differently.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x.to_string() == y.to_string(),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(key, x)| ys.get(key).is_some_and(|y| same(x, y)))
        }
        _ => false,
    }
}

/// Whether two optional values are both absent or have the same canonical bytes.
pub(crate) fn same_opt(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same(a, b),
        _ => false,
    }
}

/// Appends `segment` to a JSON pointer (RFC 6901), escaping `~` and `/`.
pub(crate) fn pointer(base: &str, segment: &str) -> String {
    let escaped = segment.replace('~', "~0").replace('/', "~1");
    format!("{base}/{escaped}")
}

/// Writes a JSON string literal with serde_json's escaping: `"` and `\`, the short forms
/// `\b \t \n \f \r`, and `\u00XX` (lower-case hex) for the other control characters.
pub(crate) fn write_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{08}' => out.extend_from_slice(b"\\b"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\u{0C}' => out.extend_from_slice(b"\\f"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if u32::from(c) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", u32::from(c)).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn to_bytes(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write(value, &mut out);
        out
    }

    #[test]
    fn sorts_keys_at_every_depth_and_drops_whitespace() {
        let value = json!({"b": [ {"z": 1, "a": null} ], "a": {"y": true, "x": "s"}});
        assert_eq!(
            String::from_utf8(to_bytes(&value)).unwrap(),
            r#"{"a":{"x":"s","y":true},"b":[{"a":null,"z":1}]}"#
        );
    }

    #[test]
    fn escapes_strings_as_serde_json_does() {
        let text = "quote \" back \\ nl \n tab \t bell \u{07} del \u{7f} é 😀 \u{08}\u{0c}\r";
        let value = Value::String(text.to_owned());
        assert_eq!(to_bytes(&value), serde_json::to_vec(&value).unwrap());
    }

    #[test]
    fn numbers_print_as_serde_json_prints_them() {
        let value = json!([1, -1, 1.0, 0.5, 1e300, -0.0, u64::MAX, i64::MIN]);
        assert_eq!(to_bytes(&value), serde_json::to_vec(&value).unwrap());
    }

    #[test]
    fn same_ignores_key_order_but_not_number_spelling() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":[1,2]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":[1,2],"a":1}"#).unwrap();
        assert!(same(&a, &b));
        assert!(!same(&json!([1, 2]), &json!([2, 1])));
        assert!(!same(&json!(1), &json!(1.0)));
        assert!(!same(&json!(0.0), &json!(-0.0)));
        assert!(same_opt(None, None));
        assert!(!same_opt(Some(&Value::Null), None));
    }

    #[test]
    fn pointer_segments_are_escaped() {
        assert_eq!(pointer("", "a/b~c"), "/a~1b~0c");
        assert_eq!(pointer("/properties", "x"), "/properties/x");
    }
}
