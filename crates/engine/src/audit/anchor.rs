//! The anchor thread: writes the newest committed head to the keychain, at most once per
//! [`ANCHOR_INTERVAL`], and the last one at a clean stop.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postern_audit::Head;
use postern_vault::SecretStore;

use super::{ANCHOR, Shared, Wait, relock, sleep};

/// The shortest time between two anchor writes. A keychain write is a D-Bus round trip and, for
/// gnome-keyring, a rewrite of the keyring file: writing after every batch halved the durable
/// append rate in the benchmark. The anchor trails the log by at most this (plus one write);
/// the records after it are protected by the chain alone until the next write, and the last
/// head is always written at a clean stop.
const ANCHOR_INTERVAL: Duration = Duration::from_millis(100);

/// Writes the newest committed head to the keychain, on its own thread, coalescing.
pub(super) struct Anchorer {
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
    pub(super) fn start(secrets: Arc<dyn SecretStore>, shared: Arc<Shared>) -> Anchorer {
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

    /// Hands over the newest committed head.
    pub(super) fn post(&self, head: Head) {
        // With a head pending the thread is writing or waits for its time, and takes the
        // newest then: only one that waits for a head is woken (once per write, not per batch).
        let waits = self.inner.lock().pending.replace(head).is_none();
        if waits {
            self.inner.wake.notify_one();
        }
        if self.handle.is_none() {
            // No thread: anchor inline.
            if let Some(head) = self.inner.lock().pending.take() {
                self.inner.write(head);
            }
        }
    }

    /// Writes the last posted head, then stops the thread (later posts are written inline).
    pub(super) fn finish(&mut self) {
        self.inner.lock().closing = true;
        self.inner.wake.notify_one();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl AnchorInner {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        relock(&self.slot)
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
                    let wait = match slot.pending {
                        Some(_) => Wait::Until(Instant::now() + due),
                        None => Wait::UntilWoken,
                    };
                    slot = sleep(&self.wake, slot, wait);
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
