//! Sealing a body to the log's public key, and opening it with the secret one.
//!
//! # Sealed body layout (versions 1 and 2)
//!
//! | offset   | size | field                                              |
//! |---------:|-----:|----------------------------------------------------|
//! | 0        | 32   | ephemeral X25519 public key `E`                    |
//! | 32       | m    | ChaCha20-Poly1305 ciphertext of the `m`-byte body  |
//! | 32 + m   | 16   | Poly1305 tag                                       |
//!
//! # Construction (an ECIES over X25519)
//!
//! ```text
//! e     = 32 bytes from the caller's RNG          E  = X25519(e, 9)
//! ss    = X25519(e, R)                            R  = the recipient (log) public key
//! v1:  okm = HKDF-SHA256(salt = E || R, ikm = ss, info = "postern-audit v1 body", L = 44)
//! v2:  okm = HKDF-SHA256(salt = E || R, ikm = ss, info = "postern-audit v2 body" || seq, L = 44)
//! key   = okm[0..32]                              nonce = okm[32..44]
//! sealed = E || ChaCha20-Poly1305(key, nonce, aad = header bytes, body)
//! ```
//!
//! `seq` is the record's sequence number, 8 bytes big-endian; the header's version byte says
//! which derivation a record used. Version 1 draws a fresh `e` for every record. Version 2
//! draws one per run of records sealed together ([`PreparedSeal`]; the engine's writer keeps
//! one for the group commits of up to 100 ms): the two scalar multiplications, nearly all of a
//! seal's cost, are paid once per run, not once per record. Every (key, nonce) pair is still used once: within a run each record has
//! its own sequence number, and a [`PreparedSeal`] refuses to seal a number that is not past
//! the last it sealed (a batch that failed to commit and is retried takes a fresh one). The
//! nonce is derived rather than random because nothing else would use it. The header bytes are
//! the associated data, so a body cannot be moved to another record or given another kind,
//! time or sequence number without the tag failing. Opening computes `ss = X25519(r, E)` and
//! refuses an `E` of small order (an all-zero shared secret); a verifier remembers the last
//! `E`'s agreement, so opening a version-2 run costs one multiplication too. HKDF's extract
//! step (salt `E || R`, ikm `ss`) is the same for a whole run, so it is done once per run; each
//! record pays for the expand step only.
//!
//! Records of one run share `E`, which says they were sealed together; that is no more than
//! their adjacent sequence numbers and times say already. Whoever learns `e` or `ss` (the
//! engine's memory while it seals, or the few seals kept ready ahead) opens that run, as
//! whoever learned a version-1 record's `e` opened that record. A seal's secret is zeroed when
//! it is dropped, after its run (moves may leave copies in freed memory, as for
//! any value; the engine keeps seals boxed so they move by pointer). The AEAD is ring's; it
//! does not zero a record's own key when done with it, which opens that record alone.
//!
//! Anyone holding `R` can seal, which is the point (the engine appends while the vault is
//! locked); it also means sealing proves nothing about who wrote a body. Integrity against a
//! writer comes from the chain and the trusted anchor, not from the AEAD.

use hkdf::Hkdf;
use rand_core::TryCryptoRng;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::error::{AppendError, FormatError, OpenError};
use crate::header::{FORMAT_VERSION, Header, Seq};
use crate::keys::{OpeningKey, RecipientKey};

/// Bytes a sealed body adds to its plaintext: the ephemeral key (32) and the tag (16).
pub const SEAL_OVERHEAD: usize = EPHEMERAL_LEN + TAG_LEN;

/// A body sealed to the log's recipient key (layout in the module docs). Holding one says the
/// bytes are long enough to be a sealed body, not that they open.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SealedBody(Vec<u8>);

impl SealedBody {
    /// Wraps stored bytes, refusing any shorter than [`SEAL_OVERHEAD`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<SealedBody, FormatError> {
        check_len(&bytes)?;
        Ok(SealedBody(bytes))
    }

    /// The stored bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The stored bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// Length of the body inside.
    pub fn plaintext_len(&self) -> usize {
        self.0.len() - SEAL_OVERHEAD
    }
}

/// The costly part of sealing, done once for a run of records (on any thread, before their
/// places in the chain are known): a fresh ephemeral X25519 key and its agreement with the
/// recipient, two scalar multiplications. [`crate::Chain::append_prepared`] seals each record of
/// the run with it under a key of the record's own (version 2); it refuses a sequence number
/// not past the last one it sealed, so no key is ever derived twice. Debug never shows the
/// secret, and it is zeroed when dropped.
pub struct PreparedSeal {
    ephemeral_public: [u8; 32],
    /// HKDF's pseudorandom key for the run: extracted from the agreement once.
    prk: Zeroizing<[u8; 32]>,
    recipient: RecipientKey,
    last: Option<Seq>,
}

impl PreparedSeal {
    /// Draws the ephemeral key from `rng` and agrees a secret with `recipient`.
    pub fn new<R: TryCryptoRng + ?Sized>(
        recipient: &RecipientKey,
        rng: &mut R,
    ) -> Result<PreparedSeal, AppendError> {
        let mut ephemeral = Zeroizing::new([0u8; 32]);
        rng.try_fill_bytes(ephemeral.as_mut())
            .map_err(|e| AppendError::Entropy {
                reason: e.to_string(),
            })?;
        let ephemeral = StaticSecret::from(*ephemeral);
        let ephemeral_public = PublicKey::from(&ephemeral);
        // `recipient` is never of small order, so the shared secret is never all zero.
        let shared = Zeroizing::new(ephemeral.diffie_hellman(recipient.point()).to_bytes());
        let ephemeral_public = ephemeral_public.to_bytes();
        Ok(PreparedSeal {
            prk: extract(&shared, &ephemeral_public, recipient),
            ephemeral_public,
            recipient: *recipient,
            last: None,
        })
    }

    /// The key this seal is for.
    pub fn recipient(&self) -> &RecipientKey {
        &self.recipient
    }

    /// Seals `body` as the record `header` (version 2), `header_bytes` being its encoding.
    pub(crate) fn seal(
        &mut self,
        header: &Header,
        header_bytes: &[u8],
        body: &[u8],
    ) -> Result<SealedBody, AppendError> {
        if self.last.is_some_and(|last| header.seq() <= last) {
            return Err(AppendError::SealReused);
        }
        // Always version 2's derivation, which binds the key to the record: under version 1's, a
        // run would share one key and nonce. (`Header::new` makes no other version.)
        debug_assert_eq!(header.version(), FORMAT_VERSION);
        let (cipher, nonce) = body_cipher(&self.prk, FORMAT_VERSION, header.seq());
        let mut out = Vec::with_capacity(SEAL_OVERHEAD + body.len());
        out.extend_from_slice(&self.ephemeral_public);
        out.extend_from_slice(body);
        let tag = cipher
            .seal_in_place_separate_tag(nonce, Aad::from(header_bytes), &mut out[EPHEMERAL_LEN..])
            .expect("ChaCha20-Poly1305 seals any body shorter than 256 GiB");
        out.extend_from_slice(tag.as_ref());
        self.last = Some(header.seq());
        Ok(SealedBody(out))
    }
}

impl std::fmt::Debug for PreparedSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSeal")
            .field("recipient", &self.recipient)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

/// Opens sealed bodies with one key, remembering the last ephemeral key's agreement: the
/// records of a version-2 run share it, so opening them in order costs one X25519 per run
/// ([`crate::SealedRecord::open_with`]). Use one per opening key.
#[derive(Default)]
pub struct Opener {
    last: Option<Agreed>,
}

/// An agreement an [`Opener`] remembers: the ephemeral key, the recipient key, the
/// pseudorandom key extracted from their secret.
type Agreed = ([u8; 32], [u8; 32], Zeroizing<[u8; 32]>);

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").finish_non_exhaustive()
    }
}

impl Opener {
    /// Opens `sealed` (stored bytes) of a record of format `version` at `seq` with `key`,
    /// checking `header_bytes` as associated data.
    pub(crate) fn open(
        &mut self,
        key: &OpeningKey,
        version: u8,
        seq: Seq,
        header_bytes: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        check_len(sealed)?;
        let (ephemeral, rest) = sealed.split_at(EPHEMERAL_LEN);
        let ephemeral: [u8; 32] = ephemeral.try_into().expect("split at 32");
        let recipient = key.recipient();
        let prk = match &self.last {
            Some((known, for_key, prk))
                if *known == ephemeral && for_key == recipient.as_bytes() =>
            {
                prk.clone()
            }
            _ => {
                let shared = key.secret().diffie_hellman(&PublicKey::from(ephemeral));
                if !shared.was_contributory() {
                    return Err(OpenError::Unreadable);
                }
                let prk = extract(&Zeroizing::new(shared.to_bytes()), &ephemeral, &recipient);
                self.last = Some((ephemeral, *recipient.as_bytes(), prk.clone()));
                prk
            }
        };
        let (cipher, nonce) = body_cipher(&prk, version, seq);
        // The ciphertext and its tag, opened in place: the plaintext is what precedes the tag.
        let mut body = rest.to_vec();
        let len = cipher
            .open_in_place(nonce, Aad::from(header_bytes), &mut body)
            .map_err(|_| OpenError::Unreadable)?
            .len();
        body.truncate(len);
        Ok(body)
    }
}

const EPHEMERAL_LEN: usize = 32;
const TAG_LEN: usize = 16;
const HKDF_INFO_V1: &[u8] = b"postern-audit v1 body";
const HKDF_INFO_V2: &[u8] = b"postern-audit v2 body";

/// HKDF's extract step over the agreement: salt `E || R`, ikm the shared secret. The same for
/// every record sealed with one ephemeral key, whatever their versions.
fn extract(
    shared: &[u8; 32],
    ephemeral_public: &[u8; 32],
    recipient: &RecipientKey,
) -> Zeroizing<[u8; 32]> {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(ephemeral_public);
    salt[32..].copy_from_slice(recipient.as_bytes());
    let (prk, _) = Hkdf::<Sha256>::extract(Some(&salt), shared);
    Zeroizing::new(prk.into())
}

/// The record's AEAD key and nonce, HKDF's expand step from the run's pseudorandom key
/// ([`extract`]) with the version's info (version 2's ends with the record's sequence number).
fn body_cipher(prk: &[u8; 32], version: u8, seq: Seq) -> (LessSafeKey, Nonce) {
    let mut info = [0u8; HKDF_INFO_V2.len() + 8];
    // Versions are checked when a header is decoded: 1 and 2 only.
    let info: &[u8] = match version {
        1 => HKDF_INFO_V1,
        _ => {
            info[..HKDF_INFO_V2.len()].copy_from_slice(HKDF_INFO_V2);
            info[HKDF_INFO_V2.len()..].copy_from_slice(&seq.get().to_be_bytes());
            &info
        }
    };
    let mut okm = Zeroizing::new([0u8; 44]);
    Hkdf::<Sha256>::from_prk(prk)
        .expect("a SHA-256 output is a valid pseudorandom key")
        .expand(info, okm.as_mut())
        .expect("44 bytes is within HKDF-SHA256's 8160-byte limit");
    let key = UnboundKey::new(&CHACHA20_POLY1305, &okm[..32]).expect("a 32-byte key");
    let nonce: [u8; 12] = okm[32..].try_into().expect("12 bytes");
    // Each (key, nonce) pair seals one record: see the module docs.
    (LessSafeKey::new(key), Nonce::assume_unique_for_key(nonce))
}

fn check_len(sealed: &[u8]) -> Result<(), FormatError> {
    if sealed.len() < SEAL_OVERHEAD {
        return Err(FormatError::BodyTooShort {
            len: sealed.len(),
            min: SEAL_OVERHEAD,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Infallible, TryRng};

    /// Counts up from a seed: enough to make distinct ephemeral keys in a unit test.
    struct Counter(u8);

    impl TryRng for Counter {
        type Error = Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Infallible> {
            unreachable!("seal only fills bytes")
        }
        fn try_next_u64(&mut self) -> Result<u64, Infallible> {
            unreachable!("seal only fills bytes")
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
            self.0 = self.0.wrapping_add(1);
            dst.fill(self.0);
            Ok(())
        }
    }
    impl TryCryptoRng for Counter {}

    fn header(seq: u64) -> (Header, Vec<u8>) {
        let header = Header::new(
            Seq::new(seq),
            crate::UnixMillis::new(1),
            crate::EventKind::from_static("tool_call_intent"),
        );
        let bytes = header.encode();
        (header, bytes)
    }

    fn open(
        key: &OpeningKey,
        seq: u64,
        header_bytes: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        Opener::default().open(key, 2, Seq::new(seq), header_bytes, sealed)
    }

    #[test]
    fn seal_then_open_round_trips_and_binds_the_header() {
        let key = OpeningKey::from_bytes([3; 32]);
        let mut prepared = PreparedSeal::new(&key.recipient(), &mut Counter(0)).unwrap();
        let (h, bytes) = header(5);
        let sealed = prepared.seal(&h, &bytes, b"body").unwrap();
        assert_eq!(sealed.as_bytes().len(), 4 + SEAL_OVERHEAD);
        assert_eq!(sealed.plaintext_len(), 4);
        assert_eq!(open(&key, 5, &bytes, sealed.as_bytes()).unwrap(), b"body");
        let (_, other_header) = header(6);
        assert_eq!(
            open(&key, 5, &other_header, sealed.as_bytes()),
            Err(OpenError::Unreadable)
        );
        // The key is the record's own: derived with another sequence number, it opens nothing.
        assert_eq!(
            open(&key, 6, &bytes, sealed.as_bytes()),
            Err(OpenError::Unreadable)
        );
        let other = OpeningKey::from_bytes([4; 32]);
        assert_eq!(
            open(&other, 5, &bytes, sealed.as_bytes()),
            Err(OpenError::Unreadable)
        );
    }

    #[test]
    fn a_run_shares_its_ephemeral_key_and_each_record_has_its_own_key() {
        let key = OpeningKey::from_bytes([3; 32]);
        let mut rng = Counter(0);
        let mut run = PreparedSeal::new(&key.recipient(), &mut rng).unwrap();
        let (h1, b1) = header(1);
        let (h2, b2) = header(2);
        let a = run.seal(&h1, &b1, b"same").unwrap();
        let b = run.seal(&h2, &b2, b"same").unwrap();
        assert_eq!(
            a.as_bytes()[..32],
            b.as_bytes()[..32],
            "one ephemeral key per run"
        );
        assert_ne!(
            a.as_bytes()[32..],
            b.as_bytes()[32..],
            "a keystream used twice"
        );
        let mut opener = Opener::default();
        for (seq, bytes, sealed) in [(1, &b1, &a), (2, &b2, &b)] {
            let body = opener.open(&key, 2, Seq::new(seq), bytes, sealed.as_bytes());
            assert_eq!(body.unwrap(), b"same");
        }
        let next = PreparedSeal::new(&key.recipient(), &mut rng).unwrap();
        assert_ne!(next.ephemeral_public, run.ephemeral_public);
    }

    #[test]
    fn a_run_never_seals_a_sequence_number_twice() {
        let key = OpeningKey::from_bytes([3; 32]);
        let mut run = PreparedSeal::new(&key.recipient(), &mut Counter(0)).unwrap();
        let (h2, b2) = header(2);
        run.seal(&h2, &b2, b"first").unwrap();
        // A batch put back and retried with the same seal would reuse the key and nonce.
        assert_eq!(run.seal(&h2, &b2, b"other"), Err(AppendError::SealReused));
        let (h1, b1) = header(1);
        assert_eq!(run.seal(&h1, &b1, b"earlier"), Err(AppendError::SealReused));
        let (h3, b3) = header(3);
        assert!(run.seal(&h3, &b3, b"next").is_ok());
    }

    #[test]
    fn short_and_small_order_bodies_are_refused() {
        let key = OpeningKey::from_bytes([3; 32]);
        assert_eq!(
            open(&key, 1, b"h", &[0; 47]),
            Err(OpenError::Format(FormatError::BodyTooShort {
                len: 47,
                min: 48
            }))
        );
        assert_eq!(
            SealedBody::from_bytes(vec![0; 47]).unwrap_err().code(),
            "audit_body_malformed"
        );
        // E = 0 (small order): refused before any decryption.
        assert_eq!(open(&key, 1, b"h", &[0; 48]), Err(OpenError::Unreadable));
    }
}
