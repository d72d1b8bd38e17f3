//! Webhook signing secrets at rest: sealed with AES-256-GCM (ring, already in the build through
//! the AWS SDK's TLS) under a deployment key, bound to their endpoint id as associated data so a
//! sealed secret copied to another endpoint does not open.
//!
//! The key is versioned. A sealed value is base64 of nonce (12 bytes, random) followed by the
//! ciphertext and its tag, prefixed `v<N>:` when sealed under key version N ≥ 2; a value with no
//! prefix is version 1 — every value sealed before versions existed (base64 never holds `:`), and
//! what a deployment that never rotated still writes, so its stored values keep one format.
//! The key material ([`SealKey::from_secret_text`]) is one key (version 1, the shape before
//! versions), or `{"current": N, "keys": {"1": "<text>", …, "N": "<text>"}}`: new secrets are
//! sealed under `current`, every listed version opens. `reseal` moves old values to `current`.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// Why a secret could not be sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the webhook secret key must be base64 of 32 bytes")]
    BadKey,
    #[error(
        "the webhook secret key versions must be {{\"current\": N, \"keys\": {{\"N\": \"<key>\", …}}}} with N ≥ 1 among the keys"
    )]
    BadVersions,
    #[error("no randomness for a nonce")]
    Randomness,
    #[error("a sealed secret does not open with this key")]
    Open,
    #[error("a sealed secret names key version {0}, which the key material does not hold")]
    UnknownVersion(u32),
}

/// The deployment's keys for webhook secrets (`AGENTPLANE_WEBHOOK_SECRET_KEY`, or the stack's
/// `WebhookSecretKeySecret`): the current version seals, every version opens. A process that
/// re-reads its key's secret [`SealKey::update`]s it in place, so every holder sees new versions.
pub struct SealKey {
    versions: std::sync::RwLock<Versioned>,
}

struct Versioned {
    current: u32,
    keys: BTreeMap<u32, LessSafeKey>,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(…)")
    }
}

fn aes_key(bytes: &[u8]) -> Result<LessSafeKey, SealError> {
    if bytes.len() != 32 {
        return Err(SealError::BadKey);
    }
    let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| SealError::BadKey)?;
    Ok(LessSafeKey::new(key))
}

/// One key's text: base64 of 32 bytes as is; any other text of at least 32 characters (what
/// Secrets Manager generates) through SHA-256.
fn key_from_text(text: &str) -> Result<LessSafeKey, SealError> {
    let text = text.trim();
    if let Ok(bytes) = STANDARD.decode(text)
        && bytes.len() == 32
    {
        return aes_key(&bytes);
    }
    if text.chars().count() < 32 {
        return Err(SealError::BadKey);
    }
    use sha2::Digest as _;
    aes_key(&sha2::Sha256::digest(text.as_bytes()))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Versions {
    current: u32,
    keys: BTreeMap<String, String>,
}

impl SealKey {
    /// One key, version 1.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SealError> {
        Ok(Self::of(1, BTreeMap::from([(1, aes_key(bytes)?)])))
    }

    fn of(current: u32, keys: BTreeMap<u32, LessSafeKey>) -> Self {
        Self { versions: std::sync::RwLock::new(Versioned { current, keys }) }
    }

    /// Takes `other`'s versions (the secret was read again).
    pub fn update(&self, other: SealKey) {
        let other = other.versions.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut mine = self.versions.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *mine = other;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Versioned> {
        self.versions.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        Self::from_bytes(&STANDARD.decode(text.trim()).map_err(|_| SealError::BadKey)?)
    }

    /// The key material in a secret's text: the versions object (text starting with `{`), else
    /// one key (version 1) as [`key_from_text`] reads it.
    pub fn from_secret_text(text: &str) -> Result<Self, SealError> {
        let text = text.trim();
        if !text.starts_with('{') {
            return Ok(Self::of(1, BTreeMap::from([(1, key_from_text(text)?)])));
        }
        let versions: Versions = serde_json::from_str(text).map_err(|_| SealError::BadVersions)?;
        let mut keys = BTreeMap::new();
        for (version, key) in &versions.keys {
            let version: u32 = version.parse().ok().filter(|v| *v >= 1).ok_or(SealError::BadVersions)?;
            keys.insert(version, key_from_text(key)?);
        }
        if !keys.contains_key(&versions.current) {
            return Err(SealError::BadVersions);
        }
        Ok(Self::of(versions.current, keys))
    }

    /// The version new secrets are sealed under.
    pub fn current_version(&self) -> u32 {
        self.read().current
    }

    /// The key version a sealed value names (1 when it has no prefix); `None` when the prefix
    /// is malformed.
    pub fn version_of(sealed: &str) -> Option<u32> {
        match sealed.split_once(':') {
            None => Some(1),
            Some((prefix, _)) => prefix.strip_prefix('v')?.parse().ok().filter(|v| *v >= 2),
        }
    }

    /// Whether `sealed` is sealed under the current version (a re-seal leaves it alone).
    pub fn is_current(&self, sealed: &str) -> bool {
        Self::version_of(sealed) == Some(self.current_version())
    }

    /// Seals `plaintext` for `context` (the endpoint id) under the current version and a fresh
    /// random nonce.
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> Result<String, SealError> {
        let versions = self.read();
        let current = versions.current;
        let key = versions.keys.get(&current).ok_or(SealError::UnknownVersion(current))?;
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError::Randomness)?;
        let mut data = plaintext.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(context.as_bytes()),
            &mut data,
        )
        .map_err(|_| SealError::Randomness)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        let body = STANDARD.encode(out);
        Ok(if current == 1 { body } else { format!("v{current}:{body}") })
    }

    /// Opens what [`SealKey::seal`] sealed for the same `context`, under whichever version it
    /// names.
    pub fn open(&self, context: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let version = Self::version_of(sealed).ok_or(SealError::Open)?;
        let versions = self.read();
        let key = versions.keys.get(&version).ok_or(SealError::UnknownVersion(version))?;
        let body = sealed.split_once(':').map_or(sealed, |(_, body)| body);
        let bytes = STANDARD.decode(body).map_err(|_| SealError::Open)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut data = data.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut data)
            .map_err(|_| SealError::Open)?;
        Ok(plain.to_vec())
    }

    /// `sealed` under the current version: as it is when it already is, else opened and sealed
    /// again.
    pub fn reseal(&self, context: &str, sealed: &str) -> Result<String, SealError> {
        if self.is_current(sealed) {
            return Ok(sealed.to_owned());
        }
        self.seal(context, &self.open(context, sealed)?)
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

    /// A value sealed by the format before key versions (checked in): it is version 1.
    #[test]
    fn a_secret_sealed_before_key_versions_still_opens() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("fixtures/legacy_sealed_v1.json")).expect("fixture");
        let field = |name: &str| fixture[name].as_str().expect("fixture field").to_owned();
        let key = SealKey::from_secret_text(&field("key_text")).expect("key");
        let opened = key.open(&field("endpoint_id"), &field("sealed")).expect("opens");
        assert_eq!(opened, field("plaintext").as_bytes());
    }

    fn versions(current: u32, keys: &[(u32, &str)]) -> SealKey {
        let keys: serde_json::Map<String, serde_json::Value> =
            keys.iter().map(|(v, k)| (v.to_string(), serde_json::Value::from(*k))).collect();
        SealKey::from_secret_text(&serde_json::json!({ "current": current, "keys": keys }).to_string())
            .expect("versions")
    }

    const K1: &str = "FirstWebhookSealingKeyText0123456789abcdefXYZ";
    const K2: &str = "SecondWebhookSealingKeyText0123456789abcdefXY";

    #[test]
    fn a_new_key_seals_new_secrets_while_old_ones_stay_readable() {
        let old = SealKey::from_secret_text(K1).expect("one key");
        let sealed_v1 = old.seal("ep", b"whsec_1").expect("seal");
        assert_eq!(SealKey::version_of(&sealed_v1), Some(1));
        assert!(!sealed_v1.contains(':'), "version 1 keeps the format before versions");

        let both = versions(2, &[(1, K1), (2, K2)]);
        let sealed_v2 = both.seal("ep", b"whsec_2").expect("seal");
        assert!(sealed_v2.starts_with("v2:"), "{sealed_v2}");
        assert_eq!(both.open("ep", &sealed_v1).expect("v1 opens"), b"whsec_1");
        assert_eq!(both.open("ep", &sealed_v2).expect("v2 opens"), b"whsec_2");
        assert!(matches!(old.open("ep", &sealed_v2), Err(SealError::UnknownVersion(2))));

        // Re-sealing moves a value to the current version, and is a no-op on one already there.
        let moved = both.reseal("ep", &sealed_v1).expect("reseal");
        assert!(both.is_current(&moved) && moved.starts_with("v2:"));
        assert_eq!(both.open("ep", &moved).expect("opens"), b"whsec_1");
        assert_eq!(both.reseal("ep", &moved).expect("again"), moved);
        // Once every value is re-sealed, version 1 can leave the key material.
        let only_v2 = versions(2, &[(2, K2)]);
        assert_eq!(only_v2.open("ep", &moved).expect("opens"), b"whsec_1");
        assert!(only_v2.open("ep", &sealed_v1).is_err());
        // A process that reads the key material again sees the new versions in place.
        let held = SealKey::from_secret_text(K1).expect("one key");
        assert!(held.open("ep", &sealed_v2).is_err());
        held.update(versions(2, &[(1, K1), (2, K2)]));
        assert_eq!(held.open("ep", &sealed_v2).expect("opens after the update"), b"whsec_2");
        assert!(held.seal("ep", b"x").expect("seal").starts_with("v2:"));
        // The version is bound to its key: a value relabelled to another version does not open.
        let relabelled = format!("v2:{sealed_v1}");
        assert!(both.open("ep", &relabelled).is_err());
    }

    #[test]
    fn key_versions_must_hold_the_current_one() {
        for bad in [
            r#"{"current": 3, "keys": {"1": "FirstWebhookSealingKeyText0123456789abcdefXYZ"}}"#,
            r#"{"current": 1, "keys": {"0": "FirstWebhookSealingKeyText0123456789abcdefXYZ"}}"#,
            r#"{"current": 1, "keys": {"1": "short"}}"#,
            r#"{"current": 1}"#,
            r#"{"current": 1, "keys": {}, "extra": 1}"#,
        ] {
            assert!(SealKey::from_secret_text(bad).is_err(), "{bad}");
        }
        assert_eq!(SealKey::version_of("vx:AAAA"), None);
        assert_eq!(SealKey::version_of("v1:AAAA"), None, "version 1 has no prefix");
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
