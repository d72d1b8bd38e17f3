//! One timestamp type; each surface picks its wire format (Unix seconds, Unix ms, RFC 3339).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_unix_millis(ms: i64) -> Self {
        Self(ms)
    }

    pub const fn from_unix_seconds(s: i64) -> Self {
        Self(s.saturating_mul(1000))
    }

    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds, rounded down (also for times before the epoch).
    pub const fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }

    pub const fn plus_seconds(self, s: i64) -> Self {
        Self(self.0.saturating_add(s.saturating_mul(1000)))
    }

    pub const fn plus_millis(self, ms: i64) -> Self {
        Self(self.0.saturating_add(ms))
    }

    /// Parses RFC 3339 text (any offset); `None` when it is not RFC 3339 or out of range.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let t = OffsetDateTime::parse(text.trim(), &Rfc3339).ok()?;
        i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok().map(Self)
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-30T04:43:12.000Z`.
    pub fn rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|t| {
                let t = t.replace_nanosecond((self.0.rem_euclid(1000) as u32) * 1_000_000).ok()?;
                t.format(&Rfc3339).ok()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_down() {
        assert_eq!(Timestamp::from_unix_millis(1_999).unix_seconds(), 1);
        assert_eq!(Timestamp::from_unix_millis(-1).unix_seconds(), -1);
    }

    #[test]
    fn rfc3339_is_utc() {
        assert_eq!(Timestamp::from_unix_millis(1_500).rfc3339(), "1970-01-01T00:00:01.5Z");
        assert_eq!(
            Timestamp::parse_rfc3339("1970-01-01T01:00:01.5+01:00"),
            Some(Timestamp::from_unix_millis(1_500))
        );
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }
}
