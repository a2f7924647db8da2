//! The OS keychain through the `keyring` crate (v3): macOS Keychain (`apple-native`), Windows
//! Credential Manager (`windows-native`), the Linux Secret Service over libdbus
//! (`sync-secret-service`).
//!
//! The Secret Service is spoken over its plain transport, without the optional session
//! encryption (keyring's `crypto-*` features: a 1024-bit Diffie-Hellman exchange in every
//! keychain operation, two per write, which took a tenth of the engine's CPU under load for the
//! audit anchor alone). That encryption hides values from an eavesdropper on the session bus;
//! the only processes that can watch that bus are the user's own, and those can ask the Secret
//! Service for the items themselves. And Postern writes nothing there in the clear: credential
//! values and the audit log's key are sealed under the vault key, and the anchor is a hash.
//!
//! keyring's Secret Service client gives each D-Bus call 2 seconds; a busy gnome-keyring (one
//! rewriting its file for another process's write) can take longer, and the call fails with
//! D-Bus's `NoReply` although the service is there. Such a call is made again until it is
//! answered or [`PATIENCE`] has passed ([`patiently`]): a read, a replacing write and a delete
//! each come out the same when made twice (a delete whose first attempt went through reports
//! the entry as already gone).

use std::path::Path;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::{Secret, SecretStore, VaultError, check_name};

/// How long a keychain call is made again while the service does not answer in time (each
/// attempt waits 2 s for its answer).
const PATIENCE: Duration = Duration::from_secs(15);

/// The pause between an unanswered attempt and the next.
const PAUSE: Duration = Duration::from_millis(100);

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

    fn entry(&self, name: &str) -> Result<keyring::Entry, VaultError> {
        check_name(name)?;
        keyring::Entry::new(Self::SERVICE, &self.user(name)).map_err(|e| map_error(name, e))
    }
}

impl SecretStore for Keychain {
    fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, VaultError> {
        let entry = self.entry(name)?;
        match patiently(|| entry.get_secret()) {
            Ok(bytes) => Ok(Some(Secret::new(bytes))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(map_error(name, e)),
        }
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        let entry = self.entry(name)?;
        patiently(|| entry.set_secret(value)).map_err(|e| map_error(name, e))
    }

    fn delete(&self, name: &str) -> Result<bool, VaultError> {
        let entry = self.entry(name)?;
        match patiently(|| entry.delete_credential()) {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(map_error(name, e)),
        }
    }
}

/// Makes a keychain call, again while it fails for want of an answer in time (see the module
/// docs) and [`PATIENCE`] has not passed.
fn patiently<T>(call: impl FnMut() -> keyring::Result<T>) -> keyring::Result<T> {
    patiently_for(PATIENCE, call)
}

fn patiently_for<T>(
    patience: Duration,
    mut call: impl FnMut() -> keyring::Result<T>,
) -> keyring::Result<T> {
    let start = Instant::now();
    loop {
        match call() {
            Err(e) if unanswered(&e) && start.elapsed() < patience => {
                tracing::warn!(
                    "the OS keychain did not answer in time; asking again ({:.0?} so far)",
                    start.elapsed()
                );
                std::thread::sleep(PAUSE);
            }
            done => return done,
        }
    }
}

/// Whether the keychain service did not answer in time (D-Bus `NoReply`).
#[cfg(target_os = "linux")]
fn unanswered(error: &keyring::Error) -> bool {
    let keyring::Error::PlatformFailure(e) = error else {
        return false;
    };
    let e: &(dyn std::error::Error + 'static) = &**e;
    std::iter::successors(Some(e), |e| e.source())
        .filter_map(|e| e.downcast_ref::<dbus::Error>())
        .any(|e| e.name() == Some("org.freedesktop.DBus.Error.NoReply"))
}

#[cfg(not(target_os = "linux"))]
fn unanswered(_: &keyring::Error) -> bool {
    false
}

/// Maps keyring's error without ever formatting one that could carry a value
/// (`BadEncoding` holds the bytes read; its `Display` does not, but its `Debug` does).
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

    /// A Secret Service failure as keyring reports it: D-Bus error `name` under the client's own.
    #[cfg(target_os = "linux")]
    fn dbus_failure(name: &str) -> keyring::Error {
        #[derive(Debug)]
        struct Client(dbus::Error);
        impl std::fmt::Display for Client {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "DBus error: {}", self.0)
            }
        }
        impl std::error::Error for Client {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let error = dbus::Error::new_custom(name, "the service did not answer");
        keyring::Error::PlatformFailure(Box::new(Client(error)))
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_call_the_service_did_not_answer_in_time_is_made_again_and_others_are_not() {
        let no_reply = "org.freedesktop.DBus.Error.NoReply";
        // Unanswered twice, then answered: the caller gets the answer.
        let mut calls = 0;
        let answer = patiently(|| {
            calls += 1;
            match calls {
                1 | 2 => Err(dbus_failure(no_reply)),
                _ => Ok(calls),
            }
        });
        assert_eq!(answer.expect("answered"), 3);
        // Never answered: asked again until the patience is spent, then the last failure.
        let mut calls = 0;
        let patience = PAUSE * 3;
        let start = Instant::now();
        let failed = patiently_for(patience, || -> keyring::Result<()> {
            calls += 1;
            Err(dbus_failure(no_reply))
        });
        assert!(failed.is_err());
        assert!(calls > 1, "asked {calls} times");
        assert!(start.elapsed() >= patience);
        // Any other failure, or no entry, is the answer at once.
        for other in [
            dbus_failure("org.freedesktop.DBus.Error.ServiceUnknown"),
            keyring::Error::NoEntry,
        ] {
            let mut other = Some(other);
            let mut calls = 0;
            let _ = patiently(|| -> keyring::Result<()> {
                calls += 1;
                Err(other.take().unwrap_or(keyring::Error::NoEntry))
            });
            assert_eq!(calls, 1);
        }
    }

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
