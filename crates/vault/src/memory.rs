//! An in-memory [`SecretStore`] for unit tests only (feature `memory`). It can be switched to
//! fail like an absent keychain, to test what callers do then.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use zeroize::Zeroizing;

use crate::{Secret, SecretStore, VaultError, check_name};

/// Secrets in a map, for unit tests. Never use it outside tests: it is not a vault.
#[derive(Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, Zeroizing<Vec<u8>>>>,
    unavailable: AtomicBool,
}

impl MemoryStore {
    /// An empty, available store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every call fail with [`VaultError::Unavailable`] (or work again).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.unavailable.store(unavailable, Ordering::SeqCst);
    }

    fn check(&self, name: &str) -> Result<(), VaultError> {
        check_name(name)?;
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(VaultError::Unavailable {
                reason: "the test store is switched off".into(),
            });
        }
        Ok(())
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Zeroizing<Vec<u8>>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<String> = self.entries().keys().cloned().collect();
        names.sort();
        f.debug_struct("MemoryStore")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

impl SecretStore for MemoryStore {
    fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, VaultError> {
        self.check(name)?;
        Ok(self
            .entries()
            .get(name)
            .map(|value| Secret::new(value.to_vec())))
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        self.check(name)?;
        self.entries()
            .insert(name.to_owned(), Zeroizing::new(value.to_vec()));
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<bool, VaultError> {
        self.check(name)?;
        Ok(self.entries().remove(name).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_delete_and_unavailability() {
        let store = MemoryStore::new();
        assert!(store.get("k").unwrap().is_none());
        store.set("k", b"v1").unwrap();
        store.set("k", b"v2").unwrap();
        assert_eq!(store.get("k").unwrap().unwrap().expose(), b"v2");
        assert!(!format!("{store:?}").contains("v2"));
        store.set_unavailable(true);
        assert_eq!(store.get("k").unwrap_err().code(), "keychain_unavailable");
        store.set_unavailable(false);
        assert!(store.delete("k").unwrap());
        assert!(!store.delete("k").unwrap());
    }
}
