//! A `text/event-stream` answer whose frames a task sends on a channel: the body ends when the
//! sender is dropped. Proxies are told not to buffer it, and nothing caches it.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use tokio::sync::mpsc;

/// The answer streaming what `rx` receives, frame by frame.
pub fn event_stream(mut rx: mpsc::Receiver<Bytes>) -> Response {
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|chunk| chunk.map(Ok::<_, Infallible>))
    }));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
