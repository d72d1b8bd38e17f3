//! Rollback of a Run and every later Run of its environment.

use agentplane_domain::ProjectId;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_store::StoreError;

use crate::App;

/// Whether a rollback holds the environment (new Runs wait, workspace writes are refused).
pub async fn in_progress(
    app: &App,
    project: &ProjectId,
    environment: &EnvironmentId,
) -> Result<bool, StoreError> {
    match app.store.environments().get(project, environment).await {
        Ok(found) => Ok(found.rollback.is_some()),
        Err(StoreError::NotFound) => Ok(false),
        Err(err) => Err(err),
    }
}
