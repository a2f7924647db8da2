//! Answers that may come back before the call that asked for them returns.
//!
//! The gate decides most tool calls, and the audit log commits a lone call's intent, on the
//! session's own thread, before `authorize` or `record_durable_alone` returns; a person's
//! verdict, or an intent the writer thread commits, comes later from another thread. An
//! answer given while the session is still in the call is kept for it ([`Asking::returned`]),
//! and the session goes on with the call at once; a later one is sent to the session's queue.
//! Sending an inline answer to that queue as well would have the session's task wake itself
//! while it runs, which tokio treats as a yield: the task is queued again and another worker
//! thread woken for it, a system call and a context switch on every call's way to the server
//! (docs/benchmarks.md, "Issue 17, eleventh change").

use std::sync::{Arc, Mutex, MutexGuard};

/// The asking side: kept by the session while it is in the call.
pub(crate) struct Asking<T>(Arc<Mutex<Slot<T>>>);

/// The answering side: handed to whoever answers.
pub(crate) struct Answer<T>(Arc<Mutex<Slot<T>>>);

enum Slot<T> {
    /// The session is still in the call.
    Asking,
    /// Answered while it was.
    Answered(T),
    /// The call returned unanswered: the answer goes to the session's queue.
    Returned,
}

/// A question and the means to answer it.
pub(crate) fn ask<T>() -> (Asking<T>, Answer<T>) {
    let slot = Arc::new(Mutex::new(Slot::Asking));
    (Asking(Arc::clone(&slot)), Answer(slot))
}

fn lock<T>(slot: &Mutex<Slot<T>>) -> MutexGuard<'_, Slot<T>> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Asking<T> {
    /// The call that asked returned: the answer if it came meanwhile; `None`: it will come
    /// through the session's queue.
    pub(crate) fn returned(self) -> Option<T> {
        match std::mem::replace(&mut *lock(&self.0), Slot::Returned) {
            Slot::Answered(value) => Some(value),
            Slot::Asking | Slot::Returned => None,
        }
    }
}

impl<T> Answer<T> {
    /// Gives the answer to the session still in the call, or back (`Err`) to be sent to its
    /// queue.
    pub(crate) fn give(self, value: T) -> Result<(), T> {
        let mut slot = lock(&self.0);
        match *slot {
            Slot::Asking => {
                *slot = Slot::Answered(value);
                Ok(())
            }
            Slot::Answered(_) | Slot::Returned => Err(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_given_in_the_call_is_kept_for_the_session() {
        let (asking, answer) = ask();
        assert_eq!(answer.give(7), Ok(()));
        assert_eq!(asking.returned(), Some(7));
    }

    #[test]
    fn an_answer_given_after_the_call_returned_goes_to_the_queue() {
        let (asking, answer) = ask();
        assert_eq!(asking.returned(), None);
        assert_eq!(answer.give(7), Err(7));
    }
}
