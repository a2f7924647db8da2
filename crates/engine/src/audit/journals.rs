//! The journals' thread: projects what the log committed into the journals, on a connection
//! of its own, beside the commits.
//!
//! The journals live in a file of their own (`postern-journals.db`): writing them never holds
//! up an append, and an append's fsync never carries their pages. Whoever commits a batch hands
//! it here in commit order ([`Journals::committed`]); this thread writes the batches received
//! within [`PROJECT_AFTER`] of the oldest in one transaction (more rows per page written), at
//! once for a flush ([`Journals::flush`], what `postern activity` asks for) and before it stops.
//! Journals found behind the log wait here for the opening key ([`Journals::catch_up`]).

use std::path::PathBuf;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postern_audit::{OpeningKey, SealedRecord};
use postern_domain::AuditEvent;
use postern_store::{Append, JournalWriter};

use super::offline::CatchUp;
use super::{Wait, relock, sleep};

/// How long committed batches wait to be projected together (the oldest's wait): the more
/// rows a transaction writes, the fewer pages per row, and the more calls whose intent and
/// result it holds both of (one Activity insert, no update). The windows poll every second and
/// a flush projects at once, so nobody waits on it.
const PROJECT_AFTER: Duration = Duration::from_millis(50);

/// How many committed events are projected at once, without waiting for [`PROJECT_AFTER`].
const PROJECT_MAX: usize = 4096;

/// A committed batch, for the journals.
pub(super) struct Committed {
    /// When it was committed.
    pub at: Instant,
    pub records: Vec<SealedRecord>,
    pub events: Vec<AuditEvent>,
}

enum Job {
    Project(Committed),
    /// Reply once everything handed over before is projected.
    Flush(SyncSender<()>),
    CatchUp(Box<OpeningKey>),
}

/// The handle the committers hold: hands batches to the journals' thread.
pub(super) struct Journals {
    queue: Arc<Queue>,
    handle: Option<JoinHandle<()>>,
}

/// What is handed to the journals' thread. A committed batch wakes it only when it waits with
/// nothing pending (to start the [`PROJECT_AFTER`] window) or once [`PROJECT_MAX`] events are
/// behind; within a window, batches only queue (a wake-up per commit was a context switch per
/// call at one call at a time).
#[derive(Default)]
struct Queue {
    inbox: Mutex<Inbox>,
    wake: Condvar,
}

#[derive(Default)]
struct Inbox {
    jobs: Vec<Job>,
    /// Events handed over and not projected yet (queued here or pending in the thread).
    behind: usize,
    /// Nothing more is taken; the thread projects what it has and stops.
    closed: bool,
    /// Whether the thread waits, and until when.
    wait: Wait,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        relock(&self.inbox)
    }
}

/// Takes nothing more once the thread stopped, a panic included: what was queued is dropped
/// (a flush's receiver is let go) instead of piling up for nobody.
struct CloseOnExit<'a>(&'a Queue);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.lock();
        queue.closed = true;
        queue.jobs.clear();
    }
}

impl Journals {
    /// Starts the thread, projecting with `db` (a connection of its own). `behind`: the
    /// journals are not at the log's end and wait for the opening key to catch up so.
    pub(super) fn start(db: JournalWriter, home: PathBuf, behind: Option<CatchUp>) -> Journals {
        let queue = Arc::new(Queue::default());
        let mut thread = JournalThread {
            db,
            home,
            behind,
            pending: Vec::new(),
        };
        let jobs = Arc::clone(&queue);
        let spawned = std::thread::Builder::new()
            .name("postern-journals".into())
            .spawn(move || {
                let _closed = CloseOnExit(&jobs);
                thread.run(&jobs);
            });
        let handle = spawned
            .map_err(|e| {
                // The log goes on; the journals catch up from it at the next start.
                tracing::error!("cannot start the journals' thread: {e}; they stay behind the log");
                // What would be handed over is dropped (a flush's receiver is let go).
                queue.lock().closed = true;
            })
            .ok();
        Journals { queue, handle }
    }

    /// Hands over a committed batch (in commit order: the caller holds the log).
    pub(super) fn committed(&self, batch: Committed) {
        self.send(Job::Project(batch));
    }

    /// Replies on `reply` once every batch handed over before is projected (if the thread is
    /// gone, `reply` is dropped, which lets its receiver go as well).
    pub(super) fn flush(&self, reply: SyncSender<()>) {
        self.send(Job::Flush(reply));
    }

    /// The opening key, at an unlock: journals behind the log catch up with it.
    pub(super) fn catch_up(&self, key: Box<OpeningKey>) {
        self.send(Job::CatchUp(key));
    }

    /// Projects what was handed over and stops the thread.
    pub(super) fn finish(&mut self) {
        self.queue.lock().closed = true;
        self.queue.wake.notify_one();
        if let Some(handle) = self.handle.take()
            && handle.join().is_err()
        {
            tracing::error!("the journals' thread panicked; they catch up at the next start");
        }
    }

    /// Queues `job`, waking the thread if it waits and the job is due before it would look
    /// again: a flush or a catch-up always, a batch when nothing was pending or once
    /// [`PROJECT_MAX`] events are behind.
    fn send(&self, job: Job) {
        let mut queue = self.queue.lock();
        if queue.closed {
            return;
        }
        let wake = match &job {
            Job::Project(batch) => {
                queue.behind += batch.records.len();
                match queue.wait {
                    Wait::UntilWoken => true,
                    Wait::Until(_) => queue.behind >= PROJECT_MAX,
                    Wait::Awake => false,
                }
            }
            Job::Flush(_) | Job::CatchUp(_) => queue.wait.asleep(),
        };
        queue.jobs.push(job);
        drop(queue);
        if wake {
            self.queue.wake.notify_one();
        }
    }
}

impl Drop for Journals {
    fn drop(&mut self) {
        self.finish();
    }
}

struct JournalThread {
    db: JournalWriter,
    home: PathBuf,
    /// The journals are not at the log's end and wait for the opening key to catch up so
    /// ([`Journals::catch_up`]); meanwhile committed batches are not projected (the catch-up
    /// projects them from the log, after the journals' end).
    behind: Option<CatchUp>,
    /// Committed batches not projected yet, oldest first.
    pending: Vec<Committed>,
}

impl JournalThread {
    fn run(&mut self, inbox: &Queue) {
        loop {
            let (jobs, closed, behind) = {
                let mut queue = inbox.lock();
                while queue.jobs.is_empty()
                    && !queue.closed
                    && queue.behind < PROJECT_MAX
                    && self.due().is_none_or(|at| at > Instant::now())
                {
                    queue.wait = Wait::until(self.due());
                    let wait = queue.wait;
                    queue = sleep(&inbox.wake, queue, wait);
                    queue.wait = Wait::Awake;
                }
                (std::mem::take(&mut queue.jobs), queue.closed, queue.behind)
            };
            for job in jobs {
                match job {
                    Job::Project(batch) => self.pending.push(batch),
                    Job::Flush(reply) => {
                        self.project(inbox);
                        let _ = reply.send(());
                    }
                    Job::CatchUp(key) => {
                        self.project(inbox);
                        self.catch_up(&key);
                    }
                }
            }
            if closed {
                self.project(inbox);
                return;
            }
            if behind >= PROJECT_MAX || self.due().is_some_and(|at| at <= Instant::now()) {
                self.project(inbox);
            }
        }
    }

    /// When the pending batches are to be projected.
    fn due(&self) -> Option<Instant> {
        Some(self.pending.first()?.at + PROJECT_AFTER)
    }

    /// Projects the pending batches, in the order they were committed, in one transaction.
    fn project(&mut self, inbox: &Queue) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let events: usize = pending.iter().map(|c| c.records.len()).sum();
        let mut queue = inbox.lock();
        queue.behind = queue.behind.saturating_sub(events);
        drop(queue);
        if self.behind.is_some() {
            return;
        }
        let batch: Vec<Append<'_>> = pending
            .iter()
            .flat_map(|c| c.records.iter().zip(&c.events))
            .map(|(record, event)| Append { record, event })
            .collect();
        if let Err(e) = self.db.project_appended(&batch) {
            // The log has the events; the journals catch up from it at the next unlock or
            // start.
            tracing::error!(
                records = batch.len(),
                "the journals could not take an audit batch: {e}; they catch up from the log at the next unlock"
            );
            self.behind = Some(CatchUp::FromTheirEnd);
        }
    }

    /// Brings journals that were behind the log up to date, now that the opening key is at
    /// hand (every event committed meanwhile included: they were not projected, and those
    /// handed over after it are skipped by their sequence numbers).
    fn catch_up(&mut self, key: &OpeningKey) {
        let Some(how) = self.behind else { return };
        let caught = postern_store::Store::open(&self.home)
            .map_err(super::AuditError::from)
            .and_then(|reader| super::offline::catch_up(&mut self.db, &reader, key, how));
        match caught {
            Ok(projected) => {
                self.behind = None;
                tracing::info!(projected, "the journals caught up with the log");
            }
            Err(e) => tracing::error!("the journals could not catch up with the log: {e}"),
        }
    }
}
