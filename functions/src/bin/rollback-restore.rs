//! Lambda: rollback-restore (the `rollbacks` queue's consumer: stops, restores and reverts the
//! Runs of an accepted rollback). The job lives in agentplane-api.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::jobs::serve(agentplane_api::jobs::Job::RollbackRestore).await
}
