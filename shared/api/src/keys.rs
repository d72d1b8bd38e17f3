//! Bearer keys that rotate — the Core key, the node enrollment key — as a process accepts them,
//! re-read from their secret while it lives: every
//! `AGENTPLANE_CORE_KEY_TTL_S` (default 60 s), and when a key this process does not know is
//! presented (at most once per `AGENTPLANE_CORE_KEY_MISS_REFRESH_S`, default 5 s, so a flood of
//! bad keys cannot turn into a flood of Secrets Manager calls). So a rotation (a new current key,
//! the old one kept as `previous` until `previous_until`) takes effect in every warm Lambda
//! instance within a minute, without a redeploy; see README "Rotating secrets".

use std::sync::RwLock;
use std::time::{Duration, Instant};

use agentplane_domain::Timestamp;
use agentplane_domain::api_key::{CoreKey, CoreKeys};
use anyhow::Context;

use crate::secrets::SecretFetch;

/// Where a bearer key's accepted values (current, and previous until an expiry: see
/// [`CoreKeys`]) come from, and the copy this process holds.
pub struct RotatingKeys {
    fetch: Option<SecretFetch>,
    ttl: Duration,
    miss_refresh: Duration,
    cached: RwLock<Cached>,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
}

struct Cached {
    keys: CoreKeys,
    fetched: Instant,
    last_miss_refresh: Option<Instant>,
}

impl std::fmt::Debug for RotatingKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotatingKeys").field("refreshes", &self.fetch.is_some()).finish_non_exhaustive()
    }
}

impl RotatingKeys {
    /// Keys that never change (a literal `AGENTPLANE_CORE_KEY`, tests).
    pub fn fixed(keys: CoreKeys) -> Self {
        Self {
            fetch: None,
            ttl: Duration::MAX,
            miss_refresh: Duration::MAX,
            cached: RwLock::new(Cached { keys, fetched: Instant::now(), last_miss_refresh: None }),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// Keys read through `fetch` now (an unreadable secret stops the process from starting),
    /// and again as the module says.
    pub async fn refreshing(fetch: SecretFetch) -> anyhow::Result<Self> {
        let text = fetch().await.context("reading the key's secret")?;
        let keys = CoreKeys::parse(&text)?;
        let seconds = |name: &str, default: u64| {
            std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(default)
        };
        Ok(Self {
            fetch: Some(fetch),
            ttl: Duration::from_secs(seconds("AGENTPLANE_CORE_KEY_TTL_S", 60)),
            miss_refresh: Duration::from_secs(seconds("AGENTPLANE_CORE_KEY_MISS_REFRESH_S", 5)),
            cached: RwLock::new(Cached { keys, fetched: Instant::now(), last_miss_refresh: None }),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// Re-reads after `ttl`, and on an unknown key at most once per `miss_refresh`.
    pub fn with_refresh(mut self, ttl: Duration, miss_refresh: Duration) -> Self {
        self.ttl = ttl;
        self.miss_refresh = miss_refresh;
        self
    }

    /// The key this process would hand out as current.
    pub fn current(&self) -> Option<CoreKey> {
        self.cached.read().ok().map(|c| c.keys.current().clone())
    }

    /// Whether `presented` is a key accepted at `now`.
    pub async fn accept(&self, presented: &str, now: Timestamp) -> bool {
        let (accepted, stale, may_refresh_on_miss) = {
            let Ok(cached) = self.cached.read() else { return false };
            (
                cached.keys.accept(presented, now),
                cached.fetched.elapsed() >= self.ttl,
                cached.last_miss_refresh.is_none_or(|at| at.elapsed() >= self.miss_refresh),
            )
        };
        if self.fetch.is_none() || (accepted && !stale) {
            return accepted;
        }
        if stale {
            self.refresh(false).await;
        } else if !accepted && may_refresh_on_miss {
            self.refresh(true).await;
        } else {
            return false;
        }
        self.cached.read().is_ok_and(|c| c.keys.accept(presented, now))
    }

    async fn refresh(&self, on_miss: bool) {
        let Some(fetch) = &self.fetch else { return };
        let _one = self.refreshing.lock().await;
        // Another request may have refreshed while this one waited.
        let fresh_enough = self.cached.read().is_ok_and(|c| {
            if on_miss {
                c.last_miss_refresh.is_some_and(|at| at.elapsed() < self.miss_refresh)
            } else {
                c.fetched.elapsed() < self.ttl
            }
        });
        if fresh_enough {
            return;
        }
        let read = fetch().await.and_then(|text| CoreKeys::parse(&text).map_err(anyhow::Error::from));
        let Ok(mut cached) = self.cached.write() else { return };
        let now = Instant::now();
        if on_miss {
            cached.last_miss_refresh = Some(now);
        }
        match read {
            Ok(keys) => {
                cached.keys = keys;
                cached.fetched = now;
            }
            // Keep serving the keys this process has; try again after another TTL.
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "re-reading a key's secret failed; keeping the keys read before");
                cached.fetched = now;
            }
        }
    }
}
