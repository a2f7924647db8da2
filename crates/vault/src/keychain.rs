//! The OS keychain: macOS Keychain and Windows Credential Manager through the `keyring` crate
//! (v3, `apple-native`, `windows-native`), the Linux Secret Service through
//! `dbus-secret-service` over libdbus, one connection per process ([`secret_service`], which
//! says why not through `keyring`).
//!
//! The Secret Service is spoken over its plain transport, without the optional session
//! encryption (a 1024-bit Diffie-Hellman exchange per session). That encryption hides values
//! from an eavesdropper on the session bus; the only processes that can watch that bus are the
//! user's own, and those can ask the Secret Service for the items themselves. And Postern
//! writes nothing there in the clear: credential values and the audit log's key are sealed
//! under the vault key, and the anchor is a hash.

#[cfg(target_os = "linux")]
mod secret_service;

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{Secret, SecretStore, VaultError, check_name};

/// The keychain entries of one Postern home: service [`Keychain::SERVICE`], user
/// `<name>@<namespace>`, the namespace being the first 12 hex digits of the SHA-256 of the
/// home's canonical path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keychain {
    namespace: String,
}

impl Keychain {
    /// The service every Postern entry is stored under.
    pub const SERVICE: &'static str = "postern";

    /// The entries of the home at `home` (canonicalized when it exists, so two spellings of
    /// one directory share their entries).
    pub fn for_home(home: &Path) -> Keychain {
        let path = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_owned());
        let digest = Sha256::digest(path.as_os_str().as_encoded_bytes());
        let namespace = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        Keychain { namespace }
    }

    /// The namespace (the part after `@` in every user name).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The keychain "user" (account) an entry is stored as: `<name>@<namespace>`.
    pub fn user(&self, name: &str) -> String {
        format!("{name}@{}", self.namespace)
    }
}

#[cfg(target_os = "linux")]
impl SecretStore for Keychain {
    fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, VaultError> {
        check_name(name)?;
        secret_service::get(Self::SERVICE, &self.user(name), name)
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        check_name(name)?;
        secret_service::set(Self::SERVICE, &self.user(name), name, value)
    }

    fn delete(&self, name: &str) -> Result<bool, VaultError> {
        check_name(name)?;
        secret_service::delete(Self::SERVICE, &self.user(name), name)
    }
}

#[cfg(not(target_os = "linux"))]
impl Keychain {
    fn entry(&self, name: &str) -> Result<keyring::Entry, VaultError> {
        check_name(name)?;
        keyring::Entry::new(Self::SERVICE, &self.user(name)).map_err(|e| map_error(name, e))
    }
}

#[cfg(not(target_os = "linux"))]
impl SecretStore for Keychain {
    fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, VaultError> {
        match self.entry(name)?.get_secret() {
            Ok(bytes) => Ok(Some(Secret::new(bytes))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(map_error(name, e)),
        }
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        self.entry(name)?
            .set_secret(value)
            .map_err(|e| map_error(name, e))
    }

    fn delete(&self, name: &str) -> Result<bool, VaultError> {
        match self.entry(name)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(map_error(name, e)),
        }
    }
}

/// Maps keyring's error without ever formatting one that could carry a value
/// (`BadEncoding` holds the bytes read; its `Display` does not, but its `Debug` does).
#[cfg(not(target_os = "linux"))]
fn map_error(name: &str, error: keyring::Error) -> VaultError {
    match error {
        keyring::Error::NoStorageAccess(e) => VaultError::NoAccess {
            reason: e.to_string(),
        },
        keyring::Error::Ambiguous(_) => VaultError::Ambiguous { name: name.into() },
        keyring::Error::PlatformFailure(e) => VaultError::Unavailable {
            reason: e.to_string(),
        },
        keyring::Error::BadEncoding(_) => VaultError::Unavailable {
            reason: "the keychain returned an undecodable value".into(),
        },
        other => VaultError::Unavailable {
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_namespaced_per_home() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        let ka = Keychain::for_home(a.path());
        let kb = Keychain::for_home(b.path());
        assert_ne!(ka, kb);
        assert_eq!(ka.namespace().len(), 12);
        assert_eq!(
            ka.user("audit-anchor"),
            format!("audit-anchor@{}", ka.namespace())
        );
        // Two spellings of one directory share a namespace.
        let dotted = a.path().join(".");
        assert_eq!(Keychain::for_home(&dotted), ka);
        // Names are checked before the keychain is touched.
        assert_eq!(
            ka.get("Not Valid").unwrap_err().code(),
            "secret_name_invalid"
        );
    }
}
