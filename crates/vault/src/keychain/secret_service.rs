//! The Linux Secret Service (gnome-keyring, KeePassXC, ...) over libdbus, through
//! `dbus-secret-service` (the library `keyring`'s own Linux backend is), with one connection and
//! one session per process.
//!
//! Why not through `keyring`: it opens a new D-Bus connection and Secret Service session for
//! every operation (two for a write), and gnome-keyring aborts when a new client's first
//! `OpenSession` races another's (upstream gnome-keyring issues 190 and 196: "assertion 'client'
//! failed", then `g_variant_new` on a null value). Postern writes the audit anchor up to ten
//! times a second while the CLI and other programs use the keychain, so it hit that race: the
//! keyring died, D-Bus started a fresh one whose login keyring was locked, and every keychain
//! call after it failed or waited on a prompt. Here a process connects once, every operation
//! goes through that connection in turn, and a connection that failed is replaced at the next
//! call.
//!
//! Items keep the attributes `keyring` gave them (`target` = `default`, `service`, `username`,
//! `application`), so the entries earlier versions wrote are found and replaced in place. New
//! items go to the default collection.
//!
//! A call the service does not answer within the library's 2 s (D-Bus `NoReply`: a busy
//! gnome-keyring rewriting its file) is made again until [`PATIENCE`] has passed: a read, a
//! replacing write and a delete each come out the same when made twice.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dbus_secret_service::{EncryptionType, Error, Item, SecretService};

use crate::{Secret, VaultError};

/// How long a call is made again while the service does not answer in time.
const PATIENCE: Duration = Duration::from_secs(15);

/// The pause between an unanswered attempt and the next.
const PAUSE: Duration = Duration::from_millis(100);

/// How long the service may show its own prompt (to unlock a locked keyring) before the call
/// gives up with "refused access".
const PROMPT_SECONDS: u64 = 120;

/// The collection every item names as its `target` (`keyring`'s name for the default one).
const TARGET: &str = "default";

/// The `application` attribute of the items (what `keyring` wrote).
const APPLICATION: &str = "rust-keyring";

/// The process's connection: made at the first call, replaced after a failed one.
static CONNECTION: Mutex<Option<SecretService>> = Mutex::new(None);

/// The secret of the item (`service`, `user`), if there is one.
pub(super) fn get(
    service: &str,
    user: &str,
    name: &str,
) -> Result<Option<Secret<Vec<u8>>>, VaultError> {
    with_service(name, |ss| {
        let Some(item) = the_item(ss, service, user)? else {
            return Ok(None);
        };
        Ok(Some(Secret::new(item.get_secret()?)))
    })
}

/// Sets the secret of the item (`service`, `user`), creating it in the default collection.
pub(super) fn set(service: &str, user: &str, name: &str, value: &[u8]) -> Result<(), VaultError> {
    with_service(name, |ss| {
        if let Some(item) = the_item(ss, service, user)? {
            return Ok(item.set_secret(value, "text/plain")?);
        }
        let collection = ss.get_default_collection()?;
        collection.ensure_unlocked()?;
        let attributes = HashMap::from([
            ("target", TARGET),
            ("service", service),
            ("username", user),
            ("application", APPLICATION),
        ]);
        let label = format!("{user}@{service}:{TARGET} (Postern)");
        collection.create_item(&label, attributes, value, true, "text/plain")?;
        Ok(())
    })
}

/// Deletes the item (`service`, `user`); whether there was one.
pub(super) fn delete(service: &str, user: &str, name: &str) -> Result<bool, VaultError> {
    with_service(name, |ss| {
        let Some(item) = the_item(ss, service, user)? else {
            return Ok(false);
        };
        item.delete()?;
        Ok(true)
    })
}

/// A failure inside one operation: the service's, or more than one item for an entry.
enum Failure {
    Service(Error),
    Ambiguous,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Service(e)
    }
}

/// The entry's item, unlocked, if there is one.
fn the_item<'a>(
    ss: &'a SecretService,
    service: &str,
    user: &str,
) -> Result<Option<Item<'a>>, Failure> {
    let attributes = HashMap::from([("target", TARGET), ("service", service), ("username", user)]);
    let found = ss.search_items(attributes)?;
    let mut items = found.unlocked.into_iter().chain(found.locked);
    match (items.next(), items.next()) {
        (None, _) => Ok(None),
        (Some(item), None) => {
            item.ensure_unlocked()?;
            Ok(Some(item))
        }
        (Some(_), Some(_)) => Err(Failure::Ambiguous),
    }
}

/// Runs `op` on the process's connection (connecting first when there is none), one operation
/// at a time. A call the service did not answer in time is made again on the same connection,
/// for [`PATIENCE`] at most. A connection whose call failed otherwise on D-Bus is dropped, and
/// the call made once more on a new one when it failed on an old one (the service may have
/// been restarted since: it no longer knows the session).
fn with_service<T>(
    name: &str,
    op: impl Fn(&SecretService) -> Result<T, Failure>,
) -> Result<T, VaultError> {
    let start = Instant::now();
    let mut connection = lock();
    loop {
        let fresh = connection.is_none();
        let result = match &*connection {
            Some(ss) => op(ss),
            None => match SecretService::connect_with_max_prompt_timeout(
                EncryptionType::Plain,
                PROMPT_SECONDS,
            ) {
                Ok(ss) => op(connection.insert(ss)),
                Err(e) => Err(Failure::Service(e)),
            },
        };
        let error = match result {
            Ok(value) => return Ok(value),
            Err(Failure::Ambiguous) => return Err(VaultError::Ambiguous { name: name.into() }),
            Err(Failure::Service(e)) => e,
        };
        let Error::Dbus(dbus) = &error else {
            return Err(vault_error(error));
        };
        if dbus.name() == Some("org.freedesktop.DBus.Error.NoReply") && start.elapsed() < PATIENCE {
            // The service is busy, the connection (if made) sound: ask again.
            tracing::warn!(
                "the OS keychain did not answer in time; asking again ({:.0?} so far)",
                start.elapsed()
            );
            std::thread::sleep(PAUSE);
            continue;
        }
        *connection = None;
        if fresh {
            return Err(vault_error(error));
        }
    }
}

fn lock() -> MutexGuard<'static, Option<SecretService>> {
    CONNECTION.lock().unwrap_or_else(|e| e.into_inner())
}

/// The service's failure as a [`VaultError`] (no message of the library carries a value).
fn vault_error(error: Error) -> VaultError {
    match error {
        Error::Locked | Error::NoResult | Error::Prompt => VaultError::NoAccess {
            reason: error.to_string(),
        },
        other => VaultError::Unavailable {
            reason: other.to_string(),
        },
    }
}
