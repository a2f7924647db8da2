//! Where the data path reports what it decided and saw. The engine plugs in the
//! encrypted, hash-chained audit log; the gateway only needs this seam.

use postern_domain::AuditEvent;

/// Called once an event is durable, or with the reason it could not be written.
pub type Durable = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Receives audit events from the data path.
pub trait AuditSink: Send + Sync + 'static {
    /// Appends an event (durable soon after; the data path does not wait).
    fn record(&self, event: AuditEvent);

    /// Appends an event and calls `done` once it is durable (fsynced). A tool call is
    /// forwarded only after its intent is durable; if it cannot be written, the call is
    /// refused (as it is if `done` is dropped uncalled). While the log is busy, the sink may
    /// hold it a moment so that the caller's next events share its write.
    fn record_durable(&self, event: AuditEvent, done: Durable);

    /// As [`AuditSink::record_durable`], from a caller with nothing else to do until the event
    /// is durable (its session holds no other request open): the sink may write it on the
    /// caller's thread when nothing else is being written, sparing the hand-offs to a writer
    /// and back. A caller with more requests open must not use it: it would wait for each
    /// one's write alone, where a writer would have written them together.
    fn record_durable_alone(&self, event: AuditEvent, done: Durable) {
        self.record_durable(event, done);
    }
}

/// A sink that keeps nothing (tests of the data path alone).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAudit;

impl AuditSink for NoAudit {
    fn record(&self, _event: AuditEvent) {}

    fn record_durable(&self, _event: AuditEvent, done: Durable) {
        done(Ok(()));
    }
}
