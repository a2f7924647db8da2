//! Reading newline-delimited lines under a size cap, and feeding them to a session.

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

use super::MAX_FRAME;
use super::id::IdScanner;
use super::pressure::Pressure;
#[cfg(doc)]
use super::pressure::READ_AHEAD;

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
                let (chunk, done) = match newline(available) {
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
            Some(_) => newline(held).map_or(&[][..], |end| &held[end + 1..]),
            None => held,
        };
        let mut unread = line.buf.to_vec();
        unread.extend_from_slice(held);
        let taken = self.inner.buffer().len();
        self.inner.consume(taken);
        unread
    }
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

/// Where the first line end in `haystack` is.
fn newline(haystack: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', haystack)
}

#[cfg(test)]
mod tests {
    use super::super::top_level_id;
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
}
