//! The A2A routes' documented shapes (the JSON-RPC envelope and the agent card). The handlers
//! build and read JSON directly; these structs are the OpenAPI document's view of it.

#![allow(dead_code)]

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, SchemaType};

/// Any JSON value (a JSON-RPC id: a string, a number or null).
fn any_value() -> Object {
    Object::builder().schema_type(SchemaType::AnyValue).build()
}

/// A JSON-RPC 2.0 request: `message/send`, `message/stream`, `tasks/get` or `tasks/cancel`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = A2aRequest)]
pub struct A2aRequest {
    /// Always `2.0`.
    pub jsonrpc: String,
    /// The request's id (a string or a number), echoed by the answer.
    #[schema(schema_with = any_value)]
    pub id: Value,
    /// `message/send`, `message/stream`, `tasks/get` or `tasks/cancel`.
    pub method: String,
    /// `message/send` and `message/stream`: `{message: {role: "user", parts, messageId,
    /// contextId?, taskId?}, configuration?}`; `tasks/get`: `{id, historyLength?}`;
    /// `tasks/cancel`: `{id}`.
    #[schema(value_type = Option<Object>)]
    pub params: Option<Value>,
}

/// A JSON-RPC 2.0 error object. Codes: -32700 parse error, -32600 invalid request, -32601
/// method not found, -32602 invalid params, -32603 internal error, -32001 task not found,
/// -32002 task not cancelable, -32003 push notifications not supported, -32004 unsupported
/// operation (a message to an ended task), -32005 content type not supported (`file` parts),
/// -32000 the session refuses the call now (`data.code`: `session_busy`, `budget_paused`,
/// `spend_limit_reached`, `action_not_pending`, …).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = A2aError)]
pub struct A2aErrorBody {
    pub code: i64,
    pub message: String,
    /// The client API's `type`, `code` and fields, or the `param` at fault.
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
}

/// A JSON-RPC 2.0 answer: `result` (a `Task`) or `error`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = A2aResponse)]
pub struct A2aResponse {
    pub jsonrpc: String,
    /// The request's id (null when it could not be read).
    #[schema(schema_with = any_value)]
    pub id: Value,
    /// A Task: `{kind: "task", id, contextId, status: {state, timestamp, message?}, history,
    /// artifacts, metadata}`.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<A2aErrorBody>,
}

/// The agent card: who the agent is, where its JSON-RPC endpoint is and how to authenticate.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = A2aAgentCard)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub protocol_version: String,
    pub name: String,
    pub description: String,
    /// The JSON-RPC endpoint.
    pub url: String,
    pub preferred_transport: String,
    /// The published version the endpoint runs.
    pub version: String,
    #[schema(value_type = Object)]
    pub capabilities: Value,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    #[schema(value_type = Vec<Object>)]
    pub skills: Vec<Value>,
    #[schema(value_type = Object)]
    pub security_schemes: Value,
    #[schema(value_type = Vec<Object>)]
    pub security: Vec<Value>,
}
