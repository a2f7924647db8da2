//! Seals prepared ahead of time (issue 17): a sealed record's costly part, its ephemeral key
//! and the key agreement (two X25519 multiplications, [`PreparedSeal`]), does not depend on the
//! events, so a thread of its own keeps a few ready while the engine is idle, and the writer
//! takes one when it needs a fresh key (every 100 ms of commits, or after a failed commit)
//! instead of computing it between a call's arrival and its forward. When the stock runs out,
//! the writer prepares its own as before.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use postern_audit::{PreparedSeal, RecipientKey};

use super::{Wait, relock, sleep};

/// Seals kept ready: a few, a few KiB of memory.
const STOCK: usize = 16;

/// The stock and its refilling thread (stopped when dropped).
#[derive(Debug)]
pub(super) struct SealStock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    recipient: RecipientKey,
    slot: Mutex<Slot>,
    wake: Condvar,
}

#[derive(Debug)]
struct Slot {
    /// Boxed, so a seal moves by pointer and its secret is not copied around.
    #[allow(
        clippy::vec_box,
        reason = "a seal's secret moves by pointer, not copied into each place it passes"
    )]
    ready: Vec<Box<PreparedSeal>>,
    closing: bool,
}

impl SealStock {
    /// A stock for records sealed to `recipient`, filled by a thread of its own (none if the
    /// thread cannot start: every seal is then prepared by its caller).
    pub(super) fn start(recipient: RecipientKey) -> SealStock {
        let inner = Arc::new(Inner {
            recipient,
            slot: Mutex::new(Slot {
                ready: Vec::with_capacity(STOCK),
                closing: false,
            }),
            wake: Condvar::new(),
        });
        let worker = Arc::clone(&inner);
        if let Err(e) = std::thread::Builder::new()
            .name("postern-seals".into())
            .spawn(move || worker.fill())
        {
            tracing::warn!("cannot start the audit seal thread ({e}); seals are made on the spot");
        }
        SealStock { inner }
    }

    /// A prepared seal: one from the stock, or one made now.
    pub(super) fn take(&self) -> Option<Box<PreparedSeal>> {
        let taken = {
            let mut slot = self.inner.lock();
            let taken = slot.ready.pop();
            if slot.ready.len() < STOCK / 2 {
                self.inner.wake.notify_one();
            }
            taken
        };
        taken.or_else(|| {
            PreparedSeal::new(&self.inner.recipient, &mut getrandom::SysRng)
                .ok()
                .map(Box::new)
        })
    }
}

impl Drop for SealStock {
    fn drop(&mut self) {
        self.inner.lock().closing = true;
        self.inner.wake.notify_one();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        relock(&self.slot)
    }

    /// Tops the stock up whenever it is below full, until closed.
    fn fill(&self) {
        loop {
            {
                let mut slot = self.lock();
                while slot.ready.len() >= STOCK && !slot.closing {
                    slot = sleep(&self.wake, slot, Wait::UntilWoken);
                }
                if slot.closing {
                    return;
                }
            }
            match PreparedSeal::new(&self.recipient, &mut getrandom::SysRng) {
                Ok(seal) => self.lock().ready.push(Box::new(seal)),
                Err(e) => {
                    tracing::warn!(
                        "cannot prepare an audit seal ({e}); seals are made on the spot"
                    );
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use postern_audit::{Chain, EventKind, OpeningKey, UnixMillis};

    #[test]
    fn every_seal_taken_is_a_fresh_one_for_the_recipient_even_past_the_stock() {
        let key = OpeningKey::from_bytes([7; 32]);
        let stock = SealStock::start(key.recipient());
        let mut chain = Chain::genesis(key.recipient());
        let kind = EventKind::parse("config_changed").expect("kind");
        let mut ephemerals: Vec<Vec<u8>> = (0..2 * STOCK)
            .map(|_| {
                let mut seal = stock.take().expect("a seal");
                let record = chain
                    .append_prepared(UnixMillis::new(1), kind.clone(), b"{}", &mut seal)
                    .expect("sealed");
                record.sealed_body().as_bytes()[..32].to_vec()
            })
            .collect();
        ephemerals.sort();
        ephemerals.dedup();
        assert_eq!(
            ephemerals.len(),
            2 * STOCK,
            "an ephemeral key handed out twice"
        );
    }
}
