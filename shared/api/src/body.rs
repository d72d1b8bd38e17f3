//! Request bodies: read whole (bounded), parsed as a JSON object whatever the Content-Type says
//! (an object naming a key twice is invalid JSON here, see [`crate::json`]), with every
//! failure mapped into the surface's own envelope by `E: From<BodyError>`.

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
        read_object(req).await.map(|map| JsonObject(map, PhantomData))
    }
}

/// The request's body as a JSON object (see the module's rules), for an extractor of its own.
pub async fn read_object<E: From<BodyError>>(req: Request) -> Result<Map<String, Value>, E> {
    let limited = Limited::new(req.into_body(), MAX_BODY_BYTES);
    let body = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(E::from(BodyError::TooLarge));
        }
        Err(_) => return Err(E::from(BodyError::Unreadable)),
    };
    parse_object(&body).map_err(E::from)
}

/// A typed request body: the JSON object deserialized into `T` (a surface's request struct).
/// A field of the wrong type answers the surface's 400 naming that field (`param`), like the
/// domain's own validation; what is valid beyond its type, `T`'s `TryFrom` into the domain
/// decides.
pub struct Wire<T, E>(pub T, pub PhantomData<E>);

impl<S, T, E> FromRequest<S> for Wire<T, E>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
    E: From<BodyError> + From<agentplane_domain::ValidationError> + IntoResponse,
{
    type Rejection = E;

    async fn from_request(req: Request, _state: &S) -> Result<Self, E> {
        let map = read_object::<E>(req).await?;
        from_object(map).map(|value| Wire(value, PhantomData)).map_err(E::from)
    }
}

/// `map` as `T`; a type mismatch names the field's path (`config.execution.max_turns`).
pub fn from_object<T: serde::de::DeserializeOwned>(
    map: Map<String, Value>,
) -> Result<T, agentplane_domain::ValidationError> {
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        if let Some(field) = inner.strip_prefix("missing field `").and_then(|f| f.strip_suffix('`')) {
            let param = if path == "." { field.to_owned() } else { format!("{path}.{field}") };
            return agentplane_domain::ValidationError::new(&param, format!("`{param}` is required"));
        }
        if inner.starts_with("unknown field `") {
            return agentplane_domain::ValidationError::new(&path, format!("unknown field `{path}`"));
        }
        // serde's message quotes the submitted value; keep only what was expected.
        let expected = inner.split_once(", expected ").map_or(inner.as_str(), |(_, e)| e);
        let expected = expected.split(" at line ").next().unwrap_or(expected);
        if path == "." || path.is_empty() {
            agentplane_domain::ValidationError::body(format!("the request body is invalid: {expected}"))
        } else {
            agentplane_domain::ValidationError::new(&path, format!("`{path}` must be {expected}"))
        }
    })
}

/// The fields a typed body gathered with `#[serde(flatten)]` because it takes none of them:
/// the first (by name) is refused, named.
pub fn no_other_field(other: &Map<String, Value>) -> Result<(), agentplane_domain::ValidationError> {
    match other.keys().next() {
        Some(unknown) => Err(agentplane_domain::ValidationError::new(
            unknown.clone(),
            format!("unknown field `{unknown}`"),
        )),
        None => Ok(()),
    }
}

pub fn parse_object(body: &Bytes) -> Result<Map<String, Value>, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(BodyError::NotAnObject),
        Err(err) => Err(BodyError::InvalidJson(err.to_string())),
    }
}

/// For `Option<T>` fields that may be left out but not sent as `null` (a `null` is refused as
/// the wrong type): `#[serde(default, deserialize_with = "crate::body::present")]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// For `Option<Option<T>>` fields of PATCH bodies, where `null` (clear it) differs from absent
/// (leave it): `#[serde(default, deserialize_with = "crate::body::nullable")]`.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Patch {
        #[serde(default, deserialize_with = "nullable")]
        title: Option<Option<String>>,
        #[allow(dead_code)]
        count: Option<u8>,
    }

    fn parse(text: &str) -> Result<Patch, agentplane_domain::ValidationError> {
        from_object(parse_object(&Bytes::from(text.to_owned())).expect("an object"))
    }

    #[test]
    fn null_differs_from_absent() {
        assert_eq!(parse("{}").expect("ok").title, None);
        assert_eq!(parse(r#"{"title":null}"#).expect("ok").title, Some(None));
        assert_eq!(parse(r#"{"title":"t"}"#).expect("ok").title, Some(Some("t".into())));
    }

    #[test]
    fn a_wrong_type_names_the_field_without_quoting_the_value() {
        let err = parse(r#"{"count":"a very long secret value"}"#).expect_err("a type error");
        assert_eq!(err.param.as_deref(), Some("count"));
        assert!(!err.message.contains("secret"), "{}", err.message);
    }
}
