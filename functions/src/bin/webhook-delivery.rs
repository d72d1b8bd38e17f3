//! Lambda: webhook-delivery (consumes the `webhooks` queue: fans emitted events out, makes first
//! attempts). The job lives in agentplane-api / agentplane-engine.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::jobs::serve(agentplane_api::jobs::Job::WebhookDelivery).await
}
