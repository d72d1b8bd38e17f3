//! What every request and every answer of every surface goes through (the router's outermost
//! layer but one): bounded request heads and bodies, and errors in the surface's own envelope
//! whoever produced them (a handler, an axum rejection, the router's 404/405, this guard), with
//! quoted input cut short. Lambda and the local gateway run the same guard.

use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

use super::quote::{cap_message, quote};
use crate::body::MAX_BODY_BYTES;
use crate::envelope::ApiError;

/// Longest request target (path and query).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields, and their total size (names and values).
pub const MAX_HEADERS: usize = 100;
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Largest body a route that takes none accepts (it is read and dropped).
pub const MAX_BODYLESS_BYTES: usize = 4 * 1024;
/// How much of an oversized body is read and dropped before answering 413, so that the client
/// reads the answer instead of a reset connection; past it the connection is dropped.
const MAX_DRAIN_BYTES: usize = 16 * 1024 * 1024;
const MAX_DRAIN_TIME: Duration = Duration::from_secs(5);
/// Error bodies are small; a larger one is replaced, not read whole.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// When the request body must have arrived. The local gateway sets it on every request
/// (`AGENTPLANE_HTTP_BODY_TIMEOUT_S`); without it (Lambda: API Gateway buffers bodies) there is
/// no deadline.
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub tokio::time::Instant);

/// Whose envelope an answer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// Client, Core and node routes: `{"error":{"type","code","message"}}`.
    Agent,
    /// `/sandbox/v1`: E2B's `{"code": <status>, "message"}`.
    Sandbox,
    /// `/v1`: `{"error":{"code","message","requestId","details"?}}`, and `X-Request-Id` on
    /// every answer.
    Platform,
}

impl Surface {
    pub fn of(path: &str) -> Self {
        if path == "/sandbox" || path.starts_with("/sandbox/") {
            Self::Sandbox
        } else if path == "/v1" || path.starts_with("/v1/") {
            Self::Platform
        } else {
            Self::Agent
        }
    }
}

/// The header naming a `/v1` request.
pub const REQUEST_ID: &str = "x-request-id";

/// A fresh request id, `req_` and 24 hex digits.
pub fn request_id() -> String {
    let bytes: [u8; 12] = crate::edge::random().unwrap_or_else(|_| {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mut fallback = [0u8; 12];
        fallback.copy_from_slice(&nanos.to_be_bytes()[4..]);
        fallback
    });
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("req_{hex}")
}

/// An error answer in `surface`'s envelope.
pub fn error(surface: Surface, status: StatusCode, code: &'static str, message: &str) -> Response {
    match surface {
        Surface::Agent => ApiError::new(status, kind_of(status), code, message).into_response(),
        Surface::Sandbox => {
            let body = crate::sandbox::error::E2bError { code: status.as_u16(), message: message.to_owned() };
            (status, Json(body)).into_response()
        }
        // `requestId` is added on the way out (`envelope_errors`).
        Surface::Platform => {
            (status, Json(json!({ "error": { "code": code, "message": message } }))).into_response()
        }
    }
}

fn kind_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The code and message of an error whose producer gave no envelope, by status.
fn generic(status: StatusCode) -> (&'static str, &'static str) {
    match status.as_u16() {
        400 => ("invalid_request", "the request is malformed"),
        401 => ("invalid_api_key", "missing, invalid or revoked credentials"),
        404 => ("not_found", "no such resource"),
        405 => ("method_not_allowed", "method not allowed"),
        408 => ("request_timeout", "the request did not arrive in time"),
        413 => ("request_too_large", "the request body is too large"),
        414 => ("uri_too_long", "the request target is too long"),
        415 => ("unsupported_media_type", "unsupported media type"),
        431 => ("headers_too_large", "the request headers are too large"),
        500..=599 => ("internal_error", "internal error"),
        _ => ("http_error", "the request failed"),
    }
}

/// The envelope body of an error that only has a status (the transport's own refusals), in
/// `surface`'s shape.
pub fn generic_body(surface: Surface, status: StatusCode) -> Value {
    let (code, message) = generic(status);
    match surface {
        Surface::Agent => json!({ "error": { "type": kind_of(status), "code": code, "message": message } }),
        Surface::Sandbox => json!({ "code": status.as_u16(), "message": message }),
        Surface::Platform => {
            json!({ "error": { "code": code, "message": message, "requestId": request_id() } })
        }
    }
}

/// The routes of a router that read a request body: `(method, path as declared)`.
#[derive(Debug, Clone, Default)]
pub struct BodyRoutes(std::sync::Arc<Vec<(http::Method, String)>>);

impl BodyRoutes {
    pub fn add(&mut self, method: http::Method, path: &str) {
        std::sync::Arc::make_mut(&mut self.0).push((method, path.to_owned()));
    }

    /// Whether the route this request matched reads a body (a path no route serves reads none).
    fn take(&self, request: &Request) -> bool {
        let Some(matched) = request.extensions().get::<MatchedPath>() else { return false };
        self.0.iter().any(|(method, path)| method == request.method() && path == matched.as_str())
    }
}

pub async fn guard(State(bodies): State<BodyRoutes>, request: Request, next: Next) -> Response {
    let surface = Surface::of(request.uri().path());
    let takes_body = bodies.take(&request);
    let response = match check_head(&request, surface) {
        Some(refused) => refused,
        None => match read_body(request, surface, takes_body).await {
            Ok(request) => next.run(request).await,
            Err(refused) => refused,
        },
    };
    let mut response = envelope_errors(response, surface).await;
    if surface == Surface::Platform {
        // One id per request: the error body's `requestId` is the header's.
        let id = response.extensions().get::<RequestId>().map(|r| r.0.clone()).unwrap_or_else(request_id);
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(REQUEST_ID, value);
        }
    }
    response
}

/// The id an enveloped `/v1` error named, for the header.
#[derive(Debug, Clone)]
struct RequestId(String);

fn check_head(request: &Request, surface: Surface) -> Option<Response> {
    let target = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        let message = format!("the request target exceeds {MAX_URI_BYTES} bytes");
        return Some(error(surface, StatusCode::URI_TOO_LONG, "uri_too_long", &message));
    }
    let headers = request.headers();
    let size: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if headers.len() > MAX_HEADERS || size > MAX_HEADER_BYTES {
        let message = format!("the request headers exceed {MAX_HEADERS} fields or {MAX_HEADER_BYTES} bytes");
        return Some(error(
            surface,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            &message,
        ));
    }
    // An id that is not UTF-8 once decoded names nothing: a 404, like any malformed id.
    if !decodes_to_utf8(request.uri().path()) {
        return Some(error(surface, StatusCode::NOT_FOUND, "not_found", "no such resource"));
    }
    None
}

/// Whether the percent-decoded path is UTF-8.
fn decodes_to_utf8(path: &str) -> bool {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or(0));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::str::from_utf8(&out).is_ok()
}

/// Reads the whole body (bounded, before the deadline if there is one) so that handlers get it
/// in memory and a route that takes no body cannot be made to hold one.
async fn read_body(request: Request, surface: Surface, takes_body: bool) -> Result<Request, Response> {
    let limit = if takes_body { MAX_BODY_BYTES } else { MAX_BODYLESS_BYTES };
    let too_large = || {
        let message = if limit == MAX_BODY_BYTES {
            format!("the request body exceeds {limit} bytes")
        } else {
            format!("this route takes no request body (at most {limit} bytes are accepted)")
        };
        error(surface, StatusCode::PAYLOAD_TOO_LARGE, "request_too_large", &message)
    };
    let deadline = request.extensions().get::<BodyDeadline>().map(|d| d.0);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (parts, mut body) = request.into_parts();
    if declared.is_some_and(|n| n > limit as u64) {
        drain(body, deadline).await;
        return Err(too_large());
    }
    let mut buffer = Vec::new();
    loop {
        let frame = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => {
                    return Err(error(
                        surface,
                        StatusCode::REQUEST_TIMEOUT,
                        "request_timeout",
                        "the request body did not arrive in time",
                    ));
                }
            },
            None => body.frame().await,
        };
        match frame {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    buffer.extend_from_slice(&data);
                    if buffer.len() > limit {
                        drain(body, deadline).await;
                        return Err(too_large());
                    }
                }
            }
            Some(Err(_)) => {
                return Err(error(
                    surface,
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "the request body could not be read",
                ));
            }
        }
    }
    Ok(Request::from_parts(parts, Body::from(buffer)))
}

/// Reads and drops what is left of a body, within bounds.
async fn drain(mut body: Body, deadline: Option<tokio::time::Instant>) {
    let bound = tokio::time::Instant::now() + MAX_DRAIN_TIME;
    let until = deadline.map_or(bound, |d| d.min(bound));
    let _ = tokio::time::timeout_at(until, async {
        let mut read = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, Bytes::len);
            if read > MAX_DRAIN_BYTES {
                break;
            }
        }
    })
    .await;
}

/// Every error answer leaves in the surface's envelope with its quoted input cut short.
async fn envelope_errors(response: Response, surface: Surface) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (mut parts, body) = response.into_parts();
    let parsed = if is_json {
        match http_body_util::Limited::new(body, MAX_ERROR_BODY_BYTES).collect().await {
            Ok(collected) => serde_json::from_slice::<Value>(&collected.to_bytes()).ok(),
            Err(_) => None,
        }
    } else {
        None
    };
    let normalized = match parsed.and_then(|value| normalize(value, surface, status)) {
        Some(value) => value,
        None => {
            let (code, message) = generic(status);
            let replaced = keep_headers(error(surface, status, code, message), &parts);
            return if surface == Surface::Platform {
                Box::pin(envelope_errors(replaced, surface)).await
            } else {
                replaced
            };
        }
    };
    let mut normalized = normalized;
    if surface == Surface::Platform {
        let id = request_id();
        if let Some(Value::Object(error)) = normalized.get_mut("error") {
            error.insert("requestId".into(), json!(id));
        }
        parts.extensions.insert(RequestId(id));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(normalized.to_string()))
}

/// Carries the headers a producer set (e.g. `Allow`, `Retry-After`) onto a replaced answer.
fn keep_headers(mut replaced: Response, original: &http::response::Parts) -> Response {
    for (name, value) in &original.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            replaced.headers_mut().entry(name).or_insert(value.clone());
        }
    }
    replaced
}

/// The surface's envelope of an error body, or `None` when the body is no envelope at all.
fn normalize(value: Value, surface: Surface, status: StatusCode) -> Option<Value> {
    let Value::Object(mut body) = value else { return None };
    let inner = match body.get_mut("error") {
        Some(Value::Object(error)) => Some(error),
        _ => None,
    };
    match (surface, inner) {
        (Surface::Agent, Some(error)) => {
            cap_fields(error);
            Some(Value::Object(body))
        }
        (Surface::Agent, None) => match body.get("error") {
            // The older Responses shape `{"error": "message"}`.
            Some(Value::String(message)) => Some(json!({ "error": cap_message(message) })),
            _ => None,
        },
        (Surface::Sandbox, Some(error)) => {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("the request failed");
            Some(json!({ "code": status.as_u16(), "message": cap_message(message) }))
        }
        (Surface::Platform, Some(error)) => {
            // Another surface's shape (an axum rejection, the router's 404) becomes this one:
            // `code` and `message` kept, `type` dropped, every other field under `details`.
            let code = error.get("code").and_then(Value::as_str).unwrap_or(generic(status).0).to_owned();
            let message = error.get("message").and_then(Value::as_str).unwrap_or(generic(status).1);
            let message = cap_message(message);
            let mut details = match error.remove("details") {
                Some(Value::Object(d)) => d,
                Some(other) => Map::from_iter([("value".to_owned(), other)]),
                None => Map::new(),
            };
            for (name, value) in error.iter() {
                if !matches!(name.as_str(), "code" | "message" | "type" | "requestId") {
                    details.insert(name.clone(), value.clone());
                }
            }
            cap_fields(&mut details);
            let mut out = json!({ "code": code, "message": message });
            if !details.is_empty() {
                out["details"] = Value::Object(details);
            }
            Some(json!({ "error": out }))
        }
        (Surface::Platform, None) => None,
        (Surface::Sandbox, None) => {
            let message = body.get("message").and_then(Value::as_str)?;
            let message = cap_message(message);
            body.insert("code".into(), json!(status.as_u16()));
            body.insert("message".into(), json!(message));
            Some(Value::Object(body))
        }
    }
}

/// The message and every other string field a client could have filled (`param`, …).
fn cap_fields(error: &mut Map<String, Value>) {
    for (name, value) in error.iter_mut() {
        if let Value::String(text) = value {
            *text = if name == "message" { cap_message(text) } else { quote(text) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_decode_to_invalid_utf8_are_caught() {
        assert!(decodes_to_utf8("/api/client/v1/sessions/sess_abc"));
        assert!(decodes_to_utf8("/a/%C3%A9"));
        assert!(decodes_to_utf8("/a/%zz"));
        assert!(!decodes_to_utf8("/api/client/v1/sessions/%FF%FE"));
        assert!(!decodes_to_utf8("/a/%C3"));
    }

    #[test]
    fn the_sandbox_surface_is_told_by_its_prefix() {
        assert_eq!(Surface::of("/sandbox/v1/sandboxes"), Surface::Sandbox);
        assert_eq!(Surface::of("/sandboxes"), Surface::Agent);
        assert_eq!(Surface::of("/api/client/v1/sessions"), Surface::Agent);
    }

    #[test]
    fn e2b_errors_keep_their_shape_and_agent_envelopes_become_e2b_under_sandbox() {
        let routed = json!({"error": {"type": "not_found_error", "code": "route_not_found", "message": "no such route"}});
        let out = normalize(routed, Surface::Sandbox, StatusCode::NOT_FOUND).expect("an envelope");
        assert_eq!(out, json!({"code": 404, "message": "no such route"}));
        let e2b = json!({"code": 409, "message": "paused"});
        assert_eq!(normalize(e2b.clone(), Surface::Sandbox, StatusCode::CONFLICT), Some(e2b));
        assert_eq!(normalize(json!([1]), Surface::Agent, StatusCode::BAD_REQUEST), None);
    }
}
