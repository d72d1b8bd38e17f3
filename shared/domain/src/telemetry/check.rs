//! Checks on received telemetry objects: the rules a client verifies before it trusts a response.
//! Serde (exact fields, enums, nullability, number types) is the first check; these are the rules
//! serde cannot express: combinations of mode, status and fields, ranges, order and totals.
//! The builders in this module tree always produce objects that pass them.

mod history;
mod node;
mod observation;

use thiserror::Error;

use super::history_query::MAX_SAFE_INTEGER;
use super::observation_wire::ByteUsage;

pub use history::check_history;
pub use node::{check_host, check_node_history};
pub use observation::{check_observation, check_observation_list};

/// The first rule a received object breaks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct CheckError(pub String);

pub(super) fn fail<T>(message: impl Into<String>) -> Result<T, CheckError> {
    Err(CheckError(message.into()))
}

pub(super) fn ensure(ok: bool, message: &str) -> Result<(), CheckError> {
    if ok { Ok(()) } else { fail(message) }
}

pub(super) fn seconds(value: i64) -> bool {
    (0..=MAX_SAFE_INTEGER).contains(&value)
}

pub(super) fn safe(value: u64) -> bool {
    value <= MAX_SAFE_INTEGER as u64
}

pub(super) fn number(value: Option<f64>) -> bool {
    value.is_none_or(|v| v.is_finite() && v >= 0.0)
}

pub(super) fn bytes(value: Option<&ByteUsage>, what: &str) -> Result<(), CheckError> {
    let Some(b) = value else { return Ok(()) };
    ensure(
        b.usage_bytes.is_none_or(safe) && b.limit_bytes.is_none_or(safe),
        &format!("{what} is not a safe integer"),
    )?;
    ensure(b.limit_bytes != Some(0), &format!("{what}.limit_bytes must be at least 1"))?;
    ensure(
        b.usage_bytes.is_some() || b.limit_bytes.is_some(),
        &format!("{what} has no value; it must be null"),
    )
}

#[cfg(test)]
mod tests;
