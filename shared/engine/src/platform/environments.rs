//! An environment made, empty or a fork of a checkpoint ([`super::fork`]), and deleted: marked
//! at once (from then on it, its sessions and its Runs read as missing), and purged later by
//! the retention sweep ([`crate::environment_purge`]).

use agentplane_domain::ProjectId;
use agentplane_domain::platform::Environment;
use agentplane_domain::telemetry::EnvironmentId;

use super::Platform;
use super::fork::{self, ForkError};
use crate::ports::environments::EnvironmentForks;
use crate::ports::{Compute, PortError};

/// Why an environment was not made or deleted.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentsError {
    /// The project has no such environment (a deleted one is still found until it is purged).
    #[error("environment not found")]
    NotFound,
    /// The project holds `max` environments already (a delete gives a place back).
    #[error("the project has {max} environments, the most it may")]
    LimitReached { max: u32 },
    #[error(transparent)]
    Fork(ForkError),
    #[error("randomness unavailable: {0}")]
    Randomness(getrandom::Error),
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for EnvironmentsError {
    fn from(err: PortError) -> Self {
        Self::Port(err)
    }
}

/// Creates the environment `name` of `project`: empty, or (with `snapshot`, a checkpoint's id)
/// a fork whose workspace starts as that checkpoint.
pub async fn create<S: EnvironmentForks, C: Compute>(
    platform: &Platform<'_, S, C>,
    project: ProjectId,
    name: Option<String>,
    snapshot: Option<&str>,
) -> Result<Environment, EnvironmentsError> {
    if let Some(snapshot) = snapshot {
        return fork::fork(platform, project, name, snapshot).await.map_err(|err| match err {
            ForkError::Port(PortError::Conflict) => {
                EnvironmentsError::LimitReached { max: platform.max_environments }
            }
            err => EnvironmentsError::Fork(err),
        });
    }
    let id = EnvironmentId::from_random(crate::random::secret().map_err(EnvironmentsError::Randomness)?);
    let environment = Environment::new(id, project, name, crate::now());
    match platform.store.create_environment(&environment, platform.max_environments).await {
        Ok(()) => {}
        Err(PortError::Conflict) => {
            return Err(EnvironmentsError::LimitReached { max: platform.max_environments });
        }
        Err(err) => return Err(err.into()),
    }
    Ok(environment)
}

/// Marks the environment `id` of `project` deleted (again: the same); the environment as
/// marked.
pub async fn delete<S: EnvironmentForks>(
    store: &S,
    project: ProjectId,
    id: &EnvironmentId,
) -> Result<Environment, EnvironmentsError> {
    let found = |err| match err {
        PortError::NotFound => EnvironmentsError::NotFound,
        other => EnvironmentsError::Port(other),
    };
    store.mark_environment_deleted(&project, id, crate::now()).await.map_err(found)?;
    store.environment_any(&project, id).await.map_err(found)
}
