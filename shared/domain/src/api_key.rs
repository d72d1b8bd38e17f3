//! Project API keys (`cpeer_…`) and the Core admin key. A project key is shown once; only its
//! SHA-256 is stored. Comparisons of secrets run in constant time.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::project::Name;
use crate::{ApiKeyId, ProjectId, Timestamp};

pub const PROJECT_KEY_PREFIX: &str = "cpeer_";
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// 32 random bytes need 43 base-62 digits (62^43 > 2^256).
const SECRET_DIGITS: usize = 43;

/// The plaintext of a project key. Exists only between generation and the one response that
/// shows it; never stored, logged or rendered by `Debug`.
pub struct ProjectKeySecret(String);

impl ProjectKeySecret {
    /// Builds a key from 32 random bytes supplied by the caller.
    pub fn from_random(bytes: [u8; 32]) -> Self {
        Self(format!("{PROJECT_KEY_PREFIX}{}", base62(&bytes)))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> KeyHash {
        KeyHash::of(&self.0)
    }

    /// The last four characters, kept so that people can tell their keys apart.
    pub fn hint(&self) -> String {
        self.0[self.0.len() - 4..].to_owned()
    }
}

impl std::fmt::Debug for ProjectKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProjectKeySecret(…)")
    }
}

/// Whether a presented bearer token has the shape of a project key (cheap rejection before any
/// storage read).
pub fn looks_like_project_key(token: &str) -> bool {
    token
        .strip_prefix(PROJECT_KEY_PREFIX)
        .is_some_and(|rest| rest.len() == SECRET_DIGITS && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Hex SHA-256 of a presented or generated key: what storage holds and looks up.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyHash(String);

impl KeyHash {
    pub fn of(token: &str) -> Self {
        Self(hex::encode(Sha256::digest(token.as_bytes())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What is stored about a project key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub project_id: ProjectId,
    pub name: Name,
    pub hint: String,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// The Core admin key: deployment configuration, never stored in a table.
#[derive(Clone)]
pub struct CoreKey(String);

impl CoreKey {
    /// Refuses keys too short to be secrets.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        (key.len() >= 16).then_some(Self(key))
    }

    pub fn from_random(bytes: [u8; 32]) -> Self {
        Self(format!("core_{}", base62(&bytes)))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison: digests of equal length, compared with `subtle`.
    pub fn matches(&self, presented: &str) -> bool {
        let expected = Sha256::digest(self.0.as_bytes());
        let given = Sha256::digest(presented.as_bytes());
        expected.ct_eq(&given).into()
    }
}

impl std::fmt::Debug for CoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CoreKey(…)")
    }
}

/// The Core keys a deployment accepts: its current key and, during a rotation, the previous key
/// until `previous_until`. Read from a secret (or `AGENTPLANE_CORE_KEY`) that holds either the
/// key as plain text (the shape before rotation existed, still accepted) or
/// `{"current": "…", "previous": "…", "previous_until": "<RFC 3339>"}`.
#[derive(Clone)]
pub struct CoreKeys {
    current: CoreKey,
    previous: Option<(CoreKey, Timestamp)>,
}

/// Why a Core key secret's text is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreKeysError {
    #[error("the Core key `{0}` is shorter than 16 characters")]
    TooShort(&'static str),
    #[error("the Core key secret is JSON but not {{\"current\", \"previous\"?, \"previous_until\"?}}")]
    Shape,
    #[error("`previous_until` must be an RFC 3339 time, and is required with `previous`")]
    PreviousUntil,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CoreKeysText {
    current: String,
    #[serde(default)]
    previous: Option<String>,
    #[serde(default)]
    previous_until: Option<String>,
}

impl CoreKeys {
    pub fn single(key: CoreKey) -> Self {
        Self { current: key, previous: None }
    }

    /// The keys a secret's text holds: a JSON object (text starting with `{`), else the whole
    /// text is the one key.
    pub fn parse(text: &str) -> Result<Self, CoreKeysError> {
        let text = text.trim();
        if !text.starts_with('{') {
            return CoreKey::new(text).map(Self::single).ok_or(CoreKeysError::TooShort("current"));
        }
        let parsed: CoreKeysText = serde_json::from_str(text).map_err(|_| CoreKeysError::Shape)?;
        let current = CoreKey::new(parsed.current).ok_or(CoreKeysError::TooShort("current"))?;
        let previous = match (parsed.previous, parsed.previous_until) {
            (None, None) => None,
            (Some(key), Some(until)) => Some((
                CoreKey::new(key).ok_or(CoreKeysError::TooShort("previous"))?,
                Timestamp::parse_rfc3339(&until).ok_or(CoreKeysError::PreviousUntil)?,
            )),
            _ => return Err(CoreKeysError::PreviousUntil),
        };
        Ok(Self { current, previous })
    }

    pub fn current(&self) -> &CoreKey {
        &self.current
    }

    /// Until when the previous key is accepted, if there is one.
    pub fn previous_until(&self) -> Option<Timestamp> {
        self.previous.as_ref().map(|(_, until)| *until)
    }

    /// Whether `presented` is the current key, or the previous one before its expiry. Both are
    /// always compared (in constant time), so the answer's timing says nothing about which.
    pub fn accept(&self, presented: &str, now: Timestamp) -> bool {
        let current = self.current.matches(presented);
        let previous =
            self.previous.as_ref().is_some_and(|(key, until)| key.matches(presented) & (now < *until));
        current | previous
    }
}

impl std::fmt::Debug for CoreKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreKeys").field("previous_until", &self.previous_until()).finish_non_exhaustive()
    }
}

/// Big-endian base-62 of `bytes`, left-padded to a fixed width so every key has one length.
fn base62(bytes: &[u8; 32]) -> String {
    let mut number: Vec<u32> = bytes.iter().map(|&b| u32::from(b)).collect();
    let mut digits = Vec::with_capacity(SECRET_DIGITS);
    while digits.len() < SECRET_DIGITS {
        let mut remainder = 0u32;
        for limb in number.iter_mut() {
            let acc = remainder * 256 + *limb;
            *limb = acc / 62;
            remainder = acc % 62;
        }
        digits.push(BASE62[remainder as usize]);
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_core_keys_are_accepted_within_the_window_and_the_old_one_refused_after() {
        let keys = CoreKeys::parse(
            r#"{"current":"core_new_key_0123456789","previous":"core_old_key_0123456789","previous_until":"2026-12-01T12:00:00Z"}"#,
        )
        .expect("keys");
        let before = Timestamp::parse_rfc3339("2026-12-01T11:59:59Z").expect("time");
        let after = Timestamp::parse_rfc3339("2026-12-01T12:00:00Z").expect("time");
        assert!(keys.accept("core_new_key_0123456789", before));
        assert!(keys.accept("core_old_key_0123456789", before));
        assert!(keys.accept("core_new_key_0123456789", after));
        assert!(!keys.accept("core_old_key_0123456789", after));
        assert!(!keys.accept("core_other_key_0123456789", before));
        assert!(!keys.accept("", before));
    }

    #[test]
    fn a_plain_core_key_secret_is_still_one_key() {
        let keys = CoreKeys::parse("  plain_core_key_0123456789\n").expect("plain");
        assert!(keys.accept("plain_core_key_0123456789", Timestamp::from_unix_millis(0)));
        assert_eq!(keys.previous_until(), None);
        assert_eq!(CoreKeys::parse("short").err(), Some(CoreKeysError::TooShort("current")));
        let only = CoreKeys::parse(r#"{"current":"core_new_key_0123456789"}"#).expect("current only");
        assert!(only.accept("core_new_key_0123456789", Timestamp::from_unix_millis(0)));
        for bad in [
            r#"{"current":"core_new_key_0123456789","previous":"core_old_key_0123456789"}"#,
            r#"{"current":"core_new_key_0123456789","previous":"core_old_key_0123456789","previous_until":"soon"}"#,
            r#"{"current":"core_new_key_0123456789","previous":"short","previous_until":"2026-12-01T12:00:00Z"}"#,
            r#"{"current":"core_new_key_0123456789","extra":1}"#,
            r#"{"current":"#,
        ] {
            assert!(CoreKeys::parse(bad).is_err(), "{bad}");
        }
        assert!(!format!("{only:?}").contains("core_new"));
    }

    #[test]
    fn project_keys_have_one_shape() {
        for seed in [0u8, 1, 0x7f, 0xff] {
            let key = ProjectKeySecret::from_random([seed; 32]);
            assert!(looks_like_project_key(key.expose()), "{}", key.expose());
            assert_eq!(key.expose().len(), PROJECT_KEY_PREFIX.len() + SECRET_DIGITS);
        }
        assert_ne!(
            ProjectKeySecret::from_random([1; 32]).expose(),
            ProjectKeySecret::from_random([2; 32]).expose()
        );
    }

    #[test]
    fn the_hash_is_sha256_hex_of_the_whole_token() {
        let key = ProjectKeySecret::from_random([9; 32]);
        assert_eq!(key.hash(), KeyHash::of(key.expose()));
        assert_eq!(key.hash().as_str().len(), 64);
    }

    #[test]
    fn malformed_tokens_are_not_project_keys() {
        assert!(!looks_like_project_key("cpeer_short"));
        assert!(!looks_like_project_key("Bearer cpeer_x"));
        assert!(!looks_like_project_key(&format!("cpeer_{}", "-".repeat(43))));
    }

    #[test]
    fn core_key_matches_only_itself() {
        let key = CoreKey::new("0123456789abcdef-secret").expect("long enough");
        assert!(key.matches("0123456789abcdef-secret"));
        assert!(!key.matches("0123456789abcdef-secreT"));
        assert!(!key.matches(""));
        assert!(CoreKey::new("short").is_none());
        assert_eq!(format!("{key:?}"), "CoreKey(…)");
    }
}
