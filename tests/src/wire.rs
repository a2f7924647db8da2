//! A wire tap: the exact lines an MCP client wrote and read, as JSON.
//!
//! rmcp's typed model is lossy by design (its `Tool` has no `execution` field and no catch-all,
//! so a `tools/list` result read through it silently drops fields; see mcp-spec.md §16), and its
//! untagged `ServerResult` parses any `tools/list` response into that lossy type, even for a
//! `CustomRequest`. So rmcp itself cannot hand back the raw result. Instead the client's stdio
//! is wrapped in [`Tap`], which copies every newline-delimited message crossing it into a
//! [`Wire`] log, untouched, while rmcp reads and writes through it as usual. Assertions about
//! "what the agent actually received" (e.g. every field of every tool) read the tap; everything
//! else goes through rmcp's client API.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Which way a message crossed the client's stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Written by the client (to the server, or to the shim).
    Sent,
    /// Read by the client.
    Received,
}

/// One line seen on the wire.
#[derive(Debug, Clone)]
pub struct Line {
    /// Which way it went.
    pub direction: Direction,
    /// When the tap saw its final newline.
    pub at: Instant,
    /// The line as sent, without the newline.
    pub raw: String,
    /// The line parsed as JSON, or `None` when it is not JSON.
    pub json: Option<Value>,
}

impl Line {
    /// The JSON-RPC `method`, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        self.json.as_ref()?.get("method")?.as_str()
    }

    /// The JSON-RPC `id`, for requests and responses.
    pub fn id(&self) -> Option<&Value> {
        self.json.as_ref()?.get("id")
    }

    /// Whether this is a response (it has a `result` or an `error`).
    pub fn is_response(&self) -> bool {
        self.json
            .as_ref()
            .is_some_and(|j| j.get("result").is_some() || j.get("error").is_some())
    }
}

/// The log of every line a client sent and received, in order. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Wire {
    lines: Arc<Mutex<Vec<Line>>>,
    recording: Arc<AtomicBool>,
}

impl Default for Wire {
    fn default() -> Self {
        Wire {
            lines: Arc::default(),
            recording: Arc::new(AtomicBool::new(true)),
        }
    }
}

impl Wire {
    /// Stops (or resumes) recording, e.g. so a benchmark measures the session, not the tap.
    /// Bytes pass through either way.
    pub fn set_recording(&self, on: bool) {
        self.recording.store(on, Ordering::Relaxed);
    }

    /// A copy of every line so far.
    pub fn lines(&self) -> Vec<Line> {
        self.lock().clone()
    }

    /// Received notifications with this method.
    pub fn notifications(&self, method: &str) -> Vec<Line> {
        self.lock()
            .iter()
            .filter(|l| l.direction == Direction::Received && l.id().is_none())
            .filter(|l| l.method() == Some(method))
            .cloned()
            .collect()
    }

    /// The requests this client sent with `method`, each paired with the response it received
    /// (if any yet), in sending order.
    pub fn exchanges(&self, method: &str) -> Vec<(Line, Option<Line>)> {
        exchanges(&self.lock(), method, Direction::Sent)
    }

    /// The requests the peer sent this client with `method` (server-to-client requests such as
    /// `roots/list`), each paired with the client's response, if sent yet.
    pub fn peer_exchanges(&self, method: &str) -> Vec<(Line, Option<Line>)> {
        exchanges(&self.lock(), method, Direction::Received)
    }

    /// The raw `result` of the last `method` request this client sent.
    pub fn last_result(&self, method: &str) -> Result<Value> {
        let Some((request, response)) = self.exchanges(method).pop() else {
            bail!(
                "the client never sent a `{method}` request (wire: {})",
                self.summary()
            );
        };
        let Some(response) = response else {
            bail!("no response on the wire to {}", request.raw);
        };
        match response.json.as_ref().and_then(|j| j.get("result")) {
            Some(result) => Ok(result.clone()),
            None => bail!("`{method}` failed: {}", response.raw),
        }
    }

    /// The raw `result` of the last `tools/call` of `tool` this client sent.
    pub fn last_call_result(&self, tool: &str) -> Result<Value> {
        let calls = self.exchanges("tools/call");
        let Some((request, response)) = calls.into_iter().rev().find(|(req, _)| {
            req.json
                .as_ref()
                .is_some_and(|j| j["params"]["name"] == tool)
        }) else {
            bail!(
                "the client never called `{tool}` (wire: {})",
                self.summary()
            );
        };
        let Some(response) = response else {
            bail!("no response on the wire to {}", request.raw);
        };
        match response.json.as_ref().and_then(|j| j.get("result")) {
            Some(result) => Ok(result.clone()),
            None => bail!("`{tool}` failed: {}", response.raw),
        }
    }

    /// A short description of everything on the wire, for failure messages.
    pub fn summary(&self) -> String {
        let lines = self.lock();
        let mut out = format!("{} lines", lines.len());
        for l in lines.iter() {
            let arrow = match l.direction {
                Direction::Sent => "->",
                Direction::Received => "<-",
            };
            let mut raw = l.raw.clone();
            if raw.len() > 300 {
                let mut cut = 300;
                while !raw.is_char_boundary(cut) {
                    cut -= 1;
                }
                raw.truncate(cut);
                raw.push_str("...");
            }
            out.push_str(&format!("\n  {arrow} {raw}"));
        }
        out
    }

    /// Waits until `pred` holds for the log, or fails after `timeout` describing `what`.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&[Line]) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(&self.lock()) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}; wire: {}",
                    self.summary()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn record(&self, direction: Direction, raw: &[u8]) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let raw = String::from_utf8_lossy(raw)
            .trim_end_matches('\r')
            .to_owned();
        if raw.trim().is_empty() {
            return;
        }
        let json = serde_json::from_str(&raw).ok();
        self.lock().push(Line {
            direction,
            at: Instant::now(),
            raw,
            json,
        });
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Line>> {
        // A panic while holding the lock cannot leave the log half-written (push is atomic
        // from our point of view), so a poisoned lock is still good to read.
        self.lines.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn exchanges(lines: &[Line], method: &str, requester: Direction) -> Vec<(Line, Option<Line>)> {
    lines
        .iter()
        .filter(|l| l.direction == requester && l.method() == Some(method) && l.id().is_some())
        .map(|request| {
            let response = lines
                .iter()
                .find(|l| l.direction != requester && l.is_response() && l.id() == request.id())
                .cloned();
            (request.clone(), response)
        })
        .collect()
}

/// An `AsyncRead` or `AsyncWrite` that copies each complete line passing through it into a
/// [`Wire`], without changing a byte.
#[derive(Debug)]
pub struct Tap<T> {
    inner: T,
    wire: Wire,
    direction: Direction,
    partial: Vec<u8>,
    /// How many bytes at the start of the next write were logged already (offered to a write
    /// that took fewer of them, or none).
    fed_ahead: usize,
}

impl<T> Tap<T> {
    /// Wraps `inner`; lines are logged as going in `direction`.
    pub fn new(inner: T, wire: Wire, direction: Direction) -> Self {
        Tap {
            inner,
            wire,
            direction,
            partial: Vec::new(),
            fed_ahead: 0,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        for chunk in bytes.split_inclusive(|b| *b == b'\n') {
            self.partial.extend_from_slice(chunk);
            if chunk.ends_with(b"\n") {
                let line = std::mem::take(&mut self.partial);
                self.wire.record(self.direction, &line[..line.len() - 1]);
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tap<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            let fresh = buf.filled()[before..].to_vec();
            this.feed(&fresh);
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tap<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Logged before it is written: once written, the peer may answer it and the answer
        // be read and logged before this thread, preempted, logs the request (a loaded machine
        // showed a response without its request). A write that takes fewer bytes than offered
        // is offered the rest again: those are not logged twice.
        let this = self.get_mut();
        if buf.len() > this.fed_ahead {
            let ahead = this.fed_ahead;
            this.feed(&buf[ahead..]);
            this.fed_ahead = buf.len();
        }
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        match &poll {
            Poll::Ready(Ok(n)) => this.fed_ahead = this.fed_ahead.saturating_sub(*n),
            Poll::Ready(Err(_)) => this.fed_ahead = 0,
            Poll::Pending => {}
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_tap_logs_whole_lines_and_passes_every_byte() {
        let wire = Wire::default();
        let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nnot json\n{\"a\":";
        let mut tap = Tap::new(input, wire.clone(), Direction::Received);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input, "the tap must not change the bytes");
        let lines = wire.lines();
        assert_eq!(lines.len(), 2, "the unterminated tail is not a line yet");
        assert_eq!(lines[0].id(), Some(&Value::from(1)));
        assert!(lines[0].is_response());
        assert!(lines[1].json.is_none());
        assert_eq!(lines[1].raw, "not json");
    }

    /// A pipe that takes at most 7 bytes a write, and every other write none yet.
    #[derive(Default)]
    struct Trickle {
        taken: Vec<u8>,
        writes: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            this.writes += 1;
            if this.writes.is_multiple_of(2) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = buf.len().min(7);
            this.taken.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A line is logged once it is offered to the pipe, before the peer can have it, and once
    /// only however many writes the pipe takes it in.
    #[tokio::test]
    async fn a_tap_logs_a_line_it_writes_before_the_peer_has_it_and_once() {
        let wire = Wire::default();
        let mut tap = Tap::new(Trickle::default(), wire.clone(), Direction::Sent);
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n{\"id\":2}\n";
        tap.write_all(input).await.unwrap();
        assert_eq!(tap.inner.taken, input, "every byte, once");
        assert!(tap.inner.writes > 10, "taken in pieces");
        let lines: Vec<String> = wire.lines().into_iter().map(|l| l.raw).collect();
        assert_eq!(
            lines,
            [
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
                "{\"id\":2}"
            ]
        );
        let wire = Wire::default();
        let mut tap = Tap::new(Trickle::default(), wire.clone(), Direction::Sent);
        let mut line = &b"{\"id\":3}\n"[..];
        let first = write_once(&mut tap, &mut line);
        assert_eq!(first, 7);
        assert_eq!(
            wire.lines().len(),
            1,
            "logged before the pipe took all of it"
        );
    }

    /// One `poll_write` of `buf` on `tap`; how many bytes it took.
    fn write_once(tap: &mut Tap<Trickle>, buf: &mut &[u8]) -> usize {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        match Pin::new(tap).poll_write(&mut cx, buf) {
            Poll::Ready(Ok(n)) => n,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_tap_pairs_requests_with_responses_by_id() {
        let wire = Wire::default();
        let mut sent = Tap::new(Vec::new(), wire.clone(), Direction::Sent);
        sent.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\"}\n")
            .await
            .unwrap();
        let mut received = Tap::new(
            &b"{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{\"x\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"tools\":[]}}\n"[..],
            wire.clone(),
            Direction::Received,
        );
        let mut sink = Vec::new();
        received.read_to_end(&mut sink).await.unwrap();
        assert_eq!(
            wire.last_result("tools/list").unwrap(),
            serde_json::json!({"tools": []})
        );
        assert!(wire.last_result("ping").is_err());
    }
}
