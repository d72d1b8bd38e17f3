//! envd on the node: the data plane the E2B SDK speaks to a sandbox (Connect RPC `process` and
//! `filesystem`, `GET/POST /files`, `GET /health`), served by the node daemon itself for every
//! sandbox it hosts that has an access token. A request names its sandbox by the
//! `E2b-Sandbox-Id` header or by its host (`49983-{sandboxID}.{domain}`) and proves itself with
//! the sandbox's token in `X-Access-Token` (compared in constant time; a sandbox without a
//! token is not reachable at all). Processes run through the node's one start path, inside the
//! sandbox's containment, and are reported to Core as observed processes (`obs-<n>`, the number
//! reserved from Core's counter). Files are the sandbox's `/workspace` through the workspace
//! module's no-follow walk.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use agentplane_domain::sandbox::SandboxId;
use axum::Router;
use axum::routing::{get, post};
use http::HeaderMap;
use subtle::ConstantTimeEq;
use tokio::sync::Mutex;

use super::Node;
use crate::local::LocalSandbox;

pub mod connect;
mod files;
mod filesystem;
pub mod messages;
mod paths;
mod process;

use process::Running;
pub use process::Tapped;

use connect::{Code, ConnectError};

/// Where envd listens unless `AGENTPLANE_NODE_ENVD_ADDR` says otherwise: envd's own port, on
/// loopback (a team puts its proxy in front, see the README).
pub const DEFAULT_ADDR: &str = "127.0.0.1:49983";

/// Where envd listens: an address to bind, or a socket the caller bound already (a test or
/// the local gateway on an ephemeral port, which it must know before the node starts).
#[derive(Debug, Clone)]
pub enum Listen {
    Addr(SocketAddr),
    Bound(Arc<std::net::TcpListener>),
}

impl Listen {
    pub(super) async fn bind(&self) -> anyhow::Result<tokio::net::TcpListener> {
        match self {
            Self::Addr(addr) => tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("envd cannot listen on {addr}: {e}")),
            Self::Bound(listener) => {
                let listener = listener.try_clone()?;
                listener.set_nonblocking(true)?;
                Ok(tokio::net::TcpListener::from_std(listener)?)
            }
        }
    }
}

/// `AGENTPLANE_NODE_ENVD_ADDR`: unset: [`DEFAULT_ADDR`]; `off`: no envd.
pub fn listen_from_env() -> anyhow::Result<Option<Listen>> {
    let text = std::env::var("AGENTPLANE_NODE_ENVD_ADDR").unwrap_or_else(|_| DEFAULT_ADDR.to_owned());
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    text.trim()
        .parse()
        .map(|addr| Some(Listen::Addr(addr)))
        .map_err(|_| anyhow::anyhow!("AGENTPLANE_NODE_ENVD_ADDR must be host:port or off, got {text:?}"))
}

/// What envd holds for one sandbox: its token and the processes started through it.
pub struct Access {
    token: String,
    processes: Mutex<BTreeMap<u32, Arc<Running>>>,
}

impl Access {
    pub fn new(token: String) -> Arc<Self> {
        Arc::new(Self { token, processes: Mutex::new(BTreeMap::new()) })
    }

    fn admits(&self, presented: &[u8]) -> bool {
        bool::from(self.token.as_bytes().ct_eq(presented))
    }
}

/// The file a sandbox's token is kept in (root-only, beside its workspace, never inside it), so
/// that a restarted daemon serves the sandbox again.
fn token_file(node: &Node, id: &SandboxId) -> std::path::PathBuf {
    node.provider.state_dir().join("sandboxes").join(id.as_str()).join("envd.token")
}

pub(super) fn keep_token(node: &Node, id: &SandboxId, token: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(token_file(node, id))
        .and_then(|mut f| f.write_all(token.as_bytes()));
    if let Err(err) = written {
        tracing::warn!(sandbox = %id, error = %err, "could not keep the sandbox's envd token: a restarted node will not serve it");
    }
}

pub(super) fn kept_token(node: &Node, id: &SandboxId) -> Option<Arc<Access>> {
    let token = std::fs::read_to_string(token_file(node, id)).ok()?;
    (!token.is_empty()).then(|| Access::new(token))
}

/// The sandbox a request is for: `E2b-Sandbox-Id`, else a host `49983-{id}.…`.
fn sandbox_named(headers: &HeaderMap) -> Option<SandboxId> {
    let text = match headers.get("e2b-sandbox-id").and_then(|v| v.to_str().ok()) {
        Some(id) => id.trim().to_owned(),
        None => {
            let host = headers.get(http::header::HOST)?.to_str().ok()?;
            let first = host.split('.').next()?;
            first.strip_prefix("49983-")?.to_owned()
        }
    };
    text.parse().ok()
}

/// A request admitted for one sandbox.
pub(super) struct Admitted {
    pub sandbox: Arc<LocalSandbox>,
    pub access: Arc<Access>,
    pub paused: bool,
}

/// Why a request was not admitted.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    /// No sandbox named, not hosted here, no token, or the wrong one: one answer for all, so
    /// nothing tells a caller which sandboxes exist.
    #[error("the access token is missing or invalid for this sandbox")]
    Unauthenticated,
}

async fn admit(node: &Node, headers: &HeaderMap) -> Result<Admitted, Refused> {
    let presented = headers.get("x-access-token").map(|v| v.as_bytes().to_vec()).unwrap_or_default();
    let id = sandbox_named(headers).ok_or(Refused::Unauthenticated)?;
    let hosted = node.sandboxes.lock().await;
    let h = hosted.get(&id).ok_or(Refused::Unauthenticated)?;
    let access = h.envd.clone().ok_or(Refused::Unauthenticated)?;
    if presented.is_empty() || !access.admits(&presented) {
        tracing::info!(sandbox = %id, "envd request refused: wrong or missing access token");
        return Err(Refused::Unauthenticated);
    }
    Ok(Admitted { sandbox: h.sandbox.clone(), access, paused: h.paused })
}

impl From<Refused> for ConnectError {
    fn from(refused: Refused) -> Self {
        ConnectError::new(Code::Unauthenticated, refused.to_string())
    }
}

/// The routes envd answers.
pub(super) fn router(node: Arc<Node>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/files", get(files::download).post(files::upload))
        .route("/process.Process/{method}", post(process::call))
        .route("/filesystem.Filesystem/{method}", post(filesystem::call))
        .layer(axum::extract::DefaultBodyLimit::max(files::MAX_FILE_BYTES + 64 * 1024))
        .with_state(node)
}

async fn health() -> http::StatusCode {
    http::StatusCode::NO_CONTENT
}

/// Serves envd on `listener` until the daemon stops.
pub(super) async fn serve(node: Arc<Node>, listener: tokio::net::TcpListener) {
    let addr = listener.local_addr().ok();
    tracing::info!(?addr, "envd listening");
    if let Err(err) = axum::serve(listener, router(node)).await {
        tracing::error!(error = %err, "envd stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("header value"));
        }
        map
    }

    #[test]
    fn a_request_names_its_sandbox_by_header_or_by_host() {
        let id = SandboxId::from_random([7; 16]);
        let by_header = headers(&[("e2b-sandbox-id", id.as_str()), ("host", "127.0.0.1:49983")]);
        assert_eq!(sandbox_named(&by_header), Some(id.clone()));
        let host = format!("49983-{}.sandboxes.example.com", id.as_str());
        assert_eq!(sandbox_named(&headers(&[("host", &host)])), Some(id.clone()));
        // Another port's host, a malformed id, or nothing: no sandbox.
        let other_port = format!("8080-{}.sandboxes.example.com", id.as_str());
        assert_eq!(sandbox_named(&headers(&[("host", &other_port)])), None);
        assert_eq!(sandbox_named(&headers(&[("e2b-sandbox-id", "../etc")])), None);
        assert_eq!(sandbox_named(&HeaderMap::new()), None);
    }

    #[test]
    fn only_the_sandboxs_own_token_is_admitted() {
        let access = Access::new("secret-token".into());
        assert!(access.admits(b"secret-token"));
        assert!(!access.admits(b"secret-toke"));
        assert!(!access.admits(b"secret-token2"));
        assert!(!access.admits(b""));
    }
}
