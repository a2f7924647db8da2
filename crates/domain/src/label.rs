//! Server labels: the names agents use in `postern mcp <label>`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A validated server label: 1 to 64 characters of `a-z 0-9 - _ .`, starting with a
/// letter or digit. Lower case only, so `GitHub` and `github` can never be two servers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ServerLabel(String);

/// Why a string is not a server label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// The label is empty.
    #[error("a server label cannot be empty")]
    Empty,
    /// The label is longer than [`ServerLabel::MAX_LEN`].
    #[error("a server label is at most {max} characters, this one has {len}", max = ServerLabel::MAX_LEN)]
    TooLong { len: usize },
    /// The label holds a character outside the allowed set.
    #[error("a server label may hold only a-z, 0-9, '-', '_' and '.'; found {found:?}")]
    BadChar { found: char },
    /// The label starts with punctuation.
    #[error("a server label must start with a letter or a digit")]
    BadStart,
    /// The label is reserved for Postern's built-in tools.
    #[error("the label {0:?} is reserved for Postern's built-in tools")]
    Reserved(String),
}

impl ServerLabel {
    /// The longest label accepted.
    pub const MAX_LEN: usize = 64;

    /// Parses a label that a user may configure (the built-in label is refused).
    pub fn parse_configurable(s: &str) -> Result<Self, LabelError> {
        let label: Self = s.parse()?;
        if label.0 == crate::BUILTIN_LABEL {
            return Err(LabelError::Reserved(label.0));
        }
        Ok(label)
    }

    /// The label as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ServerLabel {
    type Err = LabelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let first = s.chars().next().ok_or(LabelError::Empty)?;
        if s.len() > Self::MAX_LEN {
            return Err(LabelError::TooLong {
                len: s.chars().count(),
            });
        }
        if let Some(found) = s.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        }) {
            return Err(LabelError::BadChar { found });
        }
        if !first.is_ascii_alphanumeric() {
            return Err(LabelError::BadStart);
        }
        Ok(Self(s.to_owned()))
    }
}

impl TryFrom<String> for ServerLabel {
    type Error = LabelError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ServerLabel> for String {
    fn from(label: ServerLabel) -> Self {
        label.0
    }
}

impl fmt::Display for ServerLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_labels() {
        for ok in [
            "everything",
            "time",
            "inventory-local",
            "a",
            "v2.api_x",
            "9lives",
        ] {
            assert_eq!(
                ok.parse::<ServerLabel>().map(|l| l.to_string()),
                Ok(ok.to_owned())
            );
        }
    }

    #[test]
    fn rejects_each_kind_of_bad_label() {
        assert_eq!("".parse::<ServerLabel>(), Err(LabelError::Empty));
        assert_eq!(
            "Time".parse::<ServerLabel>(),
            Err(LabelError::BadChar { found: 'T' })
        );
        assert_eq!(
            "a b".parse::<ServerLabel>(),
            Err(LabelError::BadChar { found: ' ' })
        );
        assert_eq!(
            "../etc".parse::<ServerLabel>(),
            Err(LabelError::BadChar { found: '/' })
        );
        assert_eq!("-x".parse::<ServerLabel>(), Err(LabelError::BadStart));
        assert_eq!(
            "x".repeat(65).parse::<ServerLabel>(),
            Err(LabelError::TooLong { len: 65 })
        );
        assert_eq!(
            ServerLabel::parse_configurable("postern"),
            Err(LabelError::Reserved("postern".into()))
        );
    }

    #[test]
    fn deserializing_validates() {
        let bad: Result<ServerLabel, _> = serde_json::from_str("\"Bad Label\"");
        assert!(bad.is_err());
    }
}
