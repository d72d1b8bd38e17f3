//! JSON-RPC 2.0 as A2A speaks it: one request object per call (no batches, no notifications),
//! answered with a result or an error object, never an HTTP error once the body is read.

use serde_json::{Map, Value, json};

use crate::client::error::ClientError;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// A2A's own codes.
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
/// The implementation-defined server error: a state of the session refuses the call (busy,
/// paused by its budget, the tenant's spend limit); `data.code` is the client API's code.
pub const SERVER_ERROR: i64 = -32000;

/// One JSON-RPC error object; `data` carries the client API's error fields where one applies.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    pub fn task_not_found() -> Self {
        Self::new(TASK_NOT_FOUND, "task not found")
    }

    fn to_value(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(data), Value::Object(map)) = (&self.data, &mut error) {
            map.insert("data".into(), data.clone());
        }
        error
    }
}

/// The client API's errors in JSON-RPC terms: bad input is invalid params, a missing session
/// or task is A2A's task-not-found, a storage failure is an internal error, and a state that
/// refuses the call is a server error; `data` keeps the envelope's `type`, `code` and fields.
impl From<ClientError> for RpcError {
    fn from(err: ClientError) -> Self {
        let api = err.to_api_error();
        let code = match (api.status.as_u16(), api.code) {
            (_, "session_not_found" | "action_not_found") => TASK_NOT_FOUND,
            (400, _) => INVALID_PARAMS,
            (500.., _) => INTERNAL_ERROR,
            _ => SERVER_ERROR,
        };
        let mut data = Map::new();
        data.insert("type".into(), api.kind.into());
        data.insert("code".into(), api.code.into());
        data.extend(api.extra);
        Self { code, message: api.message, data: Some(Value::Object(data)) }
    }
}

impl From<agentplane_domain::ValidationError> for RpcError {
    fn from(err: agentplane_domain::ValidationError) -> Self {
        let mut error = Self::invalid_params(err.message.clone());
        if let Some(param) = err.param {
            error.data = Some(json!({"param": param}));
        }
        error
    }
}

impl From<agentplane_store::StoreError> for RpcError {
    fn from(err: agentplane_store::StoreError) -> Self {
        ClientError::Storage(err).into()
    }
}

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for RpcError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        agentplane_store::StoreError::from(err).into()
    }
}

/// Answering a task's actions. An action that vanished while it was settled is a storage
/// failure here (the actions answered were read pending just before).
impl From<agentplane_engine::actions::ActionsError> for RpcError {
    fn from(err: agentplane_engine::actions::ActionsError) -> Self {
        use agentplane_engine::actions::ActionsError;
        match err {
            ActionsError::ActionNotFound => agentplane_store::StoreError::NotFound.into(),
            other => ClientError::from(other).into(),
        }
    }
}

/// A request: its id (a string, a number or null), its method and its params (`{}` if absent).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
}

/// Reads one request. An error comes with the id to answer it under (null when the id could
/// not be read).
pub fn parse(body: &[u8]) -> Result<RpcRequest, (Value, RpcError)> {
    let value: Value = crate::json::from_slice(body)
        .map_err(|e| (Value::Null, RpcError::new(PARSE_ERROR, format!("the body is not JSON: {e}"))))?;
    let Value::Object(mut request) = value else {
        return Err((
            Value::Null,
            RpcError::new(INVALID_REQUEST, "a request is one JSON object (batches are not taken)"),
        ));
    };
    let id = match request.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::new(INVALID_REQUEST, "`id` must be a string, a number or null"),
            ));
        }
        None => {
            return Err((
                Value::Null,
                RpcError::new(INVALID_REQUEST, "every request needs an `id` (notifications are not taken)"),
            ));
        }
    };
    if request.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err((id, RpcError::new(INVALID_REQUEST, "`jsonrpc` must be \"2.0\"")));
    }
    let method = match request.remove("method") {
        Some(Value::String(method)) => method,
        _ => return Err((id, RpcError::new(INVALID_REQUEST, "`method` must be a string"))),
    };
    let params = match request.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err((id, RpcError::invalid_params("`params` must be an object"))),
    };
    Ok(RpcRequest { id, method, params })
}

pub fn result(id: &Value, result: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_requests_are_answered_with_their_json_rpc_codes() {
        let code = |body: &str| parse(body.as_bytes()).err().map(|(_, e)| e.code);
        assert_eq!(code("{"), Some(PARSE_ERROR));
        assert_eq!(code("[]"), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"tasks/get"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"tasks/get"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":{},"method":"tasks/get"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#), Some(INVALID_PARAMS));
        let ok = parse(br#"{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"id":"x"}}"#);
        assert_eq!(ok.map(|r| (r.id, r.method)), Ok((json!("a"), "tasks/get".into())));
        // The id of a request that fails later is kept for its answer.
        let id = parse(br#"{"jsonrpc":"2.0","id":5,"method":3}"#).err().map(|(id, _)| id);
        assert_eq!(id, Some(json!(5)));
    }

    #[test]
    fn client_errors_keep_their_code_in_data() {
        let err = RpcError::from(ClientError::SessionBusy { session_id: None });
        assert_eq!(err.code, SERVER_ERROR);
        assert_eq!(err.data.as_ref().map(|d| d["code"].clone()), Some(json!("session_busy")));
        assert_eq!(RpcError::from(ClientError::SessionNotFound).code, TASK_NOT_FOUND);
        let invalid = RpcError::from(agentplane_domain::ValidationError::new("message.parts", "bad"));
        assert_eq!((invalid.code, invalid.data), (INVALID_PARAMS, Some(json!({"param": "message.parts"}))));
    }
}
