//! What the CLI does with a home's audit log, reading the SQLite file directly (WAL lets it
//! read while the engine writes) and the keys from the keychain: verify, export, and the two
//! repairs a human may choose after a quarantine (re-anchor, rebuild the journals), which need
//! the engine stopped.

use std::fs::{File, TryLockError};
use std::io::Write;
use std::sync::{Arc, Mutex};

use postern_audit::{Head, Opener, OpeningKey, RawRecord, SealedRecord, Seq};
use postern_domain::{AuditEvent, Narrowing, shape};
use postern_store::{JournalSnapshot, JournalWriter, Opened, Store};
use postern_vault::{Secret, SecretStore, VaultError, VaultKey};
use serde_json::json;

use super::start::empty_anchor;
use super::{
    ANCHOR, AuditError, AuditLog, check_log, read_anchor, read_key, read_recipient, relock,
    walk_log,
};
use crate::Home;

/// Events opened per transaction when the journals are rebuilt.
const CHUNK: i64 = 10_000;

/// How the journals compared with the log in a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalCheck {
    /// Projected anew from the log, they hold the same rows, through this record's seq.
    Matched {
        /// The last record they hold.
        through: i64,
    },
    /// Not compared: the bodies were not opened.
    NotChecked,
}

/// What `verify` established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records verified.
    pub records: u64,
    /// The last record.
    pub head: Option<Head>,
    /// Whether every body was opened (and parsed as an event of its header's kind).
    pub bodies_opened: bool,
    /// Why bodies were not opened, when they were not.
    pub key_note: Option<String>,
    /// How the anchor was checked.
    pub anchor: AnchorCheck,
    /// How the journals compared with the log.
    pub journals: JournalCheck,
}

/// The anchor part of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorCheck {
    /// The log reaches the keychain's anchor and has its hash there.
    Checked(Head),
    /// The keychain's anchor is that of an empty log (no records anchored yet).
    Empty,
    /// No keychain to ask: truncation and rollback were not checked.
    Unavailable(String),
}

/// Verifies the whole log of `home`: structure and chain hashes; against the keychain's
/// anchor when there is a keychain; and with `open_bodies` and the opening key (opened with
/// `vault` when it is sealed), every body.
pub fn verify(
    home: &Home,
    secrets: &dyn SecretStore,
    vault: Option<&VaultKey>,
    open_bodies: bool,
) -> Result<VerifyReport, AuditError> {
    let store = Store::open(home.path())?;
    // The anchor before the rows: rows only grow, so the anchor read is never ahead of them.
    let mut anchor_missing = false;
    let (anchor, check) = match read_anchor(secrets) {
        Ok(Some(anchor)) if anchor == empty_anchor() => (None, AnchorCheck::Empty),
        Ok(Some(anchor)) => (Some(anchor), AnchorCheck::Checked(anchor)),
        Ok(None) => {
            anchor_missing = true;
            (None, AnchorCheck::Empty)
        }
        Err(AuditError::Keychain(e)) => (None, AnchorCheck::Unavailable(e.to_string())),
        Err(e) => return Err(e),
    };
    let (key, key_note) = if open_bodies {
        match read_key(secrets, vault) {
            Ok(Some(key)) => (Some(key), None),
            Ok(None) => (
                None,
                Some("the opening key is not in the keychain".to_owned()),
            ),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, Some("not asked to open bodies".to_owned()))
    };
    if let (Some(key), Some(recipient)) = (&key, read_recipient(&store)?)
        && key.recipient() != recipient
    {
        return Err(AuditError::Verification {
            seq: 1,
            code: "audit_key_mismatch",
            reason: "the keychain's opening key does not match this log's public key".into(),
        });
    }
    // The journals as they stand before the log is read: the log read after reaches at least
    // as far (a running engine commits first and projects after), and the events it verifies
    // are projected anew as they come, with nothing read twice.
    let live = match &key {
        Some(_) => Some(Store::open_read_only(home.path())?),
        None => None,
    };
    let mut comparison = live.as_ref().map(JournalComparison::begin).transpose()?;
    let checked = check_log(
        &store,
        anchor,
        key.as_ref(),
        |seq, time, event| match &mut comparison {
            Some(comparison) => comparison.take(Opened { seq, time, event }),
            None => Ok(()),
        },
    )?;
    let head = checked.head.map_or(0, |h| h.seq().get());
    let journals = match comparison {
        Some(comparison) => JournalCheck::Matched {
            through: comparison.finish(head)?,
        },
        None => JournalCheck::NotChecked,
    };
    if anchor_missing && checked.records > 0 {
        return Err(AuditError::Verification {
            seq: 1,
            code: "audit_anchor_missing",
            reason: format!(
                "the log has {} records but the keychain holds no anchor for it: truncation \
                 or rollback cannot be ruled out",
                checked.records
            ),
        });
    }
    Ok(VerifyReport {
        records: checked.records,
        head: checked.head,
        bodies_opened: key.is_some(),
        key_note,
        anchor: check,
        journals,
    })
}

/// The home's journals as they stood before the log was read, and a scratch copy projected
/// anew from the events the verification opens, up to the same record: the Sessions and
/// Activity views read the journals, and nothing else would see a row edited, added or deleted
/// there (they carry no seal of their own).
struct JournalComparison<'a> {
    snapshot: JournalSnapshot<'a>,
    projected: JournalWriter,
    /// Events opened and not projected yet.
    pending: Vec<Result<Opened, AuditError>>,
    /// Where the copy lives, removed with it.
    _scratch: tempfile::TempDir,
}

impl<'a> JournalComparison<'a> {
    fn begin(live: &'a Store) -> Result<Self, AuditError> {
        let scratch = tempfile::Builder::new()
            .prefix("postern-verify-")
            .tempdir()
            .map_err(|e| AuditError::Store {
                reason: format!("a scratch directory to project the journals into: {e}"),
            })?;
        Ok(JournalComparison {
            snapshot: live.journal_snapshot()?,
            projected: JournalWriter::open_file(&scratch.path().join("check.db"))?,
            pending: Vec::new(),
            _scratch: scratch,
        })
    }

    /// An event the verification opened: projected when the journals hold it.
    fn take(&mut self, opened: Opened) -> Result<(), AuditError> {
        if i64::try_from(opened.seq.get()).unwrap_or(i64::MAX) > self.snapshot.seq {
            return Ok(());
        }
        self.pending.push(Ok(opened));
        if self.pending.len() >= CHUNK as usize {
            self.projected.project(std::mem::take(&mut self.pending))?;
        }
        Ok(())
    }

    /// Compares the two, the log verified up to `head`. Returns how far they were compared
    /// (the seq of the last record the journals hold).
    fn finish(mut self, head: u64) -> Result<i64, AuditError> {
        let through = u64::try_from(self.snapshot.seq).unwrap_or_default();
        if through > head {
            return Err(AuditError::Verification {
                seq: head + 1,
                code: "audit_journals_ahead",
                reason: format!(
                    "the Sessions and Activity journals go past the log's end: they hold records \
                     through {through}, the log ends at {head}; records were cut from the log \
                     after the journals were written. The engine projects them again from the log \
                     at its next start, or run `postern audit rebuild-journals` (with the engine \
                     stopped)"
                ),
            });
        }
        self.projected.project(std::mem::take(&mut self.pending))?;
        let Some(difference) = self.snapshot.first_difference(self.projected.store())? else {
            return Ok(self.snapshot.seq);
        };
        let row = |row: &Option<String>| {
            row.as_deref()
                .map_or_else(|| "no such row".to_owned(), |r| format!("`{r}`"))
        };
        Err(AuditError::Verification {
            seq: through,
            code: "audit_journals_differ",
            reason: format!(
                "the Sessions and Activity journals differ from the log in {}: they show {}, the \
                 log gives {}; rebuild them from the log with `postern audit rebuild-journals` \
                 (with the engine stopped)",
                difference.table,
                row(&difference.found),
                row(&difference.expected),
            ),
        })
    }
}

/// Writes every event as one JSON object per line (`seq`, `time`, `kind`, `event`), verifying
/// the chain as it goes (it stops at the first bad record, after the good ones). Tool-call
/// arguments are replaced by their shape unless `with_arguments`. A sealed opening key opens
/// with `vault`. Returns the count written.
pub fn export(
    home: &Home,
    secrets: &dyn SecretStore,
    vault: Option<&VaultKey>,
    with_arguments: bool,
    out: &mut dyn Write,
) -> Result<u64, AuditError> {
    let store = Store::open(home.path())?;
    let anchor = read_anchor(secrets)?.filter(|a| *a != empty_anchor());
    let key = read_key(secrets, vault)?.ok_or(AuditError::KeyMissing)?;
    let mut written = 0;
    check_log(&store, anchor, Some(&key), |seq, time, event| {
        let kind = event.kind();
        let event = if with_arguments {
            serde_json::to_value(&event).map_err(|e| AuditError::Store {
                reason: e.to_string(),
            })?
        } else {
            redacted(&event)?
        };
        let line =
            json!({"seq": seq.get(), "time": time.as_millis(), "kind": kind, "event": event});
        writeln!(out, "{line}").map_err(|e| AuditError::Store {
            reason: format!("writing the export: {e}"),
        })?;
        written += 1;
        Ok(())
    })?;
    Ok(written)
}

/// Accepts the log as it is now: verifies its structure and hashes (and its bodies, when the
/// key is in the keychain, opened with `vault` when sealed), appends the re-anchoring's own
/// record (a [`Narrowing::LostRecords`]) and, once it is committed, makes the head after it the
/// keychain's anchor. For a log cut short or rolled back on purpose (a restored backup); a log
/// with an edited record still fails. Needs the engine stopped. Returns the new anchor.
pub fn reanchor(
    home: &Home,
    secrets: Arc<dyn SecretStore>,
    vault: Option<&VaultKey>,
) -> Result<Head, AuditError> {
    let _lock = lock(home)?;
    let store = Store::open(home.path())?;
    let key = read_key(&*secrets, vault)?;
    if let (Some(key), Some(recipient)) = (&key, read_recipient(&store)?)
        && key.recipient() != recipient
    {
        return Err(AuditError::Verification {
            seq: 1,
            code: "audit_key_mismatch",
            reason: "the keychain's opening key does not match this log's public key".into(),
        });
    }
    let checked = check_log(&store, None, key.as_ref(), |_, _, _| Ok(()))?;
    let head = checked.head.unwrap_or_else(empty_anchor);
    let previous = read_anchor(&*secrets).ok().flatten();
    // The journals show what the log held before it was cut: projected again from the log
    // accepted as it is (the engine would at its next start, or its next unlock).
    if let Some(key) = &key {
        let mut journals = JournalWriter::open(home.path())?;
        if journals.store().journal_seq()? > to_i64(head.seq().get()) {
            catch_up(&mut journals, &store, key, CatchUp::FromStart)?;
        }
    }
    drop(store);
    // What the records cut from the log narrowed (an unbind, a removal, stricter settings) is
    // gone with them, and every seal written before them would vouch for it again. The log
    // itself says it was accepted as it is, in a record of its own appended here (not queued in
    // `postern.db`, where a process of the user could take it away before an engine recorded
    // it): a narrowing every such seal reads. The keychain's anchor moves only past it, once it
    // is committed.
    let from = previous.map_or_else(|| "no anchor".to_owned(), |a| format!("the anchor {a}"));
    let accepting = Arc::new(Accepting {
        keychain: Arc::clone(&secrets),
        head: Mutex::new(Some(head.to_string())),
    });
    let log = AuditLog::open_with(
        home.path(),
        Arc::clone(&accepting) as Arc<dyn SecretStore>,
        AuditEvent::ConfigChanged {
            what: format!("audit log re-anchored by a human at {head} (from {from})"),
            server: None,
            narrowing: Some(Narrowing::LostRecords),
        },
    );
    log.close("re-anchored");
    let anchored = read_anchor(&*secrets).ok().flatten();
    // Its record is the first after the accepted head (a batch that fails is dropped, and the
    // run's stop could be committed without it).
    let recorded_first = |recorded: Head| -> Result<bool, AuditError> {
        let mut first = None;
        walk_log(
            &Store::open(home.path())?,
            Some(head),
            recorded.seq().get() as i64,
            Some(recorded),
            |_, header| {
                first.get_or_insert(header.kind().as_str() == "config_changed");
                Ok(())
            },
        )?;
        Ok(first == Some(true))
    };
    match log.head() {
        Some(recorded)
            if recorded.seq() > head.seq()
                && anchored == Some(recorded)
                && recorded_first(recorded)? =>
        {
            Ok(recorded)
        }
        _ => Err(AuditError::Unavailable {
            reason: format!(
                "the re-anchoring could not be recorded in the log, so the log is not \
                 re-anchored (run it again): {:?}",
                log.status().state
            ),
        }),
    }
}

/// The keychain as the re-anchoring's own log sees it: its anchor reads as the head the
/// person accepts until that log writes its own, after its first record is committed. So the
/// keychain's anchor moves past that record or not at all, and a re-anchoring stopped before
/// the record is durable leaves the log as quarantined as it found it.
#[derive(Debug)]
struct Accepting {
    keychain: Arc<dyn SecretStore>,
    /// The accepted head, until the log writes an anchor.
    head: Mutex<Option<String>>,
}

impl SecretStore for Accepting {
    fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, VaultError> {
        if name == ANCHOR
            && let Some(head) = relock(&self.head).as_ref()
        {
            return Ok(Some(Secret::new(head.as_bytes().to_vec())));
        }
        self.keychain.get(name)
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        self.keychain.set(name, value)?;
        if name == ANCHOR {
            *relock(&self.head) = None;
        }
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<bool, VaultError> {
        self.keychain.delete(name)
    }
}

/// A sequence number as SQLite keeps it.
fn to_i64(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// Empties the journals and projects them again from the log, opening every body with the
/// keychain's key, opened with `vault` when sealed (after checking the chain against the
/// anchor). Needs the engine stopped. Returns how many events were projected.
pub fn rebuild_journals(
    home: &Home,
    secrets: &dyn SecretStore,
    vault: Option<&VaultKey>,
) -> Result<u64, AuditError> {
    let _lock = lock(home)?;
    let key = read_key(secrets, vault)?.ok_or(AuditError::KeyMissing)?;
    let anchor = read_anchor(secrets)?.filter(|a| *a != empty_anchor());
    let reader = Store::open(home.path())?;
    check_log(&reader, anchor, None, |_, _, _| Ok(()))?;
    let mut writer = JournalWriter::open(home.path())?;
    catch_up(&mut writer, &reader, &key, CatchUp::FromStart)
}

/// How journals that are not at the log's end catch up with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CatchUp {
    /// They end before the log does: the events after their end are projected.
    FromTheirEnd,
    /// They go past the log's end (another log's, or one rolled back), or are rebuilt on
    /// request: emptied, then every event is projected.
    FromStart,
}

/// Projects the log's events after the journals' end (or, from the start, all of them) into
/// the journals, `CHUNK` events per transaction. The chain must have been verified already.
pub(super) fn catch_up(
    writer: &mut JournalWriter,
    reader: &Store,
    key: &OpeningKey,
    how: CatchUp,
) -> Result<u64, AuditError> {
    let mut after = match how {
        CatchUp::FromStart => {
            writer.clear()?;
            0
        }
        CatchUp::FromTheirEnd => writer.store().journal_seq()?,
    };
    let mut total = 0;
    let mut opener = Opener::default();
    loop {
        let mut chunk: Vec<Result<Opened, AuditError>> = Vec::new();
        reader.audit_records_between(after, after.saturating_add(CHUNK), |row| {
            chunk.push(open_record(row.raw(), key, &mut opener));
            Ok::<(), AuditError>(())
        })?;
        let Some(Ok(last)) = chunk.last() else {
            if let Some(Err(e)) = chunk.pop() {
                return Err(e);
            }
            return Ok(total);
        };
        after = last.seq.get() as i64;
        total += writer.project(chunk)?;
    }
}

/// An event as JSON with its tool-call arguments replaced by their shape.
pub(crate) fn redacted(event: &AuditEvent) -> Result<serde_json::Value, AuditError> {
    let mut event = serde_json::to_value(event).map_err(|e| AuditError::Store {
        reason: e.to_string(),
    })?;
    if let Some(arguments) = event.get_mut("arguments") {
        *arguments = shape(arguments);
    }
    Ok(event)
}

/// The narrowings (`ConfigChanged` records that carry one) the log holds after `from` up to
/// `to`, in order, each record verified on the way: the rows must chain from `from` (a head
/// the seal names; from the first record when it names none) to `to` (the writer's own head,
/// which no row edited in the table can move), so a row deleted, edited or planted there is
/// an error, never a narrowing skipped. When the log no longer continues from `from` (its
/// first row after it does not chain, or `from` is past `to`, or at `to` with another hash:
/// records were lost, as in a re-anchored cut), every narrowing from the first record, after
/// a [`Narrowing::LostRecords`]. The bodies of `config_changed` records are opened with the
/// keychain's opening key (a sealed one with `vault`, read once there is one to open).
pub(crate) fn narrowings_between(
    store: &Store,
    secrets: &dyn SecretStore,
    vault: &VaultKey,
    from: Option<Head>,
    to: Head,
) -> Result<Vec<Narrowing>, AuditError> {
    let mut key = None;
    let mut read = |from: Option<Head>| -> Result<Vec<Narrowing>, AuditError> {
        let mut opener = Opener::default();
        let mut found = Vec::new();
        walk_log(
            store,
            from,
            to.seq().get() as i64,
            Some(to),
            |row, header| {
                if header.kind().as_str() != "config_changed" {
                    return Ok(());
                }
                let key = match &mut key {
                    Some(key) => key,
                    None => {
                        key.insert(read_key(secrets, Some(vault))?.ok_or(AuditError::KeyMissing)?)
                    }
                };
                if let AuditEvent::ConfigChanged {
                    narrowing: Some(narrowing),
                    ..
                } = open_record(row.raw(), key, &mut opener)?.event
                {
                    found.push(narrowing);
                }
                Ok(())
            },
        )?;
        Ok(found)
    };
    // The log continues from `from` when its rows after it chain from it up to `to`; with
    // none after it, only when `from` is `to` itself (the same number with another hash is
    // another log). When it does not, records the seal's head came after, or that came after
    // it, are lost, and what they narrowed with them: the seal vouches for none of what it
    // held, and every narrowing the log still holds narrows it further.
    let lost = |read: Result<Vec<Narrowing>, AuditError>| {
        read.map(|found| {
            std::iter::once(Narrowing::LostRecords)
                .chain(found)
                .collect()
        })
    };
    let resumed = from
        .filter(|from| from.seq() < to.seq() || *from == to)
        .map(|from| (from, read(Some(from))));
    match resumed {
        // Any other failure is the same read from the first record: it is the answer.
        Some((from, Err(AuditError::Verification { seq, .. })))
            if from.seq().next().is_some_and(|first| first.get() == seq) =>
        {
            tracing::warn!(
                from = %from,
                "the log does not continue from the seal's head: the seal vouches for nothing"
            );
            lost(read(None))
        }
        Some((_, read)) => read,
        None => match from {
            Some(from) => {
                tracing::warn!(
                    from = %from,
                    to = %to,
                    "the seal's head is not in the log: the seal vouches for nothing"
                );
                lost(read(None))
            }
            None => read(None),
        },
    }
}

/// Opens a stored record with the log's key and reads its event, which must be of the kind its
/// header says (`opener` remembers the last run's key agreement: pass the same one for records
/// read in order).
pub(crate) fn open_record(
    raw: RawRecord<'_>,
    key: &OpeningKey,
    opener: &mut Opener,
) -> Result<Opened, AuditError> {
    let invalid = |seq: Seq, code: &'static str, reason: String| AuditError::Verification {
        seq: seq.get(),
        code,
        reason,
    };
    let record = SealedRecord::from_raw(raw).map_err(|e| AuditError::Verification {
        seq: 0,
        code: e.code(),
        reason: e.to_string(),
    })?;
    let header = record.header();
    let seq = header.seq();
    let opened = record.open_with(key, opener).map_err(|_| {
        invalid(
            seq,
            "audit_body_unreadable",
            "the body cannot be opened with the opening key".into(),
        )
    })?;
    let event: AuditEvent = serde_json::from_slice(opened.body()).map_err(|e| {
        invalid(
            seq,
            "audit_body_invalid",
            format!("the body is not an audit event: {e}"),
        )
    })?;
    if event.kind() != header.kind().as_str() {
        return Err(invalid(
            seq,
            "audit_body_invalid",
            format!(
                "the body is a {} event, the header says {}",
                event.kind(),
                header.kind()
            ),
        ));
    }
    Ok(Opened {
        seq,
        time: header.time(),
        event,
    })
}

/// Takes the home's engine lock, so an offline repair never races a running engine.
fn lock(home: &Home) -> Result<File, AuditError> {
    let io = |e: std::io::Error| AuditError::Store {
        reason: format!("{}: {e}", home.lock_path().display()),
    };
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(home.lock_path())
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(AuditError::EngineRunning),
        Err(TryLockError::Error(e)) => Err(io(e)),
    }
}
