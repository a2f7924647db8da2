//! The requests an engine owes a shim's agent, where the shim can read them after the engine
//! is gone.
//!
//! Once the shim handed the agent's stdio over (`crate::handoff`), it no longer sees the
//! agent's requests. An engine that stops answers what it owes; one that is killed cannot. So
//! the shim gives the engine a small page (a memfd sealed against growing, sent with the
//! stdio) and the engine writes there the id of every request it holds open, clearing it once
//! the event that took the request out of its table is handled (a move from the gate's hands
//! to the server's writes nothing). A shim whose engine went away without ending the session
//! reads the page and answers each id left in it with `engine_unavailable`, as it answers
//! every request while no engine runs. The engine only writes the page, never reads it: what
//! a shim puts there cannot reach the engine.
//!
//! Each slot: a state byte (free, a request, the agent's `initialize`), the id's length, and
//! the id as JSON, written with one `pwrite` (a kill lands between system calls: a slot holds
//! a whole id or counts as free). An id too long for a slot (over 126 bytes of JSON) is not
//! written, nor are the requests the engine had read and not yet taken up, nor the repeats of
//! a waiting `initialize` (its id is answered once). A request answered in the microseconds
//! between its answer's queueing and its slot's clearing may get a second answer from the shim
//! if the engine is killed then, or none (clients drop an answer to an id they no longer wait
//! for). Linux only, as the hand-over.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use crate::message::Id;

/// Bytes per slot: the state, the id's length, the id.
const SLOT: usize = 128;
/// Slots in the page: one for each request a session may hold open at once.
const SLOTS: usize = crate::session::MAX_OPEN_REQUESTS;
/// The page's size.
pub(crate) const SIZE: usize = SLOT * SLOTS;
/// The longest id a slot holds, as JSON.
const MAX_ID: usize = SLOT - 2;

const FREE: u8 = 0;
const REQUEST: u8 = 1;
const INITIALIZE: u8 = 2;

/// The engine's side: the shim's page, and which slot holds which id.
#[derive(Debug)]
pub(crate) struct Ledger {
    page: OwnedFd,
    slots: HashMap<Id, usize>,
    free: Vec<usize>,
    /// Ids that left the table, cleared at the next [`Ledger::settle`] unless back by then.
    leaving: Vec<Id>,
}

impl Ledger {
    /// Takes `fd`, a page the shim made, for writing. Only a memfd sealed against growing
    /// and of [`SIZE`] is taken: the engine's writes stay inside its bytes.
    pub(crate) fn open(fd: &OwnedFd) -> Result<Self, String> {
        use rustix::fs::{SealFlags, fcntl_get_seals, fstat};
        let seals = fcntl_get_seals(fd).map_err(|e| format!("not a sealed memfd: {e}"))?;
        if !seals.contains(SealFlags::GROW) {
            return Err("the ledger is not sealed against growing".to_owned());
        }
        let size = fstat(fd).map_err(|e| e.to_string())?.st_size;
        if usize::try_from(size).ok() != Some(SIZE) {
            return Err(format!("the ledger has {size} bytes, not {SIZE}"));
        }
        Ok(Self {
            page: fd.try_clone().map_err(|e| e.to_string())?,
            slots: HashMap::new(),
            free: (0..SLOTS).rev().collect(),
            leaving: Vec::new(),
        })
    }

    /// The request `id` is open (again): written to a slot unless it has one. One write, the
    /// state byte first in the slot: a kill mid-write leaves a whole slot or none (the kernel
    /// copies a small write to a memfd's page at once).
    pub(crate) fn owe(&mut self, id: &Id, initialize: bool) {
        if self.slots.contains_key(id) {
            return;
        }
        let json = id.to_string();
        if json.len() > MAX_ID {
            return;
        }
        let Some(slot) = self.free.pop() else {
            return;
        };
        let mut bytes = Vec::with_capacity(2 + json.len());
        bytes.push(if initialize { INITIALIZE } else { REQUEST });
        bytes.push(json.len() as u8);
        bytes.extend_from_slice(json.as_bytes());
        if self.write(slot, &bytes) {
            self.slots.insert(id.clone(), slot);
        } else {
            self.free.push(slot);
        }
    }

    /// The request `id` left the table: cleared at the next [`Ledger::settle`] unless it is
    /// owed again by then.
    pub(crate) fn left(&mut self, id: &Id) {
        if self.slots.contains_key(id) {
            self.leaving.push(id.clone());
        }
    }

    /// Clears each id that left since the last call and is not `owed` now.
    pub(crate) fn settle(&mut self, owed: impl Fn(&Id) -> bool) {
        if self.leaving.is_empty() {
            return;
        }
        for id in std::mem::take(&mut self.leaving) {
            if !owed(&id) {
                self.paid(&id);
            }
        }
    }

    /// The request `id` is no longer the engine's to answer.
    pub(crate) fn paid(&mut self, id: &Id) {
        // A slot that cannot be cleared is never used again.
        if let Some(slot) = self.slots.remove(id)
            && self.write(slot, &[FREE])
        {
            self.free.push(slot);
        }
    }

    /// Nothing is owed any more (the engine answered everything as it stopped).
    pub(crate) fn clear(&mut self) {
        let ids: Vec<Id> = self.slots.keys().cloned().collect();
        for id in ids {
            self.paid(&id);
        }
        self.leaving.clear();
    }

    fn write(&self, slot: usize, bytes: &[u8]) -> bool {
        let at = (slot * SLOT) as u64;
        rustix::io::pwrite(&self.page, bytes, at).is_ok_and(|n| n == bytes.len())
    }
}

/// One request the engine left owed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owed {
    pub id: Id,
    /// The agent's `initialize`: the shim answers it itself rather than refusing it.
    pub initialize: bool,
}

/// The shim's side: a fresh page for the engine, sealed so that it can neither shrink nor
/// grow, or `None` where memfds cannot be made.
pub(crate) fn create() -> Option<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags, fcntl_add_seals, ftruncate, memfd_create};
    let fd = memfd_create(
        "postern-ledger",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    ftruncate(&fd, SIZE as u64).ok()?;
    fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL).ok()?;
    Some(fd)
}

/// The shim's side, once the engine is gone: every request written in the page, in slot order.
pub(crate) fn read(fd: &OwnedFd) -> Vec<Owed> {
    let mut page = vec![0u8; SIZE];
    let mut done = 0;
    while done < SIZE {
        match rustix::io::pread(fd, &mut page[done..], done as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    page[..done]
        .chunks_exact(SLOT)
        .filter_map(|slot| {
            let initialize = match slot[0] {
                REQUEST => false,
                INITIALIZE => true,
                _ => return None,
            };
            let len = usize::from(slot[1]);
            let json = slot.get(2..2 + len).filter(|_| len <= MAX_ID)?;
            let value = serde_json::from_slice(json).ok()?;
            Some(Owed {
                id: Id::from_value(&value)?,
                initialize,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn id(v: serde_json::Value) -> Id {
        Id::from_value(&v).unwrap()
    }

    /// What the engine writes is what the shim reads, in slot order; a paid id is gone at
    /// once, one that left the table when the event is settled, unless it is owed again by
    /// then; an id too long for a slot is not written; freed slots are taken again.
    #[test]
    fn the_shim_reads_what_the_engine_still_owes() {
        let fd = create().expect("a memfd");
        let mut ledger = Ledger::open(&fd).unwrap();
        let owed = |fd: &OwnedFd| -> Vec<(String, bool)> {
            read(fd)
                .into_iter()
                .map(|o| (o.id.to_string(), o.initialize))
                .collect()
        };
        ledger.owe(&id(json!(1)), true);
        ledger.owe(&id(json!("two")), false);
        ledger.owe(&id(json!(3)), false);
        ledger.owe(&id(json!(3)), false);
        ledger.owe(&id(json!("x".repeat(200))), false);
        assert_eq!(
            owed(&fd),
            [
                ("1".to_owned(), true),
                ("\"two\"".to_owned(), false),
                ("3".to_owned(), false)
            ]
        );
        ledger.paid(&id(json!(1)));
        // 3 moves from the gate's hands to the server's; "two" is answered.
        ledger.left(&id(json!(3)));
        ledger.owe(&id(json!(3)), false);
        ledger.left(&id(json!("two")));
        assert_eq!(owed(&fd).len(), 2, "cleared only when settled");
        ledger.settle(|i| *i == id(json!(3)));
        assert_eq!(owed(&fd), [("3".to_owned(), false)]);
        // The slot freed last ("two"'s) takes the next id; the engine gone, the page stays.
        ledger.owe(&id(json!(4)), false);
        drop(ledger);
        assert_eq!(
            owed(&fd),
            [("4".to_owned(), false), ("3".to_owned(), false)]
        );

        // An engine that stops answers all it owes itself: nothing is left for the shim.
        let fd = create().expect("a memfd");
        let mut ledger = Ledger::open(&fd).unwrap();
        ledger.owe(&id(json!(1)), false);
        ledger.owe(&id(json!(2)), false);
        ledger.left(&id(json!(2)));
        ledger.clear();
        assert_eq!(read(&fd), []);
    }

    /// A page the engine's writes could grow (a same-user sender's memory, without end), or of
    /// another size, is refused.
    #[test]
    fn an_unsealed_or_misshapen_page_is_refused() {
        use rustix::fs::{MemfdFlags, SealFlags, fcntl_add_seals, ftruncate, memfd_create};
        let open = memfd_create("open", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        ftruncate(&open, SIZE as u64).unwrap();
        let err = Ledger::open(&open).unwrap_err();
        assert!(err.contains("growing"), "{err}");

        let small = memfd_create("small", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        ftruncate(&small, 4096).unwrap();
        fcntl_add_seals(&small, SealFlags::GROW).unwrap();
        let err = Ledger::open(&small).unwrap_err();
        assert!(err.contains(&format!("not {SIZE}")), "{err}");

        let file = tempfile::tempfile().unwrap();
        assert!(Ledger::open(&OwnedFd::from(file)).is_err());
    }
}
