//! The deployment's quotas, read from the environment once per process: the request rate per
//! project key and the caps on what a project holds (see README, "Quotas").

use agentplane_domain::quota::{ProjectCaps, RateLimit};

/// `AGENTPLANE_RATE_LIMIT_PER_MINUTE`: requests per project key per minute (fixed one-minute
/// windows); default 600, 0 turns the limit off.
pub fn rate_limit_from_env() -> Option<RateLimit> {
    match read("AGENTPLANE_RATE_LIMIT_PER_MINUTE") {
        Some(max) => RateLimit::new(u32::try_from(max).unwrap_or(u32::MAX), 60),
        None => Some(RateLimit::DEFAULT),
    }
}

/// `AGENTPLANE_MAX_ENVIRONMENTS_PER_PROJECT`, `AGENTPLANE_MAX_SANDBOXES_PER_PROJECT`,
/// `AGENTPLANE_MAX_WEBHOOK_ENDPOINTS_PER_PROJECT` (at most the tenant cap of 50) and
/// `AGENTPLANE_MAX_STORED_BYTES_PER_PROJECT`, each at least 1; unset or unreadable: the
/// defaults ([`ProjectCaps::default`]).
pub fn caps_from_env() -> ProjectCaps {
    let default = ProjectCaps::default();
    let count = |name: &str, default: u32| {
        read(name).map_or(default, |n| u32::try_from(n).unwrap_or(u32::MAX).max(1))
    };
    ProjectCaps {
        environments: count("AGENTPLANE_MAX_ENVIRONMENTS_PER_PROJECT", default.environments),
        webhook_endpoints: count("AGENTPLANE_MAX_WEBHOOK_ENDPOINTS_PER_PROJECT", default.webhook_endpoints)
            .min(agentplane_domain::webhook::MAX_ENDPOINTS),
        sandboxes: count("AGENTPLANE_MAX_SANDBOXES_PER_PROJECT", default.sandboxes),
        stored_bytes: read("AGENTPLANE_MAX_STORED_BYTES_PER_PROJECT")
            .map_or(default.stored_bytes, |n| n.max(1)),
    }
}

fn read(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok())
}
