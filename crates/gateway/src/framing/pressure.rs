//! Queues of lines toward one peer, counted in bytes, and the back-pressure that holds a
//! reader while the queue its lines lead to is congested.

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

/// How many bytes a queue of lines to one peer may hold before it counts as congested: whoever
/// feeds it stops reading its own peer until the writer catches up (a line is never refused
/// for this, so one message may take a queue past the mark).
pub const HIGH_WATER: usize = 1 << 20;

/// How many lines a reader task may have read ahead of its session: with [`HIGH_WATER`], what
/// bounds the memory one session holds for a peer that writes without end.
pub const READ_AHEAD: usize = 8;

/// The bytes queued toward one peer, shared by the queue's ends (and, for a server, by every
/// launch of one session): congested above [`HIGH_WATER`].
#[derive(Clone, Debug, Default)]
pub struct Pressure(std::sync::Arc<Queued>);

#[derive(Debug, Default)]
struct Queued {
    bytes: std::sync::atomic::AtomicUsize,
    drained: tokio::sync::Notify,
}

impl Pressure {
    /// Whether the queue holds more than [`HIGH_WATER`] bytes.
    pub fn is_congested(&self) -> bool {
        self.bytes() > HIGH_WATER
    }

    /// The bytes queued now.
    pub fn bytes(&self) -> usize {
        self.0.bytes.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Resolves once the queue is not congested.
    pub async fn drained(&self) {
        loop {
            let drained = self.0.drained.notified();
            if !self.is_congested() {
                return;
            }
            drained.await;
        }
    }

    pub(crate) fn add(&self, n: usize) {
        self.0
            .bytes
            .fetch_add(n, std::sync::atomic::Ordering::AcqRel);
    }

    pub(crate) fn sub(&self, n: usize) {
        let before = self
            .0
            .bytes
            .fetch_sub(n, std::sync::atomic::Ordering::AcqRel);
        if before.saturating_sub(n) <= HIGH_WATER {
            self.0.drained.notify_waiters();
        }
    }
}

/// The sending end of a queue of lines to one peer's writer ([`write_lines`]), counting what it
/// holds in its [`Pressure`].
#[derive(Clone, Debug)]
pub struct Outbound {
    tx: mpsc::UnboundedSender<Bytes>,
    pressure: Pressure,
}

/// The receiving end: what a writer task drains.
#[derive(Debug)]
pub struct Inbound {
    rx: mpsc::UnboundedReceiver<Bytes>,
    pressure: Pressure,
}

/// A queue of lines counted in `pressure`.
pub fn outbound(pressure: Pressure) -> (Outbound, Inbound) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Outbound {
            tx,
            pressure: pressure.clone(),
        },
        Inbound { rx, pressure },
    )
}

impl Outbound {
    /// Queues a line (never refused for congestion); false once the writer is gone.
    pub fn send(&self, line: Bytes) -> bool {
        let len = line.len() + 1;
        self.pressure.add(len);
        if self.tx.send(line).is_err() {
            self.pressure.sub(len);
            return false;
        }
        true
    }

    /// Whether the writer is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// The queue's pressure.
    pub fn pressure(&self) -> &Pressure {
        &self.pressure
    }
}

impl Inbound {
    /// The next line; `None` once every sender is gone and the queue is empty.
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.rx.recv().await
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// A line was written (or thrown away): it no longer counts.
    pub fn done(&self, line: &Bytes) {
        self.pressure.sub(line.len() + 1);
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        // Lines that will never be written no longer count; senders see the queue closed.
        self.rx.close();
        while let Ok(line) = self.rx.try_recv() {
            self.pressure.sub(line.len() + 1);
        }
    }
}

/// Writes queued lines, each with its newline, flushing whenever the queue runs dry; ends
/// when the queue closes or the writer fails (the receiver is dropped then, so senders see
/// the queue closed).
pub async fn write_lines<W: AsyncWrite + Unpin>(write: W, mut rx: Inbound) {
    let mut out = BufWriter::new(write);
    while let Some(line) = rx.recv().await {
        let written = out.write_all(&line).await.is_ok() && out.write_all(b"\n").await.is_ok();
        rx.done(&line);
        if !written || (rx.is_empty() && out.flush().await.is_err()) {
            return;
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}
