//! A sandbox's envd access token: 32 random bytes, base64url (43 characters), made when a
//! client creates the sandbox. The node gets it in the `CreateSandbox` command; the sandbox's
//! record keeps it sealed with the deployment's key (the one webhook signing secrets are sealed
//! with), bound to the sandbox id, so Core can hand it back to the owning project on connect and
//! on reads, and a copied sealed value opens for no other sandbox.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use agentplane_domain::sandbox::{Sandbox, SandboxId};

use crate::webhooks::{SealError, SealKey};

/// Why a token could not be made or opened.
#[derive(Debug, thiserror::Error)]
pub enum EnvdTokenError {
    #[error("no randomness for a token")]
    Randomness,
    #[error(transparent)]
    Seal(#[from] SealError),
}

/// A fresh token: its text (for the node and the client) and its sealed form (for the record).
pub struct EnvdToken {
    pub text: String,
    pub sealed: String,
}

/// What a sealed token is bound to: its sandbox, under a name of its own (never a webhook's).
fn context(id: &SandboxId) -> String {
    format!("envd-token:{id}")
}

pub fn issue(key: &SealKey, id: &SandboxId) -> Result<EnvdToken, EnvdTokenError> {
    let bytes = crate::random::secret::<32>().map_err(|_| EnvdTokenError::Randomness)?;
    let text = URL_SAFE_NO_PAD.encode(bytes);
    let sealed = key.seal(&context(id), text.as_bytes())?;
    Ok(EnvdToken { text, sealed })
}

/// The sandbox's token, when it has one.
pub fn open(key: &SealKey, sandbox: &Sandbox) -> Result<Option<String>, EnvdTokenError> {
    let Some(sealed) = &sandbox.envd_token_sealed else { return Ok(None) };
    let plain = key.open(&context(&sandbox.id), sealed)?;
    String::from_utf8(plain).map(Some).map_err(|_| EnvdTokenError::Seal(SealError::Open))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_long_url_safe_and_opens_only_for_its_sandbox() {
        let key = SealKey::from_bytes(&[3; 32]).expect("key");
        let a = SandboxId::from_random([1; 16]);
        let token = issue(&key, &a).expect("issued");
        assert_eq!(token.text.len(), 43);
        assert!(token.text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert!(!token.sealed.contains(&token.text));
        let other = issue(&key, &a).expect("issued");
        assert_ne!(token.text, other.text);

        let mut sandbox = agentplane_domain::sandbox::Sandbox {
            id: a,
            project_id: agentplane_domain::ProjectId::from_random([1; 16]),
            node_id: "7b0c6a3e-0e7a-4b8e-9d7e-2f3c4d5e6f70".parse().expect("node id"),
            started_at: agentplane_domain::Timestamp::from_unix_seconds(1),
            lifecycle: agentplane_domain::sandbox::Lifecycle::start(
                agentplane_domain::Timestamp::from_unix_seconds(1),
                60,
            ),
            metadata: Default::default(),
            env_vars: Default::default(),
            isolation: Default::default(),
            session_id: None,
            envd_token_sealed: Some(token.sealed.clone()),
        };
        assert_eq!(open(&key, &sandbox).expect("opens"), Some(token.text.clone()));
        sandbox.id = SandboxId::from_random([2; 16]);
        assert!(open(&key, &sandbox).is_err(), "a sealed token copied to another sandbox");
        sandbox.envd_token_sealed = None;
        assert_eq!(open(&key, &sandbox).expect("none"), None);
    }
}
