//! The edge of the API: the two impure inputs the domain refuses to read itself (the clock,
//! the engine's, one for every crate above the domain, and randomness), and what every request
//! and answer passes through (`guard`: bounds and envelopes; `quote`: bounded echoes of input).

pub mod guard;
pub mod quote;

use agentplane_domain::Timestamp;

pub fn now() -> Timestamp {
    agentplane_engine::now()
}

/// Bytes from the operating system's CSPRNG, for keys, secrets and ids a client must not guess:
/// the engine's one helper of that rule (a failure is the request's 500).
pub use agentplane_engine::random::secret as random;

/// The domain and stage API Gateway invoked a deployed function for (the Lambda glue in
/// functions/ puts it in the request's extensions; the local gateway has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvokedAt {
    pub domain: String,
    /// `None` for the `$default` stage.
    pub stage: Option<String>,
}
