//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`,
//! one `v1,…` per secret that signs (several during a rotation), separated by spaces.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ValidationError;

/// The prefix of a secret's text form.
pub const SECRET_PREFIX: &str = "whsec_";
/// The bytes of key material in a secret we generate.
pub const SECRET_BYTES: usize = 32;

/// A signing key: the bytes behind `whsec_<base64>`.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(Vec<u8>);

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(…)")
    }
}

impl SigningSecret {
    /// From random bytes (the caller owns the randomness).
    pub fn from_random(bytes: [u8; SECRET_BYTES]) -> Self {
        Self(bytes.to_vec())
    }

    /// `whsec_` and base64 of 24 to 64 bytes.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let refuse =
            || ValidationError::new("secret", "`secret` must be `whsec_` and base64 of 24 to 64 bytes");
        let encoded = text.strip_prefix(SECRET_PREFIX).ok_or_else(refuse)?;
        let bytes = STANDARD.decode(encoded).map_err(|_| refuse())?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(refuse());
        }
        Ok(Self(bytes))
    }

    /// The text form, shown to the endpoint's owner once.
    pub fn expose(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        // HMAC takes keys of any length; this cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else { return String::new() };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The three headers of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`: the message id (the same on every attempt).
    pub id: String,
    /// `webhook-timestamp`: Unix seconds of this attempt.
    pub timestamp: String,
    /// `webhook-signature`: space-separated `v1,…`, one per secret.
    pub signature: String,
}

impl SignedHeaders {
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            ("webhook-id", &self.id),
            ("webhook-timestamp", &self.timestamp),
            ("webhook-signature", &self.signature),
        ]
    }
}

/// Signs `body` of message `id` at `timestamp` (Unix seconds) with every secret given.
pub fn sign(id: &str, timestamp: i64, body: &[u8], secrets: &[SigningSecret]) -> SignedHeaders {
    let signature = secrets.iter().map(|s| s.sign(id, timestamp, body)).collect::<Vec<_>>().join(" ");
    SignedHeaders { id: id.to_owned(), timestamp: timestamp.to_string(), signature }
}
