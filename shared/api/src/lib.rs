//! Agentplane's HTTP surfaces. One module per surface (routing, auth, request parsing, error
//! envelope); the same routers run in Lambda (one route per function) and in the local gateway
//! (every route on one port).

pub mod app;
pub mod body;
pub mod client;
pub mod core;
pub mod edge;
pub mod envelope;
pub mod found;
pub mod grants;
pub mod jobs;
pub mod json;
pub mod keys;
pub mod list;
pub mod logs;
pub mod node;
pub mod openapi;
pub mod platform;
pub mod quotas;
pub mod routes;
pub mod sandbox;
pub mod secrets;
pub mod sse;
pub mod webhooks;

pub use app::App;
pub use routes::Route;

/// Serves a router on a plain HTTP listener until `shutdown` resolves: the local gateway's and
/// the test harness's way in.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}
