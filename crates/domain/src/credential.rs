//! Credentials as Postern knows them without their values: a scope name, how the value is
//! injected, which hosts it may go to, whether every use needs a human. Values live only in
//! the OS keychain (issue 6); nothing here can hold one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A credential scope's name, e.g. `inventory-api-staging`: 1 to 40 characters of
/// `a-z 0-9 - _ .`, starting with a letter or digit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CredentialName(String);

impl CredentialName {
    /// The longest name accepted (the keychain item adds a prefix and a version).
    pub const MAX_LEN: usize = 40;

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a string is not a credential name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a credential name is 1 to {max} characters of a-z, 0-9, '-', '_', '.', starting with a letter or digit; got {0:?}",
    max = CredentialName::MAX_LEN
)]
pub struct CredentialNameError(pub String);

impl FromStr for CredentialName {
    type Err = CredentialNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=Self::MAX_LEN).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(CredentialNameError(s.to_owned()))
        }
    }
}

impl TryFrom<String> for CredentialName {
    type Error = CredentialNameError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<CredentialName> for String {
    fn from(name: CredentialName) -> Self {
        name.0
    }
}

impl fmt::Display for CredentialName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a credential's value reaches the code that uses it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Injection {
    /// As an environment variable of a stdio server, at launch.
    Env {
        /// The variable's name.
        var: String,
    },
    /// As `Authorization: Bearer <value>` on the built-in `http_request`.
    Bearer,
    /// As a named header on the built-in `http_request`.
    Header {
        /// The header's name.
        name: String,
    },
    /// As `Authorization: Basic <base64(value)>` (the value is `user:password`).
    Basic,
}

/// A credential's metadata: everything but its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    /// The scope name grants and cards use.
    pub name: CredentialName,
    /// How it is injected.
    pub injection: Injection,
    /// The hosts an HTTP request may carry it to (header kinds).
    pub hosts: Vec<String>,
    /// Every call that would use it needs a human.
    pub every_use: bool,
    /// Bumped by each rotation; the keychain item is per version.
    pub version: u32,
    /// When it was added (unix ms).
    pub created_at: u64,
    /// When it was last rotated (unix ms).
    pub rotated_at: Option<u64>,
}

impl Credential {
    /// The keychain item holding this version's value.
    pub fn keychain_item(&self) -> String {
        keychain_item(&self.name, self.version)
    }

    /// The environment variable it is released as, for the env kind.
    pub fn env_var(&self) -> Option<&str> {
        match &self.injection {
            Injection::Env { var } => Some(var),
            _ => None,
        }
    }

    /// Whether a request to `host` may carry it (exact, case-insensitive host match).
    pub fn allows_host(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }
}

/// The keychain item for version `version` of `name`.
pub fn keychain_item(name: &CredentialName, version: u32) -> String {
    format!("credential.{name}.v{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_fit_a_keychain_item() {
        for good in ["inventory-api-staging", "a", "x.y_z-1", &"a".repeat(40)] {
            let name: CredentialName = good.parse().expect(good);
            let item = keychain_item(&name, u32::MAX);
            assert!(item.len() <= 64, "{item}");
        }
        for bad in ["", "Inventory", "-x", "a b", "a/b", &"a".repeat(41)] {
            assert!(bad.parse::<CredentialName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_match_exactly_ignoring_case() {
        let c = Credential {
            name: "api".parse().expect("name"),
            injection: Injection::Bearer,
            hosts: vec!["api.example.com".into()],
            every_use: false,
            version: 1,
            created_at: 0,
            rotated_at: None,
        };
        assert!(c.allows_host("API.example.com"));
        assert!(!c.allows_host("example.com"));
        assert!(!c.allows_host("api.example.com.evil.net"));
        assert_eq!(c.env_var(), None);
    }
}
