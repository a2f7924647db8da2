//! The properties one input must keep, checked with the gateway's real line reader and parser.
//!
//! The input is read as the gate reads a peer: [`LineReader`] (the 8 MiB cap, the whole input
//! at hand), each line through [`Message::from_line`]. Then:
//!
//! 1. **Nothing panics**; refusing a line is fine.
//! 2. **Every reader reads back what the gate decided.** The line forwarded for an accepted
//!    message (`msg.line`, then a newline) is read by each receiving peer's line reader: split
//!    on `\n` (the gate's own [`LineReader`], Rust's `lines`, the TypeScript SDK), on `\r`, `\n`
//!    and `\r\n` (Python's universal newlines, Java's and .NET's `ReadLine`), and on every
//!    break `str.splitlines` knows (U+0085, U+2028, U+2029, VT, FF, FS, GS, RS as well). Each
//!    yields exactly one line, `msg.line` itself, which plain `serde_json` parses to exactly
//!    `msg.body` (key order and number type included). The input itself parses, with plain
//!    `serde_json`, to that same value, and `Message::parse(msg.line)` gives back the same
//!    body, line and kind. Every number is forwarded with its exact value and its kind (an
//!    integer stays an integer for a reader such as Python's that tells them apart).
//! 3. **Ids are ones every peer reads alike**: an accepted request's or response's id is a
//!    string or an integer within ±2^53, and it is the body's `id`.
//! 4. **No accepted line holds a line break** (CR, LF, U+0085, U+2028, U+2029) or any other
//!    raw control character below U+0020.
//! 5. **The kind is the body's**: a request has a string method and an id, a notification a
//!    method and no id, a response an id and exactly one of `result` and `error`.
//! 6. **Refusals are sound and answerable**: a line refused as not JSON is not JSON to plain
//!    `serde_json` either, and the error answer is itself a line-safe JSON-RPC error naming
//!    the refused id (or null).
//! 7. **The oversize path agrees**: read again with a small cap and small chunks, the lines are
//!    what a reference splitter says (a line over the cap skipped and reported with its
//!    length), and the top-level id recovered from an oversized line is the one
//!    [`top_level_id`] reads from it whole. On an accepted message, `top_level_id` never reads
//!    an id other than the parser's, and finds the parser's in the gate's own line.
//! 8. **A hop changes nothing**: a line as read, passed on with a newline (the shim forwards
//!    an agent's lines so), is read again as the same line.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use postern_gateway::MAX_FRAME;
use postern_gateway::framing::{Line, LineReader, top_level_id};
use postern_gateway::message::{Id, Kind, Message, Rejected, code};
use postern_gateway::method;
use serde_json::{Map, Value};

/// What one input amounted to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lines the gate read (at the 8 MiB cap).
    pub lines: u64,
    /// Lines it accepted as messages.
    pub accepted: u64,
    /// Lines it refused.
    pub refused: u64,
}

impl Tally {
    /// Adds another tally to this one.
    pub fn add(&mut self, other: Tally) {
        self.lines += other.lines;
        self.accepted += other.accepted;
        self.refused += other.refused;
    }
}

/// A property an input broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which property (a short name).
    pub property: &'static str,
    /// What happened, with the line concerned.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "property `{}` broken: {}", self.property, self.detail)
    }
}

/// Checks every property on one input (see the module documentation). A panic anywhere, in
/// the gateway's code or in this check, is reported as a broken `never panics`.
pub fn check(input: &[u8]) -> Result<Tally, Violation> {
    match catch_unwind(AssertUnwindSafe(|| check_unguarded(input))) {
        Ok(outcome) => outcome,
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            fail("never panics", format!("panicked: {text}"))
        }
    }
}

fn check_unguarded(input: &[u8]) -> Result<Tally, Violation> {
    let mut tally = Tally::default();
    let lines = read_lines(input, MAX_FRAME, None)?;
    ensure_lines_match(input, MAX_FRAME, &lines)?;
    for line in lines {
        tally.lines += 1;
        let raw = match &line {
            Line::Frame(raw) => raw.clone(),
            Line::Oversize { .. } => Bytes::new(),
        };
        if !raw.is_empty() {
            check_hop(&raw)?;
        }
        match Message::from_line(line) {
            Ok(msg) => {
                tally.accepted += 1;
                check_accepted(&raw, &msg)?;
            }
            Err(rejected) => {
                tally.refused += 1;
                check_refused(&raw, &rejected)?;
            }
        }
    }
    // The same input read with a small cap, a few bytes at a time: the oversize path.
    let (cap, chunk) = small_reader(input);
    let lines = read_lines(input, cap, Some(chunk))?;
    ensure_lines_match(input, cap, &lines)?;
    for line in &lines {
        if let Line::Oversize { len, id } = line {
            check_answer(&Rejected::oversize(*len, id.as_ref()))?;
        }
    }
    Ok(tally)
}

/// Property 8: a line passed on as read (the shim forwards an agent's line with a newline of
/// its own) is read again as the same line, so every hop decides the same bytes.
fn check_hop(raw: &Bytes) -> Result<(), Violation> {
    let again = read_lines(&[&raw[..], b"\n"].concat(), MAX_FRAME, None)?;
    if again == [Line::Frame(raw.clone())] {
        return Ok(());
    }
    fail(
        "a line passed on is read again as itself",
        format!("{} passed on with a newline reads as {again:?}", show(raw)),
    )
}

fn check_accepted(raw: &[u8], msg: &Message) -> Result<(), Violation> {
    let line = &msg.line[..];
    ensure_line_safe(line, "accepted lines hold no line break")?;
    for (reader, pieces) in [
        ("split on \\n", split_lf(line)),
        ("universal newlines", split_universal(line)),
        ("str.splitlines", split_unicode(line)),
    ] {
        if pieces != [line] {
            return fail(
                "every reader reads one line",
                format!(
                    "{reader} reads {} line(s) {:?} from the forwarded {}",
                    pieces.len(),
                    pieces.iter().map(|p| show(p)).collect::<Vec<_>>(),
                    show(line)
                ),
            );
        }
    }
    let again = read_lines(&[line, b"\n"].concat(), MAX_FRAME, Some(7))?;
    if again != [Line::Frame(msg.line.clone())] {
        return fail(
            "every reader reads one line",
            format!(
                "the gate's LineReader reads {again:?} from the forwarded {}",
                show(line)
            ),
        );
    }
    let body = Value::Object(msg.body.clone());
    match serde_json::from_slice::<Value>(line) {
        Ok(read) if same(&read, &body) => {}
        other => {
            return fail(
                "what is read back is what was decided",
                format!("the forwarded {} reads as {other:?}", show(line)),
            );
        }
    }
    match serde_json::from_slice::<Value>(raw) {
        Ok(sent) if same(&sent, &body) => {}
        other => {
            return fail(
                "what is decided is what was sent",
                format!(
                    "the gate accepted {} as {}, plain serde_json reads {other:?}",
                    show(raw),
                    show(line)
                ),
            );
        }
    }
    check_numbers(raw, line)?;
    match Message::parse(msg.line.clone()) {
        Ok(again)
            if again.line == msg.line
                && again.kind == msg.kind
                && same(&Value::Object(again.body.clone()), &body) => {}
        other => {
            return fail(
                "parsing the forwarded line is idempotent",
                format!("{} parses again as {other:?}", show(line)),
            );
        }
    }
    check_kind(msg)?;
    check_scanned_id(raw, msg)
}

/// Property 2, for numbers: each number in the input is forwarded with its value and its
/// kind. A reader that tells integers from other numbers (Python's `json`: `int` or `float`)
/// reads the same type from both: `1.0` stays a float, `-0` stays an integer.
fn check_numbers(raw: &[u8], line: &[u8]) -> Result<(), Violation> {
    let (sent, forwarded) = (numbers(raw), numbers(line));
    let differ = sent.len() != forwarded.len()
        || sent.iter().zip(&forwarded).any(|(a, b)| {
            is_integer(a) != is_integer(b) || decimal(a).is_none() || decimal(a) != decimal(b)
        });
    if !differ {
        return Ok(());
    }
    let pairs: Vec<String> = sent
        .iter()
        .zip(&forwarded)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("{} as {}", show(a), show(b)))
        .collect();
    fail(
        "numbers are forwarded exactly, integers as integers",
        format!(
            "{} is forwarded as {}: {}",
            show(raw),
            show(line),
            pairs.join(", ")
        ),
    )
}

/// The number tokens of a JSON text, outside strings, in order.
fn numbers(text: &[u8]) -> Vec<&[u8]> {
    let mut tokens = Vec::new();
    let (mut in_string, mut escaped, mut start) = (false, false, None);
    for (i, &b) in text.iter().enumerate() {
        let numeric = !in_string && (b.is_ascii_digit() || b"+-.eE".contains(&b));
        match (start, numeric) {
            (None, true) => start = Some(i),
            (Some(from), false) => {
                tokens.push(&text[from..i]);
                start = None;
            }
            _ => {}
        }
        if escaped {
            escaped = false;
        } else if in_string && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            in_string = !in_string;
        }
    }
    tokens.extend(start.map(|from| &text[from..]));
    // The `e` of `true` and `false` is not a number.
    tokens.retain(|t| t[0] == b'-' || t[0].is_ascii_digit());
    tokens
}

/// Whether a number is written as an integer (no fraction, no exponent).
fn is_integer(number: &[u8]) -> bool {
    !number.iter().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

/// A number's exact value: (negative, significant digits, power of ten of the last one); a
/// zero keeps its sign.
fn decimal(number: &[u8]) -> Option<(bool, Vec<u8>, i128)> {
    let (negative, rest) = match number.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, number),
    };
    let (mantissa, exponent) = match rest.iter().position(|b| matches!(b, b'e' | b'E')) {
        Some(at) => (
            &rest[..at],
            std::str::from_utf8(&rest[at + 1..])
                .ok()?
                .parse::<i128>()
                .ok()?,
        ),
        None => (rest, 0),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &[][..]),
    };
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    if int.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let first = digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(digits.len());
    let last = digits
        .iter()
        .rposition(|&d| d != b'0')
        .map_or(first, |at| at + 1);
    let power = exponent - frac.len() as i128 + (digits.len() - last) as i128;
    Some((
        negative,
        digits[first..last].to_vec(),
        if first == last { 0 } else { power },
    ))
}

/// Properties 3 and 5: the kind is the body's, and ids are strings or integers within ±2^53.
fn check_kind(msg: &Message) -> Result<(), Violation> {
    let body = &msg.body;
    let wrong = |what: String| fail("the kind is the body's", format!("{what}: {:?}", msg.kind));
    if body.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return wrong(format!(
            "accepted without \"jsonrpc\":\"2.0\": {}",
            show(&msg.line)
        ));
    }
    let id = match &msg.kind {
        Kind::Request { id, method } => {
            if body.get("method").and_then(Value::as_str) != Some(method.as_str()) {
                return wrong(format!("the body's method differs in {}", show(&msg.line)));
            }
            // Routing is total: every method has a route.
            let _ = method::route(method);
            Some(id)
        }
        Kind::Notification { method } => {
            if body.contains_key("id")
                || body.get("method").and_then(Value::as_str) != Some(method.as_str())
            {
                return wrong(format!("not a notification: {}", show(&msg.line)));
            }
            let _ = method::forwards_notification(method);
            None
        }
        Kind::Response { id } => {
            if body.contains_key("method")
                || body.contains_key("result") == body.contains_key("error")
            {
                return wrong(format!("not a response: {}", show(&msg.line)));
            }
            Some(id)
        }
    };
    match id {
        Some(id) if !id_is_portable(id.value()) || body.get("id") != Some(id.value()) => fail(
            "ids are strings or integers within ±2^53",
            format!("accepted id {} in {}", id.value(), show(&msg.line)),
        ),
        _ => Ok(()),
    }
}

/// Property 7 on accepted messages: the constant-memory id scanner never reads an id the
/// parser did not, and reads the parser's from the gate's own line.
fn check_scanned_id(raw: &[u8], msg: &Message) -> Result<(), Violation> {
    let parsed = match msg.body.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        _ => None,
    };
    let short = parsed.filter(|id| id.to_string().len() <= 128);
    let from_line = top_level_id(&msg.line);
    if from_line.as_ref() != short && !(short.is_none() && from_line.as_ref() == parsed) {
        return fail(
            "the oversize id scanner agrees with the parser",
            format!(
                "top_level_id reads {from_line:?} from the forwarded {}, whose id is {parsed:?}",
                show(&msg.line)
            ),
        );
    }
    match top_level_id(raw) {
        Some(scanned) if Some(&scanned) != parsed => fail(
            "the oversize id scanner agrees with the parser",
            format!(
                "top_level_id reads {scanned} from {}, whose id is {parsed:?}",
                show(raw)
            ),
        ),
        _ => Ok(()),
    }
}

fn check_refused(raw: &[u8], rejected: &Rejected) -> Result<(), Violation> {
    if ![code::PARSE_ERROR, code::INVALID_REQUEST].contains(&rejected.code) {
        return fail(
            "refusals are sound",
            format!("{} refused with code {}", show(raw), rejected.code),
        );
    }
    if rejected.code == code::PARSE_ERROR && serde_json::from_slice::<Value>(raw).is_ok() {
        return fail(
            "refusals are sound",
            format!(
                "{} refused as not JSON ({}), but it is JSON",
                show(raw),
                rejected.reason
            ),
        );
    }
    check_answer(rejected)
}

/// The error answer to a refused line is a line-safe JSON-RPC error with its id (or null).
fn check_answer(rejected: &Rejected) -> Result<(), Violation> {
    let answer = rejected.answer();
    ensure_line_safe(&answer, "error answers are line-safe")?;
    let read: Value = serde_json::from_slice(&answer).unwrap_or_default();
    let id = rejected.id.as_ref().map_or(&Value::Null, Id::value);
    if read["jsonrpc"] != "2.0"
        || &read["id"] != id
        || read["error"]["code"] != rejected.code
        || read["error"]["message"].as_str().is_none_or(str::is_empty)
    {
        return fail(
            "error answers are JSON-RPC errors",
            format!(
                "the answer to a refusal ({rejected:?}) is {}",
                show(&answer)
            ),
        );
    }
    Ok(())
}

/// Property 4: UTF-8, no control character below U+0020 (CR and LF included), no U+0085,
/// U+2028 or U+2029.
fn ensure_line_safe(line: &[u8], property: &'static str) -> Result<(), Violation> {
    let Ok(text) = std::str::from_utf8(line) else {
        return fail(property, format!("not UTF-8: {}", show(line)));
    };
    match text
        .char_indices()
        .find(|&(_, c)| c < ' ' || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}'))
    {
        Some((at, c)) => fail(property, format!("{c:?} at byte {at} of {}", show(line))),
        None => Ok(()),
    }
}

/// Whether every JSON reader holds this id alike: a string, or an integer within ±2^53.
fn id_is_portable(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some_and(|n| n.unsigned_abs() <= 1 << 53)
}

/// Equality that also holds key order, a number's type (integer or float) and a zero's sign.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => same_map(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Number(x), Value::Number(y)) => match (x.is_f64(), y.is_f64()) {
            (true, true) => x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits),
            (false, false) => x == y,
            _ => false,
        },
        _ => a == b,
    }
}

fn same_map(x: &Map<String, Value>, y: &Map<String, Value>) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|((ka, a), (kb, b))| ka == kb && same(a, b))
}

/// The messages the engine accepts from an agent's input, in order, read as `postern mcp`
/// passes it on: the shim reads each line and forwards its bytes and a newline (an oversized
/// line it answers itself), and the engine reads them again.
pub fn accepted_through_shim(input: &[u8]) -> Vec<Message> {
    let mut accepted = Vec::new();
    for line in read_lines(input, MAX_FRAME, None).unwrap_or_default() {
        let Line::Frame(raw) = line else { continue };
        let hop = read_lines(&[&raw[..], b"\n"].concat(), MAX_FRAME, None).unwrap_or_default();
        accepted.extend(
            hop.into_iter()
                .filter_map(|line| Message::from_line(line).ok()),
        );
    }
    accepted
}

// ---- line readers ----

/// How the gate splits a stream, by a simpler model: on `\n`; every `\r` just before it
/// dropped (part of the line ending); blank lines (ASCII whitespace only) skipped; a line over
/// `cap` bytes (its `\r`s counted) reported with its length and the id [`top_level_id`] reads
/// from it.
fn ensure_lines_match(input: &[u8], cap: usize, lines: &[Line]) -> Result<(), Violation> {
    let mut expected = Vec::new();
    for segment in segments(input) {
        if segment.len() > cap {
            expected.push((
                Line::Oversize {
                    len: segment.len(),
                    id: top_level_id(segment),
                },
                segment,
            ));
            continue;
        }
        let end = segment
            .iter()
            .rposition(|&b| b != b'\r')
            .map_or(0, |at| at + 1);
        let line = &segment[..end];
        if !line.iter().all(u8::is_ascii_whitespace) {
            expected.push((Line::Frame(Bytes::copy_from_slice(line)), segment));
        }
    }
    let matches = expected.len() == lines.len()
        && expected
            .iter()
            .zip(lines)
            .all(|((want, segment), got)| match (want, got) {
                (
                    Line::Oversize { len, id },
                    Line::Oversize {
                        len: got_len,
                        id: got_id,
                    },
                ) => len == got_len && (id == got_id || unfinished_number(segment, id, got_id)),
                _ => want == got,
            });
    if matches {
        return Ok(());
    }
    fail(
        "the line reader splits as specified",
        format!(
            "with a cap of {cap}, {} reads as {lines:?}, expected {:?}",
            show(input),
            expected.iter().map(|(line, _)| line).collect::<Vec<_>>()
        ),
    )
}

/// A line that ends inside its top-level id's number (`{"id":12`): the reader, which never
/// saw the number end, recovers nothing, where `top_level_id` takes the end of the line for
/// the number's end. Either is fine for a line that is not JSON.
fn unfinished_number(segment: &[u8], whole: &Option<Value>, read: &Option<Value>) -> bool {
    read.is_none()
        && matches!(whole, Some(Value::Number(_)))
        && segment
            .iter()
            .rev()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(u8::is_ascii_digit)
}

/// The input's `\n`-separated segments, the last one only if it is not empty.
fn segments(input: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces.into_iter()
}

/// Reads every line with the gateway's [`LineReader`]: `cap` bytes at most per line, the
/// input handed over `chunk` bytes at a time (all at once when `None`).
fn read_lines(input: &[u8], cap: usize, chunk: Option<usize>) -> Result<Vec<Line>, Violation> {
    match chunk {
        None => read_all(LineReader::with_cap(input, cap)),
        Some(chunk) => read_all(LineReader::with_cap(
            tokio::io::BufReader::with_capacity(chunk, input),
            cap,
        )),
    }
}

fn read_all<R: tokio::io::AsyncBufRead + Unpin>(
    mut reader: LineReader<R>,
) -> Result<Vec<Line>, Violation> {
    let mut lines = Vec::new();
    loop {
        match now(reader.next()) {
            Some(Ok(Some(line))) => lines.push(line),
            Some(Ok(None)) => return Ok(lines),
            Some(Err(e)) => return fail("the line reader splits as specified", e.to_string()),
            None => {
                return fail(
                    "the line reader splits as specified",
                    "reading bytes in memory waited (a driver bug)".into(),
                );
            }
        }
    }
}

/// Polls a future once: reading bytes already in memory never waits.
fn now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// The small cap and chunk size an input is read with again: chosen by its bytes, so that a
/// saved input replays the same way.
fn small_reader(input: &[u8]) -> (usize, usize) {
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    const CAPS: [usize; 8] = [0, 1, 2, 8, 16, 64, 256, 4096];
    (CAPS[(hash % 8) as usize], 1 + (hash >> 8) as usize % 64)
}

/// The line (with its newline) split on `\n`, empty pieces dropped.
fn split_lf(line: &[u8]) -> Vec<&[u8]> {
    split_on(line, |rest| usize::from(rest[0] == b'\n'))
}

/// Python's universal newlines (and Java's, .NET's and Node's readline): `\r\n`, `\r`, `\n`.
fn split_universal(line: &[u8]) -> Vec<&[u8]> {
    split_on(line, |rest| match rest {
        [b'\r', b'\n', ..] => 2,
        [b'\r' | b'\n', ..] => 1,
        _ => 0,
    })
}

/// Python's `str.splitlines`: universal newlines and VT, FF, FS, GS, RS, U+0085, U+2028,
/// U+2029 (the line is UTF-8 here: checked before).
fn split_unicode(line: &[u8]) -> Vec<&[u8]> {
    split_on(line, |rest| match rest {
        [b'\r', b'\n', ..] => 2,
        [b'\r' | b'\n' | 0x0b | 0x0c | 0x1c | 0x1d | 0x1e, ..] => 1,
        [0xc2, 0x85, ..] => 2,
        [0xe2, 0x80, 0xa8 | 0xa9, ..] => 3,
        _ => 0,
    })
}

/// Splits `line` followed by a newline wherever `brk` says a break of that many bytes
/// starts; drops empty pieces.
fn split_on(line: &[u8], brk: impl Fn(&[u8]) -> usize) -> Vec<&[u8]> {
    let stream = [line, b"\n"].concat();
    let mut pieces = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < stream.len() {
        match brk(&stream[i..]) {
            0 => i += 1,
            n => {
                pieces.push(start..i);
                i += n;
                start = i;
            }
        }
    }
    pieces.push(start..stream.len());
    pieces
        .into_iter()
        .filter(|r| !r.is_empty())
        .map(|r| &line[r.start.min(line.len())..r.end.min(line.len())])
        .collect()
}

/// A line for a message: escaped, and cut after 600 bytes.
pub fn show(bytes: &[u8]) -> String {
    const SHOWN: usize = 600;
    let shown: String = bytes[..bytes.len().min(SHOWN)].escape_ascii().to_string();
    if bytes.len() > SHOWN {
        format!("b\"{shown}\"... ({} bytes)", bytes.len())
    } else {
        format!("b\"{shown}\"")
    }
}

fn fail<T>(property: &'static str, detail: String) -> Result<T, Violation> {
    Err(Violation { property, detail })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_reader_splits_where_it_would() {
        let line = "a\rb\u{2028}c".as_bytes();
        assert_eq!(split_lf(line), [line]);
        assert_eq!(split_universal(line), [&b"a"[..], "b\u{2028}c".as_bytes()]);
        assert_eq!(split_unicode(line), [&b"a"[..], b"b", b"c"]);
        assert_eq!(split_universal(b"a\r\nb"), [&b"a"[..], b"b"]);
    }

    #[test]
    fn sameness_holds_key_order_number_kind_and_the_sign_of_zero() {
        assert!(same(&json!({"a": [1, 2.5]}), &json!({"a": [1, 2.5]})));
        let (ab, ba): (Value, Value) = (
            serde_json::from_str(r#"{"a":1,"b":2}"#).expect("json"),
            serde_json::from_str(r#"{"b":2,"a":1}"#).expect("json"),
        );
        assert_eq!(ab, ba, "serde_json's own equality ignores the order");
        assert!(!same(&ab, &ba));
        assert!(!same(&json!(1), &json!(1.0)));
        assert!(!same(&json!(0.0), &json!(-0.0)));
    }

    #[test]
    fn numbers_compare_by_exact_value_and_kind() {
        assert_eq!(decimal(b"1e2"), decimal(b"100.0"));
        assert_eq!(decimal(b"0.10"), decimal(b"1e-1"));
        assert_ne!(decimal(b"-0"), decimal(b"0"));
        assert_ne!(decimal(b"0.30000000000000004"), decimal(b"0.3"));
        assert!(is_integer(b"-12") && !is_integer(b"1.0") && !is_integer(b"1e0"));
        assert_eq!(
            numbers(br#"{"a":"1,2\"3","b":[-0,1e5],"c":4}"#),
            [&b"-0"[..], b"1e5", b"4"]
        );
    }

    #[test]
    fn a_broken_property_is_reported() {
        let forwarded = "{\"a\":\"\u{2028}\"}".as_bytes();
        let broken = ensure_line_safe(forwarded, "no line break").expect_err("a raw U+2028");
        assert_eq!(broken.property, "no line break");
        assert!(
            check_numbers(br#"{"n":-0}"#, br#"{"n":-0.0}"#).is_err(),
            "an integer forwarded as a float"
        );
        assert!(check_numbers(br#"{"n":1E2}"#, br#"{"n":100.0}"#).is_ok());
    }

    #[test]
    fn the_smuggle_of_issue_12_is_refused_and_a_plain_call_accepted() {
        let smuggle = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\",\"params\":{\"x\":\r{}\r}}\n";
        let tally = check(smuggle).expect("no property broken");
        assert_eq!((tally.accepted, tally.refused), (0, 1));
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        let tally = check(call).expect("no property broken");
        assert_eq!((tally.accepted, tally.refused), (1, 0));
    }
}
