//! The crate's errors: one enum per boundary, each variant with a stable machine code.
//!
//! Codes are part of the public contract (the UI, the CLI and agents match on them): a code is
//! never renamed or reused; new variants get new codes.

use thiserror::Error;

use crate::header::Seq;

/// Stored bytes that are not a well-formed version-1 record (decoding, no keys involved).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The header's first byte names a format version this crate does not read.
    #[error("unknown audit format version {version}")]
    UnknownVersion {
        /// The version byte found.
        version: u8,
    },
    /// The header is truncated, has trailing bytes, or its kind length disagrees with its size.
    #[error("audit header is {len} bytes, expected {expected}")]
    HeaderLength {
        /// Bytes present.
        len: usize,
        /// Bytes the layout calls for (the minimum, when the length byte itself is missing).
        expected: usize,
    },
    /// The event kind is empty, too long, or not `[a-z][a-z0-9_]*`.
    #[error("invalid audit event kind")]
    InvalidKind,
    /// A sealed body shorter than an ephemeral key plus a tag.
    #[error("sealed body is {len} bytes, the minimum is {min}")]
    BodyTooShort {
        /// Bytes present.
        len: usize,
        /// The minimum (48).
        min: usize,
    },
    /// A chain hash that is not 32 bytes (or 64 hex digits).
    #[error("chain hash is malformed")]
    HashMalformed,
    /// A head (anchor) that is not `SEQ:HEX` or 40 bytes.
    #[error("audit head is malformed")]
    HeadMalformed,
}

/// A key that cannot be made or parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The text is not standard, padded base64.
    #[error("audit key is not valid base64")]
    Base64,
    /// The key is not 32 bytes.
    #[error("audit key is {len} bytes, expected 32")]
    Length {
        /// Bytes decoded.
        len: usize,
    },
    /// A public key of small order: every body sealed to it would be readable by anyone.
    #[error("audit recipient key is a low-order point")]
    WeakPublicKey,
    /// The random number generator failed.
    #[error("no randomness for the audit key: {reason}")]
    Entropy {
        /// The generator's own message.
        reason: String,
    },
}

/// A record that could not be appended.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AppendError {
    /// The log has reached `u64::MAX` records.
    #[error("audit sequence numbers are exhausted")]
    SequenceExhausted,
    /// The random number generator failed; nothing was sealed and the chain did not advance.
    #[error("no randomness to seal the audit record: {reason}")]
    Entropy {
        /// The generator's own message.
        reason: String,
    },
    /// A [`crate::PreparedSeal`] made for another recipient key than the chain's.
    #[error("the prepared seal is for another recipient key than this log's")]
    RecipientMismatch,
    /// A [`crate::PreparedSeal`] asked to seal a sequence number not past the last it sealed
    /// (its key would be derived twice): a retried batch takes a fresh seal.
    #[error("the prepared seal already sealed this sequence number or a later one")]
    SealReused,
}

/// A sealed body that could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The stored bytes are not a record (see [`FormatError`]).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Wrong opening key, or the body or its header was altered. The two are indistinguishable
    /// by design (the AEAD tag is all that is checked).
    #[error("audit body cannot be opened with this key")]
    Unreadable,
}

/// Why verification stopped. Each variant carries the FIRST bad sequence number (see
/// [`VerifyError::seq`]): for a record that cannot be trusted, the position the record should
/// have had, since its own header may be the thing that was altered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The record at `seq` has a header version this crate does not read.
    #[error("record {seq}: unknown format version {version}")]
    UnknownVersion {
        /// Position of the record.
        seq: Seq,
        /// The version byte found.
        version: u8,
    },
    /// The record at `seq` is of an older format version than the record before it: a log only
    /// ever moves to newer versions, so an older one there was put there by hand.
    #[error("record {seq}: format version {version} after a record of version {previous}")]
    VersionRegressed {
        /// Position of the record.
        seq: Seq,
        /// Its version byte.
        version: u8,
        /// The version of the record before it.
        previous: u8,
    },
    /// The record at `seq` is not well-formed.
    #[error("record {seq}: {source}")]
    Malformed {
        /// Position of the record.
        seq: Seq,
        /// What is wrong with it.
        source: FormatError,
    },
    /// A record is missing: `expected` came next but the header says `found` (> expected).
    /// Deleted and reordered records show up here.
    #[error("record {expected} is missing: found record {found} in its place")]
    SequenceGap {
        /// The sequence number that should have come next.
        expected: Seq,
        /// The one found.
        found: Seq,
    },
    /// A record repeats or goes backwards: `found` (< expected) where `expected` came next.
    #[error("record {expected} is out of order: found record {found} in its place")]
    SequenceRepeated {
        /// The sequence number that should have come next.
        expected: Seq,
        /// The one found.
        found: Seq,
    },
    /// The chain hash stored with record `seq` is not SHA-256(previous || header || body):
    /// the record (or the hash) was altered.
    #[error("record {seq}: chain hash does not match")]
    ChainBroken {
        /// The record whose hash does not match.
        seq: Seq,
    },
    /// The body of record `seq` does not open with the opening key (checked only when the
    /// verifier has the key).
    #[error("record {seq}: body cannot be opened")]
    BodyUnreadable {
        /// The record.
        seq: Seq,
    },
    /// The record at the trusted anchor's sequence number has a different chain hash: the log
    /// was rolled back or rewritten (the first rewritten record is at or before `seq`).
    #[error("record {seq}: chain hash differs from the trusted anchor (rollback or rewrite)")]
    AnchorMismatch {
        /// The anchor's sequence number.
        seq: Seq,
    },
    /// The log ends before the trusted anchor: its tail was cut off.
    #[error(
        "{} but the trusted anchor is at record {anchor} (truncated)",
        match last { Some(last) => format!("the log ends at record {last}"), None => "the log is empty".to_owned() }
    )]
    Truncated {
        /// The anchor's sequence number.
        anchor: Seq,
        /// The last record present (`None`: the log is empty).
        last: Option<Seq>,
    },
}

impl FormatError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            FormatError::UnknownVersion { .. } => "audit_unknown_version",
            FormatError::HeaderLength { .. } => "audit_header_malformed",
            FormatError::InvalidKind => "audit_kind_invalid",
            FormatError::BodyTooShort { .. } => "audit_body_malformed",
            FormatError::HashMalformed => "audit_hash_malformed",
            FormatError::HeadMalformed => "audit_head_malformed",
        }
    }
}

impl KeyError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            KeyError::Base64 | KeyError::Length { .. } => "audit_key_malformed",
            KeyError::WeakPublicKey => "audit_key_weak",
            KeyError::Entropy { .. } => "audit_entropy_unavailable",
        }
    }
}

impl AppendError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            AppendError::SequenceExhausted => "audit_sequence_exhausted",
            AppendError::Entropy { .. } => "audit_entropy_unavailable",
            AppendError::RecipientMismatch => "audit_recipient_mismatch",
            AppendError::SealReused => "audit_seal_reused",
        }
    }
}

impl OpenError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            OpenError::Format(e) => e.code(),
            OpenError::Unreadable => "audit_body_unreadable",
        }
    }
}

impl VerifyError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::UnknownVersion { .. } => "audit_unknown_version",
            VerifyError::VersionRegressed { .. } => "audit_version_regressed",
            VerifyError::Malformed { .. } => "audit_record_malformed",
            VerifyError::SequenceGap { .. } => "audit_sequence_gap",
            VerifyError::SequenceRepeated { .. } => "audit_sequence_repeated",
            VerifyError::ChainBroken { .. } => "audit_chain_broken",
            VerifyError::BodyUnreadable { .. } => "audit_body_unreadable",
            VerifyError::AnchorMismatch { .. } => "audit_anchor_mismatch",
            VerifyError::Truncated { .. } => "audit_log_truncated",
        }
    }

    /// The first bad sequence number. For [`VerifyError::Truncated`], the first missing one.
    pub fn seq(&self) -> Seq {
        match *self {
            VerifyError::UnknownVersion { seq, .. }
            | VerifyError::VersionRegressed { seq, .. }
            | VerifyError::Malformed { seq, .. }
            | VerifyError::ChainBroken { seq }
            | VerifyError::BodyUnreadable { seq }
            | VerifyError::AnchorMismatch { seq } => seq,
            VerifyError::SequenceGap { expected, .. }
            | VerifyError::SequenceRepeated { expected, .. } => expected,
            VerifyError::Truncated { last, .. } => last.and_then(Seq::next).unwrap_or(Seq::FIRST),
        }
    }
}
