//! Lambda: every Agentplane function. One binary, `agentplane`; each deployed function names
//! its route or job in `AGENTPLANE_FUNCTION` (infra/template.yaml). The handlers and jobs live in
//! agentplane-api.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::lambda::serve_from_env().await
}
