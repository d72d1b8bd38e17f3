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
