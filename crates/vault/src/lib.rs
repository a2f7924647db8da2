//! Where Postern keeps secrets: the OS keychain (macOS Keychain, Windows Credential Manager,
//! the Linux Secret Service), behind a small port, [`SecretStore`]. Only this crate touches the
//! keychain.
//!
//! - [`Keychain`]: the real store (the `keyring` crate on macOS and Windows, the Secret Service
//!   over one D-Bus connection per process on Linux). Its entries are namespaced per
//!   Postern home: service `postern`, user `<name>@<short hash of the home path>`, so a test
//!   home never reads or overwrites the entries of a user's real one.
//! - `MemoryStore` (feature `memory`, or this crate's own tests): an in-memory store for unit
//!   tests only. Integration and end-to-end tests use the real keychain (a D-Bus session with an
//!   unlocked gnome-keyring on Linux).
//! - [`Secret`]: a value with a redacted `Debug`, no `Display`, zeroized on drop.
//!
//! Every call is blocking (the Secret Service is a D-Bus round trip): call from a blocking
//! context, never from an async task.

mod key;
mod keychain;
#[cfg(any(test, feature = "memory"))]
mod memory;

use std::fmt;

use zeroize::Zeroize;

pub use key::{KDF_MEMORY_KIB, KDF_PASSES, KeyError, VaultKey, WrappedKey, is_sealed};
pub use keychain::Keychain;
#[cfg(any(test, feature = "memory"))]
pub use memory::MemoryStore;

/// Gets, sets and deletes secret bytes by name. Names are 1 to 64 characters of
/// `[a-z0-9._-]` (see [`check_name`]); the store adds its own namespace.
pub trait SecretStore: Send + Sync + fmt::Debug + 'static {
    /// The secret called `name`, or `None` if there is none.
    fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, VaultError>;

    /// Stores `value` under `name`, replacing any previous value.
    fn set(&self, name: &str, value: &[u8]) -> Result<(), VaultError>;

    /// Deletes `name`. Returns whether there was one.
    fn delete(&self, name: &str) -> Result<bool, VaultError>;
}

/// A secret value. `Debug` shows `Secret(<redacted>)`; there is no `Display`; the value is
/// zeroized when dropped. Read it with [`Secret::expose`], as late and as briefly as possible.
pub struct Secret<T: Zeroize>(T);

/// Why the keychain could not be used. No variant carries a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VaultError {
    /// There is no keychain to talk to (no D-Bus session, no Secret Service, a platform error).
    #[error("the OS keychain is unavailable: {reason}")]
    Unavailable {
        /// The platform's own message.
        reason: String,
    },
    /// The keychain exists but refused access (typically: it is locked).
    #[error("the OS keychain refused access (is it locked?): {reason}")]
    NoAccess {
        /// The platform's own message.
        reason: String,
    },
    /// More than one keychain item matches the entry (made by hand, or by another program).
    #[error("more than one keychain item matches {name}; remove the extra ones")]
    Ambiguous {
        /// The entry's name (not its value).
        name: String,
    },
    /// A name outside `[a-z0-9._-]{1,64}`.
    #[error("invalid secret name {name:?}: use 1 to 64 characters of a-z, 0-9, '.', '_', '-'")]
    InvalidName {
        /// The name refused.
        name: String,
    },
}

impl<T: Zeroize> Secret<T> {
    /// Wraps a secret value.
    pub fn new(value: T) -> Self {
        Secret(value)
    }

    /// The value. Keep the borrow short, and never log or format it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T: Zeroize> Drop for Secret<T> {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl<T: Zeroize> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl VaultError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            VaultError::Unavailable { .. } => "keychain_unavailable",
            VaultError::NoAccess { .. } => "keychain_locked",
            VaultError::Ambiguous { .. } => "keychain_ambiguous",
            VaultError::InvalidName { .. } => "secret_name_invalid",
        }
    }
}

/// Checks a secret name: 1 to 64 characters of `[a-z0-9._-]`.
pub fn check_name(name: &str) -> Result<(), VaultError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(VaultError::InvalidName { name: name.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug() {
        let secret = Secret::new(b"hunter2-canary".to_vec());
        let shown = format!("{secret:?} {:?}", Some(&secret));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert_eq!(secret.expose(), b"hunter2-canary");
    }

    #[test]
    fn names_are_checked() {
        for good in [
            "audit-opening-key",
            "a",
            "inventory-api.staging_2",
            &"x".repeat(64),
        ] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "Audit", "a b", "a/b", "ключ", &"x".repeat(65)] {
            let err = check_name(bad).unwrap_err();
            assert_eq!(err.code(), "secret_name_invalid", "{bad}");
        }
    }
}
