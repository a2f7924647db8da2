//! Newline-delimited JSON-RPC framing, shared by every hop (agent to shim, shim to
//! engine, engine to server).
//!
//! One message per line. A line longer than [`MAX_FRAME`] bytes is skipped, never
//! buffered whole: the reader reports it and continues with the next line, so one bad
//! peer message costs one message, not the session.

use std::fmt;

use bytes::{Bytes, BytesMut};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::sync::mpsc;

/// The largest message Postern accepts on any hop: 8 MiB.
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// The longest key text read while looking for an oversized line's `id` (`"\u0069\u0064"` is
/// 12).
const MAX_KEY_TEXT: usize = 16;

/// Whether a key's text (between its quotes, escapes as written) is `id`.
fn key_is_id(text: &[u8]) -> bool {
    if text == b"id" {
        return true;
    }
    let quoted = [&b"\""[..], text, &b"\""[..]].concat();
    serde_json::from_slice::<String>(&quoted).is_ok_and(|key| key == "id")
}

/// The longest id text recovered from an oversized line (a longer id is not recovered).
const MAX_ID_TEXT: usize = 256;

/// One item read from a line stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its newline (and without a trailing `\r`).
    Frame(Bytes),
    /// A line over the size cap was skipped, never buffered whole; its top-level `id`, wherever
    /// it sat in the line (the TypeScript SDK writes it last), was read on the way.
    Oversize {
        /// Bytes the line had (at least the cap + 1).
        len: usize,
        /// The value of its top-level `id` member, when it had one that is a string or a
        /// number (of at most 256 characters).
        id: Option<Value>,
    },
}

/// Reads newline-delimited lines with a size cap. Blank lines are skipped. [`LineReader::next`]
/// is cancel-safe: the part of a line read so far stays with the reader.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    cap: usize,
    partial: Partial,
}

/// The line being read.
#[derive(Debug, Default)]
struct Partial {
    buf: BytesMut,
    len: usize,
    saw_any: bool,
    /// Once the line is over the cap, its bytes go through this instead of the buffer.
    scanner: Option<IdScanner>,
}

impl Partial {
    /// Adds `chunk` (no line end in it) to the line.
    fn feed(&mut self, chunk: &[u8], cap: usize) {
        self.saw_any = true;
        match &mut self.scanner {
            Some(scanner) => scanner.feed(chunk),
            None if self.len + chunk.len() <= cap => self.buf.extend_from_slice(chunk),
            None => {
                let mut fresh = IdScanner::default();
                fresh.feed(&self.buf);
                fresh.feed(chunk);
                self.buf = BytesMut::new();
                self.scanner = Some(fresh);
            }
        }
        self.len += chunk.len();
    }
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader with the standard cap, [`MAX_FRAME`].
    pub fn new(inner: R) -> Self {
        Self::with_cap(inner, MAX_FRAME)
    }

    /// A reader whose first line starts with `start` (read from the same peer before, by a
    /// reader that stopped inside a line): held as the reader holds a line it read in part, so
    /// a reader that stops at once gives it back ([`LineReader::take_unread`]).
    pub fn resuming(inner: R, start: &[u8]) -> Self {
        let mut reader = Self::new(inner);
        if !start.is_empty() {
            reader.partial.feed(start, reader.cap);
        }
        reader
    }

    /// A reader with an explicit cap (tests use small caps).
    pub fn with_cap(inner: R, cap: usize) -> Self {
        Self {
            inner,
            cap,
            partial: Partial::default(),
        }
    }

    /// The reader it reads from.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The next line; `None` at end of stream. A final line without a newline counts.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let terminated = loop {
                let available = self.inner.fill_buf().await?;
                if available.is_empty() {
                    break false;
                }
                let (chunk, done) = match memchr(available) {
                    Some(i) => (&available[..i], Some(i + 1)),
                    None => (available, None),
                };
                self.partial.feed(chunk, self.cap);
                let consumed = done.unwrap_or(available.len());
                self.inner.consume(consumed);
                if done.is_some() {
                    break true;
                }
            };
            let Partial {
                mut buf,
                len,
                saw_any,
                scanner,
            } = std::mem::take(&mut self.partial);
            if !saw_any && !terminated {
                return Ok(None);
            }
            if let Some(scanner) = scanner {
                return Ok(Some(Line::Oversize {
                    len,
                    id: scanner.id(),
                }));
            }
            // A line ending (`\r\n`), and any carriage returns just before it: whitespace after
            // the message to every reader, so a line passed on is read again as itself.
            while buf.last() == Some(&b'\r') {
                buf.truncate(buf.len() - 1);
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                if terminated {
                    continue;
                }
                return Ok(None);
            }
            return Ok(Some(Line::Frame(buf.freeze())));
        }
    }
}

impl<X: AsyncRead + Unpin> LineReader<BufReader<X>> {
    /// Takes every byte read from the peer and not yet returned as a line: the line being read
    /// and what the buffer holds after it. A line over the cap has no bytes to give back; what
    /// follows it does.
    pub fn take_unread(&mut self) -> Vec<u8> {
        let line = std::mem::take(&mut self.partial);
        let held = self.inner.buffer();
        let held = match line.scanner {
            Some(_) => memchr(held).map_or(&[][..], |end| &held[end + 1..]),
            None => held,
        };
        let mut unread = line.buf.to_vec();
        unread.extend_from_slice(held);
        let taken = self.inner.buffer().len();
        self.inner.consume(taken);
        unread
    }
}

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

/// Reads lines into a bounded queue ([`READ_AHEAD`] lines), waiting while any of `gates` (the
/// queues its lines lead to) is congested, so a peer that writes without end fills its own
/// pipe, never the engine's memory. At end of stream (or a read error) it sends `closed`, if
/// any, after the last line; it ends early once the receiver is gone.
pub async fn read_lines<R, T>(
    mut reader: LineReader<R>,
    tx: mpsc::Sender<T>,
    wrap: impl Fn(Line) -> T,
    closed: Option<T>,
    gates: Vec<Pressure>,
) where
    R: AsyncBufRead + Unpin,
{
    loop {
        for gate in &gates {
            gate.drained().await;
        }
        match reader.next().await {
            Ok(Some(line)) => {
                if tx.send(wrap(line)).await.is_err() {
                    return;
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    if let Some(closed) = closed {
        let _ = tx.send(closed).await;
    }
}

/// [`read_lines`] for a peer's reader that may be told to stop (an agent's, when the engine
/// stops): once `stop` resolves it reads no further from the peer, passes on every whole line
/// it already holds, and returns the bytes it holds of the next line (a shim takes those and
/// the rest of the pipe). Ends too, returning nothing, at the end of the stream or once the
/// receiver is gone.
pub async fn read_lines_until<X: AsyncRead + Unpin>(
    mut reader: LineReader<BufReader<X>>,
    tx: mpsc::Sender<Line>,
    gates: Vec<Pressure>,
    stop: impl Future<Output = ()>,
) -> Vec<u8> {
    tokio::pin!(stop);
    loop {
        let line = tokio::select! {
            biased;
            () = &mut stop => break,
            // Cancel-safe: a stop in the middle of a line leaves its bytes with the reader.
            line = async {
                for gate in &gates {
                    gate.drained().await;
                }
                reader.next().await
            } => line,
        };
        match line {
            Ok(Some(line)) => {
                if tx.send(line).await.is_err() {
                    return Vec::new();
                }
            }
            Ok(None) | Err(_) => return Vec::new(),
        }
    }
    let unread = reader.take_unread();
    let end = memchr::memrchr(b'\n', &unread).map_or(0, |end| end + 1);
    let whole = Bytes::copy_from_slice(&unread[..end]);
    for line in whole.split(|b| *b == b'\n') {
        let line = line.trim_ascii_end();
        if line.is_empty() {
            continue;
        }
        if tx.send(Line::Frame(whole.slice_ref(line))).await.is_err() {
            break;
        }
    }
    unread[end..].to_vec()
}

/// The top-level `id` of a line Postern cannot otherwise read (not JSON, a duplicate key, a
/// lone surrogate, a carriage return): a string or a number, wherever it sits in the object.
pub fn top_level_id(line: &[u8]) -> Option<Value> {
    let mut scanner = IdScanner::default();
    scanner.feed(line);
    scanner.finish_number();
    scanner.id()
}

/// Reads the top-level `id` member of a JSON object from its bytes, chunk by chunk, in
/// constant memory: for a line too large to keep, whose answer must still reach its request.
/// Nested `"id"` keys (inside `params` or `result`) are not it.
#[derive(Debug, Default)]
struct IdScanner {
    /// Nesting depth outside strings: 1 inside the top-level object.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1: whether the next string is a key (else a value).
    expect_key: bool,
    /// The key being read at depth 1 (kept only while it may still be `id`).
    key: Vec<u8>,
    /// The last top-level key read.
    last_key_is_id: bool,
    /// The text of the top-level `id` value, while it is read and once done.
    value: Vec<u8>,
    state: IdState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum IdState {
    #[default]
    Looking,
    /// Reading the id's value (a string, or a number's characters).
    Reading,
    /// The id was read whole.
    Done,
    /// An id too long, or not a scalar: none is recovered.
    Unreadable,
}

impl IdScanner {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.state == IdState::Done || self.state == IdState::Unreadable {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            let keep = self.depth == 1;
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            if keep && self.state == IdState::Reading {
                self.push_value(b);
                if !self.in_string {
                    self.state = IdState::Done;
                }
            } else if keep && self.expect_key && self.in_string {
                // Enough of the key to read `id` however it is escaped (`"\u0069d"`).
                if self.key.len() <= MAX_KEY_TEXT {
                    self.key.push(b);
                }
            } else if keep && self.expect_key {
                self.last_key_is_id = self.key.len() <= MAX_KEY_TEXT && key_is_id(&self.key);
                self.key.clear();
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && !self.expect_key && self.last_key_is_id {
                    self.state = IdState::Reading;
                    self.push_value(b);
                }
            }
            b'{' | b'[' => {
                if self.depth == 1 && !self.expect_key && self.last_key_is_id {
                    self.state = IdState::Unreadable;
                }
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = true;
                }
            }
            b'}' | b']' => {
                self.finish_number();
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => self.expect_key = false,
            b',' if self.depth == 1 => {
                self.finish_number();
                self.expect_key = true;
                self.last_key_is_id = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if self.depth == 1 && !self.expect_key && self.last_key_is_id => {
                self.state = IdState::Reading;
                self.push_value(b);
            }
            _ => {}
        }
    }

    fn push_value(&mut self, b: u8) {
        if self.value.len() >= MAX_ID_TEXT {
            self.state = IdState::Unreadable;
        } else {
            self.value.push(b);
        }
    }

    fn finish_number(&mut self) {
        if self.depth == 1 && self.state == IdState::Reading {
            self.state = IdState::Done;
        }
    }

    /// The id read, as JSON (a string or a number; `None` for anything else).
    fn id(&self) -> Option<Value> {
        if self.state != IdState::Done {
            return None;
        }
        match serde_json::from_slice(&self.value).ok()? {
            value @ (Value::String(_) | Value::Number(_)) => Some(value),
            _ => None,
        }
    }
}

fn memchr(haystack: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', haystack)
}

/// Why a line is not an acceptable JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all (or not UTF-8).
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// A carriage return inside the line. JSON takes it for whitespace, but some line
    /// readers (Python's universal newlines, Java's and .NET's `ReadLine`) take it for a line
    /// break: one line to Postern could be several messages to the server.
    #[error(
        "a bare carriage return (CR) at byte offset {0}: some servers read it as a line break, so Postern refuses the line"
    )]
    BareCarriageReturn(usize),
    /// A number a 64-bit float or integer cannot hold exactly: the value forwarded would not
    /// be the value sent.
    #[error(
        "the number {text} at byte offset {offset} cannot be carried exactly (integers must fit in 64 bits, other numbers in a 64-bit float)"
    )]
    InexactNumber {
        /// Where it starts in the line.
        offset: usize,
        /// Its text (at most 40 characters of it).
        text: String,
    },
    /// JSON, but not an object.
    #[error("a JSON-RPC message must be a JSON object, got {0}")]
    NotObject(&'static str),
    /// An object repeats a key. The value checked must be the value forwarded, and
    /// receivers disagree on which duplicate wins, so such messages are refused.
    #[error("duplicate key {0:?} in a JSON object")]
    DuplicateKey(String),
}

/// Parses one line as a JSON object, refusing duplicate keys at any depth, a carriage return
/// anywhere in the line, and numbers that would not survive the trip exactly
/// ([`FrameError`]): what parses is what Postern forwards, re-serialized by
/// [`encode`].
pub fn parse_object(line: &[u8]) -> Result<Map<String, Value>, FrameError> {
    scan(line)?;
    let mut de = serde_json::Deserializer::from_slice(line);
    let value = StrictValue.deserialize(&mut de).map_err(|e| {
        let msg = e.to_string();
        match msg.strip_prefix(DUPLICATE_PREFIX) {
            Some(rest) => FrameError::DuplicateKey(trim_location(rest).to_owned()),
            None => FrameError::NotJson(msg),
        }
    })?;
    de.end().map_err(|e| FrameError::NotJson(e.to_string()))?;
    match value {
        Value::Object(map) => Ok(map),
        Value::Array(_) => Err(FrameError::NotObject(
            "an array (batches are not part of MCP since 2025-06-18)",
        )),
        Value::String(_) => Err(FrameError::NotObject("a string")),
        Value::Number(_) => Err(FrameError::NotObject("a number")),
        Value::Bool(_) => Err(FrameError::NotObject("a boolean")),
        Value::Null => Err(FrameError::NotObject("null")),
    }
}

/// Serializes a value as one line the way Postern forwards every message: compact, keys in
/// the order they were parsed, numbers as parsed (see [`scan`]), and every character some
/// line reader takes for a line break escaped: CR and LF as JSON always escapes them, and
/// U+0085, U+2028 and U+2029, which JSON allows raw inside strings.
pub fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Bytes {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, LineSafe);
    // Serializing a `Value` into a Vec cannot fail (its keys are strings).
    if serde::Serialize::serialize(value, &mut ser).is_err() {
        out.clear();
    }
    Bytes::from(out)
}

/// serde_json's compact formatter, escaping U+0085, U+2028 and U+2029 inside strings too.
struct LineSafe;

impl serde_json::ser::Formatter for LineSafe {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let bytes = fragment.as_bytes();
        if memchr::memchr2(0xC2, 0xE2, bytes).is_none() {
            return writer.write_all(bytes);
        }
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            // U+0085 is C2 85; U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
            let escape = match bytes[i] {
                0xC2 if bytes.get(i + 1) == Some(&0x85) => Some(("\\u0085", 2)),
                0xE2 if bytes.get(i + 1) == Some(&0x80) => match bytes.get(i + 2) {
                    Some(0xA8) => Some(("\\u2028", 3)),
                    Some(0xA9) => Some(("\\u2029", 3)),
                    _ => None,
                },
                _ => None,
            };
            match escape {
                Some((text, len)) => {
                    writer.write_all(&bytes[start..i])?;
                    writer.write_all(text.as_bytes())?;
                    i += len;
                    start = i;
                }
                None => i += 1,
            }
        }
        writer.write_all(&bytes[start..])
    }
}

/// What JSON parsing alone lets through, checked over the raw line: a carriage return
/// anywhere (JSON forbids it raw inside strings and takes it for whitespace outside them),
/// and numbers that would not be forwarded as sent. Integers must fit in 64 bits (`i64` or
/// `u64`); any other number must be exactly the value its nearest 64-bit float prints as
/// (`0.1` is, `1.00000000000000000001` is not). Malformed numbers are left to the parser,
/// which names them better.
pub fn scan(line: &[u8]) -> Result<(), FrameError> {
    if let Some(offset) = line.iter().position(|&b| b == b'\r') {
        return Err(FrameError::BareCarriageReturn(offset));
    }
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b'"' => {
                i += 1;
                // To the closing quote, stepping over escapes.
                while let Some(at) = memchr::memchr2(b'"', b'\\', &line[i.min(line.len())..]) {
                    i += at;
                    if line[i] == b'"' {
                        break;
                    }
                    i += 2;
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < line.len()
                    && matches!(line[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let text = std::str::from_utf8(&line[start..i]).unwrap_or_default();
                if !number_is_exact(text) {
                    return Err(FrameError::InexactNumber {
                        offset: start,
                        text: text.chars().take(40).collect(),
                    });
                }
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Whether a JSON number's text survives parsing and printing (see [`scan`]), judged with the
/// very parser and printer that forward it (serde_json's). Text that is not a number counts as
/// exact: the parser refuses it with its own message.
fn number_is_exact(text: &str) -> bool {
    if !text.contains(['.', 'e', 'E']) {
        if text == "-0" {
            return false; // read back as the float -0.0: an integer would become a float
        }
        return text.parse::<i64>().is_ok()
            || text.parse::<u64>().is_ok()
            || decimal(text).is_none();
    }
    match serde_json::from_str::<f64>(text) {
        Ok(float) if float.is_finite() => match serde_json::Number::from_f64(float) {
            Some(printed) => decimal(text) == decimal(&printed.to_string()),
            None => false,
        },
        _ => true,
    }
}

/// A decimal number's value as (negative, significant digits, power of ten of the last
/// digit), zero as (false, "", 0); `None` when the text is not a JSON-like number.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let trimmed = digits.trim_start_matches('0').trim_end_matches('0');
    if trimmed.is_empty() {
        return Some((false, String::new(), 0));
    }
    let trailing = digits.trim_end_matches('0').len();
    let power = exponent
        .saturating_sub(frac.len() as i64)
        .saturating_add((digits.len() - trailing) as i64);
    Some((negative, trimmed.to_owned(), power))
}

const DUPLICATE_PREFIX: &str = "\u{1}duplicate:";

fn trim_location(s: &str) -> &str {
    // serde_json appends " at line L column C" to custom errors.
    s.rsplit_once(" at line ").map_or(s, |(key, _)| key)
}

/// A `serde_json::Value` seed that fails on duplicate object keys.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // The object's own map tells a key seen before: one lookup, no second set.
            match out.entry(key) {
                Entry::Occupied(seen) => {
                    let key = seen.key();
                    return Err(de::Error::custom(format_args!("{DUPLICATE_PREFIX}{key}")));
                }
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(StrictValue)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_read_in_part_when_the_wait_is_cancelled_is_read_whole_later() {
        use tokio::io::AsyncWriteExt;
        let (mut peer, ours) = tokio::io::duplex(64);
        let mut reader = LineReader::new(BufReader::new(ours));
        peer.write_all(b"{\"id\":1,").await.unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), reader.next());
        assert!(waited.await.is_err(), "no whole line yet");
        peer.write_all(b"\"method\":\"ping\"}\n{\"id\"")
            .await
            .unwrap();
        let line = reader.next().await.unwrap();
        assert_eq!(line, Some(frame(r#"{"id":1,"method":"ping"}"#)));
        // Cancelled again in the middle of the next line: what was read of it is given back.
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), reader.next());
        assert!(waited.await.is_err());
        assert_eq!(reader.take_unread(), br#"{"id""#);
    }

    /// A reader resuming a line another reader stopped inside: the line reads whole, and a
    /// reader stopped before it read anything gives the start back (nothing is lost however
    /// soon a stop comes).
    #[tokio::test]
    async fn a_resumed_line_reads_whole_or_is_given_back_whole() {
        let rest: &[u8] = b"\"method\":\"ping\"}\n";
        let mut reader = LineReader::resuming(BufReader::new(rest), b"{\"id\":1,");
        let line = reader.next().await.unwrap();
        assert_eq!(line, Some(frame(r#"{"id":1,"method":"ping"}"#)));

        let (_peer, ours) = tokio::io::duplex(64);
        let mut reader = LineReader::resuming(BufReader::new(ours), b"{\"id\":1,");
        assert_eq!(reader.take_unread(), br#"{"id":1,"#);
    }

    async fn read_all(input: &[u8], cap: usize) -> Vec<Line> {
        let mut reader = LineReader::with_cap(input, cap);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.expect("read") {
            out.push(line);
        }
        out
    }

    fn frame(s: &str) -> Line {
        Line::Frame(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[tokio::test]
    async fn splits_lines_skips_blanks_and_strips_carriage_returns() {
        let lines = read_all(b"{\"a\":1}\n\n  \r\n{\"b\":2}\r\r\n{\"c\":3}", 64).await;
        assert_eq!(
            lines,
            [frame("{\"a\":1}"), frame("{\"b\":2}"), frame("{\"c\":3}")]
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_reported_and_the_next_line_still_arrives() {
        let big = format!("{{\"id\":7,\"x\":\"{}\"}}", "y".repeat(100));
        let input = format!("{big}\n{{\"ok\":true}}\n");
        let lines = read_all(input.as_bytes(), 32).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            Line::Oversize {
                len: big.len(),
                id: Some(serde_json::json!(7))
            }
        );
        assert_eq!(lines[1], frame("{\"ok\":true}"));
    }

    #[tokio::test]
    async fn the_top_level_id_of_an_oversized_line_is_read_wherever_it_sits() {
        let filler = "y".repeat(200);
        for (line, id) in [
            // The TypeScript SDK writes the id last; nested ids are not it.
            (
                format!(
                    r#"{{"jsonrpc":"2.0","result":{{"id":"inner","t":"{filler}","a":[{{"id":9}}]}},"id":"outer"}}"#
                ),
                Some(serde_json::json!("outer")),
            ),
            (
                format!(r#"{{ "result" : "{filler}\"id\":3" , "id" : -12 }}"#),
                Some(serde_json::json!(-12)),
            ),
            (
                format!(r#"{{"id":"a\"b","x":"{filler}"}}"#),
                Some(serde_json::json!("a\"b")),
            ),
            (format!(r#"{{"x":"{filler}","id":null}}"#), None),
            (format!(r#"{{"x":"{filler}","id":{{"a":1}}}}"#), None),
            (format!(r#"{{"x":"{filler}","idx":1}}"#), None),
            (
                format!(r#"{{"x":"{filler}","\u0069d":5}}"#),
                Some(serde_json::json!(5)),
            ),
            (format!(r#"{{"x":"{filler}"}}"#), None),
        ] {
            let lines = read_all(format!("{line}\n").as_bytes(), 64).await;
            assert_eq!(
                lines,
                [Line::Oversize {
                    len: line.len(),
                    id: id.clone()
                }],
                "{line}"
            );
            assert_eq!(top_level_id(line.as_bytes()), id, "{line}");
        }
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_accepted() {
        let line = "x".repeat(32);
        assert_eq!(
            read_all(format!("{line}\n").as_bytes(), 32).await,
            [frame(&line)]
        );
    }

    #[test]
    fn parses_objects_and_names_what_else_it_got() {
        assert!(parse_object(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(matches!(
            parse_object(b"not json"),
            Err(FrameError::NotJson(_))
        ));
        assert!(matches!(
            parse_object(b"[1,2]"),
            Err(FrameError::NotObject(_))
        ));
        assert!(matches!(
            parse_object(b"42"),
            Err(FrameError::NotObject("a number"))
        ));
        assert!(matches!(
            parse_object(b"{} {}"),
            Err(FrameError::NotJson(_))
        ));
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert_eq!(
            parse_object(br#"{"id":1,"method":"tools/call","method":"ping"}"#),
            Err(FrameError::DuplicateKey("method".into()))
        );
        assert_eq!(
            parse_object(br#"{"params":{"arguments":{"target":"preview","target":"production"}}}"#),
            Err(FrameError::DuplicateKey("target".into()))
        );
        // Same key in sibling objects is fine.
        assert!(parse_object(br#"{"a":{"k":1},"b":{"k":2}}"#).is_ok());
    }

    #[test]
    fn a_carriage_return_anywhere_is_refused_naming_its_offset() {
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"resources/list\",\"params\":{\"x\":\r{}}}";
        let at = line.iter().position(|&b| b == b'\r').expect("a CR");
        let refused = parse_object(line).expect_err("refused");
        assert_eq!(refused, FrameError::BareCarriageReturn(at));
        assert!(
            refused.to_string().contains(&format!("offset {at}")),
            "{refused}"
        );
    }

    #[test]
    fn numbers_are_carried_exactly_or_refused() {
        for exact in [
            "0",
            "1",
            "-1",
            "-0.0",
            "1.0",
            "0.1",
            "-2.5e-3",
            "1E5",
            "1e+5",
            "0.30000000000000004",
            "9007199254740993",
            "18446744073709551615",
            "-9223372036854775808",
            "1.5e300",
            "0.000001",
            "123456.789",
        ] {
            let line = format!("{{\"n\":{exact}}}");
            let parsed = parse_object(line.as_bytes()).unwrap_or_else(|e| panic!("{exact}: {e}"));
            // What goes on is the same number.
            let again = encode(&parsed);
            let back = parse_object(&again).expect("reparses");
            assert_eq!(parsed, back, "{exact}");
            let sent: f64 = exact.parse().expect("a float");
            let forwarded: f64 = back["n"].to_string().parse().expect("a float");
            assert!(sent == forwarded, "{exact} became {}", back["n"]);
        }
        for inexact in [
            "-0",
            "-26077749241640.313",
            "18446744073709551616",
            "-9223372036854775809",
            "100000000000000000001",
            "1.00000000000000000001",
            "0.1000000000000000000000001",
        ] {
            let line = format!("{{\"a\":[1,{{\"n\":{inexact}}}]}}");
            match parse_object(line.as_bytes()) {
                Err(FrameError::InexactNumber { offset, text }) => {
                    assert_eq!(
                        (offset, text.as_str()),
                        (line.find(inexact).expect("in"), inexact)
                    );
                }
                other => panic!("{inexact}: {other:?}"),
            }
        }
        // Digits inside strings are text, not numbers.
        assert!(parse_object(br#"{"s":"100000000000000000001\"1e999"}"#).is_ok());
    }

    #[test]
    fn encoding_escapes_every_character_a_line_reader_breaks_on() {
        let value =
            serde_json::json!({"k\u{2028}": "a\rb\nc\u{85}d\u{2028}e\u{2029}f\u{7f}g\u{e9}"});
        let line = encode(&value);
        let text = std::str::from_utf8(&line).expect("utf-8");
        assert_eq!(
            text,
            "{\"k\\u2028\":\"a\\rb\\nc\\u0085d\\u2028e\\u2029f\u{7f}g\u{e9}\"}"
        );
        assert_eq!(parse_object(&line).map(Value::Object), Ok(value));
    }

    proptest::proptest! {
        /// Whatever the strings hold, the forwarded line is one line to every line reader,
        /// and parses back to the value decided.
        #[test]
        fn a_forwarded_line_is_one_line_to_any_reader(
            key in "\\PC{0,8}",
            text in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::char::any(),
                    proptest::sample::select(vec!['\r', '\n', '\u{85}', '\u{2028}', '\u{2029}', '\u{0}', '\u{1b}']),
                ],
                0..24,
            ),
        ) {
            let text: String = text.into_iter().collect();
            let value = serde_json::json!({"jsonrpc": "2.0", "id": 1, "params": {key: text}});
            let line = encode(&value);
            let as_text = std::str::from_utf8(&line).expect("utf-8");
            let breaks = ['\r', '\n', '\u{85}', '\u{2028}', '\u{2029}'];
            proptest::prop_assert!(!as_text.contains(breaks), "{}", as_text);
            proptest::prop_assert_eq!(parse_object(&line).map(Value::Object), Ok(value));
        }
    }
}
