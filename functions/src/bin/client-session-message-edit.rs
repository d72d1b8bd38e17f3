//! Lambda: client-session-message-edit. The handler lives in agentplane-api.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    agentplane_api::lambda::serve(agentplane_api::Route::ClientSessionMessageEdit).await
}
