//! Lambda: webhook-retry (a scheduled job: makes due webhook attempts, fans out events whose
//! queue message never came). The job lives in agentplane-api / agentplane-engine.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::jobs::serve(agentplane_api::jobs::Job::WebhookRetry).await
}
