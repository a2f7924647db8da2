//! Every agent request a session still owes an answer, in one table keyed by id, each with
//! where it stands: the agent's `initialize` waiting for the server, held until the catalog is
//! in, with the gate, withdrawn but owed the gate's verdict, or forwarded. A request is in
//! exactly one of these at a time, so an id is in use exactly while it is in the table, and a
//! move from one to the next takes it out of the first.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use super::{Authorizing, InFlight, Settling};
use crate::framing::MAX_FRAME;
use crate::message::{Id, Kind, Message};

/// How many bytes of messages one session may hold for its server at once: one message of the
/// largest size, or many smaller ones. Held messages are kept as their lines (a parsed value
/// can take dozens of times its text), and parsed again when released.
pub(super) const HELD_BUDGET: usize = MAX_FRAME;

/// Where one open request stands.
#[derive(Debug)]
pub(super) enum Open {
    /// The agent's `initialize`, answered once the server is up; `repeats` more requests with
    /// its id arrived meanwhile, each refused just after it is answered.
    Initialize { repeats: u32 },
    /// Held until the server has started and its catalog is in (the message waits in the
    /// held queue, in order).
    Held,
    /// With the gate (perhaps a human): nothing of it reached the server.
    Deciding(Authorizing),
    /// Withdrawn from the gate after its verdict was given; answered once that arrives.
    Settling(Settling),
    /// Forwarded to the current epoch, not answered yet.
    Forwarded(InFlight),
    /// Forwarded, then answered by the gate (cancelled by the agent, or its epoch ended while
    /// the same process lives on): the server may still answer it. The id stays in use until
    /// it does (its answer is dropped) or the process is gone, so a late answer can never
    /// reach another request that reused the id.
    Abandoned,
}

/// The table, and the queue of messages (requests and notifications) held for the server.
#[derive(Debug, Default)]
pub(super) struct Requests {
    open: HashMap<Id, Open>,
    /// Held messages as the lines Postern forwards (parsed again when released), in order.
    held: VecDeque<(Bytes, Option<Id>)>,
    held_bytes: usize,
    /// Abandoned ids, oldest first: at most [`MAX_ABANDONED`] are remembered (servers need not
    /// answer a cancelled request at all).
    abandoned: VecDeque<Id>,
    /// Where the shim that handed over the agent's stdio reads what is owed if the engine is
    /// killed: every id in the table but the abandoned ones (`crate::ledger`).
    #[cfg(target_os = "linux")]
    ledger: Option<crate::ledger::Ledger>,
}

/// How many abandoned request ids a session keeps in use.
const MAX_ABANDONED: usize = 1024;

impl Requests {
    /// A table mirrored into the shim's ledger.
    #[cfg(target_os = "linux")]
    pub(super) fn with_ledger(ledger: Option<crate::ledger::Ledger>) -> Self {
        Self {
            ledger,
            ..Self::default()
        }
    }

    /// Puts `id` in the table (the ledger follows).
    fn insert(&mut self, id: Id, open: Open) {
        #[cfg(target_os = "linux")]
        if let Some(ledger) = &mut self.ledger {
            match open {
                Open::Abandoned => ledger.paid(&id),
                Open::Initialize { .. } => ledger.owe(&id, true),
                _ => ledger.owe(&id, false),
            }
        }
        self.open.insert(id, open);
    }

    /// Takes `id` out of the table, with the id as the agent sent it. The ledger follows once
    /// the event that took it out is handled ([`Requests::settle_ledger`]): most requests only
    /// move from one state to the next (the gate's hands to the server's), and stay owed.
    fn remove(&mut self, id: &Id) -> Option<(Id, Open)> {
        let removed = self.open.remove_entry(id);
        #[cfg(target_os = "linux")]
        if let (Some(ledger), Some(_)) = (&mut self.ledger, &removed) {
            ledger.left(id);
        }
        removed
    }

    /// Clears from the ledger the requests the last event took out of the table for good.
    pub(super) fn settle_ledger(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(ledger) = &mut self.ledger {
            let open = &self.open;
            ledger.settle(
                |id| matches!(open.get(id), Some(open) if !matches!(open, Open::Abandoned)),
            );
        }
    }

    /// The engine answers every request it owes as it stops: none is left for the shim.
    pub(super) fn paid_all(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(ledger) = &mut self.ledger {
            ledger.clear();
        }
    }

    /// Whether a request with this id is open.
    pub(super) fn contains(&self, id: &Id) -> bool {
        self.open.contains_key(id)
    }

    /// Whether at most one request is open (the one being handled, if any).
    pub(super) fn at_most_one(&self) -> bool {
        self.open.len() <= 1
    }

    /// How many requests are open (each repeat of a waiting `initialize` counts: each is owed
    /// its refusal).
    pub(super) fn len(&self) -> usize {
        self.open
            .values()
            .map(|o| match o {
                Open::Initialize { repeats } => 1 + *repeats as usize,
                Open::Abandoned => 0,
                _ => 1,
            })
            .sum()
    }

    /// Every request still owed an answer, with how many answers (a waiting `initialize`'s
    /// repeats are each owed their own).
    pub(super) fn owed(&self) -> Vec<(Id, u32)> {
        self.open
            .iter()
            .filter_map(|(id, o)| match o {
                Open::Initialize { repeats } => Some((id.clone(), 1 + repeats)),
                Open::Abandoned => None,
                _ => Some((id.clone(), 1)),
            })
            .collect()
    }

    // ---- initialize ----

    /// The agent's `initialize` now waits for the server.
    pub(super) fn initialize(&mut self, id: Id) {
        self.insert(id, Open::Initialize { repeats: 0 });
    }

    /// Another `initialize` with the id of the one waiting: counted, to be refused after it.
    /// False when `id` is not the waiting `initialize`'s.
    pub(super) fn repeat_initialize(&mut self, id: &Id) -> bool {
        match self.open.get_mut(id) {
            Some(Open::Initialize { repeats }) => {
                *repeats += 1;
                true
            }
            _ => false,
        }
    }

    /// Takes the waiting `initialize` out: its id and how many repeats to refuse.
    pub(super) fn take_initialize(&mut self) -> Option<(Id, u32)> {
        let id = self
            .open
            .iter()
            .find(|(_, o)| matches!(o, Open::Initialize { .. }))
            .map(|(id, _)| id.clone())?;
        match self.remove(&id) {
            Some((id, Open::Initialize { repeats })) => Some((id, repeats)),
            _ => None,
        }
    }

    // ---- held ----

    /// Holds a message until the server is ready (a request is open meanwhile), unless the
    /// session already holds [`HELD_BUDGET`] bytes: then the message comes back, refused.
    pub(super) fn hold(&mut self, msg: Message) -> Result<(), Box<Message>> {
        let len = msg.line.len();
        if self.held_bytes > 0 && self.held_bytes + len > HELD_BUDGET {
            return Err(Box::new(msg));
        }
        let id = match msg.kind {
            Kind::Request { id, .. } => {
                self.insert(id.clone(), Open::Held);
                Some(id)
            }
            _ => None,
        };
        self.held_bytes += len;
        self.held.push_back((msg.line, id));
        Ok(())
    }

    /// Takes every held message, in order; their requests are no longer open (the caller
    /// routes each again, or answers it).
    pub(super) fn take_held(&mut self) -> Vec<Message> {
        self.held_bytes = 0;
        let held: Vec<(Bytes, Option<Id>)> = self.held.drain(..).collect();
        held.into_iter()
            .filter_map(|(line, id)| {
                if let Some(id) = &id
                    && matches!(self.open.get(id), Some(Open::Held))
                {
                    self.remove(id);
                }
                // Postern's own serialization of a message it parsed: it parses again.
                Message::parse(line).ok()
            })
            .collect()
    }

    /// Drops the held request `id` (it was cancelled); false when none was held.
    pub(super) fn unhold(&mut self, id: &Id) -> bool {
        if !matches!(self.open.get(id), Some(Open::Held)) {
            return false;
        }
        self.remove(id);
        let mut freed = 0;
        self.held.retain(|(line, held)| {
            let keep = held.as_ref() != Some(id);
            if !keep {
                freed += line.len();
            }
            keep
        });
        self.held_bytes -= freed;
        true
    }

    // ---- with the gate ----

    /// The call `id` goes to the gate (or back to it, to read its credentials).
    pub(super) fn decide(&mut self, id: Id, waiting: Authorizing) {
        self.insert(id, Open::Deciding(waiting));
    }

    /// The call `id` if it is with the gate.
    pub(super) fn deciding(&self, id: &Id) -> Option<&Authorizing> {
        match self.open.get(id) {
            Some(Open::Deciding(waiting)) => Some(waiting),
            _ => None,
        }
    }

    /// Takes the call `id` from the gate's hands, if it is there.
    pub(super) fn take_deciding(&mut self, id: &Id) -> Option<Authorizing> {
        self.take(id, |o| matches!(o, Open::Deciding(_)))
            .and_then(|o| match o {
                Open::Deciding(waiting) => Some(waiting),
                _ => None,
            })
    }

    /// Takes every call with the gate.
    pub(super) fn take_all_deciding(&mut self) -> Vec<(Id, Authorizing)> {
        self.take_all(|o| matches!(o, Open::Deciding(_)))
            .into_iter()
            .filter_map(|(id, o)| match o {
                Open::Deciding(waiting) => Some((id, waiting)),
                _ => None,
            })
            .collect()
    }

    /// Every call with the gate.
    pub(super) fn all_deciding(&self) -> impl Iterator<Item = &Authorizing> {
        self.open.values().filter_map(|o| match o {
            Open::Deciding(waiting) => Some(waiting),
            _ => None,
        })
    }

    // ---- withdrawn, owed a verdict ----

    /// The call `id` was withdrawn after its verdict was given.
    pub(super) fn settle(&mut self, id: Id, settling: Settling) {
        self.insert(id, Open::Settling(settling));
    }

    /// The withdrawn call `id`, if it waits for its verdict.
    pub(super) fn settling(&self, id: &Id) -> Option<&Settling> {
        match self.open.get(id) {
            Some(Open::Settling(settling)) => Some(settling),
            _ => None,
        }
    }

    /// Takes the withdrawn call `id`, if it waits for its verdict.
    pub(super) fn take_settling(&mut self, id: &Id) -> Option<Settling> {
        self.take(id, |o| matches!(o, Open::Settling(_)))
            .and_then(|o| match o {
                Open::Settling(settling) => Some(settling),
                _ => None,
            })
    }

    // ---- forwarded ----

    /// The request `id` went to the server.
    pub(super) fn forward(&mut self, id: Id, request: InFlight) {
        self.insert(id, Open::Forwarded(request));
    }

    /// The forwarded request `id`.
    pub(super) fn forwarded_mut(&mut self, id: &Id) -> Option<&mut InFlight> {
        match self.open.get_mut(id) {
            Some(Open::Forwarded(request)) => Some(request),
            _ => None,
        }
    }

    /// Takes the forwarded request `id` (it was answered, or it never will be), with the id as
    /// the agent sent it (`7` or `"7"`: the server may answer either).
    pub(super) fn take_forwarded(&mut self, id: &Id) -> Option<(Id, InFlight)> {
        if !matches!(self.open.get(id), Some(Open::Forwarded(_))) {
            return None;
        }
        match self.remove(id) {
            Some((sent, Open::Forwarded(request))) => Some((sent, request)),
            _ => None,
        }
    }

    /// The forwarded request `id` was answered by the gate while the server may still answer.
    pub(super) fn abandon(&mut self, id: Id) {
        self.insert(id.clone(), Open::Abandoned);
        self.abandoned.push_back(id);
        while self.abandoned.len() > MAX_ABANDONED {
            if let Some(oldest) = self.abandoned.pop_front() {
                self.take(&oldest, |o| matches!(o, Open::Abandoned));
            }
        }
    }

    /// A late answer to an abandoned request: true (and the id is free again) if it was one.
    pub(super) fn take_abandoned(&mut self, id: &Id) -> bool {
        self.take(id, |o| matches!(o, Open::Abandoned)).is_some()
    }

    /// The server process is gone: nothing abandoned can be answered any more.
    pub(super) fn forget_abandoned(&mut self) {
        self.open.retain(|_, o| !matches!(o, Open::Abandoned));
        self.abandoned.clear();
    }

    /// Takes every forwarded request (their epoch ended).
    pub(super) fn take_all_forwarded(&mut self) -> Vec<(Id, InFlight)> {
        self.take_all(|o| matches!(o, Open::Forwarded(_)))
            .into_iter()
            .filter_map(|(id, o)| match o {
                Open::Forwarded(request) => Some((id, request)),
                _ => None,
            })
            .collect()
    }

    /// How many forwarded requests wait for the server.
    pub(super) fn forwarded_count(&self) -> usize {
        self.open
            .values()
            .filter(|o| matches!(o, Open::Forwarded(_)))
            .count()
    }

    fn take(&mut self, id: &Id, kind: impl Fn(&Open) -> bool) -> Option<Open> {
        if self.open.get(id).is_some_and(kind) {
            self.remove(id).map(|(_, open)| open)
        } else {
            None
        }
    }

    fn take_all(&mut self, kind: impl Fn(&Open) -> bool) -> Vec<(Id, Open)> {
        let ids: Vec<Id> = self
            .open
            .iter()
            .filter(|(_, o)| kind(o))
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter().filter_map(|id| self.remove(&id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::Bytes;
    use serde_json::json;

    use super::*;

    fn id(n: i64) -> Id {
        Id::from_value(&json!(n)).expect("an id")
    }

    fn request(n: i64, method: &str) -> Message {
        let line = json!({"jsonrpc": "2.0", "id": n, "method": method}).to_string();
        Message::parse(Bytes::from(line)).expect("a request")
    }

    fn forwarded(method: &str) -> InFlight {
        InFlight {
            method: method.into(),
            tool: None,
            sent: Instant::now(),
            task: None,
            intent: None,
            _holds: Vec::new(),
        }
    }

    #[test]
    fn a_session_holds_at_most_its_budget_of_bytes() {
        let mut requests = Requests::default();
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"p":"{}"}}}}"#,
            "a".repeat(HELD_BUDGET - 100)
        );
        requests
            .hold(Message::parse(Bytes::from(big)).expect("parses"))
            .expect("one message of any size is held");
        let refused = requests.hold(request(2, "tools/list"));
        assert!(refused.is_err(), "past the budget");
        assert!(!requests.contains(&id(2)));
        assert_eq!(requests.take_held().len(), 1);
        requests.hold(request(2, "tools/list")).expect("room again");
    }

    #[test]
    fn a_request_is_in_one_place_and_a_move_takes_it_out_of_the_last() {
        let mut requests = Requests::default();
        requests.initialize(id(0));
        assert!(requests.repeat_initialize(&id(0)));
        assert!(
            !requests.repeat_initialize(&id(1)),
            "not the waiting initialize"
        );
        requests.hold(request(1, "tools/list")).expect("held");
        requests.hold(request(2, "resources/list")).expect("held");
        assert_eq!(requests.len(), 4, "the initialize, its repeat, two held");
        assert!(requests.contains(&id(1)));

        // Taking another kind leaves it where it is.
        assert!(requests.take_forwarded(&id(1)).is_none());
        assert!(requests.take_deciding(&id(1)).is_none());
        assert!(requests.contains(&id(1)));

        assert!(requests.unhold(&id(2)));
        let held = requests.take_held();
        assert_eq!(
            held.len(),
            1,
            "the cancelled one is gone, the other released"
        );
        assert!(
            !requests.contains(&id(1)),
            "released: no longer open until routed"
        );
        requests.forward(id(1), forwarded("tools/list"));
        assert_eq!(requests.forwarded_count(), 1);
        // Cancelled: the id stays in use (not counted as open) until the late answer comes.
        let (sent, _) = requests.take_forwarded(&id(1)).expect("forwarded");
        requests.abandon(sent);
        assert!(requests.contains(&id(1)));
        assert!(requests.take_abandoned(&id(1)));
        assert!(!requests.contains(&id(1)));
        requests.forward(id(1), forwarded("tools/list"));
        assert_eq!(
            requests.take_all_forwarded().len(),
            1,
            "the epoch's end answers it"
        );
        assert_eq!(requests.take_initialize(), Some((id(0), 1)));
        assert_eq!(requests.len(), 0);
    }
}
