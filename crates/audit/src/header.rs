//! The frozen record header, format versions 1 and 2.
//!
//! The header is the part of a record that stays in the clear: which record this is, when it was
//! written and what kind of event it holds. [`Header::encode`] is the ONE function that turns it
//! into bytes, and those bytes are used twice: as the AEAD associated data of the sealed body, and
//! as part of the chain-hash input. [`Header::decode`] is its strict inverse: it accepts exactly
//! the bytes `encode` produces and nothing else, so a stored header has one encoding only.
//!
//! # Layout (versions 1 and 2), all integers big-endian
//!
//! | offset | size | field                                                            |
//! |-------:|-----:|------------------------------------------------------------------|
//! | 0      | 1    | format version, `0x01` or `0x02`                                 |
//! | 1      | 8    | sequence number, `u64` (the first record of a log is 1)          |
//! | 9      | 8    | timestamp, `i64` milliseconds since the Unix epoch (two's compl.)|
//! | 17     | 1    | `n`, length of the event kind in bytes, 1..=64                   |
//! | 18     | n    | event kind, ASCII: `[a-z]` then `[a-z0-9_]*`                     |
//!
//! Total length: `18 + n` bytes; no padding, no trailing bytes. A new layout gets a new version
//! byte; a written version is never changed (the golden vectors in `tests/golden/` pin each).
//! Versions 1 and 2 share this layout and differ in how the body's key is derived
//! ([`crate::seal`]): version 1 draws an ephemeral key per record, version 2 per run of records
//! sealed together (one group commit) and binds each record's key to its sequence number. This
//! crate writes version 2 and reads both, so a log begun in version 1 goes on in version 2.
//!
//! # Why the event kind is a string
//!
//! The kind is a short snake_case name (`tool_call_intent`), not a numeric code, so that a row
//! is readable in SQLite and in an export without a code table, a verifier that knows nothing of
//! the event schema still checks every row, and new kinds need no registry in this crate. It
//! costs at most 64 bytes per row, which is small next to a sealed body.

use std::borrow::Cow;
use std::fmt;

use crate::error::FormatError;

/// The format version this crate writes.
pub const FORMAT_VERSION: u8 = 2;

/// The format versions this crate reads: 1 (an ephemeral key per record) and 2.
pub const READ_VERSIONS: [u8; 2] = [1, FORMAT_VERSION];

/// The longest event kind, in bytes.
pub const MAX_KIND_LEN: usize = 64;

/// A record's position in its log. The first record is [`Seq::FIRST`]; each next one is `+ 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(u64);

/// A wall-clock time in milliseconds since the Unix epoch, as passed in by the caller's clock.
///
/// Timestamps are recorded, not checked: a clock may step backwards, so verification does not
/// require them to grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(i64);

/// The kind of event a record holds: 1 to 64 ASCII bytes, a lowercase letter then lowercase
/// letters, digits and underscores (`server_started`, `tool_call_intent`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKind(Cow<'static, str>);

/// The clear part of a record (see the module docs for its byte layout).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    version: u8,
    seq: Seq,
    time: UnixMillis,
    kind: EventKind,
}

impl Seq {
    /// The sequence number of the first record of every log.
    pub const FIRST: Seq = Seq(1);

    /// Wraps a raw sequence number (as stored in an index column, say).
    pub const fn new(seq: u64) -> Seq {
        Seq(seq)
    }

    /// The raw number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The sequence number after this one, or `None` at `u64::MAX`.
    pub const fn next(self) -> Option<Seq> {
        match self.0.checked_add(1) {
            Some(next) => Some(Seq(next)),
            None => None,
        }
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl UnixMillis {
    /// Wraps milliseconds since the Unix epoch.
    pub const fn new(millis: i64) -> UnixMillis {
        UnixMillis(millis)
    }

    /// The raw milliseconds.
    pub const fn as_millis(self) -> i64 {
        self.0
    }
}

impl EventKind {
    /// A kind known at compile time. Panics (at compile time, in a `const`) if `kind` is not a
    /// valid event kind.
    pub const fn from_static(kind: &'static str) -> EventKind {
        assert!(is_valid_kind(kind.as_bytes()), "invalid audit event kind");
        EventKind(Cow::Borrowed(kind))
    }

    /// Parses an event kind from untrusted text.
    pub fn parse(kind: &str) -> Result<EventKind, FormatError> {
        if is_valid_kind(kind.as_bytes()) {
            Ok(EventKind(Cow::Owned(kind.to_owned())))
        } else {
            Err(FormatError::InvalidKind)
        }
    }

    /// The kind as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Header {
    /// A header of the version this crate writes ([`FORMAT_VERSION`]).
    pub fn new(seq: Seq, time: UnixMillis, kind: EventKind) -> Header {
        Header {
            version: FORMAT_VERSION,
            seq,
            time,
            kind,
        }
    }

    /// The record's format version: one of [`READ_VERSIONS`] (a `Header` value exists only for
    /// a version this crate reads).
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The record's sequence number.
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// When the record was written, by the appender's clock.
    pub fn time(&self) -> UnixMillis {
        self.time
    }

    /// What kind of event the body holds.
    pub fn kind(&self) -> &EventKind {
        &self.kind
    }

    /// The canonical bytes: AEAD associated data and chain-hash input. The one encoder.
    pub fn encode(&self) -> Vec<u8> {
        let kind = self.kind.as_str().as_bytes();
        let mut out = Vec::with_capacity(FIXED_LEN + kind.len());
        out.push(self.version);
        out.extend_from_slice(&self.seq.0.to_be_bytes());
        out.extend_from_slice(&self.time.0.to_be_bytes());
        // The kind is at most MAX_KIND_LEN (64) bytes, checked when the EventKind was made.
        out.push(kind.len() as u8);
        out.extend_from_slice(kind);
        out
    }

    /// Decodes stored header bytes, accepting exactly what [`Header::encode`] produces.
    pub fn decode(bytes: &[u8]) -> Result<Header, FormatError> {
        let view = HeaderView::parse(bytes)?;
        Ok(Header {
            version: view.version,
            seq: view.seq,
            time: view.time,
            kind: EventKind(Cow::Owned(view.kind.to_owned())),
        })
    }
}

/// The fixed part of the layout: version, seq, time, kind length.
const FIXED_LEN: usize = 1 + 8 + 8 + 1;

/// A decoded header borrowing its kind from the stored bytes (verification allocates nothing).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeaderView<'a> {
    pub(crate) version: u8,
    pub(crate) seq: Seq,
    pub(crate) time: UnixMillis,
    pub(crate) kind: &'a str,
}

impl<'a> HeaderView<'a> {
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<HeaderView<'a>, FormatError> {
        let version = match bytes.first() {
            None => {
                return Err(FormatError::HeaderLength {
                    len: 0,
                    expected: FIXED_LEN + 1,
                });
            }
            Some(&version) if !READ_VERSIONS.contains(&version) => {
                return Err(FormatError::UnknownVersion { version });
            }
            Some(&version) => version,
        };
        let Some((fixed, kind)) = bytes.split_at_checked(FIXED_LEN) else {
            return Err(FormatError::HeaderLength {
                len: bytes.len(),
                expected: FIXED_LEN + 1,
            });
        };
        let kind_len = usize::from(fixed[17]);
        if kind.len() != kind_len {
            return Err(FormatError::HeaderLength {
                len: bytes.len(),
                expected: FIXED_LEN + kind_len,
            });
        }
        if !is_valid_kind(kind) {
            return Err(FormatError::InvalidKind);
        }
        let seq = u64::from_be_bytes(fixed[1..9].try_into().expect("8 bytes"));
        let time = i64::from_be_bytes(fixed[9..17].try_into().expect("8 bytes"));
        // Valid kinds are ASCII, so this cannot fail; the error arm keeps it panic-free.
        let kind = std::str::from_utf8(kind).map_err(|_| FormatError::InvalidKind)?;
        Ok(HeaderView {
            version,
            seq: Seq(seq),
            time: UnixMillis(time),
            kind,
        })
    }
}

const fn is_valid_kind(kind: &[u8]) -> bool {
    if kind.is_empty() || kind.len() > MAX_KIND_LEN || !kind[0].is_ascii_lowercase() {
        return false;
    }
    let mut i = 1;
    while i < kind.len() {
        let b = kind[i];
        if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: EventKind = EventKind::from_static("tool_call_intent");

    #[test]
    fn layout_is_byte_exact() {
        let header = Header::new(Seq::new(0x0102_0304_0506_0708), UnixMillis::new(-2), KIND);
        let mut expected = vec![0x02, 1, 2, 3, 4, 5, 6, 7, 8];
        expected.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
        expected.push(16);
        expected.extend_from_slice(b"tool_call_intent");
        assert_eq!(header.encode(), expected);
        assert_eq!(Header::decode(&expected), Ok(header));
        // A version-1 header (the same layout) still decodes, and encodes back to itself.
        expected[0] = 0x01;
        let old = Header::decode(&expected).expect("version 1 reads");
        assert_eq!(old.version(), 1);
        assert_eq!(old.encode(), expected);
    }

    #[test]
    fn decode_rejects_every_non_canonical_form() {
        let good = Header::new(Seq::FIRST, UnixMillis::new(7), KIND).encode();
        assert_eq!(
            Header::decode(&[]),
            Err(FormatError::HeaderLength {
                len: 0,
                expected: 19
            })
        );
        for version in [0, 3, 0xff] {
            let mut unknown = good.clone();
            unknown[0] = version;
            assert_eq!(
                Header::decode(&unknown),
                Err(FormatError::UnknownVersion { version })
            );
        }
        assert!(matches!(
            Header::decode(&good[..10]),
            Err(FormatError::HeaderLength { len: 10, .. })
        ));
        let mut trailing = good.clone();
        trailing.push(b'x');
        assert!(matches!(
            Header::decode(&trailing),
            Err(FormatError::HeaderLength { .. })
        ));
        let mut short_kind = good.clone();
        short_kind.pop();
        assert!(matches!(
            Header::decode(&short_kind),
            Err(FormatError::HeaderLength { .. })
        ));
        let mut upper = good.clone();
        upper[18] = b'T';
        assert_eq!(Header::decode(&upper), Err(FormatError::InvalidKind));
        let empty_kind = [&good[..17], &[0u8][..]].concat();
        assert_eq!(Header::decode(&empty_kind), Err(FormatError::InvalidKind));
    }

    #[test]
    fn kinds_are_checked() {
        for bad in ["", "Tool", "1abc", "a-b", "a b", "é", &"a".repeat(65)] {
            assert_eq!(
                EventKind::parse(bad),
                Err(FormatError::InvalidKind),
                "{bad:?}"
            );
        }
        for good in ["a", "server_started", "v2_event", &"a".repeat(64)] {
            assert_eq!(
                EventKind::parse(good).map(|k| k.to_string()),
                Ok(good.to_owned())
            );
        }
    }

    #[test]
    fn seq_next_stops_at_the_end() {
        assert_eq!(Seq::FIRST.next(), Some(Seq::new(2)));
        assert_eq!(Seq::new(u64::MAX).next(), None);
    }
}
