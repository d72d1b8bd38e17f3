//! A sandbox's lifecycle: running until its deadline, paused (the deadline stops running down),
//! expired at the deadline, or killed. The rules of `timeout` (900/1800/3600 seconds from now,
//! never shortening, never resuming) live here.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    Running,
    Paused,
    Expired,
    Killed,
}

impl SandboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Expired => "expired",
            Self::Killed => "killed",
        }
    }

    /// Expired and killed sandboxes have no processes and never come back.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Expired | Self::Killed)
    }
}

/// The only timeouts `POST …/timeout` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutSeconds(i64);

impl TimeoutSeconds {
    pub const ALLOWED: [i64; 3] = [900, 1800, 3600];

    pub fn new(seconds: i64) -> Option<Self> {
        Self::ALLOWED.contains(&seconds).then_some(Self(seconds))
    }

    pub fn seconds(self) -> i64 {
        self.0
    }
}

/// Bounds of the `timeout` given at creation.
pub const CREATE_TIMEOUT_DEFAULT_S: i64 = 300;
pub const CREATE_TIMEOUT_MAX_S: i64 = 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LifecycleError {
    #[error("the sandbox is paused")]
    Paused,
    #[error("the sandbox is not paused")]
    NotPaused,
    #[error("the sandbox has expired")]
    Expired,
    #[error("the sandbox was killed")]
    Killed,
    #[error("the requested timeout would not extend the sandbox's deadline")]
    WouldNotExtend,
}

/// The part of a sandbox that the lifecycle rules read and change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    pub state: SandboxState,
    pub end_at: Timestamp,
    /// While paused: how much of the deadline was left at the pause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_remaining_ms: Option<i64>,
}

impl Lifecycle {
    pub fn start(now: Timestamp, timeout_s: i64) -> Self {
        Self { state: SandboxState::Running, end_at: now.plus_seconds(timeout_s), paused_remaining_ms: None }
    }

    /// The state as of `now`: a running sandbox past its deadline has expired even before
    /// anything recorded it.
    pub fn effective(&self, now: Timestamp) -> SandboxState {
        match self.state {
            SandboxState::Running if now >= self.end_at => SandboxState::Expired,
            other => other,
        }
    }

    fn ended(&self, now: Timestamp) -> Result<SandboxState, LifecycleError> {
        match self.effective(now) {
            SandboxState::Expired => Err(LifecycleError::Expired),
            SandboxState::Killed => Err(LifecycleError::Killed),
            live => Ok(live),
        }
    }

    pub fn pause(&self, now: Timestamp) -> Result<Self, LifecycleError> {
        match self.ended(now)? {
            SandboxState::Paused => Err(LifecycleError::Paused),
            _ => Ok(Self {
                state: SandboxState::Paused,
                end_at: self.end_at,
                paused_remaining_ms: Some(self.end_at.unix_millis().saturating_sub(now.unix_millis()).max(0)),
            }),
        }
    }

    /// Resuming restores the time that was left at the pause.
    pub fn resume(&self, now: Timestamp) -> Result<Self, LifecycleError> {
        match self.ended(now)? {
            SandboxState::Paused => Ok(Self {
                state: SandboxState::Running,
                end_at: now.plus_millis(self.paused_remaining_ms.unwrap_or(0)),
                paused_remaining_ms: None,
            }),
            _ => Err(LifecycleError::NotPaused),
        }
    }

    /// `timeout` seconds from now; never shortens, never resumes.
    pub fn extend(&self, timeout: TimeoutSeconds, now: Timestamp) -> Result<Self, LifecycleError> {
        match self.ended(now)? {
            SandboxState::Paused => Err(LifecycleError::Paused),
            _ => {
                let end_at = now.plus_seconds(timeout.seconds());
                if end_at <= self.end_at {
                    return Err(LifecycleError::WouldNotExtend);
                }
                Ok(Self { end_at, ..*self })
            }
        }
    }

    /// E2B's connect once the sandbox runs (a paused one is resumed first): its deadline moves
    /// to `timeout_s` seconds from now when that is later, and is never shortened.
    pub fn connect(&self, timeout_s: Option<i64>, now: Timestamp) -> Result<Self, LifecycleError> {
        match self.ended(now)? {
            SandboxState::Paused => Err(LifecycleError::Paused),
            _ => {
                let end_at = timeout_s.map_or(self.end_at, |t| self.end_at.max(now.plus_seconds(t)));
                Ok(Self { end_at, ..*self })
            }
        }
    }

    pub fn kill(&self, now: Timestamp) -> Result<Self, LifecycleError> {
        self.ended(now)?;
        Ok(Self { state: SandboxState::Killed, paused_remaining_ms: None, ..*self })
    }

    /// What the node records when it enforced the deadline.
    pub fn expire(&self, now: Timestamp) -> Result<Self, LifecycleError> {
        match self.effective(now) {
            SandboxState::Expired => Ok(Self { state: SandboxState::Expired, ..*self }),
            SandboxState::Killed => Err(LifecycleError::Killed),
            _ => Err(LifecycleError::WouldNotExtend),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_unix_seconds(s)
    }

    #[test]
    fn only_three_timeouts_are_accepted() {
        for ok in [900, 1800, 3600] {
            assert!(TimeoutSeconds::new(ok).is_some());
        }
        for bad in [0, -900, 899, 901, 1000, 3601, 7200] {
            assert!(TimeoutSeconds::new(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_sandbox_expires_at_its_deadline() {
        let life = Lifecycle::start(t(0), 60);
        assert_eq!(life.effective(t(59)), SandboxState::Running);
        assert_eq!(life.effective(t(60)), SandboxState::Expired);
        assert_eq!(life.extend(TimeoutSeconds(900), t(61)), Err(LifecycleError::Expired));
    }

    #[test]
    fn extending_is_from_now_and_never_shortens() {
        let life = Lifecycle::start(t(0), 3600);
        assert_eq!(life.extend(TimeoutSeconds(900), t(10)), Err(LifecycleError::WouldNotExtend));
        // Exactly equal does not extend either.
        assert_eq!(life.extend(TimeoutSeconds(1800), t(1800)), Err(LifecycleError::WouldNotExtend));
        let longer = life.extend(TimeoutSeconds(3600), t(10)).expect("extends");
        assert_eq!(longer.end_at, t(3610));
    }

    #[test]
    fn a_paused_sandbox_is_never_extended_or_resumed_by_a_timeout() {
        let paused = Lifecycle::start(t(0), 300).pause(t(100)).expect("pauses");
        assert_eq!(paused.extend(TimeoutSeconds(3600), t(200)), Err(LifecycleError::Paused));
        assert_eq!(paused.state, SandboxState::Paused);
    }

    #[test]
    fn the_deadline_does_not_run_down_while_paused() {
        let paused = Lifecycle::start(t(0), 300).pause(t(100)).expect("pauses");
        // Paused past the original deadline: not expired.
        assert_eq!(paused.effective(t(10_000)), SandboxState::Paused);
        let resumed = paused.resume(t(10_000)).expect("resumes");
        assert_eq!(resumed.end_at, t(10_200));
        assert_eq!(resumed.state, SandboxState::Running);
    }

    #[test]
    fn pause_and_resume_conflict_in_the_wrong_state() {
        let life = Lifecycle::start(t(0), 300);
        assert_eq!(life.resume(t(1)), Err(LifecycleError::NotPaused));
        let paused = life.pause(t(1)).expect("pauses");
        assert_eq!(paused.pause(t(2)), Err(LifecycleError::Paused));
        let killed = paused.kill(t(3)).expect("kills");
        assert_eq!(killed.kill(t(4)), Err(LifecycleError::Killed));
        assert_eq!(killed.resume(t(4)), Err(LifecycleError::Killed));
    }

    #[test]
    fn connect_moves_the_deadline_later_only() {
        let life = Lifecycle::start(t(0), 600);
        assert_eq!(life.connect(None, t(10)).map(|l| l.end_at), Ok(t(600)));
        assert_eq!(life.connect(Some(60), t(10)).map(|l| l.end_at), Ok(t(600)));
        assert_eq!(life.connect(Some(900), t(10)).map(|l| l.end_at), Ok(t(910)));
        assert_eq!(life.connect(Some(900), t(600)), Err(LifecycleError::Expired));
        let paused = life.pause(t(1)).expect("pauses");
        assert_eq!(paused.connect(Some(900), t(2)), Err(LifecycleError::Paused));
    }

    proptest! {
        #[test]
        fn extend_never_moves_the_deadline_earlier(
            timeout in 1i64..4000, elapsed in 0i64..5000, pick in 0usize..3
        ) {
            let life = Lifecycle::start(t(0), timeout);
            let requested = TimeoutSeconds(TimeoutSeconds::ALLOWED[pick]);
            if let Ok(next) = life.extend(requested, t(elapsed)) {
                prop_assert!(next.end_at > life.end_at);
                prop_assert_eq!(next.end_at, t(elapsed + requested.seconds()));
            }
        }

        #[test]
        fn pause_then_resume_keeps_the_remaining_time(
            timeout in 1i64..4000, at in 0i64..4000, paused_for in 0i64..100_000
        ) {
            let life = Lifecycle::start(t(0), timeout);
            prop_assume!(at < timeout);
            let resumed = life.pause(t(at)).and_then(|p| p.resume(t(at + paused_for)));
            prop_assert_eq!(resumed.map(|r| r.end_at), Ok(t(timeout + paused_for)));
        }
    }
}
