//! Verification of a stored log, streaming, without I/O.
//!
//! Feed records in storage order to [`Verifier::push`] (or hand an iterator to [`verify`]). For
//! each record, in this order:
//!
//! 1. the header decodes as a version this crate reads, not older than the record before it
//!    ([`VerifyError::UnknownVersion`], [`VerifyError::VersionRegressed`],
//!    [`VerifyError::Malformed`]);
//! 2. its sequence number is the previous one plus 1, the first being 1
//!    ([`VerifyError::SequenceGap`], [`VerifyError::SequenceRepeated`]);
//! 3. the stored chain hash is 32 bytes and equals SHA-256(previous || header || sealed body)
//!    ([`VerifyError::Malformed`], [`VerifyError::ChainBroken`]);
//! 4. the sealed body is long enough to be one ([`VerifyError::Malformed`]);
//! 5. at the anchor's sequence number, the hash is the anchor's ([`VerifyError::AnchorMismatch`]);
//! 6. with the opening key only: the body opens ([`VerifyError::BodyUnreadable`]).
//!
//! [`Verifier::finish`] then checks that the log reaches the anchor ([`VerifyError::Truncated`]).
//! Verification stops at the first bad record; every error names its sequence number.
//! Timestamps are not checked (clocks step backwards).

use crate::chain::{ChainHash, Head, RawRecord};
use crate::error::{FormatError, VerifyError};
use crate::header::Seq;
use crate::keys::OpeningKey;
use crate::seal::{Opener, SEAL_OVERHEAD};

/// Verifies a whole log given as an iterator, in storage order. See the module docs.
pub fn verify<'r>(
    records: impl IntoIterator<Item = RawRecord<'r>>,
    anchor: Option<Head>,
    opening_key: Option<&OpeningKey>,
) -> Result<Verified, VerifyError> {
    let mut verifier = Verifier::new();
    if let Some(anchor) = anchor {
        verifier = verifier.with_anchor(anchor);
    }
    if let Some(key) = opening_key {
        verifier = verifier.with_opening_key(key);
    }
    records
        .into_iter()
        .try_for_each(|record| verifier.push(record))?;
    verifier.finish()
}

/// A streaming verifier: push records one by one (from a database cursor, say), then finish.
#[derive(Debug)]
pub struct Verifier<'k> {
    expected: Seq,
    prev: ChainHash,
    last: Option<Head>,
    records: u64,
    anchor: Option<Head>,
    opening_key: Option<&'k OpeningKey>,
    opener: Opener,
    /// The format version of the last record checked.
    version: u8,
    failed: Option<VerifyError>,
}

/// What a successful verification established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// The last record verified (`None`: no records were pushed).
    pub head: Option<Head>,
    /// How many records were verified.
    pub records: u64,
    /// Whether the bodies were opened too.
    pub bodies: Bodies,
}

/// How far the bodies were checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bodies {
    /// Only hashed, as part of the chain (no opening key was given).
    Hashed,
    /// Every one was opened with the opening key.
    Opened,
}

impl Default for Verifier<'_> {
    fn default() -> Self {
        Verifier::new()
    }
}

impl<'k> Verifier<'k> {
    /// A verifier for a log from its first record.
    pub fn new() -> Self {
        Verifier {
            expected: Seq::FIRST,
            prev: ChainHash::GENESIS,
            last: None,
            records: 0,
            anchor: None,
            opening_key: None,
            opener: Opener::default(),
            version: 1,
            failed: None,
        }
    }

    /// A verifier that continues after `head`, a record already verified (the records pushed
    /// start at `head.seq() + 1`).
    pub fn resume(head: Head) -> Self {
        Verifier {
            expected: head.seq().next().unwrap_or(head.seq()),
            prev: head.hash(),
            last: Some(head),
            ..Verifier::new()
        }
    }

    /// Checks the log against a head kept outside the database: the record at `anchor.seq()`
    /// must have `anchor.hash()`, and the log must reach it. (After [`Verifier::resume`], an
    /// anchor at or before the resumed head is not re-checked: the head was trusted instead.)
    pub fn with_anchor(mut self, anchor: Head) -> Self {
        self.anchor = Some(anchor);
        self
    }

    /// Opens every body too.
    pub fn with_opening_key(mut self, key: &'k OpeningKey) -> Self {
        self.opening_key = Some(key);
        self
    }

    /// Verifies the next record. After the first error, every call returns that error again.
    pub fn push(&mut self, record: RawRecord<'_>) -> Result<(), VerifyError> {
        if let Some(failed) = &self.failed {
            return Err(failed.clone());
        }
        self.check(record)
            .inspect_err(|e| self.failed = Some(e.clone()))
    }

    /// Ends verification: checks the log reached the anchor, and reports what was verified.
    pub fn finish(self) -> Result<Verified, VerifyError> {
        if let Some(failed) = self.failed {
            return Err(failed);
        }
        if let Some(anchor) = self.anchor {
            let last = self.last.map(|head| head.seq());
            if last.is_none_or(|last| last < anchor.seq()) {
                return Err(VerifyError::Truncated {
                    anchor: anchor.seq(),
                    last,
                });
            }
        }
        let bodies = match self.opening_key {
            Some(_) => Bodies::Opened,
            None => Bodies::Hashed,
        };
        Ok(Verified {
            head: self.last,
            records: self.records,
            bodies,
        })
    }

    fn check(&mut self, record: RawRecord<'_>) -> Result<(), VerifyError> {
        let seq = self.expected;
        let malformed = |source| VerifyError::Malformed { seq, source };
        let header = record.header_view().map_err(|e| match e {
            FormatError::UnknownVersion { version } => VerifyError::UnknownVersion { seq, version },
            other => malformed(other),
        })?;
        if header.version < self.version {
            return Err(VerifyError::VersionRegressed {
                seq,
                version: header.version,
                previous: self.version,
            });
        }
        if header.seq != seq {
            return Err(if header.seq > seq {
                VerifyError::SequenceGap {
                    expected: seq,
                    found: header.seq,
                }
            } else {
                VerifyError::SequenceRepeated {
                    expected: seq,
                    found: header.seq,
                }
            });
        }
        let stored = ChainHash::from_slice(record.chain_hash).map_err(malformed)?;
        let computed = ChainHash::link(&self.prev, record.header, record.sealed_body);
        if stored != computed {
            return Err(VerifyError::ChainBroken { seq });
        }
        if record.sealed_body.len() < SEAL_OVERHEAD {
            return Err(malformed(FormatError::BodyTooShort {
                len: record.sealed_body.len(),
                min: SEAL_OVERHEAD,
            }));
        }
        if let Some(anchor) = self.anchor
            && anchor.seq() == seq
            && anchor.hash() != computed
        {
            return Err(VerifyError::AnchorMismatch { seq });
        }
        if let Some(key) = self.opening_key {
            self.opener
                .open(key, header.version, seq, record.header, record.sealed_body)
                .map_err(|_| VerifyError::BodyUnreadable { seq })?;
        }
        self.prev = computed;
        self.version = header.version;
        self.last = Some(Head::new(seq, computed));
        self.records += 1;
        // Saturates only after 2^64 - 1 records, which no log (nor a resumed head from
        // `Chain`, which never appends u64::MAX) reaches.
        self.expected = seq.next().unwrap_or(seq);
        Ok(())
    }
}
