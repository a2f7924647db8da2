//! The hash chain and the record types: [`Chain`] appends, producing [`SealedRecord`]s; a sealed
//! record opens into an [`OpenedRecord`]; [`RawRecord`] is how stored bytes come back in.
//!
//! # Chain hash
//!
//! ```text
//! hash(seq) = SHA-256( hash(seq - 1) || header bytes || sealed body bytes )
//! hash(0)   = 32 zero bytes  (ChainHash::GENESIS)
//! ```
//!
//! The concatenation is unambiguous: the previous hash is 32 bytes, the header carries its own
//! length (its kind is length-prefixed), and the sealed body is the rest. The genesis value is
//! plain zeros so that an independent verifier (a script, another language) needs no constant
//! from this crate. The hash is keyless: it detects editing, deleting, inserting and reordering
//! records, but a writer who rewrites a suffix and recomputes its hashes is caught only by a
//! trusted [`Head`] kept outside the database (see [`crate::Verifier::with_anchor`]).

use std::fmt;
use std::str::FromStr;

use rand_core::TryCryptoRng;
use sha2::{Digest, Sha256};

use crate::error::{AppendError, FormatError, OpenError};
use crate::header::{EventKind, Header, HeaderView, Seq, UnixMillis};
use crate::keys::{OpeningKey, RecipientKey};
use crate::seal::{Opener, PreparedSeal, SealedBody};

/// A SHA-256 chain hash. Displays as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainHash([u8; 32]);

/// The last record of a log, by sequence number and chain hash. Kept outside the database (in
/// the keychain) it is the trusted anchor; `Display`/`FromStr` use `SEQ:HEX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    seq: Seq,
    hash: ChainHash,
}

/// The appender: the previous hash, the next sequence number and the key to seal to.
///
/// `append` advances the chain before the caller has stored the record. If storing fails, put
/// back the value from before (the chain is cheap to clone: snapshot it before a batch, restore
/// it if the batch does not commit) or rebuild it with [`Chain::resume`] from the stored head.
#[derive(Debug, Clone)]
pub struct Chain {
    next: Seq,
    prev: ChainHash,
    recipient: RecipientKey,
}

/// A record as stored: clear header, sealed body, chain hash. Made only by [`Chain::append`]
/// or, from stored bytes, by [`SealedRecord::from_raw`] (which checks the format, not the chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRecord {
    header: Header,
    header_bytes: Box<[u8]>,
    sealed_body: SealedBody,
    chain_hash: ChainHash,
}

/// A record whose body was opened (and so authenticated against its header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedRecord<Body> {
    header: Header,
    chain_hash: ChainHash,
    body: Body,
}

/// A stored record as borrowed bytes, the way a database row comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// The header bytes, exactly as [`Header::encode`] produced them.
    pub header: &'a [u8],
    /// The sealed body bytes.
    pub sealed_body: &'a [u8],
    /// The stored chain hash (32 bytes).
    pub chain_hash: &'a [u8],
}

impl ChainHash {
    /// The "previous hash" of the first record.
    pub const GENESIS: ChainHash = ChainHash([0; 32]);

    /// The hash of a record: SHA-256(previous || header bytes || sealed body bytes).
    pub fn link(prev: &ChainHash, header_bytes: &[u8], sealed_body: &[u8]) -> ChainHash {
        let mut hasher = Sha256::new();
        hasher.update(prev.0);
        hasher.update(header_bytes);
        hasher.update(sealed_body);
        ChainHash(hasher.finalize().into())
    }

    /// Wraps 32 bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> ChainHash {
        ChainHash(bytes)
    }

    /// Parses stored bytes, which must be exactly 32.
    pub fn from_slice(bytes: &[u8]) -> Result<ChainHash, FormatError> {
        bytes
            .try_into()
            .map(ChainHash)
            .map_err(|_| FormatError::HashMalformed)
    }

    /// Parses 64 hex digits (either case).
    pub fn from_hex(text: &str) -> Result<ChainHash, FormatError> {
        let text = text.as_bytes();
        if text.len() != 64 {
            return Err(FormatError::HashMalformed);
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
            *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
        }
        Ok(ChainHash(out))
    }

    /// The 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChainHash({self})")
    }
}

impl Head {
    /// The head at `seq` with chain hash `hash`.
    pub const fn new(seq: Seq, hash: ChainHash) -> Head {
        Head { seq, hash }
    }

    /// Sequence number of the last record.
    pub const fn seq(&self) -> Seq {
        self.seq
    }

    /// Chain hash of the last record.
    pub const fn hash(&self) -> ChainHash {
        self.hash
    }

    /// 40 bytes: the sequence number (u64, big-endian) then the hash.
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[..8].copy_from_slice(&self.seq.get().to_be_bytes());
        out[8..].copy_from_slice(&self.hash.0);
        out
    }

    /// Parses the 40 bytes of [`Head::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Head, FormatError> {
        let bytes: &[u8; 40] = bytes.try_into().map_err(|_| FormatError::HeadMalformed)?;
        let seq = u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
        let hash = ChainHash(bytes[8..].try_into().expect("32 bytes"));
        Ok(Head {
            seq: Seq::new(seq),
            hash,
        })
    }
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

impl FromStr for Head {
    type Err = FormatError;

    fn from_str(text: &str) -> Result<Head, FormatError> {
        let (seq, hash) = text
            .trim()
            .split_once(':')
            .ok_or(FormatError::HeadMalformed)?;
        if !seq.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FormatError::HeadMalformed);
        }
        let seq = seq.parse::<u64>().map_err(|_| FormatError::HeadMalformed)?;
        let hash = ChainHash::from_hex(hash).map_err(|_| FormatError::HeadMalformed)?;
        Ok(Head {
            seq: Seq::new(seq),
            hash,
        })
    }
}

impl Chain {
    /// A new, empty log sealed to `recipient`.
    pub fn genesis(recipient: RecipientKey) -> Chain {
        Chain {
            next: Seq::FIRST,
            prev: ChainHash::GENESIS,
            recipient,
        }
    }

    /// Continues a log whose last stored (and verified) record is `head`.
    pub fn resume(recipient: RecipientKey, head: Head) -> Result<Chain, AppendError> {
        let next = head.seq.next().ok_or(AppendError::SequenceExhausted)?;
        Ok(Chain {
            next,
            prev: head.hash,
            recipient,
        })
    }

    /// The last record appended (`None` for an empty log).
    pub fn head(&self) -> Option<Head> {
        (self.next != Seq::FIRST).then(|| Head::new(Seq::new(self.next.get() - 1), self.prev))
    }

    /// The sequence number the next record will get.
    pub fn next_seq(&self) -> Seq {
        self.next
    }

    /// The key bodies are sealed to.
    pub fn recipient(&self) -> &RecipientKey {
        &self.recipient
    }

    /// Seals `body` as the next record and advances the chain. On error the chain is unchanged.
    pub fn append<R: TryCryptoRng + ?Sized>(
        &mut self,
        time: UnixMillis,
        kind: EventKind,
        body: &[u8],
        rng: &mut R,
    ) -> Result<SealedRecord, AppendError> {
        let mut prepared = PreparedSeal::new(&self.recipient, rng)?;
        self.append_prepared(time, kind, body, &mut prepared)
    }

    /// [`Chain::append`] with the key agreement done ahead of time ([`PreparedSeal`], on any
    /// thread), so that the part that must run in chain order is cheap; one seal serves a run
    /// of records (the engine's group commits of up to 100 ms). The seal must be for this chain's recipient and must not
    /// have sealed this sequence number or a later one (after putting the chain back, take a
    /// fresh seal). On error the chain is unchanged.
    pub fn append_prepared(
        &mut self,
        time: UnixMillis,
        kind: EventKind,
        body: &[u8],
        prepared: &mut PreparedSeal,
    ) -> Result<SealedRecord, AppendError> {
        if *prepared.recipient() != self.recipient {
            return Err(AppendError::RecipientMismatch);
        }
        let after = self.next.next().ok_or(AppendError::SequenceExhausted)?;
        let header = Header::new(self.next, time, kind);
        let header_bytes = header.encode().into_boxed_slice();
        let sealed_body = prepared.seal(&header, &header_bytes, body)?;
        let chain_hash = ChainHash::link(&self.prev, &header_bytes, sealed_body.as_bytes());
        self.next = after;
        self.prev = chain_hash;
        Ok(SealedRecord {
            header,
            header_bytes,
            sealed_body,
            chain_hash,
        })
    }
}

impl SealedRecord {
    /// A record from stored bytes. Checks the format (header, body length, hash length), not
    /// the chain: that is [`crate::Verifier`]'s job.
    pub fn from_raw(raw: RawRecord<'_>) -> Result<SealedRecord, FormatError> {
        let header = Header::decode(raw.header)?;
        let sealed_body = SealedBody::from_bytes(raw.sealed_body.to_vec())?;
        let chain_hash = ChainHash::from_slice(raw.chain_hash)?;
        Ok(SealedRecord {
            header,
            header_bytes: raw.header.into(),
            sealed_body,
            chain_hash,
        })
    }

    /// The clear header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The header's canonical bytes (what is stored, hashed and authenticated).
    pub fn header_bytes(&self) -> &[u8] {
        &self.header_bytes
    }

    /// The sealed body.
    pub fn sealed_body(&self) -> &SealedBody {
        &self.sealed_body
    }

    /// The chain hash of this record.
    pub fn chain_hash(&self) -> ChainHash {
        self.chain_hash
    }

    /// This record as the head of its log.
    pub fn head(&self) -> Head {
        Head::new(self.header.seq(), self.chain_hash)
    }

    /// The record as borrowed bytes, as it is stored.
    pub fn as_raw(&self) -> RawRecord<'_> {
        RawRecord {
            header: &self.header_bytes,
            sealed_body: self.sealed_body.as_bytes(),
            chain_hash: self.chain_hash.as_bytes(),
        }
    }

    /// Opens the body with the log's opening key (authenticating it against the header).
    pub fn open(&self, key: &OpeningKey) -> Result<OpenedRecord<Vec<u8>>, OpenError> {
        self.open_with(key, &mut Opener::default())
    }

    /// [`SealedRecord::open`], reusing the agreement `opener` remembers from the record before
    /// (records opened in order: one X25519 per run of a group commit, not per record).
    pub fn open_with(
        &self,
        key: &OpeningKey,
        opener: &mut Opener,
    ) -> Result<OpenedRecord<Vec<u8>>, OpenError> {
        let body = opener.open(
            key,
            self.header.version(),
            self.header.seq(),
            &self.header_bytes,
            self.sealed_body.as_bytes(),
        )?;
        Ok(OpenedRecord {
            header: self.header.clone(),
            chain_hash: self.chain_hash,
            body,
        })
    }
}

impl<Body> OpenedRecord<Body> {
    /// The clear header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The chain hash of the sealed record this came from.
    pub fn chain_hash(&self) -> ChainHash {
        self.chain_hash
    }

    /// The opened body.
    pub fn body(&self) -> &Body {
        &self.body
    }

    /// The opened body, owned.
    pub fn into_body(self) -> Body {
        self.body
    }

    /// Decodes the body (into an event type, say), keeping the header and hash.
    pub fn try_map<T, E>(
        self,
        decode: impl FnOnce(Body) -> Result<T, E>,
    ) -> Result<OpenedRecord<T>, E> {
        Ok(OpenedRecord {
            header: self.header,
            chain_hash: self.chain_hash,
            body: decode(self.body)?,
        })
    }
}

impl<'a> RawRecord<'a> {
    /// A stored record's three byte fields.
    pub const fn new(header: &'a [u8], sealed_body: &'a [u8], chain_hash: &'a [u8]) -> Self {
        RawRecord {
            header,
            sealed_body,
            chain_hash,
        }
    }

    pub(crate) fn header_view(&self) -> Result<HeaderView<'a>, FormatError> {
        HeaderView::parse(self.header)
    }
}

fn hex_digit(c: u8) -> Result<u8, FormatError> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(FormatError::HashMalformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_heads_round_trip_as_text_and_bytes() {
        let hash = ChainHash::link(&ChainHash::GENESIS, b"h", b"b");
        assert_eq!(ChainHash::from_hex(&hash.to_string()), Ok(hash));
        assert_eq!(
            ChainHash::from_hex(&hash.to_string().to_uppercase()),
            Ok(hash)
        );
        assert_eq!(ChainHash::from_slice(hash.as_bytes()), Ok(hash));
        assert_eq!(
            ChainHash::from_slice(&[0; 31]),
            Err(FormatError::HashMalformed)
        );
        assert_eq!(
            ChainHash::from_hex(&"g".repeat(64)),
            Err(FormatError::HashMalformed)
        );

        let head = Head::new(Seq::new(42), hash);
        assert_eq!(head.to_string().parse::<Head>(), Ok(head));
        assert_eq!(Head::from_bytes(&head.to_bytes()), Ok(head));
        for bad in [
            "",
            "42",
            "x:00",
            "+1:00",
            &format!("-1:{hash}"),
            &format!("1:{hash}0"),
        ] {
            assert_eq!(
                bad.parse::<Head>(),
                Err(FormatError::HeadMalformed),
                "{bad:?}"
            );
        }
        assert_eq!(Head::from_bytes(&[0; 39]), Err(FormatError::HeadMalformed));
    }

    #[test]
    fn genesis_is_zeros_and_link_is_plain_sha256() {
        assert_eq!(ChainHash::GENESIS.as_bytes(), &[0; 32]);
        // SHA-256 of 32 zero bytes followed by "abc", computed independently.
        let expected = Sha256::digest([&[0u8; 32][..], b"a", b"bc"].concat());
        assert_eq!(
            ChainHash::link(&ChainHash::GENESIS, b"a", b"bc").as_bytes()[..],
            expected[..]
        );
    }

    /// Fills with a fixed byte: two chains fed the same sequence seal identically.
    struct Fill(u8);

    impl rand_core::TryRng for Fill {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            unreachable!("sealing only fills bytes")
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            unreachable!("sealing only fills bytes")
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            self.0 = self.0.wrapping_add(1);
            dst.fill(self.0);
            Ok(())
        }
    }
    impl TryCryptoRng for Fill {}

    #[test]
    fn a_prepared_seal_gives_the_same_record_and_must_match_the_recipient() {
        let key = OpeningKey::from_bytes([5; 32]);
        let kind = EventKind::from_static("tool_call_intent");
        let mut direct = Chain::genesis(key.recipient());
        let mut prepared = direct.clone();
        let mut rng_a = Fill(0);
        let mut rng_b = Fill(0);
        for i in 0..3 {
            let time = UnixMillis::new(i);
            let a = direct
                .append(time, kind.clone(), b"body", &mut rng_a)
                .unwrap();
            let mut seal = PreparedSeal::new(&key.recipient(), &mut rng_b).unwrap();
            let b = prepared
                .append_prepared(time, kind.clone(), b"body", &mut seal)
                .unwrap();
            assert_eq!(a, b);
        }
        let other = OpeningKey::from_bytes([6; 32]).recipient();
        let mut foreign = PreparedSeal::new(&other, &mut rng_b).unwrap();
        let before = prepared.clone().head();
        assert_eq!(
            prepared
                .append_prepared(UnixMillis::new(9), kind.clone(), b"x", &mut foreign)
                .unwrap_err()
                .code(),
            "audit_recipient_mismatch"
        );
        assert_eq!(
            prepared.head(),
            before,
            "a refused append leaves the chain as it was"
        );
    }

    #[test]
    fn a_chain_put_back_after_a_failed_batch_cannot_reuse_the_batch_seal() {
        let key = OpeningKey::from_bytes([5; 32]);
        let kind = EventKind::from_static("tool_call_intent");
        let mut chain = Chain::genesis(key.recipient());
        let before = chain.clone();
        let mut seal = PreparedSeal::new(&key.recipient(), &mut Fill(0)).unwrap();
        chain
            .append_prepared(UnixMillis::new(1), kind.clone(), b"a", &mut seal)
            .unwrap();
        // The batch did not commit: the writer puts the chain back and must take a fresh seal.
        chain = before;
        let err = chain
            .append_prepared(UnixMillis::new(1), kind.clone(), b"b", &mut seal)
            .unwrap_err();
        assert_eq!(err.code(), "audit_seal_reused");
        assert_eq!(
            chain.head(),
            None,
            "a refused append leaves the chain as it was"
        );
        let mut fresh = PreparedSeal::new(&key.recipient(), &mut Fill(1)).unwrap();
        chain
            .append_prepared(UnixMillis::new(1), kind, b"b", &mut fresh)
            .unwrap();
    }

    #[test]
    fn resume_refuses_the_last_sequence_number() {
        let recipient = OpeningKey::from_bytes([1; 32]).recipient();
        let end = Head::new(Seq::new(u64::MAX), ChainHash::GENESIS);
        assert_eq!(
            Chain::resume(recipient, end).unwrap_err(),
            AppendError::SequenceExhausted
        );
        let chain = Chain::resume(recipient, Head::new(Seq::new(9), ChainHash::GENESIS)).unwrap();
        assert_eq!(chain.next_seq(), Seq::new(10));
        assert_eq!(
            chain.head(),
            Some(Head::new(Seq::new(9), ChainHash::GENESIS))
        );
        assert_eq!(Chain::genesis(recipient).head(), None);
    }
}
