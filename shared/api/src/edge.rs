//! The two impure inputs the domain refuses to read itself: the clock and randomness.

use std::time::{SystemTime, UNIX_EPOCH};

use agentplane_domain::Timestamp;

pub fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    Timestamp::from_unix_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Bytes from the operating system's CSPRNG. Failure here means the host is broken; there is no
/// safe fallback for key material, so it aborts the request (the caller maps it to a 500).
pub fn random<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)?;
    Ok(buf)
}
