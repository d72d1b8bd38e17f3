//! Quotas, so that one tenant cannot starve the others: a request rate per project key, counted
//! in fixed windows, and caps on what a project may hold at once. The arithmetic lives here; the
//! counts live in the store (conditional writes), the settings come from the deployment.

use crate::Timestamp;

/// At most `max` requests per key in each fixed window of `window_s` seconds (windows start at
/// multiples of `window_s` since the Unix epoch, so every instance agrees on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub max: u32,
    pub window_s: u32,
}

impl RateLimit {
    /// The deployment default: 600 requests a minute per key.
    pub const DEFAULT: RateLimit = RateLimit { max: 600, window_s: 60 };

    /// `max` requests per `window_s` seconds; `None` (no limit) when `max` is 0. A window is at
    /// least a second.
    pub fn new(max: u32, window_s: u32) -> Option<Self> {
        (max > 0).then_some(Self { max, window_s: window_s.max(1) })
    }

    /// The number of the window `now` falls in.
    pub fn window(&self, now: Timestamp) -> i64 {
        now.unix_seconds().max(0) / i64::from(self.window_s)
    }

    /// Whole seconds from `now` until `window` ends (at least 1): the `Retry-After` of a request
    /// refused in it.
    pub fn retry_after(&self, window: i64, now: Timestamp) -> u64 {
        let end_ms = (window + 1).saturating_mul(i64::from(self.window_s)).saturating_mul(1000);
        let left_ms = end_ms.saturating_sub(now.unix_millis()).max(0);
        u64::try_from((left_ms + 999) / 1000).unwrap_or(1).max(1)
    }
}

/// What a project may hold at once. Each cap is at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectCaps {
    /// Environments not deleted.
    pub environments: u32,
    /// Webhook endpoints of the project (the tenant-wide cap of 50 applies as well).
    pub webhook_endpoints: u32,
    /// Bytes of session files (their declared sizes) the project stores.
    pub stored_bytes: u64,
    /// Live (running or paused) sandboxes made through the sandbox API.
    pub sandboxes: u32,
}

impl Default for ProjectCaps {
    fn default() -> Self {
        Self {
            environments: 100,
            webhook_endpoints: crate::webhook::MAX_ENDPOINTS,
            stored_bytes: 10 * 1024 * 1024 * 1024,
            sandboxes: 20,
        }
    }
}

/// Which cap a create ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    Environments,
    WebhookEndpoints,
    StoredBytes,
    Sandboxes,
}

impl Cap {
    /// The `quota` field of the error that names it.
    pub fn name(self) -> &'static str {
        match self {
            Cap::Environments => "environments",
            Cap::WebhookEndpoints => "webhook_endpoints",
            Cap::StoredBytes => "stored_bytes",
            Cap::Sandboxes => "sandboxes",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_limit_is_no_limit() {
        assert_eq!(RateLimit::new(0, 60), None);
        assert_eq!(RateLimit::new(5, 0), Some(RateLimit { max: 5, window_s: 1 }));
    }

    #[test]
    fn windows_are_fixed_and_retry_after_runs_to_the_windows_end() {
        let limit = RateLimit { max: 10, window_s: 60 };
        let at = Timestamp::from_unix_millis(120_000);
        assert_eq!(limit.window(at), 2);
        assert_eq!(limit.retry_after(2, at), 60);
        let late = Timestamp::from_unix_millis(179_001);
        assert_eq!(limit.window(late), 2);
        assert_eq!(limit.retry_after(2, late), 1);
        assert_eq!(limit.retry_after(2, Timestamp::from_unix_millis(178_500)), 2);
        // A window already over still says at least a second.
        assert_eq!(limit.retry_after(1, late), 1);
    }
}
