//! The local gateway's webhook targets: public hosts, plus the receivers
//! `AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE` lists (`host:port`, comma-separated; none by default),
//! and never the emulator (the AWS endpoint's port) or the gateway itself (its listen port),
//! even when listed: the gateway refuses to start with such an entry.

use agentplane_domain::webhook::targets::PrivateTargets;
use agentplane_engine::webhooks::{private_targets, url_port};
use anyhow::Context;

/// The targets of the allow-list `list` for a gateway listening on `listen` (`host:port`)
/// against the emulator at `aws_endpoint`.
pub fn targets(list: &str, listen: &str, aws_endpoint: &str) -> anyhow::Result<PrivateTargets> {
    let listen_port = listen
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .with_context(|| format!("the listen address {listen} names no port"))?;
    let mut refused = vec![(listen_port, "this gateway")];
    if let Some(port) = url_port(aws_endpoint) {
        refused.push((port, "the AWS endpoint"));
    }
    // The error names the variable.
    Ok(private_targets(list, &refused)?)
}
