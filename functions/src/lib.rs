//! The Lambda glue every function binary shares. Each route and each job is its own binary
//! (`src/bin/<function>.rs`, written by `cargo xtask functions`): a route's binary takes its
//! declaration at compile time and serves it ([`route_function!`]), a job's binary runs its job
//! ([`jobs`]), so each links only its own handler or job.

pub mod jobs;
pub mod logs;
pub mod metrics;

use std::process::ExitCode;

use agentplane_api::App;
use agentplane_api::edge::InvokedAt;
use agentplane_api::routes::{Declaration, router_of};
use axum::extract::Request;

pub use agentplane_api::routes::Route;

/// A function binary serving one route: `agentplane_functions::route_function!(CoreProjectsList);`.
#[macro_export]
macro_rules! route_function {
    ($route:ident) => {
        fn main() -> ::std::process::ExitCode {
            const DECLARATION: $crate::routes::Declaration = $crate::Route::$route.declaration();
            $crate::serve_route(DECLARATION)
        }
    };
}

pub mod routes {
    pub use agentplane_api::routes::Declaration;
}

/// Runs a function's main future on a multi-threaded runtime; an init or runtime error is
/// logged and ends the process with a failure (Lambda reports it as an init error).
fn run(main: impl Future<Output = Result<(), lambda_http::Error>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("starting the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(%err, "the function stopped");
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// JSON logs, one flat object per line carrying the request id, trace id and project
/// ([`logs::FlatJson`]), level from `RUST_LOG` (default `info`; `target=level` directives as
/// well). Lambda stamps the time itself. A `Targets` filter, not `EnvFilter`: no regex engine in
/// every function's binary for directives the functions never need. Metric events become EMF
/// lines whatever the level ([`metrics::Emf`]).
pub fn init_tracing() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    let json = tracing_subscriber::fmt::layer()
        .event_format(logs::FlatJson)
        .fmt_fields(logs::span_fields())
        .with_ansi(false)
        .with_filter(filter);
    tracing_subscriber::registry().with(json).with(metrics::Emf::new(std::io::stdout)).init();
}

/// Serves one route as a Lambda function behind API Gateway (REST API) until Lambda stops the
/// process. Not generic and not async: all of it is compiled here once, and a route's binary
/// only links it (with its own handler, which the declaration points at).
pub fn serve_route(declaration: Declaration) -> ExitCode {
    run(route(declaration))
}

/// The app holds the clients its grants name (S3, SQS only where granted).
async fn route(declaration: Declaration) -> Result<(), lambda_http::Error> {
    init_tracing();
    let app = App::from_env(declaration.grants).await?;
    let router = router_of(app, &[declaration])
        .layer(axum::middleware::map_request(invoked_at))
        .layer(axum::middleware::from_fn(in_request_span));
    if declaration.serving.streams() {
        lambda_http::run_with_streaming_response(router).await
    } else {
        lambda_http::run(router).await
    }
}

/// Runs the request in its span ([`logs::request_span`]), inside the invocation's, so every
/// line it logs carries the project once authentication records it.
async fn in_request_span(request: Request, next: axum::middleware::Next) -> axum::response::Response {
    use tracing::Instrument as _;
    next.run(request).instrument(logs::request_span()).await
}

/// The domain and stage API Gateway invoked the function for, as the handlers read it
/// ([`InvokedAt`]: the A2A card's links when no public URL is configured).
async fn invoked_at(mut request: Request) -> Request {
    let invoked = match request.extensions().get::<lambda_http::request::RequestContext>() {
        Some(lambda_http::request::RequestContext::ApiGatewayV1(context)) => {
            context.domain_name.as_deref().filter(|d| !d.is_empty()).map(|domain| InvokedAt {
                domain: domain.to_owned(),
                stage: context.stage.clone().filter(|s| !s.is_empty() && s != "$default"),
            })
        }
        _ => None,
    };
    if let Some(invoked) = invoked {
        request.extensions_mut().insert(invoked);
    }
    request
}
