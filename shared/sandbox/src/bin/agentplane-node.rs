//! agentplane-node: the sandbox node daemon. Configuration (environment):
//! - `AGENTPLANE_CORE_URL`: Core's base URL (e.g. `http://127.0.0.1:8080`).
//! - `AGENTPLANE_NODE_TOKEN`: the token `POST /core/v1/sandbox/nodes` returned.
//! - `AGENTPLANE_NODE_STATE_DIR`: where workspaces live (default `/var/lib/agentplane-node`).
//! - `AGENTPLANE_NODE_HEARTBEAT_S`: seconds between heartbeats (default 5).
//! - `AGENTPLANE_NODE_WORKSPACE_MAX_{DEPTH,ENTRIES,PATH_BYTES,LISTING_BYTES}`: the caps of a walk
//!   over a workspace (default 64, 100000, 4084, 32 MiB; see `workspace::Limits`).
//! - `AGENTPLANE_NODE_DISK_MB`: each sandbox's disk in MiB (default 10240; 0: none).

use std::time::Duration;

use anyhow::Context;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_target(false).init();
    let config = agentplane_sandbox::NodeConfig {
        core_url: std::env::var("AGENTPLANE_CORE_URL").context("AGENTPLANE_CORE_URL is not set")?,
        token: std::env::var("AGENTPLANE_NODE_TOKEN").context("AGENTPLANE_NODE_TOKEN is not set")?,
        state_dir: std::env::var_os("AGENTPLANE_NODE_STATE_DIR")
            .map(Into::into)
            .unwrap_or_else(|| "/var/lib/agentplane-node".into()),
        heartbeat_every: Duration::from_secs(
            std::env::var("AGENTPLANE_NODE_HEARTBEAT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(5),
        ),
        workspace_limits: agentplane_sandbox::local::workspace::Limits::from_env(),
        disk_size_mb: agentplane_sandbox::disk_size_mb_from_env()?,
    };
    tokio::select! {
        result = agentplane_sandbox::run(config) => result,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
