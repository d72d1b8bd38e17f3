//! The `retention-sweep` job in-process (local gateway, tests): one pass per interval. The pass
//! itself is `agentplane_engine::retention_sweep::sweep_once`, which Lambda runs on a schedule.

use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::{App, edge};

pub use agentplane_engine::retention_sweep::{SweepReport, sweep_once};

/// The default interval of the in-process sweep (the deployed schedule's).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// `AGENTPLANE_SWEEP_INTERVAL_S` (whole seconds, at least 1), else every minute.
pub fn sweep_interval_from_env() -> Duration {
    sweep_interval(std::env::var("AGENTPLANE_SWEEP_INTERVAL_S").ok().as_deref())
}

fn sweep_interval(setting: Option<&str>) -> Duration {
    setting
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s >= 1)
        .map_or(DEFAULT_SWEEP_INTERVAL, Duration::from_secs)
}

/// One sweep pass every `interval`, for as long as the process lives.
pub async fn sweep_forever(app: App, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let now = edge::now();
        // Each step boxed as a `Send` future where its borrows are concrete (the spawned loop
        // would otherwise ask for `Send` over every lifetime of the borrows inside).
        let sweep: BoxFuture<'_, _> = Box::pin(sweep_once(&app.store, now));
        match sweep.await {
            Ok(report) if report == SweepReport::default() => {}
            Ok(report) => tracing::info!(?report, "retention sweep pass"),
            Err(err) => tracing::warn!(error = %err, "retention sweep pass failed"),
        }
        let purge: BoxFuture<'_, _> = Box::pin(super::purge_environments_once(&app, now));
        match purge.await {
            Ok(report) if report == super::PurgeReport::default() => {}
            Ok(report) => tracing::info!(?report, "environment purge pass"),
            Err(err) => tracing::warn!(error = %err, "environment purge pass failed"),
        }
        let erase: BoxFuture<'_, _> =
            Box::pin(super::erase_run_content_once(&app, super::run_content_retention_from_env(), now));
        match erase.await {
            Ok(report) if report == super::ContentReport::default() => {}
            Ok(report) => tracing::info!(?report, "run content retention pass"),
            Err(err) => tracing::warn!(error = %err, "run content retention pass failed"),
        }
        let outbox: BoxFuture<'_, _> =
            Box::pin(super::sweep_outbox(&app.store, now, app.platform_limits.rollback_give_up));
        match outbox.await {
            Ok(report) if report == super::OutboxReport::default() => {}
            Ok(report) => tracing::info!(?report, "platform outbox pass"),
            Err(err) => tracing::warn!(error = %err, "platform outbox pass failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_interval_is_whole_seconds_and_falls_back_to_a_minute() {
        assert_eq!(sweep_interval(Some("5")), Duration::from_secs(5));
        assert_eq!(sweep_interval(Some(" 2 ")), Duration::from_secs(2));
        for bad in [None, Some(""), Some("0"), Some("-3"), Some("1.5"), Some("soon")] {
            assert_eq!(sweep_interval(bad), DEFAULT_SWEEP_INTERVAL, "{bad:?}");
        }
    }
}
