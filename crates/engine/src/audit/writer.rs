//! The group-committing writer: the queue between the sinks and the log, and the thread that
//! commits what queues up (start-up is [`super::start`], the anchor's thread
//! [`super::anchor`], the journals' thread [`super::journals`]).

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postern_audit::{Chain, EventKind, OpeningKey, PreparedSeal, SealedRecord, UnixMillis};
use postern_domain::AuditEvent;
#[cfg(doc)]
use postern_gateway::audit::AuditSink;
use postern_gateway::audit::Durable;
use postern_store::{Append, LogWriter};
use postern_vault::SecretStore;

use super::anchor::Anchorer;
use super::journals::{Committed, Journals};
use super::start::Ready;
use super::stock::SealStock;
use super::{AuditError, AuditState, Shared, Wait, relock, sleep};

/// How many queued events the writer thread waits for, at most, before it commits them
/// (whoever commits takes the whole queue, in one transaction).
const MAX_BATCH: usize = 4096;

/// How long a batch that nobody waits for (a call's result, a session's start) waits for an
/// event somebody does (the next call's intent, a flush) before it is committed on its own:
/// the two then share one commit, and a call's intent does not queue behind the previous
/// call's result being fsynced. Those events are "durable soon after" ([`AuditSink::record`]):
/// at most this much after they were queued, or, if a commit was being written then, after
/// that commit ends.
///
/// [`AuditSink::record`]: postern_gateway::audit::AuditSink::record
const LINGER: Duration = Duration::from_millis(5);

/// While commits follow one another, the writer thread waits this many times as long as the
/// last commit took (at most [`GATHER_MAX`]) after its end before it commits intents whose
/// callers have more in flight (a session with several calls open, [`Queue::submit`] without
/// `alone`), when the last batch held several of theirs: more of theirs come meanwhile and
/// share the commit, one write and one fsync for several calls. Under one session with 32
/// calls in flight this cut the engine's CPU per call by about a third (docs/benchmarks.md,
/// "Issue 17, tenth change"). A caller with nothing else in flight (one call at a time, the
/// way agents call tools), a flush, an intent that finds the log idle, and the few calls of
/// one burst (an agent's parallel tool calls) are committed at once.
const GATHER_SPANS: u32 = 2;

/// The longest the writer thread gathers ([`GATHER_SPANS`]): a slow disk's commit must not
/// hold a session's calls much longer.
const GATHER_MAX: Duration = Duration::from_millis(1);

/// How long one prepared seal (one ephemeral key) serves the commits that follow one
/// another: under load a commit every millisecond or so took an X25519 agreement each (7% of
/// the engine's CPU at one session with 32 calls in flight). Its secret opens the records it
/// sealed; it is dropped (and zeroed) at most this long after it was taken, the writer waiting
/// for no more than that while it holds one, so it stays in memory about as long as those
/// records' events in the clear, which passed through the same memory moments before. A
/// commit that fails drops it (its sequence numbers are sealed again, under a fresh one). The
/// few seals kept ready ahead ([`SealStock`]) open only records not yet written.
const SEAL_SPAN: Duration = Duration::from_millis(100);

/// What the sink hands whoever commits.
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

impl Msg {
    /// Whether only the writer thread handles it (anything but an event).
    fn is_control(&self) -> bool {
        !matches!(self, Msg::Event(_))
    }

    /// Whether somebody waits for it to be committed.
    fn is_awaited(&self) -> bool {
        match self {
            Msg::Event(queued) => queued.done.is_some(),
            _ => true,
        }
    }
}

/// Between the sinks and the log: what waits to be committed, and the state that commits it.
///
/// The writer thread commits what queues up, in groups. A durable append from a caller with
/// nothing else to do ([`AuditSink::record_durable_alone`]) that finds the log idle (nothing
/// else awaited in the queue, nothing being committed, and nothing else came while the last
/// commit was written) commits on its caller's thread instead, taking what queued before it
/// along: a lone call's intent then reaches the disk without two thread hand-offs (to the
/// writer and back), each a wake-up on the way to the forward. Under load, callers queue and
/// the writer groups them, waiting a moment for more when only callers with more in flight
/// wait ([`GATHER_SPANS`]). Whoever commits holds [`Queue::core`] and takes the whole queue
/// under it, so the log's order is the order events were queued in, whichever thread writes
/// them, and hands each committed batch to the journals' thread ([`Journals`]) before it lets
/// go of the log, so the journals see the batches in the log's order too.
pub(super) struct Queue {
    inbox: Mutex<Inbox>,
    /// Wakes the writer thread: something was queued, or a caller's commit set the kept
    /// seal's deadline.
    wake: Condvar,
    core: Mutex<Core>,
    /// The log's status (also in [`Core`]): a panic while committing says so there without
    /// the log, which the panicking thread may hold.
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Inbox {
    msgs: VecDeque<Msg>,
    /// How many of `msgs` somebody waits for (every flush, close and catch-up included).
    awaited: usize,
    /// `Close` was queued: nothing more is taken.
    closed: bool,
    /// Until when the commits' kept seal serves (the writer thread drops it then).
    seal_until: Option<Instant>,
    /// Until when what is queued (nothing of it awaited) waits for company ([`LINGER`]).
    linger_until: Option<Instant>,
    /// Something awaited was queued while the last commit was written: the log is busy, and
    /// a caller queues rather than commits.
    busy: bool,
    /// Whether the writer thread waits on [`Queue::wake`], and until when: only then does a
    /// caller wake it (a busy writer looks at the queue again before it waits, and a wake-up
    /// is a system call), and only for what is due before it would look again of itself:
    /// something awaited, or a linger that ends earlier.
    wait: Wait,
    /// When the last commit ended: while commits follow one another, the writer looks again
    /// [`LINGER`] after the last one, so that what a caller queues unawaited right after its
    /// commit (a call's result) never needs to wake it.
    last_commit: Option<Instant>,
    /// How long the last commit that wrote records took.
    last_span: Duration,
    /// How many of `msgs` are awaited by callers with more in flight (the rest of `awaited` are
    /// lone callers', flushes, a close, a catch-up: those are committed at once).
    pipelined: usize,
    /// How many the last batch taken held: only after one that held several does the writer
    /// gather ([`Inbox::gather_until`]).
    last_pipelined: usize,
}

impl Inbox {
    /// Queues `msg`; whether the writer thread is to be woken for it.
    fn push(&mut self, msg: Msg, alone: bool) -> bool {
        let awaited = msg.is_awaited();
        let lone = alone || msg.is_control();
        // A sleeping writer with something awaited queued gathers company for it
        // ([`Inbox::gather_until`]), or was woken already: more of it does not wake it.
        let gathering = self.awaited > 0;
        self.pipelined += usize::from(awaited && !lone);
        self.awaited += usize::from(awaited);
        self.closed |= matches!(msg, Msg::Close(_));
        self.msgs.push_back(msg);
        let linger = *self
            .linger_until
            .get_or_insert_with(|| Instant::now() + LINGER);
        self.wait.asleep()
            && ((awaited && (!gathering || lone))
                || self.msgs.len() >= MAX_BATCH
                || self.wait.past(linger))
    }

    fn take(&mut self) -> VecDeque<Msg> {
        self.awaited = 0;
        self.last_pipelined = std::mem::take(&mut self.pipelined);
        self.linger_until = None;
        std::mem::take(&mut self.msgs)
    }

    /// After a commit (`wrote`: one that appended records) or a seal dropped: the kept seal's
    /// deadline, and whether more came meanwhile. Called with the log held, so that no later
    /// committer's is overwritten. What queued unawaited while records were written waits
    /// [`LINGER`] from now for an intent to share the next commit (a slow fsync must not
    /// have used up its linger).
    fn settle(&mut self, core: &Core, wrote: Option<Instant>) {
        self.seal_until = core.seal_until();
        self.busy = self.awaited > 0;
        if let Some(started) = wrote {
            let now = Instant::now();
            self.last_commit = Some(now);
            self.last_span = now - started;
            if !self.msgs.is_empty() {
                self.linger_until = Some(now + LINGER);
            }
        }
    }

    /// Until when the writer thread waits for company before it commits what is awaited
    /// ([`GATHER_SPANS`]): only callers with more in flight wait, the last batch held several
    /// of theirs, and the gathering time after the last commit is not over (the log was not
    /// idle); `None`: at once.
    fn gather_until(&self, now: Instant) -> Option<Instant> {
        if self.awaited > self.pipelined || self.last_pipelined < 2 {
            return None;
        }
        let gather = (self.last_span * GATHER_SPANS).min(GATHER_MAX);
        let until = self.last_commit? + gather;
        (until > now).then_some(until)
    }

    /// The log takes nothing more; whatever waits in the queue is refused (its waiters told,
    /// its flushes let go).
    fn shut(&mut self) {
        self.closed = true;
        for msg in self.take() {
            if let Msg::Event(queued) = msg
                && let Some(done) = queued.done
            {
                done(Err(AuditError::Closed.to_durable()));
            }
        }
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        relock(&self.inbox)
    }

    /// Queues `msg`, or with `alone` commits it at once if the log is idle (see [`Queue`]);
    /// gives it back once `Close` was queued.
    pub(super) fn submit(&self, msg: Msg, alone: bool) -> Result<(), Msg> {
        let mut inbox = self.lock();
        if inbox.closed {
            return Err(msg);
        }
        let lead = alone && !msg.is_control() && inbox.awaited == 0 && !inbox.busy;
        if lead && let Ok(mut core) = self.core.try_lock() {
            let mut events: Vec<Queued> = inbox
                .take()
                .into_iter()
                .filter_map(|m| match m {
                    Msg::Event(queued) => Some(*queued),
                    _ => None,
                })
                .collect();
            drop(inbox);
            // A panic while committing here closes the log, as one on the writer thread does.
            let _shut = ShutOnPanic(self);
            if let Msg::Event(queued) = msg {
                events.push(*queued);
            }
            let started = Instant::now();
            let done = core.commit(events);
            let mut inbox = self.lock();
            inbox.settle(&core, Some(started));
            // The writer thread drops the kept seal when its span is over: one that waits
            // with no deadline is to learn of the seal this commit may have taken (one with a
            // deadline looks again by then anyway).
            let wake = inbox.wait == Wait::UntilWoken;
            drop(inbox);
            drop(core);
            done.tell();
            if wake {
                self.wake.notify_one();
            }
            return Ok(());
        }
        let wake = inbox.push(msg, alone);
        drop(inbox);
        if wake {
            self.wake.notify_one();
        }
        Ok(())
    }
}

/// Starts the writer thread (and, from it, the anchor and seal threads); returns the queue
/// it commits from. `first` is queued before anything else.
pub(super) fn spawn(
    ready: Ready,
    first: Msg,
    secrets: Arc<dyn SecretStore>,
    shared: Arc<Shared>,
) -> (Arc<Queue>, Option<JoinHandle<()>>) {
    let mut inbox = Inbox::default();
    inbox.push(first, true);
    for what in ready.repaired {
        inbox.push(Msg::Event(Box::new(Queued::tampered(what))), true);
    }
    let queue = Arc::new(Queue {
        inbox: Mutex::new(inbox),
        wake: Condvar::new(),
        core: Mutex::new(Core {
            seals: SealStock::start(*ready.chain.recipient()),
            seal: None,
            db: ready.db,
            chain: ready.chain,
            journals: Journals::start(ready.journals, ready.home, ready.behind),
            anchor: Anchorer::start(secrets, Arc::clone(&shared)),
            shared: Arc::clone(&shared),
        }),
        shared,
    });
    let writer = Arc::clone(&queue);
    let spawned = std::thread::Builder::new()
        .name("postern-audit".into())
        .spawn(move || {
            let _shut = ShutOnPanic(&writer);
            writer.run();
        });
    match spawned {
        Ok(handle) => (queue, Some(handle)),
        Err(e) => {
            // Nothing would commit what is queued: every append is refused.
            tracing::error!("cannot start the audit writer thread: {e}; tool calls are refused");
            queue.lock().shut();
            (queue, None)
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

/// How many commits of `config_tampered` records follow a commit the store repaired the
/// schema for, at most (each after a repair of what was planted again meanwhile).
const REPAIR_RECORDS: usize = 3;

/// An event on its way to the log.
pub(super) struct Queued {
    pub event: AuditEvent,
    /// When it happened.
    pub time: UnixMillis,
    /// Who waits for the commit (a durable append).
    pub done: Option<Durable>,
}

impl Queued {
    /// The record of what the store repaired in the database's schema (`what`), that nobody
    /// waits for.
    fn tampered(what: String) -> Queued {
        Queued {
            event: AuditEvent::ConfigTampered { what },
            time: now(),
            done: None,
        }
    }
}

/// The state that commits: whoever holds it appends.
struct Core {
    /// Prepared seals, made ahead by a thread of its own.
    seals: SealStock,
    /// The seal of the last commits, and when it was taken: it serves the next ones for
    /// [`SEAL_SPAN`].
    seal: Option<(Box<PreparedSeal>, Instant)>,
    db: LogWriter,
    chain: Chain,
    /// Where committed batches go for their journal rows.
    journals: Journals,
    anchor: Anchorer,
    shared: Arc<Shared>,
}

/// Who waits for a batch, and what each gets: told once the committing thread let go of the
/// log (a waiter's callback may wake a task, or take long).
#[must_use]
struct Outcomes(Vec<(Durable, Result<(), String>)>);

impl Outcomes {
    fn tell(self) {
        for (done, outcome) in self.0 {
            done(outcome);
        }
    }
}

impl Queue {
    fn core(&self) -> MutexGuard<'_, Core> {
        relock(&self.core)
    }

    /// The writer thread: commits what queues up, and hands flushes and the catch-up to the
    /// journals' thread (in order with the batches it committed); at the close, stops it.
    fn run(&self) {
        loop {
            if !self.ready() {
                continue;
            }
            // The queue is taken while holding the log: what a caller commits meanwhile was
            // queued after all of it (see [`Queue`]).
            let mut core = self.core();
            let (msgs, shut) = {
                let mut inbox = self.lock();
                let msgs = inbox.take();
                let shut = msgs.is_empty() && inbox.closed;
                (msgs, shut)
            };
            if shut {
                // A caller's commit panicked and shut the log: nothing more comes, and the
                // journals' and the anchor's threads are let go as at a close.
                core.finish();
                return;
            }
            let mut events = Vec::new();
            let mut flushes = Vec::new();
            let mut key = None;
            let mut closing = None;
            for msg in msgs {
                match msg {
                    Msg::Event(queued) => events.push(*queued),
                    Msg::Flush(reply) => flushes.push(reply),
                    Msg::Close(reason) => closing = Some(reason),
                    Msg::CatchUp(opening) => key = Some(opening),
                }
            }
            if let Some(reason) = &closing {
                events.push(Queued {
                    event: AuditEvent::EngineStopped {
                        reason: reason.clone(),
                    },
                    time: now(),
                    done: None,
                });
            }
            let wrote = (!events.is_empty()).then(Instant::now);
            let done = core.commit(events);
            // The journals' thread answers flushes once it has projected what came before.
            if let Some(key) = key {
                core.journals.catch_up(key);
            }
            for reply in flushes {
                core.journals.flush(reply);
            }
            self.lock().settle(&core, wrote);
            // The waiters with the log let go (a call's intent is durable: it goes out now).
            drop(core);
            done.tell();
            if closing.is_some() {
                let mut core = self.core();
                core.shared.update(|s| s.state = AuditState::Closed);
                core.finish();
                return;
            }
        }
    }

    /// Waits until what is queued is to be committed: somebody waits for some of it, or it
    /// lingered [`LINGER`], or it is [`MAX_BATCH`] long. `false`: nothing to commit yet, but
    /// the kept seal was dropped meanwhile.
    fn ready(&self) -> bool {
        let mut inbox = self.lock();
        loop {
            let queued = inbox.msgs.len();
            // Shut under the writer (a caller's commit panicked): it stops.
            if queued >= MAX_BATCH || inbox.closed {
                return true;
            }
            let now = Instant::now();
            let gather = if inbox.awaited > 0 {
                match inbox.gather_until(now) {
                    Some(until) => Some(until),
                    None => return true,
                }
            } else {
                None
            };
            if inbox.seal_until.is_some_and(|until| until <= now) {
                drop(inbox);
                let mut core = self.core();
                core.drop_expired_seal();
                self.lock().settle(&core, None);
                return false;
            }
            if queued > 0 && *inbox.linger_until.get_or_insert(now + LINGER) <= now {
                return true;
            }
            let after_last = inbox
                .last_commit
                .map(|at| at + LINGER)
                .filter(|at| *at > now);
            let deadline = [inbox.linger_until, inbox.seal_until, after_last, gather]
                .into_iter()
                .flatten()
                .min();
            inbox.wait = Wait::until(deadline);
            let wait = inbox.wait;
            inbox = sleep(&self.wake, inbox, wait);
            inbox.wait = Wait::Awake;
        }
    }
}

/// Closes the log if its thread panics while committing (drops while unwinding): nothing else
/// would commit what is queued, nor can the chain be trusted to continue without a gap.
struct ShutOnPanic<'a>(&'a Queue);

impl Drop for ShutOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!("the audit log's writer panicked; tool calls are refused");
            self.0.shared.update(|s| {
                s.state = AuditState::Unavailable {
                    reason: "its writer stopped on an internal error, which the engine logged; restart Postern to record calls again".into(),
                }
            });
            self.0.lock().shut();
            // A writer thread asleep would otherwise sleep on, and a close wait for it.
            self.0.wake.notify_all();
        }
    }
}

impl Core {
    /// At a close (or once a panic shut the log): drops the kept seal, and lets the journals'
    /// and the anchor's threads finish their last work and stop.
    fn finish(&mut self) {
        self.seal = None;
        self.journals.finish();
        self.anchor.finish();
    }

    /// Until when the kept seal serves.
    fn seal_until(&self) -> Option<Instant> {
        self.seal.as_ref().map(|(_, taken)| *taken + SEAL_SPAN)
    }

    /// Drops the kept seal once its span is over (an idle engine holds no key that opens
    /// records already written).
    fn drop_expired_seal(&mut self) {
        if self
            .seal
            .as_ref()
            .is_some_and(|(_, taken)| taken.elapsed() >= SEAL_SPAN)
        {
            self.seal = None;
        }
    }

    /// Seals `events` onto the chain and commits them in one transaction, and hands the batch
    /// to the journals' thread ([`Journals::committed`]); returns what each waiter is to be
    /// told. On failure the chain is put back as it was. The batch's records are sealed with the
    /// ephemeral key of the commits before it, if taken less than [`SEAL_SPAN`] ago, else a
    /// fresh one (format version 2: each record's own key is derived from it and its sequence
    /// number); a failed commit drops it, so a retry takes a fresh one.
    fn commit(&mut self, events: Vec<Queued>) -> Outcomes {
        let (mut outcomes, mut repaired) = self.commit_once(events);
        // A commit refused by what was planted in the database's schema was made again after
        // the store repaired it (review 14, N1): what it repaired is recorded in a commit of
        // its own that nobody waits for (and what that one repaired, planted again meanwhile,
        // in another, a few times at most).
        for _ in 0..REPAIR_RECORDS {
            if repaired.is_empty() {
                break;
            }
            let tampered = repaired.into_iter().map(Queued::tampered).collect();
            let (more, again) = self.commit_once(tampered);
            outcomes.0.extend(more.0);
            repaired = again;
        }
        outcomes
    }

    /// [`Core::commit`] of `events` alone; with what the store repaired to commit them.
    fn commit_once(&mut self, events: Vec<Queued>) -> (Outcomes, Vec<String>) {
        let before = self.chain.clone();
        let mut waiters = Vec::new();
        let mut records: Vec<SealedRecord> = Vec::with_capacity(events.len());
        let mut sealed_events: Vec<AuditEvent> = Vec::with_capacity(events.len());
        let mut prepared = if events.is_empty() {
            None
        } else {
            self.seal
                .take()
                .filter(|(_, taken)| taken.elapsed() < SEAL_SPAN)
                .or_else(|| Some((self.seals.take()?, Instant::now())))
        };
        for queued in events {
            let Queued { event, time, done } = queued;
            match self.seal(&event, time, prepared.as_mut().map(|(p, _)| &mut **p)) {
                Ok(record) => {
                    records.push(record);
                    sealed_events.push(event);
                    waiters.extend(done.map(|done| (done, Ok(()))));
                }
                Err(e) => {
                    tracing::error!(kind = event.kind(), "cannot seal an audit event: {e}");
                    waiters.extend(done.map(|done| (done, Err(e.to_durable()))));
                }
            }
        }
        if records.is_empty() {
            return (Outcomes(waiters), Vec::new());
        }
        let batch: Vec<Append<'_>> = records
            .iter()
            .zip(&sealed_events)
            .map(|(record, event)| Append { record, event })
            .collect();
        match self.db.append(&batch) {
            Ok(()) => {
                self.seal = prepared;
                if let Some(head) = self.chain.head() {
                    self.shared.update(|s| s.head = Some(head.to_string()));
                    self.anchor.post(head);
                }
                self.journals.committed(Committed {
                    at: Instant::now(),
                    records,
                    events: sealed_events,
                });
            }
            Err(e) => {
                self.chain = before;
                let error = AuditError::WriteFailed {
                    reason: e.to_string(),
                };
                tracing::error!(records = batch.len(), "audit batch not committed: {e}");
                self.shared.update(|s| s.failed_batches += 1);
                for (_, outcome) in &mut waiters {
                    *outcome = Err(error.to_durable());
                }
            }
        }
        (Outcomes(waiters), self.db.take_repaired())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An intent somebody waits for.
    fn intent() -> Msg {
        Msg::Event(Box::new(Queued {
            event: AuditEvent::EngineStopped {
                reason: "test".into(),
            },
            time: now(),
            done: Some(Box::new(|_| {})),
        }))
    }

    /// An inbox whose last commit ended at `end` after taking `span` and held `pipelined`
    /// intents of callers with more in flight, with one more intent queued since (`alone`:
    /// from a caller with nothing else in flight).
    fn after_commit(end: Instant, span: Duration, pipelined: usize, alone: bool) -> Inbox {
        let mut inbox = Inbox {
            last_commit: Some(end),
            last_span: span,
            last_pipelined: pipelined,
            ..Inbox::default()
        };
        inbox.push(intent(), alone);
        inbox
    }

    #[test]
    fn intents_of_a_caller_with_more_in_flight_wait_for_company_while_commits_follow_one_another() {
        let end = Instant::now();
        let span = Duration::from_micros(300);
        let inbox = after_commit(end, span, 5, false);
        assert_eq!(inbox.gather_until(end), Some(end + span * 2));
        let later = end + Duration::from_micros(50);
        assert_eq!(inbox.gather_until(later), Some(end + span * 2));
        // Once that time has come, it is committed.
        assert_eq!(inbox.gather_until(end + span * 2), None);
        // A slow disk's commit does not hold it longer than GATHER_MAX.
        let slow = after_commit(end, Duration::from_millis(40), 5, false);
        assert_eq!(slow.gather_until(later), Some(end + GATHER_MAX));
        // A batch taken resets the count the next gathering is decided by.
        let mut taken = after_commit(end, span, 0, false);
        taken.push(intent(), false);
        let _ = taken.take();
        taken.push(intent(), false);
        assert_eq!(taken.gather_until(end), Some(end + span * 2));
    }

    #[test]
    fn lone_callers_bursts_flushes_and_an_idle_log_are_committed_at_once() {
        let end = Instant::now();
        let span = Duration::from_micros(300);
        let lone = after_commit(end, span, 5, true);
        assert_eq!(lone.gather_until(end), None);
        // The last batch held one pipelined intent (or none): a burst of an agent's parallel
        // calls, not a stream.
        for few in [0, 1] {
            assert_eq!(after_commit(end, span, few, false).gather_until(end), None);
        }
        // The log was idle: the gathering time after the last commit is over.
        let idle = after_commit(end, span, 5, false);
        assert_eq!(idle.gather_until(end + span * 3), None);
        // Nothing committed yet since the start.
        let first = Inbox {
            last_pipelined: 5,
            ..Inbox::default()
        };
        assert_eq!(first.gather_until(Instant::now()), None);
        // A caller with more in flight joined by a lone one: all of it goes at once.
        let mut joined = after_commit(end, span, 5, false);
        assert!(joined.gather_until(end).is_some());
        joined.push(intent(), true);
        assert_eq!(joined.gather_until(end), None);
        // So does a flush.
        let mut flushed = after_commit(end, span, 5, false);
        let (reply, _wait) = mpsc::sync_channel(1);
        flushed.push(Msg::Flush(reply), false);
        assert_eq!(flushed.gather_until(end), None);
    }

    #[test]
    fn a_gathering_writer_is_woken_only_for_what_cannot_wait() {
        let mut inbox = Inbox {
            wait: Wait::Until(Instant::now() + Duration::from_micros(500)),
            ..Inbox::default()
        };
        // Asleep with nothing awaited: the first intent wakes it.
        assert!(inbox.push(intent(), false));
        // Asleep with it queued (gathering company for it): more company does not.
        assert!(!inbox.push(intent(), false), "more company: no wake-up");
        assert!(inbox.push(intent(), true), "a lone caller waits: woken");
        let (reply, _wait) = mpsc::sync_channel(1);
        assert!(inbox.push(Msg::Flush(reply), false), "a flush: woken");
    }
}
