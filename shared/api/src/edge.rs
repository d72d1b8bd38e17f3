//! The edge of the API: the two impure inputs the domain refuses to read itself (the clock,
//! the engine's, one for every crate above the domain, and randomness), and what every request
//! and answer passes through (`guard`: bounds and envelopes; `quote`: bounded echoes of input).

pub mod guard;
pub mod quote;

use agentplane_domain::Timestamp;

pub fn now() -> Timestamp {
    agentplane_engine::now()
}

/// Bytes from the operating system's CSPRNG. Failure here means the host is broken; there is no
/// safe fallback for key material, so it aborts the request (the caller maps it to a 500).
pub fn random<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)?;
    Ok(buf)
}

/// The domain and stage API Gateway invoked a deployed function for (the Lambda glue in
/// functions/ puts it in the request's extensions; the local gateway has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvokedAt {
    pub domain: String,
    /// `None` for the `$default` stage.
    pub stage: Option<String>,
}
