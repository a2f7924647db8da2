//! The vault key: 32 random bytes that exist in the clear only in the engine's memory while
//! the vault is unlocked. The keychain holds it wrapped under the person's passphrase
//! ([`WrappedKey`]: argon2id, then XChaCha20-Poly1305), so another process of the same user
//! that reads the keychain gets ciphertext, and only someone who knows the passphrase gets
//! the key back.
//!
//! With the key the engine seals values ([`VaultKey::seal`]: credential values in the
//! keychain) and authenticates rows it wrote ([`VaultKey::mac`]: settings in the store), so a
//! value read or a row edited behind the engine's back is useless or detected.
//!
//! Formats (all integers little-endian):
//! - wrapped key: `PVK1` | m (KiB, u32) | t (u32) | p (u32) | salt (16) | nonce (24) |
//!   ciphertext and tag (48). The associated data is everything before the nonce, so the
//!   parameters cannot be changed without the unwrap failing.
//! - sealed value: `PSV1` | nonce (24) | ciphertext | tag (16), the associated data being
//!   the value's purpose (e.g. the keychain item's name): a sealed value moved to another
//!   item does not open.

use argon2::{Algorithm, Argon2, Params, Version};
use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroize;

use crate::Secret;

const KEY_LEN: usize = 32;
const SALT_LEN: usize = 16;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const WRAPPED_MAGIC: &[u8; 4] = b"PVK1";
const SEALED_MAGIC: &[u8; 4] = b"PSV1";
const WRAPPED_HEADER: usize = 4 + 12 + SALT_LEN;
const WRAPPED_LEN: usize = WRAPPED_HEADER + NONCE_LEN + KEY_LEN + TAG_LEN;

/// The argon2id cost of a new wrapping: 64 MiB, 3 passes, 1 lane (RFC 9106's second
/// recommended setting). About a quarter of a second on a laptop: slow for a guesser, quick
/// for a person.
pub const KDF_MEMORY_KIB: u32 = 64 * 1024;
/// Passes over the memory.
pub const KDF_PASSES: u32 = 3;

/// The most memory a wrapped key may ask argon2 for (1 GiB): a wrapping edited to ask for
/// more is refused rather than obeyed.
const KDF_MEMORY_MAX_KIB: u32 = 1024 * 1024;
/// The most passes a wrapped key may ask for.
const KDF_PASSES_MAX: u32 = 64;

/// Why a key could not be made, unwrapped or used. No variant carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The passphrase does not unwrap the key (or the wrapping was altered).
    #[error("the passphrase is not the one this vault was locked with")]
    WrongPassphrase,
    /// The bytes are not a wrapped key or a sealed value Postern wrote.
    #[error("{0}")]
    Malformed(String),
    /// A sealed value does not open with this key for this purpose.
    #[error("the value does not open with this vault's key")]
    NotOpened,
    /// The operating system gave no random bytes.
    #[error("no randomness from the operating system: {0}")]
    Random(String),
}

/// The vault key. `Debug` is redacted; the bytes are zeroized on drop.
pub struct VaultKey(Secret<[u8; KEY_LEN]>);

impl std::fmt::Debug for VaultKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VaultKey(<redacted>)")
    }
}

/// A copy is as secret as the original: redacted, zeroized when dropped.
impl Clone for VaultKey {
    fn clone(&self) -> Self {
        VaultKey(Secret::new(*self.0.expose()))
    }
}

impl VaultKey {
    /// A new random key.
    pub fn generate() -> Result<VaultKey, KeyError> {
        let mut bytes = [0u8; KEY_LEN];
        random(&mut bytes)?;
        Ok(VaultKey(Secret::new(bytes)))
    }

    /// This key wrapped under `passphrase`, with a fresh salt and nonce, at the default cost.
    pub fn wrap(&self, passphrase: &[u8]) -> Result<WrappedKey, KeyError> {
        self.wrap_with(passphrase, KDF_MEMORY_KIB, KDF_PASSES)
    }

    /// [`VaultKey::wrap`] at a chosen argon2id cost (tests use a cheap one).
    pub fn wrap_with(
        &self,
        passphrase: &[u8],
        memory_kib: u32,
        passes: u32,
    ) -> Result<WrappedKey, KeyError> {
        let mut bytes = Vec::with_capacity(WRAPPED_LEN);
        bytes.extend_from_slice(WRAPPED_MAGIC);
        for n in [memory_kib, passes, 1] {
            bytes.extend_from_slice(&n.to_le_bytes());
        }
        let mut salt = [0u8; SALT_LEN];
        random(&mut salt)?;
        bytes.extend_from_slice(&salt);
        let mut nonce = [0u8; NONCE_LEN];
        random(&mut nonce)?;
        let kek = derive(passphrase, &salt, memory_kib, passes)?;
        let mut body = *self.0.expose();
        let tag = XChaCha20Poly1305::new(&Key::from(*kek.expose()))
            .encrypt_inout_detached(&XNonce::from(nonce), &bytes, (&mut body[..]).into())
            .map_err(|_| KeyError::Malformed("the key could not be wrapped".into()))?;
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&tag);
        body.zeroize();
        Ok(WrappedKey { bytes })
    }

    /// `plaintext` sealed for `purpose` (authenticated encryption, a fresh nonce).
    pub fn seal(&self, purpose: &str, plaintext: &[u8]) -> Result<Vec<u8>, KeyError> {
        let mut nonce = [0u8; NONCE_LEN];
        random(&mut nonce)?;
        let mut out = Vec::with_capacity(4 + NONCE_LEN + plaintext.len() + TAG_LEN);
        out.extend_from_slice(SEALED_MAGIC);
        out.extend_from_slice(&nonce);
        let start = out.len();
        out.extend_from_slice(plaintext);
        let tag = self
            .cipher()
            .encrypt_inout_detached(
                &XNonce::from(nonce),
                purpose.as_bytes(),
                (&mut out[start..]).into(),
            )
            .map_err(|_| KeyError::Malformed("the value is too long to seal".into()))?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// Opens a value [`VaultKey::seal`] sealed for `purpose`.
    pub fn open(&self, purpose: &str, sealed: &[u8]) -> Result<Secret<Vec<u8>>, KeyError> {
        if !is_sealed(sealed) || sealed.len() < 4 + NONCE_LEN + TAG_LEN {
            return Err(KeyError::Malformed(
                "the value was not sealed by Postern".into(),
            ));
        }
        let nonce: [u8; NONCE_LEN] = sealed[4..4 + NONCE_LEN].try_into().expect("length");
        let (body, tag) = sealed[4 + NONCE_LEN..].split_at(sealed.len() - 4 - NONCE_LEN - TAG_LEN);
        let tag = Tag::try_from(tag).map_err(|_| KeyError::NotOpened)?;
        let mut buf = body.to_vec();
        let opened = self.cipher().decrypt_inout_detached(
            &XNonce::from(nonce),
            purpose.as_bytes(),
            (&mut buf[..]).into(),
            &tag,
        );
        let plain = Secret::new(buf);
        opened.map_err(|_| KeyError::NotOpened)?;
        Ok(plain)
    }

    /// An HMAC-SHA-256 of `data` for `purpose`: what the engine stores beside a row it
    /// wrote, to tell later whether the row is still the one it wrote.
    pub fn mac(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(self.0.expose()).expect("any length");
        mac.update(&(purpose.len() as u64).to_le_bytes());
        mac.update(purpose.as_bytes());
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is [`VaultKey::mac`] of `data` for `purpose` (compared in constant time).
    pub fn verify_mac(&self, purpose: &str, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(self.0.expose()).expect("any length");
        mac.update(&(purpose.len() as u64).to_le_bytes());
        mac.update(purpose.as_bytes());
        mac.update(data);
        mac.verify_slice(tag).is_ok()
    }

    /// Whether `other` is the same key (compared in constant time).
    pub fn same_as(&self, other: &VaultKey) -> bool {
        let check = self.mac("postern key check", b"");
        other.verify_mac("postern key check", b"", &check)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&Key::from(*self.0.expose()))
    }
}

/// A vault key wrapped under a passphrase, as the keychain holds it.
#[derive(Clone, PartialEq, Eq)]
pub struct WrappedKey {
    bytes: Vec<u8>,
}

impl std::fmt::Debug for WrappedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WrappedKey(..)")
    }
}

impl WrappedKey {
    /// Reads a wrapping from its stored bytes; its argon2 cost is checked against sane bounds.
    pub fn from_bytes(bytes: &[u8]) -> Result<WrappedKey, KeyError> {
        if bytes.len() != WRAPPED_LEN || &bytes[..4] != WRAPPED_MAGIC {
            return Err(KeyError::Malformed(
                "the stored vault key is not one Postern wrapped".into(),
            ));
        }
        let wrapped = WrappedKey {
            bytes: bytes.to_vec(),
        };
        let (m, t, p) = wrapped.params();
        if !(8..=KDF_MEMORY_MAX_KIB).contains(&m) || !(1..=KDF_PASSES_MAX).contains(&t) || p != 1 {
            return Err(KeyError::Malformed(format!(
                "the stored vault key asks for an argon2 cost Postern never uses ({m} KiB, {t} passes, {p} lanes)"
            )));
        }
        Ok(wrapped)
    }

    /// The bytes to store.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The key, if `passphrase` is the one it was wrapped under.
    pub fn unwrap_key(&self, passphrase: &[u8]) -> Result<VaultKey, KeyError> {
        let (m, t, _) = self.params();
        let salt = &self.bytes[16..WRAPPED_HEADER];
        let kek = derive(passphrase, salt, m, t)?;
        let nonce: [u8; NONCE_LEN] = self.bytes[WRAPPED_HEADER..WRAPPED_HEADER + NONCE_LEN]
            .try_into()
            .expect("length");
        let start = WRAPPED_HEADER + NONCE_LEN;
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&self.bytes[start..start + KEY_LEN]);
        let tag = Tag::try_from(&self.bytes[start + KEY_LEN..])
            .map_err(|_| KeyError::Malformed("the stored vault key is cut short".into()))?;
        let opened = XChaCha20Poly1305::new(&Key::from(*kek.expose())).decrypt_inout_detached(
            &XNonce::from(nonce),
            &self.bytes[..WRAPPED_HEADER],
            (&mut key[..]).into(),
            &tag,
        );
        let key = VaultKey(Secret::new(key));
        opened.map_err(|_| KeyError::WrongPassphrase)?;
        Ok(key)
    }

    fn params(&self) -> (u32, u32, u32) {
        let n = |at: usize| u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("length"));
        (n(4), n(8), n(12))
    }
}

/// Whether `bytes` look like a value [`VaultKey::seal`] made (a credential stored before
/// the vault had a key does not).
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(SEALED_MAGIC)
}

fn derive(
    passphrase: &[u8],
    salt: &[u8],
    memory_kib: u32,
    passes: u32,
) -> Result<Secret<[u8; KEY_LEN]>, KeyError> {
    let params = Params::new(memory_kib, passes, 1, Some(KEY_LEN))
        .map_err(|e| KeyError::Malformed(format!("argon2 parameters: {e}")))?;
    let mut bytes = [0u8; KEY_LEN];
    let derived = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase, salt, &mut bytes)
        .map_err(|e| KeyError::Malformed(format!("argon2: {e}")));
    let out = Secret::new(bytes);
    bytes.zeroize();
    derived.map(|()| out)
}

fn random(out: &mut [u8]) -> Result<(), KeyError> {
    getrandom::fill(out).map_err(|e| KeyError::Random(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheap(key: &VaultKey, passphrase: &str) -> WrappedKey {
        key.wrap_with(passphrase.as_bytes(), 64, 1).expect("wrap")
    }

    #[test]
    fn the_passphrase_unwraps_the_key_and_another_does_not() {
        let key = VaultKey::generate().expect("key");
        let wrapped = cheap(&key, "correct horse");
        let stored = WrappedKey::from_bytes(wrapped.as_bytes()).expect("parse");
        let back = stored.unwrap_key(b"correct horse").expect("unwrap");
        assert!(back.same_as(&key));
        assert_eq!(
            stored.unwrap_key(b"correct horsf").unwrap_err(),
            KeyError::WrongPassphrase
        );
        assert!(!VaultKey::generate().expect("other").same_as(&key));
    }

    #[test]
    fn an_edited_wrapping_is_refused() {
        let key = VaultKey::generate().expect("key");
        let wrapped = cheap(&key, "pass");
        // Every byte matters: the cost and salt are associated data, the rest is the cipher.
        for at in 4..WRAPPED_LEN {
            let mut bytes = wrapped.as_bytes().to_vec();
            bytes[at] ^= 1;
            let outcome = WrappedKey::from_bytes(&bytes).and_then(|w| w.unwrap_key(b"pass"));
            assert!(outcome.is_err(), "byte {at} flipped still unwrapped");
        }
        let mut costly = wrapped.as_bytes().to_vec();
        costly[4..8].copy_from_slice(&(4 * 1024 * 1024u32).to_le_bytes());
        let err = WrappedKey::from_bytes(&costly).unwrap_err();
        assert!(err.to_string().contains("argon2 cost"), "{err}");
        assert!(WrappedKey::from_bytes(b"plain text").is_err());
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_purpose() {
        let key = VaultKey::generate().expect("key");
        let sealed = key
            .seal("credential.github.v1", b"ghp_secret")
            .expect("seal");
        assert!(is_sealed(&sealed));
        assert!(
            !sealed.windows(10).any(|w| w == b"ghp_secret"),
            "the value is not in the clear"
        );
        let opened = key.open("credential.github.v1", &sealed).expect("open");
        assert_eq!(opened.expose(), b"ghp_secret");
        assert_eq!(
            key.open("credential.other.v1", &sealed).unwrap_err(),
            KeyError::NotOpened
        );
        let other = VaultKey::generate().expect("other");
        assert_eq!(
            other.open("credential.github.v1", &sealed).unwrap_err(),
            KeyError::NotOpened
        );
        assert!(
            key.open("x", b"ghp_secret").is_err(),
            "plain text is not sealed"
        );
    }

    #[test]
    fn a_mac_tells_an_edited_row() {
        let key = VaultKey::generate().expect("key");
        let tag = key.mac("settings", b"{\"mode\":\"prompt\"}");
        assert!(key.verify_mac("settings", b"{\"mode\":\"prompt\"}", &tag));
        assert!(!key.verify_mac("settings", b"{\"mode\":\"observe\"}", &tag));
        assert!(!key.verify_mac("every-use", b"{\"mode\":\"prompt\"}", &tag));
        let other = VaultKey::generate().expect("other");
        assert!(!other.verify_mac("settings", b"{\"mode\":\"prompt\"}", &tag));
    }

    #[test]
    fn debug_output_never_shows_key_bytes() {
        let key = VaultKey::generate().expect("key");
        assert_eq!(format!("{key:?}"), "VaultKey(<redacted>)");
    }
}
