//! The daemon's node token: where it comes from (configured, or enrolled with the deployment's
//! enrollment key), where it is kept (`node-token.json` in the state dir, 0600), and its
//! rotation — a new token is written to the state dir before any request carries it, so a
//! daemon that dies between the two restarts with a token Core accepts (the old one, within its
//! grace, which may rotate again).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::client::{CoreClient, enroll};

/// Enrollment: the key and the name this node enrolls under (when no token is configured).
#[derive(Clone)]
pub struct Enrollment {
    pub key: String,
    pub name: String,
}

impl std::fmt::Debug for Enrollment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enrollment").field("name", &self.name).finish_non_exhaustive()
    }
}

/// When the daemon rotates its token: every `every` (none: never on a schedule) and whenever
/// `now` is notified (the binary notifies it on SIGUSR1).
#[derive(Debug, Clone, Default)]
pub struct TokenRotation {
    pub every: Option<Duration>,
    pub now: Arc<tokio::sync::Notify>,
}

const FILE: &str = "node-token.json";

/// The kept token and what it descends from: `configured:<sha256 of the configured token>` or
/// `enrolled:<name>`. A kept token is used only while its origin is still the configuration's,
/// so an operator who configures a new token (after Core reissued one) is not overridden.
#[derive(Serialize, Deserialize)]
struct Kept {
    token: String,
    origin: String,
}

/// The token's origin, and where it is kept.
#[derive(Debug, Clone)]
pub struct TokenFile {
    path: PathBuf,
    origin: String,
}

impl TokenFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps `token` (written whole to a temporary file, then renamed over the old one).
    pub fn save(&self, token: &str) -> anyhow::Result<()> {
        let text = serde_json::to_string(&Kept { token: token.to_owned(), origin: self.origin.clone() })?;
        let tmp = self.path.with_extension("json.tmp");
        {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .with_context(|| format!("writing {}", tmp.display()))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path).with_context(|| format!("replacing {}", self.path.display()))?;
        Ok(())
    }

    fn load(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let kept: Kept = serde_json::from_str(&text).ok()?;
        (kept.origin == self.origin && !kept.token.is_empty()).then_some(kept.token)
    }
}

/// The token to start with: the kept one if it descends from this configuration, else the
/// configured one, else one enrollment hands out (kept before it is used).
pub async fn resolve(
    core_url: &str,
    configured: &str,
    enrollment: Option<&Enrollment>,
    state_dir: &Path,
) -> anyhow::Result<(String, TokenFile)> {
    let path = state_dir.join(FILE);
    if !configured.is_empty() {
        let origin = format!("configured:{}", hex::encode(sha2::Sha256::digest(configured.as_bytes())));
        let file = TokenFile { path, origin };
        let token = file.load().unwrap_or_else(|| configured.to_owned());
        return Ok((token, file));
    }
    let Some(enrollment) = enrollment else {
        anyhow::bail!(
            "no node token: set AGENTPLANE_NODE_TOKEN, or AGENTPLANE_NODE_ENROLLMENT_KEY to enroll"
        );
    };
    let file = TokenFile { path, origin: format!("enrolled:{}", enrollment.name) };
    if let Some(token) = file.load() {
        tracing::info!(name = %enrollment.name, "using the token this node enrolled with before");
        return Ok((token, file));
    }
    let token = enroll(core_url, &enrollment.key, &enrollment.name).await.context("enrolling the node")?;
    file.save(&token).context("keeping the enrolled token")?;
    tracing::info!(name = %enrollment.name, "node enrolled");
    Ok((token, file))
}

/// One rotation: a new token from Core, kept, then used.
pub async fn rotate_once(client: &CoreClient, file: &TokenFile) -> anyhow::Result<()> {
    let rotated = client.rotate_token().await?;
    file.save(&rotated.token).context("keeping the rotated token")?;
    client.set_token(rotated.token);
    tracing::info!(previous_expires_at = rotated.previous_token_expires_at, "node token rotated");
    Ok(())
}

/// Rotates as `rotation` says, until dropped. A failed rotation is logged and tried again at
/// the next occasion (the token held stays valid: Core replaced nothing, or it is in grace).
pub async fn rotation_loop(client: CoreClient, file: TokenFile, rotation: TokenRotation) {
    loop {
        match rotation.every {
            Some(every) => {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = rotation.now.notified() => {}
                }
            }
            None => rotation.now.notified().await,
        }
        if let Err(err) = rotate_once(&client, &file).await {
            tracing::warn!(error = %format!("{err:#}"), "rotating the node token failed");
        }
    }
}
