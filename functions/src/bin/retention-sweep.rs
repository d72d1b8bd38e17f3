//! Lambda: retention-sweep (a scheduled job: expires unanswered actions). The job lives in
//! agentplane-api / agentplane-engine.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::jobs::serve(agentplane_api::jobs::Job::RetentionSweep).await
}
