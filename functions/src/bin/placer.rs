//! Lambda: placer (a scheduled job). The job lives in agentplane-api.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::jobs::serve(agentplane_api::jobs::Job::Placer).await
}
