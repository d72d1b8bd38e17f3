//! The Connect protocol as envd speaks it to the E2B SDK, JSON codec only (the SDK's own
//! choice): unary calls are a JSON body in and out (`application/json`); server streams take one
//! enveloped request and answer enveloped messages (`application/connect+json`), each a 5-byte
//! prefix (flags, big-endian length) before its JSON, ended by an end-of-stream envelope (flag
//! 0x02) carrying `{}` or `{"error":{…}}`.

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The largest request message a call accepts.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

const END_STREAM: u8 = 0x02;
const COMPRESSED: u8 = 0x01;

/// A Connect error code (the protocol's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    Unauthenticated,
    FailedPrecondition,
    Unimplemented,
    Internal,
    Unavailable,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid_argument",
            Self::NotFound => "not_found",
            Self::AlreadyExists => "already_exists",
            Self::PermissionDenied => "permission_denied",
            Self::Unauthenticated => "unauthenticated",
            Self::FailedPrecondition => "failed_precondition",
            Self::Unimplemented => "unimplemented",
            Self::Internal => "internal",
            Self::Unavailable => "unavailable",
        }
    }

    /// The HTTP status of a unary error (Connect's mapping).
    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidArgument => StatusCode::BAD_REQUEST,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::AlreadyExists => StatusCode::CONFLICT,
            Self::PermissionDenied => StatusCode::FORBIDDEN,
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::FailedPrecondition => StatusCode::PRECONDITION_FAILED,
            Self::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A failed call: its code and a message safe to show (no host paths, no pids of the host).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code.as_str(), "message": self.message })
    }
}

impl IntoResponse for ConnectError {
    /// Before a stream starts and for unary calls alike: the status and `{code, message}`
    /// (a stream's client reads the same shape from a non-200 answer).
    fn into_response(self) -> Response {
        let mut response = (self.code.status(), axum::Json(self.json())).into_response();
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

fn media(headers: &http::HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ConnectError> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}".as_slice() } else { bytes };
    serde_json::from_slice(bytes)
        .map_err(|e| ConnectError::new(Code::InvalidArgument, format!("the request message is invalid: {e}")))
}

/// The message of a unary call.
pub fn unary_request<T: DeserializeOwned>(
    headers: &http::HeaderMap,
    body: &Bytes,
) -> Result<T, ConnectError> {
    match media(headers).as_str() {
        "application/json" | "" => decode(body),
        other => Err(unsupported(other)),
    }
}

fn unsupported(media: &str) -> ConnectError {
    ConnectError::new(
        Code::Unimplemented,
        format!("content type {media:?} is not served: this envd speaks Connect's JSON codec"),
    )
}

/// The answer of a unary call.
pub fn unary_response<T: Serialize>(message: &T) -> Response {
    let mut response = axum::Json(message).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The single message of a server-streaming call.
pub fn stream_request<T: DeserializeOwned>(
    headers: &http::HeaderMap,
    body: &Bytes,
) -> Result<T, ConnectError> {
    match media(headers).as_str() {
        "application/connect+json" => {}
        other => return Err(unsupported(other)),
    }
    let mut messages = envelopes(body);
    match (messages.next(), messages.next()) {
        (Some(first), None) => decode(first?),
        _ => Err(ConnectError::new(Code::InvalidArgument, "a streaming call takes exactly one message")),
    }
}

/// The messages of an enveloped body (a client stream's, or one message's); compressed ones are
/// refused (no compression is offered).
pub fn envelopes(body: &[u8]) -> impl Iterator<Item = Result<&[u8], ConnectError>> {
    let mut rest = body;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some((head, tail)) = rest.split_first_chunk::<5>() else {
            rest = &[];
            return Some(Err(ConnectError::new(Code::InvalidArgument, "a truncated envelope")));
        };
        let (flags, length) = (head[0], u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize);
        if flags & COMPRESSED != 0 || length > MAX_MESSAGE_BYTES || length > tail.len() {
            rest = &[];
            return Some(Err(ConnectError::new(Code::InvalidArgument, "an invalid envelope")));
        }
        let (message, after) = tail.split_at(length);
        rest = after;
        // An end-of-stream envelope from a client carries nothing to act on.
        Some(Ok(if flags & END_STREAM == 0 { message } else { &[][..] }))
    })
    .filter(|m| !matches!(m, Ok(b) if b.is_empty()))
}

/// One message enveloped.
pub fn envelope<T: Serialize>(message: &T) -> Bytes {
    frame(0, &serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec()))
}

/// The end-of-stream envelope: success, or the error that ended the stream.
pub fn end_of_stream(error: Option<&ConnectError>) -> Bytes {
    let body = match error {
        None => serde_json::json!({}),
        Some(err) => serde_json::json!({ "error": err.json() }),
    };
    frame(END_STREAM, &serde_json::to_vec(&body).unwrap_or_default())
}

fn frame(flags: u8, json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 5);
    out.push(flags);
    out.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(json);
    Bytes::from(out)
}

/// A server stream's response around a stream of already enveloped frames.
pub fn stream_response(frames: impl futures_util::Stream<Item = Bytes> + Send + 'static) -> Response {
    use futures_util::StreamExt;
    let body = Body::from_stream(frames.map(Ok::<_, std::convert::Infallible>));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/connect+json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_reads_back_and_a_lying_length_is_refused() {
        let framed = envelope(&serde_json::json!({"a": 1}));
        let read: Vec<_> = envelopes(&framed).collect::<Result<_, _>>().expect("one message");
        assert_eq!(read, vec![br#"{"a":1}"#.as_slice()]);
        let mut lying = framed.to_vec();
        lying[4] = 200;
        assert!(envelopes(&lying).any(|m| m.is_err()));
        assert!(envelopes(&[0, 0, 0]).any(|m| m.is_err()));
        let end = end_of_stream(None);
        assert_eq!(end[0], END_STREAM);
        assert_eq!(envelopes(&end).count(), 0);
    }
}
