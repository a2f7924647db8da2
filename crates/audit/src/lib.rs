//! Postern's audit log format, as pure functions over values: no files, no SQLite, no keychain,
//! no clock, no OS randomness. Time and randomness are passed in, so the format is reproducible
//! (the golden vectors in `tests/golden/` pin it byte for byte).
//!
//! A log is a sequence of records. Each record is
//!
//! - a **header** in the clear ([`Header`]: format version, sequence number, timestamp, event
//!   kind), encoded by one function, [`Header::encode`], into canonical bytes (layout below);
//! - a **sealed body** ([`SealedBody`]): the event bytes encrypted to the log's public
//!   [`RecipientKey`] with an ephemeral X25519 key, HKDF-SHA256 and ChaCha20-Poly1305, the header
//!   bytes being the associated data. Version 2 (written since issue 17) shares one ephemeral
//!   key among a run of records sealed together ([`PreparedSeal`]; the engine keeps one for its
//!   group commits of up to 100 ms) and binds each record's key to its sequence number; version 1 drew one per record and is still read (`seal` module). The
//!   engine appends while the vault is locked; only the [`OpeningKey`] (kept in the keychain by
//!   the caller) opens bodies;
//! - a **chain hash** ([`ChainHash`]): SHA-256(previous hash || header bytes || sealed body),
//!   the previous hash of record 1 being 32 zero bytes.
//!
//! [`Chain`] appends ([`SealedRecord`]); [`SealedRecord::open`] gives an [`OpenedRecord`];
//! [`Verifier`] / [`verify`] check stored records ([`RawRecord`]) without the opening key, or
//! with it, against an optional trusted anchor ([`Head`]) kept outside the database, and report
//! the first bad sequence number ([`VerifyError::seq`]).
//!
//! # Header bytes (format versions 1 and 2), big-endian
//!
//! ```text
//! offset  size  field
//!      0     1  version = 0x01 or 0x02
//!      1     8  sequence number, u64 (first record = 1)
//!      9     8  timestamp, i64 milliseconds since the Unix epoch
//!     17     1  n = length of the event kind, 1..=64
//!     18     n  event kind, ASCII [a-z][a-z0-9_]*
//! ```
//!
//! # Sealed body bytes
//!
//! ```text
//! offset  size  field
//!      0    32  ephemeral X25519 public key
//!     32     m  ChaCha20-Poly1305 ciphertext of the m-byte body
//!   32+m    16  Poly1305 tag
//! ```
//!
//! # What the log does and does not prove
//!
//! The chain detects any edited, deleted, inserted or reordered record. It is keyless, and
//! anyone with the public key can seal, so a writer who rewrites a suffix of the log and
//! recomputes its hashes is detected only by the anchor: the head's sequence number and hash,
//! stored where the database's writer cannot roll it back. Truncation past the anchor and any
//! rewrite up to it are detected; records appended after the last anchor update are protected
//! by the chain alone.

mod chain;
mod error;
mod header;
mod keys;
mod seal;
mod verify;

pub use chain::{Chain, ChainHash, Head, OpenedRecord, RawRecord, SealedRecord};
pub use error::{AppendError, FormatError, KeyError, OpenError, VerifyError};
pub use header::{EventKind, FORMAT_VERSION, Header, MAX_KIND_LEN, READ_VERSIONS, Seq, UnixMillis};
pub use keys::{OpeningKey, RecipientKey};
pub use seal::{Opener, PreparedSeal, SEAL_OVERHEAD, SealedBody};
pub use verify::{Bodies, Verified, Verifier, verify};

/// The rand_core version this crate's RNG bounds come from (`TryCryptoRng`), re-exported so
/// callers name the same traits.
pub use rand_core;
