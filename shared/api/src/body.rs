//! Request bodies: read whole (bounded), parsed as a JSON object whatever the Content-Type says,
//! with every failure mapped into the surface's own envelope by `E: From<BodyError>`.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::IntoResponse;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Map, Value};

/// Largest accepted JSON body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    TooLarge,
    Unreadable,
    InvalidJson(String),
    NotAnObject,
}

/// A JSON object body. An empty body reads as `{}` so that routes whose fields are all optional
/// accept a bare POST.
pub struct JsonObject<E>(pub Map<String, Value>, pub PhantomData<E>);

impl<E> JsonObject<E> {
    pub fn into_inner(self) -> Map<String, Value> {
        self.0
    }
}

impl<S, E> FromRequest<S> for JsonObject<E>
where
    S: Send + Sync,
    E: From<BodyError> + IntoResponse,
{
    type Rejection = E;

    async fn from_request(req: Request, _state: &S) -> Result<Self, E> {
        let limited = Limited::new(req.into_body(), MAX_BODY_BYTES);
        let body = match limited.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => {
                return Err(E::from(BodyError::TooLarge));
            }
            Err(_) => return Err(E::from(BodyError::Unreadable)),
        };
        parse_object(&body).map(|map| JsonObject(map, PhantomData)).map_err(E::from)
    }
}

pub fn parse_object(body: &Bytes) -> Result<Map<String, Value>, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(BodyError::NotAnObject),
        Err(err) => Err(BodyError::InvalidJson(err.to_string())),
    }
}
