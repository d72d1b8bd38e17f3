//! agentplane-node: the sandbox node daemon. Configuration (environment):
//! - `AGENTPLANE_CORE_URL`: Core's base URL (e.g. `http://127.0.0.1:8080`).
//! - `AGENTPLANE_NODE_TOKEN`: the token `POST /core/v1/sandbox/nodes` returned. Unset: the node
//!   enrolls with `AGENTPLANE_NODE_ENROLLMENT_KEY` (the deployment's `NodeEnrollmentSecret`)
//!   under `AGENTPLANE_NODE_NAME` (default: the hostname), once; the token is kept in the state
//!   dir (`node-token.json`) and reused on restart.
//! - `AGENTPLANE_NODE_TOKEN_ROTATE_S`: seconds between token rotations (default 86400; 0: only
//!   on demand). `kill -USR1 <pid>` rotates now. The new token is kept in the state dir before
//!   it is used; the old one stays accepted for Core's grace (10 minutes).
//! - `AGENTPLANE_NODE_STATE_DIR`: where workspaces live (default `/var/lib/agentplane-node`).
//! - `AGENTPLANE_NODE_HEARTBEAT_S`: seconds between heartbeats (default 5).
//! - `AGENTPLANE_NODE_WORKSPACE_MAX_{DEPTH,ENTRIES,PATH_BYTES,LISTING_BYTES}`: the caps of a walk
//!   over a workspace (default 64, 100000, 4084, 32 MiB; see `workspace::Limits`).
//! - `AGENTPLANE_NODE_DISK_MB`: each sandbox's disk in MiB (default 10240; 0: none).
//! - `AGENTPLANE_NODE_ENVD_ADDR`: where envd (the E2B SDK's data plane) listens (default
//!   `127.0.0.1:49983`; `off`: not served).

use std::time::Duration;

use anyhow::Context;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_target(false).init();
    let rotation = agentplane_sandbox::TokenRotation {
        every: match std::env::var("AGENTPLANE_NODE_TOKEN_ROTATE_S")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            Some(0) => None,
            Some(s) => Some(Duration::from_secs(s)),
            None => Some(Duration::from_secs(86_400)),
        },
        now: Default::default(),
    };
    let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())?;
    let on_demand = rotation.now.clone();
    tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            on_demand.notify_one();
        }
    });
    let config = agentplane_sandbox::NodeConfig {
        core_url: std::env::var("AGENTPLANE_CORE_URL").context("AGENTPLANE_CORE_URL is not set")?,
        token: std::env::var("AGENTPLANE_NODE_TOKEN").unwrap_or_default(),
        enrollment: match std::env::var("AGENTPLANE_NODE_ENROLLMENT_KEY") {
            Ok(key) if !key.trim().is_empty() => Some(agentplane_sandbox::Enrollment {
                key: key.trim().to_owned(),
                name: std::env::var("AGENTPLANE_NODE_NAME")
                    .ok()
                    .filter(|n| !n.trim().is_empty())
                    .or_else(hostname)
                    .context("AGENTPLANE_NODE_NAME is not set and the hostname is unreadable")?,
            }),
            _ => None,
        },
        rotation: rotation.clone(),
        state_dir: std::env::var_os("AGENTPLANE_NODE_STATE_DIR")
            .map(Into::into)
            .unwrap_or_else(|| "/var/lib/agentplane-node".into()),
        heartbeat_every: Duration::from_secs(
            std::env::var("AGENTPLANE_NODE_HEARTBEAT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(5),
        ),
        workspace_limits: agentplane_sandbox::local::workspace::Limits::from_env(),
        disk_size_mb: agentplane_sandbox::disk_size_mb_from_env()?,
        envd: agentplane_sandbox::daemon::envd::listen_from_env()?,
    };
    tokio::select! {
        result = agentplane_sandbox::run(config) => result,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The kernel's hostname (an EC2 instance's is derived from its id or address).
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}
