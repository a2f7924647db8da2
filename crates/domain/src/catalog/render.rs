//! One-line renderings of JSON values for the human strings of a diff.
//!
//! Identifier-like strings are shown bare (`preview`), other strings JSON-quoted, so a
//! line never breaks and `"true"` never reads as `true`. Long values are cut with `…`;
//! the full values stay in the serialized diff.

use serde_json::Value;

/// The longest rendering of one value, in characters, before it is cut.
const MAX_CHARS: usize = 80;

/// A value on one line: `preview`, `"two words"`, `3`, `[a, b]`, `{"k":1}`.
pub(crate) fn value(v: &Value) -> String {
    cut(match v {
        Value::String(s) => string(s),
        Value::Array(items) if items.iter().all(is_scalar) => list(items),
        other => other.to_string(),
    })
}

/// An optional value, `absent` when missing.
pub(crate) fn opt(v: Option<&Value>) -> String {
    v.map_or_else(|| "absent".to_owned(), value)
}

/// Scalars as a bracketed list: `[preview, production]`.
pub(crate) fn list(items: &[Value]) -> String {
    let parts: Vec<String> = items.iter().map(value).collect();
    format!("[{}]", parts.join(", "))
}

/// Prose (a title, a description, instructions): always quoted, `absent` when missing.
pub(crate) fn text(s: Option<&str>) -> String {
    s.map_or_else(
        || "absent".to_owned(),
        |s| cut(Value::String(s.to_owned()).to_string()),
    )
}

fn string(s: &str) -> String {
    let identifier_like = !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || "_-./:@+#".contains(c))
        && !matches!(s, "true" | "false" | "null")
        && s.parse::<f64>().is_err();
    if identifier_like {
        s.to_owned()
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn cut(s: String) -> String {
    if s.chars().count() <= MAX_CHARS {
        return s;
    }
    let mut short: String = s.chars().take(MAX_CHARS - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strings_are_bare_only_when_unambiguous() {
        assert_eq!(value(&json!("preview")), "preview");
        assert_eq!(value(&json!("two words")), r#""two words""#);
        assert_eq!(value(&json!("true")), r#""true""#);
        assert_eq!(value(&json!("12")), r#""12""#);
        assert_eq!(value(&json!("")), r#""""#);
        assert_eq!(value(&json!("a\nb")), r#""a\nb""#);
    }

    #[test]
    fn lists_objects_and_absence() {
        assert_eq!(
            value(&json!(["preview", "production", 1])),
            "[preview, production, 1]"
        );
        assert_eq!(value(&json!({"k": [1]})), r#"{"k":[1]}"#);
        assert_eq!(opt(None), "absent");
        assert_eq!(text(Some("Says \"hi\"")), r#""Says \"hi\"""#);
    }

    #[test]
    fn long_values_are_cut_on_a_char_boundary() {
        let long = "é".repeat(200);
        let shown = text(Some(&long));
        assert_eq!(shown.chars().count(), MAX_CHARS);
        assert!(shown.ends_with('…'));
    }
}
