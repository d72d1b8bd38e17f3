//! The content retention of Platform Runs as the retention sweep runs it here (the step is
//! `agentplane_engine::run_content_retention`), with its deployment setting.

use agentplane_domain::Timestamp;
use agentplane_engine::run_content_retention;
use agentplane_store::StoreError;

pub use agentplane_engine::run_content_retention::ContentReport;

use crate::App;

/// The deployment setting: whole days after a Run's end when its content is erased.
pub const RUN_CONTENT_RETENTION_ENV: &str = "RUN_CONTENT_RETENTION_DAYS";

/// `RUN_CONTENT_RETENTION_DAYS` in seconds: a whole number of days, at least 1; unset, 0 or
/// anything else is off (content is kept until its environment is deleted).
pub fn run_content_retention_from_env() -> Option<i64> {
    retention(std::env::var(RUN_CONTENT_RETENTION_ENV).ok().as_deref())
}

fn retention(setting: Option<&str>) -> Option<i64> {
    let days = setting?.trim().parse::<i64>().ok().filter(|d| (1..=36_500).contains(d))?;
    Some(days * 86_400)
}

/// One pass at `now` under a retention of `retention_s` seconds (`None`: off).
pub async fn erase_run_content_once(
    app: &App,
    retention_s: Option<i64>,
    now: Timestamp,
) -> Result<ContentReport, StoreError> {
    run_content_retention::erase_expired_content(&app.store, retention_s, now).await.map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retention_is_whole_days_and_off_unless_set() {
        assert_eq!(retention(None), None);
        assert_eq!(retention(Some("0")), None);
        assert_eq!(retention(Some("-3")), None);
        assert_eq!(retention(Some("1.5")), None);
        assert_eq!(retention(Some("forever")), None);
        assert_eq!(retention(Some(" 30 ")), Some(30 * 86_400));
    }
}
