//! The `runs` queue: continuations of paused turns (and, later, background runs) as SQS
//! messages. (Skeleton: filled in by the jobs work.)

use agentplane_domain::action::Continuation;

use crate::StoreError;

#[derive(Clone, Debug, Default)]
pub struct RunsQueue {}

impl RunsQueue {
    /// Sends one continuation.
    pub async fn send(&self, _continuation: &Continuation) -> Result<(), StoreError> {
        Err(StoreError::unavailable("the runs queue is not wired yet"))
    }
}
