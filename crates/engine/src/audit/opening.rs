//! The log's opening key in the keychain (issue 13): sealed under the vault key, so that a
//! process of the user reading the Secret Service gets ciphertext, and the bodies of the log
//! (tool-call arguments, results) open only while the vault is unlocked or for the person
//! who gives the passphrase.
//!
//! The key is made plain when a log starts (the engine starts locked, and a key it could not
//! store would be a log nobody can read) and stays plain only until the vault key exists: the
//! first passphrase, or the next unlock of a home that predates this, seals it
//! ([`AuditLog::adopt`]). Appending needs only the public half, which the database keeps.

use postern_audit::OpeningKey;
use postern_vault::{SecretStore, VaultKey, is_sealed};

use super::{AuditError, AuditLog, OPENING_KEY, writer};

/// The opening key as the keychain holds it.
pub(crate) enum Stored {
    /// No key: a new log, or a keychain that was reset.
    Missing,
    /// Base64 text, written before the vault had a key; sealed at the next unlock.
    Plain(OpeningKey),
    /// Sealed under the vault key ([`VaultKey::seal`], the item's name as its purpose).
    Sealed(Vec<u8>),
}

impl Stored {
    /// Reads the keychain's item.
    pub(crate) fn read(secrets: &dyn SecretStore) -> Result<Stored, AuditError> {
        let Some(bytes) = secrets.get(OPENING_KEY)? else {
            return Ok(Stored::Missing);
        };
        if is_sealed(bytes.expose()) {
            return Ok(Stored::Sealed(bytes.expose().clone()));
        }
        let text = std::str::from_utf8(bytes.expose()).map_err(|_| AuditError::Unavailable {
            reason: "the audit opening key in the keychain is not text".into(),
        })?;
        OpeningKey::from_base64(text)
            .map(Stored::Plain)
            .map_err(|e| AuditError::Unavailable {
                reason: format!(
                    "the audit opening key in the keychain is malformed ({})",
                    e.code()
                ),
            })
    }

    /// The key itself: a plain one as it is, a sealed one opened with `vault` (refused
    /// without it).
    pub(crate) fn open(self, vault: Option<&VaultKey>) -> Result<Option<OpeningKey>, AuditError> {
        match self {
            Stored::Missing => Ok(None),
            Stored::Plain(key) => Ok(Some(key)),
            Stored::Sealed(sealed) => {
                let vault = vault.ok_or(AuditError::KeySealed)?;
                let opened =
                    vault
                        .open(OPENING_KEY, &sealed)
                        .map_err(|_| AuditError::Unavailable {
                            reason: "the audit opening key in the keychain does not open with \
                                 the vault key (it was replaced behind Postern's back)"
                                .into(),
                        })?;
                let bytes: [u8; 32] =
                    opened
                        .expose()
                        .as_slice()
                        .try_into()
                        .map_err(|_| AuditError::Unavailable {
                            reason: "the sealed audit opening key is not 32 bytes".into(),
                        })?;
                Ok(Some(OpeningKey::from_bytes(bytes)))
            }
        }
    }
}

/// The keychain's opening key: a plain one as it is, a sealed one opened with `vault`.
pub(crate) fn read_key(
    secrets: &dyn SecretStore,
    vault: Option<&VaultKey>,
) -> Result<Option<OpeningKey>, AuditError> {
    Stored::read(secrets)?.open(vault)
}

/// Whether opening the log's bodies needs the vault key (the CLI asks for the passphrase
/// then). An unreadable keychain counts as no: the read that follows says why.
pub fn opening_key_sealed(secrets: &dyn SecretStore) -> bool {
    matches!(Stored::read(secrets), Ok(Stored::Sealed(_)))
}

/// Writes `key` sealed under `vault`, and reads it back to be sure it stuck.
fn seal(secrets: &dyn SecretStore, key: &OpeningKey, vault: &VaultKey) -> Result<(), AuditError> {
    let unavailable = |reason: String| AuditError::Unavailable { reason };
    let sealed = vault
        .seal(OPENING_KEY, key.expose_bytes().as_slice())
        .map_err(|e| unavailable(e.to_string()))?;
    secrets.set(OPENING_KEY, &sealed)?;
    let back = read_key(secrets, Some(vault))?;
    if back.map(|k| k.recipient()) != Some(key.recipient()) {
        return Err(unavailable(
            "the keychain did not keep the sealed audit key".into(),
        ));
    }
    Ok(())
}

impl AuditLog {
    /// Called with the vault key at every unlock: seals a plain opening key under it, and
    /// lets journals that were behind the log at start catch up (they needed the opening
    /// key, which a sealed item gives only now). Blocking (keychain).
    pub fn adopt(&self, vault: &VaultKey) {
        let Some(recipient) = self.recipient() else {
            return;
        };
        let secrets = &*self.secrets;
        let key = match Stored::read(secrets) {
            Ok(Stored::Missing) => return,
            Ok(Stored::Plain(key)) if key.recipient() == recipient => {
                match seal(secrets, &key, vault) {
                    Ok(()) => tracing::info!("sealed the audit opening key under the vault key"),
                    Err(e) => tracing::error!("the audit opening key could not be sealed: {e}"),
                }
                key
            }
            Ok(Stored::Plain(_)) => {
                tracing::error!("the keychain's audit opening key is not this log's; left as is");
                return;
            }
            Ok(sealed @ Stored::Sealed(_)) => match sealed.open(Some(vault)) {
                Ok(Some(key)) if key.recipient() == recipient => key,
                Ok(_) => {
                    tracing::error!("the keychain's audit opening key is not this log's");
                    return;
                }
                Err(e) => {
                    tracing::error!("{e}");
                    return;
                }
            },
            Err(e) => {
                tracing::error!("the audit opening key could not be read: {e}");
                return;
            }
        };
        let _ = self.send(writer::Msg::CatchUp(Box::new(key)), false);
    }
}
