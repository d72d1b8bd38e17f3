//! The gateway's HTTP/1.1 server. Unlike a bare `axum::serve` it refuses to be held: a request
//! head must arrive within the header timeout of the connection opening (or of its first byte
//! after a previous answer), a body within the body timeout of its head (else 408 in the
//! surface's envelope), and a connection with nothing in flight is closed after the idle
//! timeout, as is one whose client stops reading an answer. The transport's own refusals
//! (a head too large for the parser) are answered in the surface's envelope too.

mod io;

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_api::edge::guard::BodyDeadline;
use anyhow::Context;
use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tower::ServiceExt;

use io::{Activity, GuardedIo};

/// Largest request head the parser buffers; the edge guard answers heads over its own (much
/// smaller) limits in the envelope, and this server answers anything larger the same way.
const MAX_HEAD_BUFFER: usize = 256 * 1024;
const MAX_HEADER_FIELDS: usize = 256;

/// The server's timeouts (`AGENTPLANE_HTTP_HEADER_TIMEOUT_S`, `…_BODY_TIMEOUT_S`,
/// `…_IDLE_TIMEOUT_S`; default 10, 30 and 60 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpTimeouts {
    /// From the connection opening, or the first byte of a later request, to the end of its head.
    pub header: Duration,
    /// From the end of the head to the end of the body.
    pub body: Duration,
    /// How long a connection may stay open with no request in flight, and how long a client
    /// may leave an answer unread.
    pub idle: Duration,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        Self { header: Duration::from_secs(10), body: Duration::from_secs(30), idle: Duration::from_secs(60) }
    }
}

impl HttpTimeouts {
    /// From the environment; an unset variable keeps its default, an invalid one is an error.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let defaults = Self::default();
        let seconds = |name: &str, default: Duration| -> anyhow::Result<Duration> {
            let Some(text) = get(name) else { return Ok(default) };
            let n: u64 =
                text.trim().parse().with_context(|| format!("{name} must be a whole number of seconds"))?;
            anyhow::ensure!((1..=3600).contains(&n), "{name} must be from 1 to 3600 seconds");
            Ok(Duration::from_secs(n))
        };
        Ok(Self {
            header: seconds("AGENTPLANE_HTTP_HEADER_TIMEOUT_S", defaults.header)?,
            body: seconds("AGENTPLANE_HTTP_BODY_TIMEOUT_S", defaults.body)?,
            idle: seconds("AGENTPLANE_HTTP_IDLE_TIMEOUT_S", defaults.idle)?,
        })
    }
}

/// Serves `router` on `listener` until `shutdown` resolves (connections already open run on).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    timeouts: HttpTimeouts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        tokio::spawn(serve_connection(stream, router.clone(), timeouts));
    }
}

async fn serve_connection(stream: TcpStream, router: Router, timeouts: HttpTimeouts) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Mutex::new(Activity::opened(Instant::now())));
    let io = GuardedIo::new(stream, activity.clone(), timeouts);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let router = router.clone();
        let busy = io::Busy::start(&activity);
        async move {
            let (mut parts, body) = request.into_parts();
            parts.extensions.insert(BodyDeadline(Instant::now() + timeouts.body));
            let request = hyper::Request::from_parts(parts, Body::new(body));
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            // The request stays in flight until its answer is written (or dropped).
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _ = &busy;
                    frame
                }))
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The connection wrapper keeps the head deadline (hyper's would also cut idle keep-alive).
        .header_read_timeout(None)
        .max_buf_size(MAX_HEAD_BUFFER)
        .max_headers(MAX_HEADER_FIELDS);
    if let Err(err) = builder.serve_connection(TokioIo::new(io), service).await {
        tracing::debug!(error = %err, "connection ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_default_to_10_30_60_and_refuse_nonsense() {
        let none = HttpTimeouts::from_lookup(|_| None).expect("defaults");
        assert_eq!(none, HttpTimeouts::default());
        assert_eq!(none.header, Duration::from_secs(10));
        assert_eq!(none.body, Duration::from_secs(30));
        assert_eq!(none.idle, Duration::from_secs(60));
        let set = HttpTimeouts::from_lookup(|name| name.contains("BODY").then(|| " 5 ".to_owned()));
        assert_eq!(set.expect("valid").body, Duration::from_secs(5));
        for bad in ["0", "abc", "-1", "3601", ""] {
            assert!(HttpTimeouts::from_lookup(|_| Some(bad.to_owned())).is_err(), "{bad:?} was taken");
        }
    }
}
