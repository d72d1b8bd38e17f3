//! When a failed delivery is tried again: after the first attempt, 5 s, 5 min, 30 min, 2 h,
//! 5 h, 10 h and 24 h (8 attempts in all); then the message has failed.

/// The delay in seconds before each retry, in order.
pub const RETRY_DELAYS_S: [i64; 7] = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 24 * 3600];
/// Attempts a message gets in all.
pub const MAX_ATTEMPTS: u32 = RETRY_DELAYS_S.len() as u32 + 1;

/// Seconds to wait after attempt `attempt` (1-based) failed; `None` when it was the last.
pub fn delay_after(attempt: u32) -> Option<i64> {
    let index = usize::try_from(attempt.checked_sub(1)?).ok()?;
    RETRY_DELAYS_S.get(index).copied()
}

/// The delay in milliseconds after attempt `attempt` failed, scaled by `scale` (1.0: the
/// production schedule; a non-finite or negative scale counts as 1.0).
pub fn delay_ms_after(attempt: u32, scale: f64) -> Option<i64> {
    let scale = if scale.is_finite() && scale >= 0.0 { scale } else { 1.0 };
    delay_after(attempt).map(|s| ((s as f64) * 1000.0 * scale).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_designs_and_scales_for_tests_only_when_asked() {
        let all: Vec<i64> = (1..=8).filter_map(|a| delay_ms_after(a, 1.0)).collect();
        assert_eq!(all, vec![5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 86_400_000]);
        assert_eq!(MAX_ATTEMPTS, 8);
        assert_eq!(delay_ms_after(8, 1.0), None);
        assert_eq!(delay_ms_after(2, 0.001), Some(300));
        assert_eq!(delay_ms_after(1, f64::NAN), Some(5_000));
    }
}
