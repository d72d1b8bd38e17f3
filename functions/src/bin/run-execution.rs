//! Lambda: run-execution (the `runs` queue's consumer: carries paused turns on). The job lives
//! in agentplane-api / agentplane-engine.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::jobs::serve(agentplane_api::jobs::Job::RunExecution).await
}
