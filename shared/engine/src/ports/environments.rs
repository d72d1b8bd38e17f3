//! What making and deleting an environment reads and writes besides a workspace's ports
//! ([`PlatformStore`]): where a fork's checkpoint came from, and the environment's record made
//! and marked deleted (a fork whose restore fails, too).

use std::future::Future;

use agentplane_domain::platform::Environment;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{ProjectId, Timestamp};

use super::PortError;
use super::platform::PlatformStore;

/// Environments made and deleted.
pub trait EnvironmentForks: PlatformStore + Send + Sync {
    /// The live environment of `project` whose checkpoint `snapshot` is (its initial one, or
    /// one a Run of it ended with); `None` when no live environment or Run of the project
    /// returned it.
    fn snapshot_source(
        &self,
        project: &ProjectId,
        snapshot: &str,
    ) -> impl Future<Output = Result<Option<EnvironmentId>, PortError>> + Send;

    /// Writes a new environment and counts it; `Conflict` when its project has `max`
    /// environments already.
    fn create_environment(
        &self,
        environment: &Environment,
        max: u32,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The environment `id` of `project`, deleted or not; `NotFound` when there is none (a
    /// purged one included).
    fn environment_any(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
    ) -> impl Future<Output = Result<Environment, PortError>> + Send;

    /// Marks the environment deleted at `now` (the retention sweep purges it); `false` when it
    /// already was, `NotFound` when there is no such environment.
    fn mark_environment_deleted(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}
