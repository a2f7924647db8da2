//! Sealing a body to the log's public key, and opening it with the secret one.
//!
//! # Sealed body layout (version 1)
//!
//! | offset   | size | field                                              |
//! |---------:|-----:|----------------------------------------------------|
//! | 0        | 32   | ephemeral X25519 public key `E`                    |
//! | 32       | m    | ChaCha20-Poly1305 ciphertext of the `m`-byte body  |
//! | 32 + m   | 16   | Poly1305 tag                                       |
//!
//! # Construction (an ECIES over X25519, one fresh key per record)
//!
//! ```text
//! e     = 32 bytes from the caller's RNG          E  = X25519(e, 9)
//! ss    = X25519(e, R)                            R  = the recipient (log) public key
//! okm   = HKDF-SHA256(salt = E || R, ikm = ss, info = "postern-audit v1 body", L = 44)
//! key   = okm[0..32]                              nonce = okm[32..44]
//! sealed = E || ChaCha20-Poly1305(key, nonce, aad = header bytes, body)
//! ```
//!
//! Every record has its own ephemeral `e`, so every (key, nonce) pair is used once; the nonce is
//! derived rather than random because nothing else would use it. The header bytes are the
//! associated data, so a body cannot be moved to another record or given another kind, time
//! or sequence number without the tag failing. Opening computes `ss = X25519(r, E)` and refuses
//! an `E` of small order (an all-zero shared secret).
//!
//! Anyone holding `R` can seal, which is the point (the engine appends while the vault is
//! locked); it also means sealing proves nothing about who wrote a body. Integrity against a
//! writer comes from the chain and the trusted anchor, not from the AEAD.

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};
use hkdf::Hkdf;
use rand_core::TryCryptoRng;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::error::{AppendError, FormatError, OpenError};
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

/// The costly half of sealing one body, done ahead of time (on any thread, before the record's
/// place in the chain is known): a fresh ephemeral X25519 key and its agreement with the
/// recipient. Two scalar multiplications: about 95% of a seal. Consumed by
/// [`crate::Chain::append_prepared`]; the bytes it produces are exactly those of
/// [`crate::Chain::append`] with the same RNG output. Debug never shows the secret.
pub struct PreparedSeal {
    ephemeral_public: [u8; 32],
    shared: Zeroizing<[u8; 32]>,
    recipient: RecipientKey,
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
        let shared = ephemeral.diffie_hellman(recipient.point());
        Ok(PreparedSeal {
            ephemeral_public: ephemeral_public.to_bytes(),
            shared: Zeroizing::new(shared.to_bytes()),
            recipient: *recipient,
        })
    }

    /// The key this seal is for.
    pub fn recipient(&self) -> &RecipientKey {
        &self.recipient
    }
}

impl std::fmt::Debug for PreparedSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSeal")
            .field("recipient", &self.recipient)
            .finish_non_exhaustive()
    }
}

/// Seals `body` to `recipient` with `header_bytes` as associated data.
#[cfg(test)]
pub(crate) fn seal<R: TryCryptoRng + ?Sized>(
    recipient: &RecipientKey,
    header_bytes: &[u8],
    body: &[u8],
    rng: &mut R,
) -> Result<SealedBody, AppendError> {
    Ok(seal_prepared(
        PreparedSeal::new(recipient, rng)?,
        header_bytes,
        body,
    ))
}

/// Finishes a prepared seal: `body` encrypted with `header_bytes` as associated data.
pub(crate) fn seal_prepared(
    prepared: PreparedSeal,
    header_bytes: &[u8],
    body: &[u8],
) -> SealedBody {
    let (cipher, nonce) = body_cipher(
        &prepared.shared,
        &prepared.ephemeral_public,
        &prepared.recipient,
    );
    let mut out = Vec::with_capacity(SEAL_OVERHEAD + body.len());
    out.extend_from_slice(&prepared.ephemeral_public);
    out.extend_from_slice(body);
    let tag = cipher
        .encrypt_inout_detached(&nonce, header_bytes, (&mut out[EPHEMERAL_LEN..]).into())
        .expect("ChaCha20-Poly1305 seals any body shorter than 256 GiB");
    out.extend_from_slice(&tag);
    SealedBody(out)
}

/// Opens `sealed` (stored bytes) with `key`, checking `header_bytes` as associated data.
pub(crate) fn open(
    key: &OpeningKey,
    header_bytes: &[u8],
    sealed: &[u8],
) -> Result<Vec<u8>, OpenError> {
    check_len(sealed)?;
    let (ephemeral, rest) = sealed.split_at(EPHEMERAL_LEN);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
    let ephemeral: [u8; 32] = ephemeral.try_into().expect("split at 32");
    let shared = key.secret().diffie_hellman(&PublicKey::from(ephemeral));
    if !shared.was_contributory() {
        return Err(OpenError::Unreadable);
    }
    let (cipher, nonce) = body_cipher(shared.as_bytes(), &ephemeral, &key.recipient());
    let mut body = ciphertext.to_vec();
    let tag = Tag::try_from(tag).expect("split at 16 from the end");
    cipher
        .decrypt_inout_detached(&nonce, header_bytes, body.as_mut_slice().into(), &tag)
        .map_err(|_| OpenError::Unreadable)?;
    Ok(body)
}

const EPHEMERAL_LEN: usize = 32;
const TAG_LEN: usize = 16;
const HKDF_INFO: &[u8] = b"postern-audit v1 body";

/// The per-record AEAD key and nonce, from the shared secret and both public keys.
fn body_cipher(
    shared: &[u8; 32],
    ephemeral_public: &[u8; 32],
    recipient: &RecipientKey,
) -> (ChaCha20Poly1305, Nonce) {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(ephemeral_public);
    salt[32..].copy_from_slice(recipient.as_bytes());
    let mut okm = Zeroizing::new([0u8; 44]);
    Hkdf::<Sha256>::new(Some(&salt), shared)
        .expand(HKDF_INFO, okm.as_mut())
        .expect("44 bytes is within HKDF-SHA256's 8160-byte limit");
    let key: Zeroizing<[u8; 32]> = Zeroizing::new(okm[..32].try_into().expect("32 bytes"));
    let nonce: [u8; 12] = okm[32..].try_into().expect("12 bytes");
    (ChaCha20Poly1305::new(&Key::from(*key)), Nonce::from(nonce))
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

    #[test]
    fn seal_then_open_round_trips_and_binds_the_header() {
        let key = OpeningKey::from_bytes([3; 32]);
        let sealed = seal(&key.recipient(), b"header", b"body", &mut Counter(0)).unwrap();
        assert_eq!(sealed.as_bytes().len(), 4 + SEAL_OVERHEAD);
        assert_eq!(sealed.plaintext_len(), 4);
        assert_eq!(open(&key, b"header", sealed.as_bytes()).unwrap(), b"body");
        assert_eq!(
            open(&key, b"headex", sealed.as_bytes()),
            Err(OpenError::Unreadable)
        );
        let other = OpeningKey::from_bytes([4; 32]);
        assert_eq!(
            open(&other, b"header", sealed.as_bytes()),
            Err(OpenError::Unreadable)
        );
    }

    #[test]
    fn each_seal_uses_a_fresh_ephemeral_key() {
        let key = OpeningKey::from_bytes([3; 32]);
        let mut rng = Counter(0);
        let a = seal(&key.recipient(), b"h", b"same", &mut rng).unwrap();
        let b = seal(&key.recipient(), b"h", b"same", &mut rng).unwrap();
        assert_ne!(a.as_bytes()[..32], b.as_bytes()[..32]);
        assert_ne!(a.as_bytes()[32..], b.as_bytes()[32..]);
    }

    #[test]
    fn short_and_small_order_bodies_are_refused() {
        let key = OpeningKey::from_bytes([3; 32]);
        assert_eq!(
            open(&key, b"h", &[0; 47]),
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
        assert_eq!(open(&key, b"h", &[0; 48]), Err(OpenError::Unreadable));
    }
}
