//! The audit log as the engine runs it: [`AuditLog`] is the gateway's
//! [`AuditSink`](postern_gateway::audit::AuditSink).
//!
//! - **Keys.** At start the log's X25519 opening key is read from the OS keychain, or created
//!   (from the OS RNG) for a new log; its public half is kept in SQLite (`meta`). The engine
//!   keeps only the public key while it runs: sealing needs nothing else.
//! - **Anchor.** The head (`SEQ:HASH`) is written to the keychain by a thread of its own
//!   (`anchor`), at most every 100 ms while batches are committed, and at a clean stop: the
//!   anchor trails the log by at most that (plus one keychain write), and is never ahead of
//!   what is on disk.
//! - **Start-up check.** The whole chain is verified (structure and hashes, without opening)
//!   against the anchor. A failure QUARANTINES the log: nothing more is appended, and every
//!   durable append (a tool call's intent) fails with "audit log failed verification at seq N",
//!   so calls are refused until a human looks (`postern audit verify`, `postern audit
//!   reanchor`). A keychain that cannot be reached makes the log UNAVAILABLE, with the same
//!   effect. The engine itself still starts and says so loudly; auditing is never skipped
//!   silently.
//! - **Group commit.** One connection (`synchronous=FULL`) appends: whoever commits takes every
//!   queued event, seals them onto the chain and stores them in ONE transaction (one fsync),
//!   then calls each `done`. That is the writer thread, or, when the log is idle, the caller of
//!   a durable append that waits on nothing else (`record_durable_alone`, a session's lone
//!   call), on its own thread (`writer::Queue`). If the transaction fails, every `done` of
//!   the batch gets the error and the chain is rolled back. The journal rows of the batches
//!   committed within 50 ms are written together after them, in a file of their own, by the
//!   journals' thread (`journals`), beside the next commits (at once for a
//!   [`AuditLog::flush`]).
//!
//! Errors handed to `done` start with a stable code (`audit_unavailable: ...`).

mod anchor;
mod journals;
mod offline;
mod opening;
mod start;
mod stock;
mod writer;

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use postern_audit::{Head, OpeningKey, RecipientKey, Seq, UnixMillis};
use postern_domain::AuditEvent;
use postern_gateway::audit::{AuditSink, Durable};
use postern_store::{Store, StoreError, StoredRecord};
use postern_vault::{SecretStore, VaultError};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub use offline::{
    AnchorCheck, JournalCheck, VerifyReport, export, reanchor, rebuild_journals, verify,
};
pub(crate) use offline::{narrowings_between, open_record, redacted};
pub use opening::opening_key_sealed;
pub(crate) use opening::read_key;

/// The keychain entry holding the log's opening key (base64).
pub const OPENING_KEY: &str = "audit-opening-key";
/// The keychain entry holding the anchor (`SEQ:HASH`).
pub const ANCHOR: &str = "audit-anchor";

/// The engine's audit log (see the module docs). Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct AuditLog {
    mode: Mode,
    shared: Arc<Shared>,
    /// The keychain the log was opened with (anchors; the opening key, sealed at unlock).
    secrets: Arc<dyn SecretStore>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// Where the log stands, for status views (ready for `Status` and its TypeScript twin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum AuditState {
    /// Appending; calls may proceed.
    Ready,
    /// No keychain (or no database): nothing can be appended; calls are refused.
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The log failed verification at start-up; calls are refused until a human acts.
    Quarantined {
        /// The first bad sequence number.
        #[ts(type = "number")]
        seq: u64,
        /// What is wrong there.
        reason: String,
    },
    /// The engine is stopping; nothing more is appended.
    Closed,
}

/// A snapshot of the audit log's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditStatus {
    /// Ready, unavailable, quarantined or closed.
    pub state: AuditState,
    /// The last committed record, `SEQ:HASH`.
    pub head: Option<String>,
    /// The head last written to the keychain.
    pub anchored: Option<String>,
    /// Why the last anchor write failed, while it keeps failing.
    pub anchor_error: Option<String>,
    /// Batches whose transaction failed (their calls were refused).
    #[ts(type = "number")]
    pub failed_batches: u64,
    /// Events that could not be recorded (unavailable or quarantined log).
    #[ts(type = "number")]
    pub dropped: u64,
}

/// Why an audit operation failed. Each variant has a stable [`AuditError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The keychain or the database cannot be used: nothing can be appended.
    #[error("the audit log is unavailable ({reason}); tool calls are refused until it is fixed")]
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The stored log failed verification (or its keys or anchor do not match it).
    #[error("audit log failed verification at seq {seq}: {reason}; run `postern audit verify`")]
    Quarantined {
        /// The first bad sequence number.
        seq: u64,
        /// What is wrong there.
        reason: String,
    },
    /// A batch could not be committed.
    #[error("the audit record could not be written: {reason}")]
    WriteFailed {
        /// The database's message.
        reason: String,
    },
    /// The engine is stopping.
    #[error("the audit log is closed (the engine is stopping)")]
    Closed,
    /// Verification found a bad record (offline tools).
    #[error("audit log failed verification at seq {seq}: {reason}")]
    Verification {
        /// The first bad sequence number.
        seq: u64,
        /// The specific code (`audit_chain_broken`, `audit_log_truncated`, ...).
        code: &'static str,
        /// What is wrong there.
        reason: String,
    },
    /// The opening key is not in the keychain (bodies cannot be opened).
    #[error("the audit opening key is not in the keychain for this home")]
    KeyMissing,
    /// The opening key is sealed under the vault key, and no vault key was given.
    #[error(
        "the audit opening key is sealed under the vault key: the bodies open only with your passphrase (or while the vault is unlocked)"
    )]
    KeySealed,
    /// The operation needs the engine stopped.
    #[error("the engine is running for this home; stop it first (the app or `postern daemon`)")]
    EngineRunning,
    /// The keychain refused.
    #[error(transparent)]
    Keychain(#[from] VaultError),
    /// The database refused.
    #[error("audit database: {reason}")]
    Store {
        /// The database's message.
        reason: String,
    },
}

impl AuditError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            AuditError::Unavailable { .. } => "audit_unavailable",
            AuditError::Quarantined { .. } => "audit_quarantined",
            AuditError::WriteFailed { .. } => "audit_write_failed",
            AuditError::Closed => "audit_closed",
            AuditError::Verification { code, .. } => code,
            AuditError::KeyMissing => "audit_key_missing",
            AuditError::KeySealed => "audit_key_sealed",
            AuditError::EngineRunning => "engine_running",
            AuditError::Keychain(e) => e.code(),
            AuditError::Store { .. } => "audit_store_failed",
        }
    }

    /// `code: message`, as handed to a durable append's `done`.
    pub fn to_durable(&self) -> String {
        format!("{}: {self}", self.code())
    }
}

impl From<StoreError> for AuditError {
    fn from(e: StoreError) -> Self {
        AuditError::Store {
            reason: e.to_string(),
        }
    }
}

impl AuditLog {
    /// Opens the log of the home at `home` with the keychain `secrets`: keys, anchor, the
    /// start-up verification, the journals' catch-up, then the writer. Never fails: a log that
    /// cannot be used is returned unavailable or quarantined (and says so, loudly, in the log).
    /// Blocking (keychain and disk): call from a blocking context.
    pub fn open(home: &Path, secrets: Arc<dyn SecretStore>) -> AuditLog {
        // The first record of every engine run.
        let started = AuditEvent::EngineStarted {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        };
        Self::open_with(home, secrets, started)
    }

    /// [`AuditLog::open`], its run's first record `first`.
    fn open_with(home: &Path, secrets: Arc<dyn SecretStore>, first: AuditEvent) -> AuditLog {
        let shared = Arc::new(Shared::default());
        match start::prepare(home, &*secrets) {
            Ok(ready) => {
                let head = ready.chain.head();
                let recipient = *ready.chain.recipient();
                shared.update(|s| s.head = head.map(|h| h.to_string()));
                let first = writer::Msg::Event(Box::new(writer::Queued {
                    event: first,
                    time: writer::now(),
                    done: None,
                }));
                let (queue, handle) =
                    writer::spawn(ready, first, Arc::clone(&secrets), Arc::clone(&shared));
                tracing::info!(head = ?head.map(|h| h.to_string()), "audit log verified and open");
                AuditLog {
                    mode: Mode::Running(queue, recipient),
                    shared,
                    secrets,
                    writer: Mutex::new(handle),
                }
            }
            Err(refusal) => {
                tracing::error!(
                    code = refusal.code(),
                    "AUDIT LOG NOT WRITABLE: {refusal}. Every tool call will be refused until \
                     this is fixed."
                );
                let state = match &refusal {
                    AuditError::Quarantined { seq, reason } => AuditState::Quarantined {
                        seq: *seq,
                        reason: reason.clone(),
                    },
                    other => AuditState::Unavailable {
                        reason: other.to_string(),
                    },
                };
                shared.update(|s| s.state = state);
                AuditLog {
                    mode: Mode::Refusing(refusal),
                    shared,
                    secrets,
                    writer: Mutex::new(None),
                }
            }
        }
    }

    /// The public key records are sealed to (`None`: a log that refuses appends).
    fn recipient(&self) -> Option<RecipientKey> {
        match &self.mode {
            Mode::Running(_, recipient) => Some(*recipient),
            Mode::Refusing(_) => None,
        }
    }

    /// A snapshot of the log's state.
    pub fn status(&self) -> AuditStatus {
        self.shared.snapshot()
    }

    /// The last committed record, as the writer holds it (never read from the table, where a
    /// process of the user can edit rows).
    pub(crate) fn head(&self) -> Option<Head> {
        self.status().head.and_then(|head| head.parse().ok())
    }

    /// Waits until every event queued before this call is committed (or failed).
    pub fn flush(&self) {
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        if self.send(writer::Msg::Flush(done_tx), false).is_ok() {
            let _ = done_rx.recv();
        }
    }

    /// Commits what is queued, records `engine_stopped`, anchors the final head and stops the
    /// writer. Later events are refused with `audit_closed`. Blocking.
    pub fn close(&self, reason: &str) {
        // Nothing is taken after `Close`.
        let _ = self.send(writer::Msg::Close(reason.to_owned()), false);
        let handle = relock(&self.writer).take();
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("the audit writer thread panicked");
        }
    }

    fn refuse(&self, refusal: &AuditError, event: &AuditEvent) {
        let first = self.shared.update(|s| {
            s.dropped += 1;
            s.dropped == 1
        });
        if first {
            tracing::error!(
                kind = event.kind(),
                "audit event not recorded: {refusal} (further drops are counted in the status)"
            );
        }
    }
}

impl AuditSink for AuditLog {
    fn record(&self, event: AuditEvent) {
        self.enqueue(event, None, false);
    }

    fn record_durable(&self, event: AuditEvent, done: Durable) {
        self.enqueue(event, Some(done), false);
    }

    fn record_durable_alone(&self, event: AuditEvent, done: Durable) {
        self.enqueue(event, Some(done), true);
    }
}

impl AuditLog {
    fn enqueue(&self, event: AuditEvent, done: Option<Durable>, alone: bool) {
        let msg = writer::Msg::Event(Box::new(writer::Queued {
            event,
            time: writer::now(),
            done,
        }));
        let (refusal, msg) = match self.send(msg, alone) {
            Ok(()) => return,
            Err(msg) => (self.refusal(), msg),
        };
        if let writer::Msg::Event(queued) = msg {
            self.refuse(&refusal, &queued.event);
            if let Some(done) = queued.done {
                done(Err(refusal.to_durable()));
            }
        }
    }

    /// Queues `msg` for the writer (or, `alone`, commits it at once: [`writer::Queue`]), or
    /// gives it back if the log takes nothing more.
    fn send(&self, msg: writer::Msg, alone: bool) -> Result<(), writer::Msg> {
        match &self.mode {
            Mode::Running(queue, _) => queue.submit(msg, alone),
            Mode::Refusing(_) => Err(msg),
        }
    }

    fn refusal(&self) -> AuditError {
        match &self.mode {
            Mode::Refusing(refusal) => refusal.clone(),
            Mode::Running(..) => AuditError::Closed,
        }
    }
}

#[derive(Debug)]
enum Mode {
    /// The writer's queue, and the key records are sealed to.
    Running(Arc<writer::Queue>, RecipientKey),
    Refusing(AuditError),
}

/// State shared by the sink, the writer and the anchor thread.
#[derive(Debug)]
struct Shared {
    status: Mutex<AuditStatus>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            status: Mutex::new(AuditStatus {
                state: AuditState::Ready,
                head: None,
                anchored: None,
                anchor_error: None,
                failed_batches: 0,
                dropped: 0,
            }),
        }
    }
}

impl Shared {
    fn update<T>(&self, f: impl FnOnce(&mut AuditStatus) -> T) -> T {
        f(&mut relock(&self.status))
    }

    fn snapshot(&self) -> AuditStatus {
        self.update(|s| s.clone())
    }
}

/// The outcome of checking a stored log: how far it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Checked {
    head: Option<Head>,
    records: u64,
}

/// Verifies every stored row (from seq 1): the chain (structure and hashes) against
/// `anchor`, that the index columns agree with each header, and with `key`, that every body
/// opens and is an event of the header's kind, handed to `each`.
fn check_log(
    store: &Store,
    anchor: Option<Head>,
    key: Option<&OpeningKey>,
    mut each: impl FnMut(Seq, UnixMillis, AuditEvent) -> Result<(), AuditError>,
) -> Result<Checked, AuditError> {
    let mut opener = postern_audit::Opener::default();
    walk_log(store, None, i64::MAX, anchor, |row, _| {
        if let Some(key) = key {
            let opened = open_record(row.raw(), key, &mut opener)?;
            each(opened.seq, opened.time, opened.event)?;
        }
        Ok(())
    })
}

/// The one verifying read of the stored log: the rows after `from` (from seq 1 when `None`) up
/// to seq `upto`, in one chain that must continue from `from` and, with `anchor`, pass through
/// it; each row's index columns must agree with its header. Each row is handed to `each`, with
/// its header, once it is verified as far as it goes (its chain hash; whether the chain reaches
/// `anchor` is known only at the end, where the walk fails if it did not).
fn walk_log(
    store: &Store,
    from: Option<Head>,
    upto: i64,
    anchor: Option<Head>,
    mut each: impl FnMut(StoredRecord<'_>, &postern_audit::Header) -> Result<(), AuditError>,
) -> Result<Checked, AuditError> {
    let mut verifier = match from {
        Some(from) => postern_audit::Verifier::resume(from),
        None => postern_audit::Verifier::new(),
    };
    if let Some(anchor) = anchor {
        verifier = verifier.with_anchor(anchor);
    }
    let after = from.map_or(0, |from| from.seq().get() as i64);
    store.audit_records_between(after, upto, |row: StoredRecord<'_>| {
        verifier.push(row.raw()).map_err(verification)?;
        let header = postern_audit::Header::decode(row.header).map_err(|e| bad(row.seq, &e))?;
        if row.seq != header.seq().get() as i64
            || row.time != header.time().as_millis()
            || row.kind != header.kind().as_str()
        {
            return Err(AuditError::Verification {
                seq: header.seq().get(),
                code: "audit_columns_mismatch",
                reason: "the seq, time or kind column disagrees with the record's header".into(),
            });
        }
        each(row, &header)
    })?;
    let verified = verifier.finish().map_err(verification)?;
    Ok(Checked {
        head: verified.head,
        records: verified.records,
    })
}

fn verification(e: postern_audit::VerifyError) -> AuditError {
    AuditError::Verification {
        seq: e.seq().get(),
        code: e.code(),
        reason: e.to_string(),
    }
}

fn bad(seq: i64, e: &postern_audit::FormatError) -> AuditError {
    AuditError::Verification {
        seq: seq.max(0) as u64,
        code: e.code(),
        reason: e.to_string(),
    }
}

/// The keychain's anchor, parsed.
fn read_anchor(secrets: &dyn SecretStore) -> Result<Option<Head>, AuditError> {
    let Some(bytes) = secrets.get(ANCHOR)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(bytes.expose()).into_owned();
    text.parse::<Head>()
        .map(Some)
        .map_err(|_| AuditError::Quarantined {
            seq: 0,
            reason: "the audit anchor in the keychain is malformed".into(),
        })
}

/// The log's public key from SQLite.
fn read_recipient(store: &Store) -> Result<Option<RecipientKey>, AuditError> {
    store
        .meta(postern_store::audit::META_RECIPIENT)?
        .map(|text| {
            RecipientKey::from_base64(&text).map_err(|e| AuditError::Quarantined {
                seq: 0,
                reason: format!(
                    "the log's public key in the database is malformed ({})",
                    e.code()
                ),
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests;

/// Whether one of the log's helper threads waits on its queue, and until when.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Wait {
    /// At work: it looks at its queue again before it waits.
    #[default]
    Awake,
    /// Waiting until it is woken.
    UntilWoken,
    /// Waiting until it is woken or this instant.
    Until(Instant),
}

impl Wait {
    /// Waiting until it is woken or `deadline`, if any.
    fn until(deadline: Option<Instant>) -> Wait {
        deadline.map_or(Wait::UntilWoken, Wait::Until)
    }

    /// Whether it waits.
    fn asleep(self) -> bool {
        self != Wait::Awake
    }

    /// Whether it waits and would not look again of itself by `at`.
    fn past(self, at: Instant) -> bool {
        match self {
            Wait::Awake => false,
            Wait::UntilWoken => true,
            Wait::Until(wakes) => wakes > at,
        }
    }
}

/// `mutex`'s guard even if a thread panicked holding it: the helper threads' state (queues,
/// flags) is consistent at every step, and a panic is reported where it happened.
fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lets `guard` go and waits on `wake` as `wait` says (until woken, or a deadline too).
fn sleep<'a, T>(wake: &Condvar, guard: MutexGuard<'a, T>, wait: Wait) -> MutexGuard<'a, T> {
    match wait {
        Wait::Until(at) => {
            let left = at.saturating_duration_since(Instant::now());
            match wake.wait_timeout(guard, left) {
                Ok((guard, _)) => guard,
                Err(e) => e.into_inner().0,
            }
        }
        Wait::UntilWoken | Wait::Awake => wake.wait(guard).unwrap_or_else(PoisonError::into_inner),
    }
}
