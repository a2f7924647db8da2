//! Opening the log at start-up: the keys, the start-up verification against the anchor, and
//! the journals' catch-up when the opening key is at hand.

use std::path::{Path, PathBuf};

use postern_audit::{Chain, ChainHash, Head, OpeningKey, Seq};
use postern_store::audit::META_RECIPIENT;
use postern_store::{JournalWriter, LogWriter, StoreError};
use postern_vault::SecretStore;

use super::offline::{CatchUp, catch_up};
use super::opening::Stored;
use super::{ANCHOR, AuditError, OPENING_KEY, check_log, read_anchor, read_key, read_recipient};

/// A log that passed the start-up checks, ready to append to.
pub(super) struct Ready {
    pub db: LogWriter,
    /// The journals' own connection (their thread projects on it, beside the appends).
    pub journals: JournalWriter,
    pub chain: Chain,
    /// The home (the catch-up reads the log on a connection of its own).
    pub home: PathBuf,
    /// Journals not at the log's end that wait for the opening key to catch up so.
    pub behind: Option<CatchUp>,
    /// What [`LogWriter::repair_schema`] found amiss in the database and repaired at the
    /// open, one line each (recorded as `config_tampered` after the run's first record).
    pub repaired: Vec<String>,
}

/// The anchor value of a log that has no records yet: written when the key is created, so
/// that a log whose first records were committed just before a crash (before the first
/// anchor write) is not mistaken for one whose anchor was deleted.
pub(super) fn empty_anchor() -> Head {
    Head::new(Seq::new(0), ChainHash::GENESIS)
}

/// Keys, anchor, start-up verification, journal catch-up.
pub(super) fn prepare(home: &Path, secrets: &dyn SecretStore) -> Result<Ready, AuditError> {
    let unopened = |e: StoreError| AuditError::Unavailable {
        reason: format!("cannot open the audit database: {e}"),
    };
    let db = LogWriter::open(home).map_err(unopened)?;
    // Before anything is read or written: an index planted to refuse some records, or a
    // trigger (which never runs on Postern's connections, but is not left there either).
    let repaired = db.repair_schema().unwrap_or_else(|e| {
        tracing::error!("cannot check the database's schema: {e}");
        Vec::new()
    });
    for what in &repaired {
        tracing::warn!("{what}");
    }
    let unavailable = |e: AuditError| match e {
        AuditError::Keychain(v) => AuditError::Unavailable {
            reason: format!("{} ({})", v, v.code()),
        },
        other => other,
    };
    let stored = Stored::read(secrets).map_err(unavailable)?;
    let anchor = read_anchor(secrets).map_err(unavailable)?;
    let recipient = read_recipient(db.store())?;
    // The last sequence number (the chain starts at 1 without a gap, which the check below
    // verifies): a count would read every page of the table.
    let records = db.store().audit_head()?.map_or(0, |(seq, _)| seq);
    let quarantine = |reason: String| AuditError::Quarantined { seq: 1, reason };

    // The opening key, when it is at hand (plain: a new log, or one not sealed yet); a sealed
    // one opens only at the next unlock, and appending needs only the public half.
    let (key, recipient) = match (stored, recipient) {
        (Stored::Plain(key), Some(recipient)) if key.recipient() == recipient => {
            (Some(key), recipient)
        }
        (Stored::Plain(_), Some(_)) => {
            return Err(quarantine(
                "the opening key in the keychain does not match this log's public key (another \
                 home's key, or a replaced database)"
                    .into(),
            ));
        }
        (Stored::Plain(key), None) => {
            tracing::warn!("the log's public key was missing from the database; restored it");
            db.set_meta(META_RECIPIENT, &key.recipient().to_base64())?;
            let recipient = key.recipient();
            (Some(key), recipient)
        }
        (Stored::Sealed(_), Some(recipient)) => (None, recipient),
        (Stored::Sealed(_), None) => {
            return Err(quarantine(
                "the log's public key is missing from the database, and its opening key is \
                 sealed: a replaced database cannot be told from this home's"
                    .into(),
            ));
        }
        (Stored::Missing, _) if records > 0 => {
            return Err(quarantine(format!(
                "the log has {records} records but its opening key is not in the keychain \
                 (was the keychain reset, or the database copied from elsewhere?)"
            )));
        }
        (Stored::Missing, _) => {
            let key = create_key(&db, secrets)?;
            let recipient = key.recipient();
            (Some(key), recipient)
        }
    };

    let verifier_anchor = anchor.filter(|a| *a != empty_anchor());
    let checked =
        check_log(db.store(), verifier_anchor, None, |_, _, _| Ok(())).map_err(|e| match e {
            AuditError::Verification { seq, reason, .. } => AuditError::Quarantined { seq, reason },
            other => other,
        })?;
    if anchor.is_none() && checked.records > 0 {
        return Err(quarantine(format!(
            "the log has {} records but no anchor in the keychain: truncation or rollback \
             cannot be ruled out",
            checked.records
        )));
    }

    let mut journals = JournalWriter::open(home).map_err(unopened)?;
    let journal = journals.store().journal_seq()?;
    let head_seq = checked.head.map_or(0, |h| h.seq().get() as i64);
    let mut behind = None;
    if journal != head_seq {
        let how = if journal > head_seq {
            CatchUp::FromStart
        } else {
            CatchUp::FromTheirEnd
        };
        match &key {
            Some(key) => {
                tracing::info!(
                    journal,
                    log = head_seq,
                    "the journals are behind the log: rebuilding them from it"
                );
                let reader = postern_store::Store::open(home)?;
                let projected = catch_up(&mut journals, &reader, key, how)?;
                tracing::info!(projected, "journals rebuilt");
            }
            None => {
                tracing::warn!(
                    journal,
                    log = head_seq,
                    "the journals are behind the log; they catch up when the vault is unlocked \
                     (the opening key is sealed under the vault key)"
                );
                behind = Some(how);
            }
        }
    }

    // The opening key is not needed to append: drop it now.
    drop(key);
    let chain = match checked.head {
        Some(head) => Chain::resume(recipient, head).map_err(|e| AuditError::Unavailable {
            reason: e.to_string(),
        })?,
        None => Chain::genesis(recipient),
    };
    Ok(Ready {
        db,
        journals,
        chain,
        home: home.to_owned(),
        behind,
        repaired,
    })
}

/// A new log's key pair: the secret to the keychain (read back to be sure it stuck), the
/// public half to the database, and the empty anchor.
fn create_key(db: &LogWriter, secrets: &dyn SecretStore) -> Result<OpeningKey, AuditError> {
    let key =
        OpeningKey::generate(&mut getrandom::SysRng).map_err(|e| AuditError::Unavailable {
            reason: e.to_string(),
        })?;
    let keychain = |e: postern_vault::VaultError| AuditError::Unavailable {
        reason: format!(
            "cannot store the audit key in the keychain: {e} ({})",
            e.code()
        ),
    };
    secrets
        .set(OPENING_KEY, key.expose_base64().as_bytes())
        .map_err(keychain)?;
    let stored = read_key(secrets, None)?;
    if stored.as_ref().map(OpeningKey::recipient) != Some(key.recipient()) {
        return Err(AuditError::Unavailable {
            reason: "the keychain did not keep the audit key".into(),
        });
    }
    secrets
        .set(ANCHOR, empty_anchor().to_string().as_bytes())
        .map_err(keychain)?;
    db.set_meta(META_RECIPIENT, &key.recipient().to_base64())?;
    tracing::info!(recipient = %key.recipient(), "created a new audit log key");
    Ok(key)
}
