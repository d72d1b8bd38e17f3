//! The local gateway's door to the embedded node's envd: a request carrying `E2b-Sandbox-Id`
//! (what the E2B SDK sends when `E2B_SANDBOX_URL` points at the gateway) is forwarded, bytes
//! streamed both ways, to the envd the embedded node serves on a loopback port of its own.
//! Everything else goes to the gateway's routes. Deployed, nothing proxies: clients reach the
//! node's envd directly (README, "envd").

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use hyper_util::rt::TokioIo;

/// The header that routes a request to envd.
pub const SANDBOX_HEADER: &str = "e2b-sandbox-id";

/// `router` with envd's requests (those carrying `E2b-Sandbox-Id`) sent to `envd` instead.
pub fn layer(router: axum::Router, envd: Option<SocketAddr>) -> axum::Router {
    router.layer(axum::middleware::from_fn(move |request, next| route(envd, request, next)))
}

/// A middleware sending envd's requests to `envd`, the rest on.
pub async fn route(envd: Option<SocketAddr>, request: Request, next: Next) -> Response {
    match envd {
        Some(addr) if request.headers().contains_key(SANDBOX_HEADER) => forward(addr, request).await,
        _ => next.run(request).await,
    }
}

async fn forward(addr: SocketAddr, request: Request) -> Response {
    match send(addr, request).await {
        Ok(response) => response,
        Err(err) => {
            tracing::warn!(error = %err, "envd did not answer the gateway");
            let body = serde_json::json!({ "code": 502, "message": "the sandbox's envd is unreachable" });
            (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response()
        }
    }
}

async fn send(addr: SocketAddr, request: Request) -> anyhow::Result<Response> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(error = %err, "an envd connection ended");
        }
    });
    let answer = sender.send_request(request).await?;
    Ok(answer.map(Body::new))
}
