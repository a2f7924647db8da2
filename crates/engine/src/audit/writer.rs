//! Opening the log at start-up, the group-committing writer thread, and the anchor thread.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postern_audit::{
    Chain, ChainHash, EventKind, Head, OpeningKey, PreparedSeal, SealedRecord, Seq, UnixMillis,
};
use postern_domain::AuditEvent;
use postern_gateway::audit::Durable;
use postern_store::audit::META_RECIPIENT;
use postern_store::{Append, AuditWriter};
use postern_vault::SecretStore;

use super::opening::Stored;
use super::stock::SealStock;
use super::{
    ANCHOR, AuditError, AuditState, OPENING_KEY, Shared, check_log, open_writer, read_anchor,
    read_key, read_recipient,
};

/// Most events committed in one transaction.
const MAX_BATCH: usize = 4096;

/// How long a batch that nobody waits for (a call's result, a session's start) waits for an
/// event somebody does (the next call's intent, a flush) before it is committed on its own:
/// the two then share one commit, and a call's intent does not queue behind the previous
/// call's result being fsynced. Those events are "durable soon after" ([`AuditSink::record`]),
/// now at most this much later.
///
/// [`AuditSink::record`]: postern_gateway::audit::AuditSink::record
const LINGER: Duration = Duration::from_millis(5);

/// How long one prepared seal (one ephemeral key) serves the commits that follow one
/// another: under load a commit every millisecond or so took an X25519 agreement each (7% of
/// the engine's CPU at one session with 32 calls in flight). Its secret opens the records it
/// sealed; it is dropped (and zeroed) at most this long after it was taken, the writer waiting
/// for no more than that while it holds one, so it stays in memory about as long as those
/// records' events in the clear, which passed through the same memory moments before. A
/// commit that fails drops it (its sequence numbers are sealed again, under a fresh one). The
/// few seals kept ready ahead ([`SealStock`]) open only records not yet written.
const SEAL_SPAN: Duration = Duration::from_millis(100);

/// The shortest time between two anchor writes. A keychain write is a D-Bus round trip and, for
/// gnome-keyring, a rewrite of the keyring file: writing after every batch halved the durable
/// append rate in the benchmark. The anchor trails the log by at most this (plus one write);
/// the records after it are protected by the chain alone until the next write, and the last
/// head is always written at a clean stop.
const ANCHOR_INTERVAL: Duration = Duration::from_millis(100);

/// What the sink sends the writer.
pub(super) enum Msg {
    /// An event to append.
    Event(Box<Queued>),
    /// Reply once everything before this is committed.
    Flush(mpsc::SyncSender<()>),
    /// Record `engine_stopped` with this reason, then stop.
    Close(String),
    /// The opening key, at an unlock: journals behind the log catch up with it.
    CatchUp(Box<OpeningKey>),
}

/// A log that passed the start-up checks, ready to append to.
pub(super) struct Ready {
    pub db: AuditWriter,
    pub chain: Chain,
    /// The home (the catch-up reads the log on a connection of its own).
    pub home: PathBuf,
    /// Journals behind the log that wait for the opening key to catch up (`Some(clear)`:
    /// with `clear`, they were ahead of it and are rebuilt from the start).
    pub behind: Option<bool>,
}

/// The anchor value of a log that has no records yet: written when the key is created, so
/// that a log whose first records were committed just before a crash (before the first
/// anchor write) is not mistaken for one whose anchor was deleted.
pub(super) fn empty_anchor() -> Head {
    Head::new(Seq::new(0), ChainHash::GENESIS)
}

/// Keys, anchor, start-up verification, journal catch-up.
pub(super) fn prepare(home: &Path, secrets: &dyn SecretStore) -> Result<Ready, AuditError> {
    let mut db = open_writer(home)?;
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

    let journal = db.store().journal_seq()?;
    let head_seq = checked.head.map_or(0, |h| h.seq().get() as i64);
    let mut behind = None;
    if journal != head_seq {
        let clear = journal > head_seq;
        match &key {
            Some(key) => {
                tracing::info!(
                    journal,
                    log = head_seq,
                    "the journals are behind the log: rebuilding them from it"
                );
                let reader = postern_store::Store::open(home)?;
                let projected = super::offline::catch_up(&mut db, &reader, key, clear)?;
                tracing::info!(projected, "journals rebuilt");
            }
            None => {
                tracing::warn!(
                    journal,
                    log = head_seq,
                    "the journals are behind the log; they catch up when the vault is unlocked \
                     (the opening key is sealed under the vault key)"
                );
                db.pause_projection();
                behind = Some(clear);
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
        chain,
        home: home.to_owned(),
        behind,
    })
}

/// A new log's key pair: the secret to the keychain (read back to be sure it stuck), the
/// public half to the database, and the empty anchor.
fn create_key(db: &AuditWriter, secrets: &dyn SecretStore) -> Result<OpeningKey, AuditError> {
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

/// Starts the writer thread (and, from it, the anchor thread).
pub(super) fn spawn(
    ready: Ready,
    rx: Receiver<Msg>,
    secrets: Arc<dyn SecretStore>,
    shared: Arc<Shared>,
) -> Option<JoinHandle<()>> {
    let spawned = std::thread::Builder::new()
        .name("postern-audit".into())
        .spawn(move || {
            let anchor = Anchorer::start(secrets, Arc::clone(&shared));
            let seals = SealStock::start(*ready.chain.recipient());
            Writer {
                seals,
                seal: None,
                db: ready.db,
                chain: ready.chain,
                home: ready.home,
                behind: ready.behind,
                shared,
            }
            .run(rx, &anchor);
            anchor.finish();
        });
    match spawned {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::error!("cannot start the audit writer thread: {e}");
            None
        }
    }
}

/// The current time for a record.
pub(super) fn now() -> UnixMillis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    UnixMillis::new(ms)
}

/// An event on its way to the log.
pub(super) struct Queued {
    pub event: AuditEvent,
    /// When it happened.
    pub time: UnixMillis,
    /// Who waits for the commit (a durable append).
    pub done: Option<Durable>,
}

struct Writer {
    /// Prepared seals, made ahead by a thread of its own.
    seals: SealStock,
    /// The seal of the last commits, and when it was taken: it serves the next ones for
    /// [`SEAL_SPAN`].
    seal: Option<(Box<PreparedSeal>, Instant)>,
    db: AuditWriter,
    chain: Chain,
    home: PathBuf,
    behind: Option<bool>,
    shared: Arc<Shared>,
}

impl Writer {
    fn run(mut self, rx: Receiver<Msg>, anchor: &Anchorer) {
        let mut closing = None;
        while closing.is_none() {
            let Some(first) = self.next(&rx) else { break };
            let mut events: Vec<Queued> = Vec::new();
            let mut flushes = Vec::new();
            let mut key = None;
            let mut next = Some(first);
            let mut linger_until: Option<Instant> = None;
            loop {
                while let Some(msg) = next.take() {
                    match msg {
                        Msg::Event(queued) => events.push(*queued),
                        Msg::Flush(reply) => flushes.push(reply),
                        Msg::Close(reason) => closing = Some(reason),
                        Msg::CatchUp(opening) => key = Some(opening),
                    }
                    if events.len() < MAX_BATCH {
                        next = rx.try_recv().ok();
                    }
                }
                let awaited = events.iter().any(|e| e.done.is_some())
                    || !flushes.is_empty()
                    || closing.is_some()
                    || key.is_some();
                if awaited || events.len() >= MAX_BATCH {
                    break;
                }
                let until = *linger_until.get_or_insert_with(|| Instant::now() + LINGER);
                match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Ok(msg) => next = Some(msg),
                    // Time's up, or every sender is gone (the next recv says so).
                    Err(_) => break,
                }
            }
            if let Some(reason) = &closing {
                let stopped = AuditEvent::EngineStopped {
                    reason: reason.clone(),
                };
                events.push(Queued {
                    event: stopped,
                    time: now(),
                    done: None,
                });
            }
            self.commit(events, anchor);
            if let Some(key) = key {
                self.catch_up(&key);
            }
            for reply in flushes {
                let _ = reply.send(());
            }
        }
        self.shared.update(|s| s.state = AuditState::Closed);
    }

    /// The next message; while waiting, the kept seal is dropped once its span is over (an
    /// idle engine holds no key that opens records already written).
    fn next(&mut self, rx: &Receiver<Msg>) -> Option<Msg> {
        if let Some((_, taken)) = &self.seal {
            match rx.recv_timeout(SEAL_SPAN.saturating_sub(taken.elapsed())) {
                Ok(msg) => return Some(msg),
                Err(mpsc::RecvTimeoutError::Timeout) => self.seal = None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
        rx.recv().ok()
    }

    /// Brings journals that were behind the log at start up to date, now that the opening
    /// key is at hand (every event appended meanwhile included: they were not projected).
    fn catch_up(&mut self, key: &OpeningKey) {
        let Some(clear) = self.behind else { return };
        let caught = postern_store::Store::open(&self.home)
            .map_err(AuditError::from)
            .and_then(|reader| super::offline::catch_up(&mut self.db, &reader, key, clear));
        match caught {
            Ok(projected) => {
                self.db.resume_projection();
                self.behind = None;
                tracing::info!(projected, "the journals caught up with the log");
            }
            Err(e) => tracing::error!("the journals could not catch up with the log: {e}"),
        }
    }

    /// Seals `events` onto the chain and commits them in one transaction; then tells each
    /// waiter. On failure the chain is put back as it was. The batch's records are sealed with
    /// the ephemeral key of the commits before it, if taken less than [`SEAL_SPAN`] ago, else a
    /// fresh one (format version 2: each record's own key is derived from it and its sequence
    /// number); a failed commit drops it, so a retry takes a fresh one.
    fn commit(&mut self, mut events: Vec<Queued>, anchor: &Anchorer) {
        let before = self.chain.clone();
        let dones: Vec<Option<Durable>> = events.iter_mut().map(|q| q.done.take()).collect();
        let mut sealed: Vec<(SealedRecord, usize)> = Vec::with_capacity(events.len());
        let mut outcomes: Vec<Result<(), String>> = Vec::with_capacity(events.len());
        let mut prepared = if events.is_empty() {
            None
        } else {
            self.seal
                .take()
                .filter(|(_, taken)| taken.elapsed() < SEAL_SPAN)
                .or_else(|| Some((self.seals.take()?, Instant::now())))
        };
        for (i, queued) in events.iter().enumerate() {
            let event = &queued.event;
            match self.seal(event, queued.time, prepared.as_mut().map(|(p, _)| &mut **p)) {
                Ok(record) => {
                    sealed.push((record, i));
                    outcomes.push(Ok(()));
                }
                Err(e) => {
                    tracing::error!(kind = event.kind(), "cannot seal an audit event: {e}");
                    outcomes.push(Err(e.to_durable()));
                }
            }
        }
        let batch: Vec<Append<'_>> = sealed
            .iter()
            .map(|(record, i)| Append {
                record,
                event: &events[*i].event,
            })
            .collect();
        let stored = if batch.is_empty() {
            Ok(())
        } else {
            self.db.append(&batch)
        };
        let committed = stored.is_ok();
        match stored {
            Ok(()) => {
                self.seal = prepared;
                if let Some(head) = self.chain.head() {
                    self.shared.update(|s| s.head = Some(head.to_string()));
                    anchor.post(head);
                }
            }
            Err(e) => {
                self.chain = before;
                let error = AuditError::WriteFailed {
                    reason: e.to_string(),
                };
                tracing::error!(records = batch.len(), "audit batch not committed: {e}");
                self.shared.update(|s| s.failed_batches += 1);
                outcomes = vec![Err(error.to_durable()); events.len()];
            }
        }
        // The waiters first (a call's intent is durable: it goes out now), then the journals.
        for (done, outcome) in dones.into_iter().zip(outcomes) {
            if let Some(done) = done {
                done(outcome);
            }
        }
        if committed && let Err(e) = self.db.project_appended(&batch) {
            // The log has the events; the journals catch up from it at the next unlock or
            // start.
            tracing::error!(
                records = batch.len(),
                "the journals could not take an audit batch: {e}; they catch up from the log at the next unlock"
            );
            self.db.pause_projection();
            self.behind.get_or_insert(false);
        }
    }

    fn seal(
        &mut self,
        event: &AuditEvent,
        time: UnixMillis,
        prepared: Option<&mut PreparedSeal>,
    ) -> Result<SealedRecord, AuditError> {
        let write_failed = |reason: String| AuditError::WriteFailed { reason };
        let kind = EventKind::parse(event.kind()).map_err(|e| write_failed(e.to_string()))?;
        let body = serde_json::to_vec(event).map_err(|e| write_failed(e.to_string()))?;
        let sealed = match prepared {
            Some(prepared) => self.chain.append_prepared(time, kind, &body, prepared),
            None => self.chain.append(time, kind, &body, &mut getrandom::SysRng),
        };
        sealed.map_err(|e| write_failed(e.to_string()))
    }
}

/// Writes the newest committed head to the keychain, on its own thread, coalescing.
struct Anchorer {
    inner: Arc<AnchorInner>,
    handle: Option<JoinHandle<()>>,
}

struct AnchorInner {
    slot: Mutex<Slot>,
    wake: Condvar,
    secrets: Arc<dyn SecretStore>,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Slot {
    pending: Option<Head>,
    closing: bool,
}

impl Anchorer {
    fn start(secrets: Arc<dyn SecretStore>, shared: Arc<Shared>) -> Anchorer {
        let inner = Arc::new(AnchorInner {
            slot: Mutex::default(),
            wake: Condvar::new(),
            secrets,
            shared,
        });
        let worker = Arc::clone(&inner);
        let handle = std::thread::Builder::new()
            .name("postern-anchor".into())
            .spawn(move || worker.run())
            .map_err(|e| tracing::error!("cannot start the audit anchor thread: {e}"))
            .ok();
        Anchorer { inner, handle }
    }

    fn post(&self, head: Head) {
        self.inner.lock().pending = Some(head);
        self.inner.wake.notify_one();
        if self.handle.is_none() {
            // No thread: anchor inline.
            if let Some(head) = self.inner.lock().pending.take() {
                self.inner.write(head);
            }
        }
    }

    /// Writes the last posted head, then stops the thread.
    fn finish(mut self) {
        self.inner.lock().closing = true;
        self.inner.wake.notify_one();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl AnchorInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the newest posted head, at most once per [`ANCHOR_INTERVAL`] (at once when
    /// closing), until closed.
    fn run(&self) {
        let mut last: Option<Instant> = None;
        loop {
            let head = {
                let mut slot = self.lock();
                loop {
                    let due = last.map_or(Duration::ZERO, |t| {
                        (t + ANCHOR_INTERVAL).saturating_duration_since(Instant::now())
                    });
                    if slot.pending.is_some() && (slot.closing || due.is_zero()) {
                        break slot.pending.take();
                    }
                    if slot.closing {
                        return;
                    }
                    slot = if slot.pending.is_some() {
                        match self.wake.wait_timeout(slot, due) {
                            Ok((slot, _)) => slot,
                            Err(e) => e.into_inner().0,
                        }
                    } else {
                        self.wake.wait(slot).unwrap_or_else(|e| e.into_inner())
                    };
                }
            };
            if let Some(head) = head {
                self.write(head);
                last = Some(Instant::now());
            }
        }
    }

    fn write(&self, head: Head) {
        match self.secrets.set(ANCHOR, head.to_string().as_bytes()) {
            Ok(()) => {
                let recovered = self.shared.update(|s| {
                    s.anchored = Some(head.to_string());
                    s.anchor_error.take().is_some()
                });
                if recovered {
                    tracing::info!(%head, "audit anchor written again");
                }
            }
            Err(e) => {
                let first = self.shared.update(|s| {
                    let first = s.anchor_error.is_none();
                    s.anchor_error = Some(e.to_string());
                    first
                });
                if first {
                    tracing::error!(
                        code = e.code(),
                        "cannot write the audit anchor to the keychain: {e}; records after {} \
                         are protected by the chain alone until it works again",
                        self.shared
                            .snapshot()
                            .anchored
                            .unwrap_or_else(|| "the start".into())
                    );
                }
            }
        }
    }
}
