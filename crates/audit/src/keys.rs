//! The log's X25519 key pair.
//!
//! Bodies are sealed to the [`RecipientKey`] (public: the engine holds it always, so it appends
//! while the vault is locked) and opened with the [`OpeningKey`] (secret: kept in the OS keychain
//! by the caller and held in memory only while unlocked). Both serialize to 32 raw bytes or to
//! standard padded base64 (44 characters).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rand_core::TryCryptoRng;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::error::KeyError;

/// The public key bodies are sealed to. Never a low-order point (checked when made).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecipientKey(PublicKey);

/// The secret key that opens bodies. Debug shows only its public half; there is no `Display`;
/// the scalar is zeroized on drop.
#[derive(Clone)]
pub struct OpeningKey {
    secret: StaticSecret,
    recipient: RecipientKey,
}

impl RecipientKey {
    /// A recipient key from its 32 bytes; refuses low-order points.
    pub fn from_bytes(bytes: [u8; 32]) -> Result<RecipientKey, KeyError> {
        let key = PublicKey::from(bytes);
        // A low-order point multiplied by any clamped scalar is the identity: probing with one
        // fixed scalar tells the low-order points from the rest.
        if !StaticSecret::from([1; 32])
            .diffie_hellman(&key)
            .was_contributory()
        {
            return Err(KeyError::WeakPublicKey);
        }
        Ok(RecipientKey(key))
    }

    /// Parses standard padded base64.
    pub fn from_base64(text: &str) -> Result<RecipientKey, KeyError> {
        let bytes = decode_32(text)?;
        RecipientKey::from_bytes(*bytes)
    }

    /// The 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Standard padded base64.
    pub fn to_base64(&self) -> String {
        BASE64.encode(self.0.as_bytes())
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    pub(crate) fn point(&self) -> &PublicKey {
        &self.0
    }
}

impl fmt::Debug for RecipientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RecipientKey")
            .field(&self.to_base64())
            .finish()
    }
}

impl fmt::Display for RecipientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl OpeningKey {
    /// A fresh key pair from the caller's cryptographic RNG.
    pub fn generate<R: TryCryptoRng + ?Sized>(rng: &mut R) -> Result<OpeningKey, KeyError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        rng.try_fill_bytes(bytes.as_mut())
            .map_err(|e| KeyError::Entropy {
                reason: e.to_string(),
            })?;
        Ok(OpeningKey::from_bytes(*bytes))
    }

    /// The key from its 32 secret bytes (any 32 bytes are a valid X25519 secret). The caller
    /// should zeroize its own copy.
    pub fn from_bytes(bytes: [u8; 32]) -> OpeningKey {
        let secret = StaticSecret::from(bytes);
        let recipient = RecipientKey(PublicKey::from(&secret));
        OpeningKey { secret, recipient }
    }

    /// Parses standard padded base64 (as stored in the keychain).
    pub fn from_base64(text: &str) -> Result<OpeningKey, KeyError> {
        let bytes = decode_32(text)?;
        Ok(OpeningKey::from_bytes(*bytes))
    }

    /// The secret bytes, for storing in the keychain. Zeroized when dropped.
    pub fn expose_bytes(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(self.secret.to_bytes())
    }

    /// The secret as standard padded base64, for storing in the keychain. Zeroized when dropped.
    pub fn expose_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(BASE64.encode(self.secret.as_bytes()))
    }

    /// The public half, which bodies are sealed to.
    pub fn recipient(&self) -> RecipientKey {
        self.recipient
    }

    pub(crate) fn secret(&self) -> &StaticSecret {
        &self.secret
    }
}

impl fmt::Debug for OpeningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpeningKey")
            .field("secret", &"<redacted>")
            .field("recipient", &self.recipient)
            .finish()
    }
}

fn decode_32(text: &str) -> Result<Zeroizing<[u8; 32]>, KeyError> {
    let decoded = Zeroizing::new(BASE64.decode(text.trim()).map_err(|_| KeyError::Base64)?);
    let bytes: [u8; 32] = decoded
        .as_slice()
        .try_into()
        .map_err(|_| KeyError::Length { len: decoded.len() })?;
    Ok(Zeroizing::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_base64_and_bytes() {
        let key = OpeningKey::from_bytes([7; 32]);
        let again = OpeningKey::from_base64(&key.expose_base64()).unwrap();
        assert_eq!(*again.expose_bytes(), [7; 32]);
        assert_eq!(again.recipient(), key.recipient());
        let public = RecipientKey::from_base64(&key.recipient().to_base64()).unwrap();
        assert_eq!(public, key.recipient());
        assert_eq!(RecipientKey::from_bytes(public.to_bytes()), Ok(public));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let key = OpeningKey::from_bytes([0xab; 32]);
        let shown = format!("{key:?}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains(&*key.expose_base64()), "{shown}");
    }

    #[test]
    fn malformed_and_weak_keys_are_refused() {
        assert_eq!(
            RecipientKey::from_base64("not base64!"),
            Err(KeyError::Base64)
        );
        assert_eq!(
            RecipientKey::from_base64(&BASE64.encode([1u8; 31])),
            Err(KeyError::Length { len: 31 })
        );
        assert_eq!(
            OpeningKey::from_base64("").map(|_| ()),
            Err(KeyError::Length { len: 0 })
        );
        // The identity and the point of order 2 (u = 0, u = 1) and one of order 8.
        let mut order8 = [0u8; 32];
        order8[..8].copy_from_slice(&[0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae]);
        order8[8..16].copy_from_slice(&[0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a]);
        order8[16..24].copy_from_slice(&[0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd]);
        order8[24..].copy_from_slice(&[0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00]);
        let mut one = [0u8; 32];
        one[0] = 1;
        for weak in [[0u8; 32], one, order8] {
            assert_eq!(RecipientKey::from_bytes(weak), Err(KeyError::WeakPublicKey));
        }
    }
}
