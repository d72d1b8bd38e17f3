//! Webhook signing secrets at rest: sealed with AES-256-GCM (ring, already in the build through
//! the AWS SDK's TLS) under a deployment key, bound to their endpoint id as associated data so a
//! sealed secret copied to another endpoint does not open. Stored as base64 of nonce (12 bytes,
//! random) followed by the ciphertext and its tag.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// Why a secret could not be sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the webhook secret key must be base64 of 32 bytes")]
    BadKey,
    #[error("no randomness for a nonce")]
    Randomness,
    #[error("a sealed secret does not open with this key")]
    Open,
}

/// The deployment's key for webhook secrets (`AGENTPLANE_WEBHOOK_SECRET_KEY`: base64 of 32 bytes).
pub struct SealKey(LessSafeKey);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(…)")
    }
}

impl SealKey {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SealError> {
        if bytes.len() != 32 {
            return Err(SealError::BadKey);
        }
        let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| SealError::BadKey)?;
        Ok(Self(LessSafeKey::new(key)))
    }

    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        Self::from_bytes(&STANDARD.decode(text.trim()).map_err(|_| SealError::BadKey)?)
    }

    /// A key from a secret's text: base64 of 32 bytes as is; any other text of at least 32
    /// characters (what Secrets Manager generates) through SHA-256.
    pub fn from_secret_text(text: &str) -> Result<Self, SealError> {
        let text = text.trim();
        if let Ok(key) = Self::from_base64(text) {
            return Ok(key);
        }
        if text.chars().count() < 32 {
            return Err(SealError::BadKey);
        }
        use sha2::Digest as _;
        Self::from_bytes(&sha2::Sha256::digest(text.as_bytes()))
    }

    /// Seals `plaintext` for `context` (the endpoint id) under a fresh random nonce.
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError::Randomness)?;
        let mut data = plaintext.to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data,
            )
            .map_err(|_| SealError::Randomness)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(STANDARD.encode(out))
    }

    /// Opens what [`SealKey::seal`] sealed for the same `context`.
    pub fn open(&self, context: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let bytes = STANDARD.decode(sealed).map_err(|_| SealError::Open)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut data = data.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut data)
            .map_err(|_| SealError::Open)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_endpoint() {
        let key = SealKey::from_bytes(&[7; 32]).expect("key");
        let sealed = key.seal("ep_1", b"whsec_abc").expect("seal");
        assert!(!sealed.contains("whsec"));
        assert_eq!(key.open("ep_1", &sealed).expect("open"), b"whsec_abc");
        assert_ne!(key.seal("ep_1", b"whsec_abc").expect("seal"), sealed, "nonces are fresh");
        assert!(key.open("ep_2", &sealed).is_err());
        let other = SealKey::from_bytes(&[8; 32]).expect("key");
        assert!(other.open("ep_1", &sealed).is_err());
        assert!(key.open("ep_1", "AAAA").is_err());
        assert!(key.open("ep_1", "%%%").is_err());
    }

    #[test]
    fn keys_are_32_bytes_of_base64() {
        assert!(SealKey::from_base64(&STANDARD.encode([1u8; 32])).is_ok());
        assert!(SealKey::from_base64(&STANDARD.encode([1u8; 16])).is_err());
        assert!(SealKey::from_base64("not base64!").is_err());
        let generated = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9kLm2n";
        let a = SealKey::from_secret_text(generated).expect("generated text");
        let sealed = a.seal("ep", b"x").expect("seal");
        assert!(SealKey::from_secret_text(generated).expect("again").open("ep", &sealed).is_ok());
        assert!(SealKey::from_secret_text("short").is_err());
        assert_eq!(format!("{:?}", SealKey::from_bytes(&[1; 32]).expect("key")), "SealKey(…)");
    }
}
