//! The runtime-history query (`start`, `end`, `max_points`) and the bucket grid Core derives from
//! it. Everything here is arithmetic on whole Unix seconds; the caller passes `now`.

use thiserror::Error;

use crate::query::Query;
use crate::{Timestamp, ValidationError};

/// The longest range one history read may cover.
pub const MAX_RANGE_SECONDS: i64 = 24 * 60 * 60;
/// No bucket is narrower than this, whatever `max_points` asks for.
pub const MIN_BUCKET_SECONDS: i64 = 30;
pub const DEFAULT_MAX_POINTS: u32 = 120;
pub const MIN_MAX_POINTS: u32 = 2;
pub const MAX_MAX_POINTS: u32 = 1000;
/// The largest integer JSON carries exactly (2^53 - 1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

const PARAMETERS: [&str; 3] = ["start", "end", "max_points"];

/// How often the sampler records a runtime sample. At least one second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SamplingInterval(i64);

impl SamplingInterval {
    pub fn from_seconds(seconds: u32) -> Option<Self> {
        (seconds >= 1).then_some(Self(i64::from(seconds)))
    }

    pub fn seconds(self) -> i64 {
        self.0
    }
}

/// 30 seconds, the spec's narrowest bucket and Core's default sampling interval.
impl Default for SamplingInterval {
    fn default() -> Self {
        Self(MIN_BUCKET_SECONDS)
    }
}

/// Why a history query was refused; each maps to one 400 code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HistoryQueryError {
    /// A parameter other than start, end and max_points, or one supplied twice.
    #[error("{0}")]
    UnsupportedParameter(ValidationError),
    /// An invalid range or max_points.
    #[error("{0}")]
    InvalidRequest(ValidationError),
}

impl HistoryQueryError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnsupportedParameter(_) => "unsupported_parameter",
            Self::InvalidRequest(_) => "invalid_request",
        }
    }

    pub fn validation(&self) -> &ValidationError {
        match self {
            Self::UnsupportedParameter(e) | Self::InvalidRequest(e) => e,
        }
    }
}

/// A validated history query: `start` inclusive, `end` exclusive, Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryQuery {
    start: i64,
    end: i64,
    max_points: u32,
}

impl HistoryQuery {
    /// The rules that need no clock: start >= 0, start < end <= start + 24 h, max_points 2..=1000.
    /// A client can check these before sending; the "at most one second in the future" rule needs
    /// the server's clock and is [`HistoryQuery::check_not_future`].
    pub fn new(start: i64, end: i64, max_points: Option<u32>) -> Result<Self, ValidationError> {
        if !(0..=MAX_SAFE_INTEGER).contains(&start) {
            return Err(ValidationError::new("start", "`start` must be a Unix second, 0 or more"));
        }
        if !(0..=MAX_SAFE_INTEGER).contains(&end) || end <= start {
            return Err(ValidationError::new("end", "`end` must be a Unix second after `start`"));
        }
        if end - start > MAX_RANGE_SECONDS {
            return Err(ValidationError::new("end", "`end` may be at most 24 hours after `start`"));
        }
        let max_points = max_points.unwrap_or(DEFAULT_MAX_POINTS);
        if !(MIN_MAX_POINTS..=MAX_MAX_POINTS).contains(&max_points) {
            return Err(ValidationError::new("max_points", "`max_points` must be an integer from 2 to 1000"));
        }
        Ok(Self { start, end, max_points })
    }

    /// `end` may be at most one second after `now`.
    pub fn check_not_future(self, now: Timestamp) -> Result<Self, ValidationError> {
        if self.end > now.unix_seconds().saturating_add(1) {
            return Err(ValidationError::new("end", "`end` may be at most one second in the future"));
        }
        Ok(self)
    }

    /// Parses the route's query string. Unknown or repeated names are checked first, so a request
    /// that is wrong in both ways is answered `unsupported_parameter`.
    pub fn from_query(query: &Query, now: Timestamp) -> Result<Self, HistoryQueryError> {
        for name in query.names() {
            if !PARAMETERS.contains(&name) {
                return Err(HistoryQueryError::UnsupportedParameter(ValidationError::new(
                    name,
                    format!("`{name}` is not a parameter of this route"),
                )));
            }
        }
        let mut values = [None; 3];
        for (slot, name) in values.iter_mut().zip(PARAMETERS) {
            *slot = query.single(name).map_err(HistoryQueryError::UnsupportedParameter)?;
        }
        let invalid = HistoryQueryError::InvalidRequest;
        let [start, end, max_points] = values;
        let start = required_seconds("start", start).map_err(invalid)?;
        let end = required_seconds("end", end).map_err(invalid)?;
        let max_points = match max_points {
            None => None,
            Some(text) => Some(parse_max_points(text).map_err(invalid)?),
        };
        Self::new(start, end, max_points).and_then(|q| q.check_not_future(now)).map_err(invalid)
    }

    pub fn start(self) -> i64 {
        self.start
    }

    pub fn end(self) -> i64 {
        self.end
    }

    pub fn max_points(self) -> u32 {
        self.max_points
    }

    /// The query string a client sends for this query.
    pub fn to_query_string(self) -> String {
        format!("start={}&end={}&max_points={}", self.start, self.end, self.max_points)
    }
}

fn required_seconds(name: &str, text: Option<&str>) -> Result<i64, ValidationError> {
    let text = text.ok_or_else(|| ValidationError::new(name, format!("`{name}` is required")))?;
    parse_digits(text)
        .filter(|n| *n <= MAX_SAFE_INTEGER)
        .ok_or_else(|| ValidationError::new(name, format!("`{name}` must be a Unix second, 0 or more")))
}

fn parse_max_points(text: &str) -> Result<u32, ValidationError> {
    parse_digits(text)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| ValidationError::new("max_points", "`max_points` must be an integer from 2 to 1000"))
}

/// Plain decimal digits only: no sign, spaces, fraction or exponent.
fn parse_digits(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The bucket grid of one history read: buckets of `width` seconds from `start`, the last one cut
/// off at `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketPlan {
    start: i64,
    end: i64,
    width: i64,
}

impl BucketPlan {
    /// The width is the range divided by `max_points`, rounded up to whole seconds, and at least
    /// 30 seconds or the sampling interval, whichever is longer.
    pub fn new(query: HistoryQuery, interval: SamplingInterval) -> Self {
        let range = query.end - query.start;
        let per_point = ceil_div(range, i64::from(query.max_points));
        let width = per_point.max(MIN_BUCKET_SECONDS).max(interval.seconds());
        Self { start: query.start, end: query.end, width }
    }

    pub fn width(&self) -> i64 {
        self.width
    }

    pub fn len(&self) -> usize {
        usize::try_from(ceil_div(self.end - self.start, self.width)).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `[start, end)` of bucket `index`, in Unix seconds.
    pub fn bounds(&self, index: usize) -> (i64, i64) {
        let offset = i64::try_from(index).unwrap_or(i64::MAX / 2).saturating_mul(self.width);
        let start = self.start.saturating_add(offset);
        (start, start.saturating_add(self.width).min(self.end))
    }

    pub fn buckets(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        (0..self.len()).map(|i| self.bounds(i))
    }

    /// The bucket holding the instant `at`, if it falls in `[start, end)`.
    pub fn index_of(&self, at: Timestamp) -> Option<usize> {
        let ms = at.unix_millis();
        let (start_ms, end_ms) = (self.start.saturating_mul(1000), self.end.saturating_mul(1000));
        if ms < start_ms || ms >= end_ms {
            return None;
        }
        usize::try_from((ms - start_ms) / self.width.saturating_mul(1000)).ok()
    }
}

/// `a / b` rounded up, for `a >= 0` and `b > 0`.
pub(crate) fn ceil_div(a: i64, b: i64) -> i64 {
    if b <= 0 { 0 } else { a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0) }
}

#[cfg(test)]
mod tests;
