//! What a function binary needs: JSON tracing and serving one route through `lambda_http`.

use crate::{App, Route, routes};

/// JSON logs, one object per line, level from `RUST_LOG` (default `info`). Lambda stamps the
/// time itself.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .init();
}

/// Runs one route as a Lambda function behind API Gateway (REST API).
pub async fn serve(route: Route) -> Result<(), lambda_http::Error> {
    init_tracing();
    // S3 and SQS only where the route is granted them (S3: the turn routes): other functions
    // build no client they never use.
    let app = App::from_env(route.grants()).await?;
    let router = routes::router(app, &[route]);
    if route.streaming() {
        lambda_http::run_with_streaming_response(router).await
    } else {
        lambda_http::run(router).await
    }
}

/// Human-readable logs for the local gateway and tests.
pub fn init_local_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn")
    });
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).try_init();
}
