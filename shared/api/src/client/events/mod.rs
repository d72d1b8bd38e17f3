//! The session event log over HTTP: a poll route and a resumable Server-Sent-Events stream.
//! Events carry a per-session gapless `id` (the sequence); clients must ignore event types they
//! do not know, since later releases add new ones.

pub(crate) mod poll;
pub(crate) mod stream;
pub(crate) mod wire;

pub use poll::list;
pub use stream::stream;
