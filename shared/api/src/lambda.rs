//! What the function binary needs: JSON tracing, and serving the route or job its function is
//! named for (`AGENTPLANE_FUNCTION`) through `lambda_http`.

use crate::jobs::{self, Job};
use crate::{App, Route, routes};

/// The environment variable naming the route or job a deployed function serves (one binary,
/// `agentplane`, for every function; each function's role grants only what its own needs).
pub const FUNCTION_VAR: &str = "AGENTPLANE_FUNCTION";

/// What a deployed function serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Route(Route),
    Job(Job),
}

impl Function {
    /// The route or job of that function name (`client-sessions-create`, `retention-sweep`).
    pub fn named(name: &str) -> Option<Function> {
        Route::by_function_name(name)
            .map(Function::Route)
            .or_else(|| Job::by_function_name(name).map(Function::Job))
    }
}

/// Serves the route or job `AGENTPLANE_FUNCTION` names; an unknown or missing name is an init
/// error (the function never takes an event), never a fallback to some other route.
pub async fn serve_from_env() -> Result<(), lambda_http::Error> {
    let name = std::env::var(FUNCTION_VAR).unwrap_or_default();
    match Function::named(&name) {
        Some(Function::Route(route)) => serve(route).await,
        Some(Function::Job(job)) => jobs::serve(job).await,
        None => Err(format!("{FUNCTION_VAR}={name:?} names no route or job of this build").into()),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_and_job_is_named_by_its_function_name_and_nothing_else_is() {
        for route in Route::ALL {
            assert_eq!(Function::named(route.function_name()), Some(Function::Route(*route)));
        }
        for job in Job::ALL {
            assert_eq!(Function::named(job.function_name()), Some(Function::Job(*job)));
        }
        for name in ["", "agentplane", "client-sessions", "Retention-Sweep", " retention-sweep"] {
            assert_eq!(Function::named(name), None, "{name:?}");
        }
    }
}
