//! An agent over A2A: its card, and one JSON-RPC endpoint for `message/send`,
//! `message/stream`, `tasks/get` and `tasks/cancel`. A task is one turn of the agent's newest
//! published version (API traffic runs the published version); its context is the session. A
//! turn that pauses for an action is `input-required`, and the caller's next message in that
//! context answers it: the same turn carries on in this call.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Value, json};

use super::ctx::published;
use super::message::prepare;
use super::rpc::{self, RpcError};
use super::run::{cancel, execute, get};
use super::stream::stream;
use super::wire::{A2aRequest, A2aResponse, AgentCard};
use crate::App;
use crate::body::{BodyError, MAX_BODY_BYTES};
use crate::client::auth::ProjectAuth;
use crate::client::error::ClientError;
use crate::envelope::ErrorEnvelope;

const PROTOCOL_VERSION: &str = "0.3.0";

/// Where clients reach this deployment, never from a request header (a client could name any
/// host there, and the card would send the next caller's key to it): the configured public
/// URL (`AGENTPLANE_PUBLIC_URL`; the local gateway's default is its listen address), else the
/// domain and stage API Gateway itself invoked the function for, else `http://localhost`.
fn public_base(app: &App, extensions: &http::Extensions) -> String {
    if let Some(url) = &app.public_url {
        return url.clone();
    }
    if let Some(invoked) = extensions.get::<crate::edge::InvokedAt>() {
        return match &invoked.stage {
            Some(stage) => format!("https://{}/{stage}", invoked.domain),
            None => format!("https://{}", invoked.domain),
        };
    }
    "http://localhost".to_owned()
}

/// An agent's A2A card.
///
/// The card of the agent's newest published version: its name, the JSON-RPC endpoint, that it
/// streams, and that calls carry the project key as a bearer token.
#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}/a2a/.well-known/agent-card.json",
    tag = "client",
    operation_id = "client-agent-a2a-card",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    responses(
        (status = 200, description = "The agent card.", body = AgentCard),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
    ),
)]
pub async fn card(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(agent_id): Path<String>,
    extensions: http::Extensions,
) -> Result<Response, ClientError> {
    let ctx = published(&app, &auth, &agent_id).await?;
    // The name the published version goes by (its experience settings), else the agent's.
    let name = ctx
        .admitted
        .config
        .experience
        .display_name
        .clone()
        .unwrap_or_else(|| ctx.admitted.agent.name.as_str().to_owned());
    let card = AgentCard {
        protocol_version: PROTOCOL_VERSION.into(),
        description: format!("{name}, an Agentplane agent (published version {}).", ctx.version),
        name: name.clone(),
        url: format!("{}/api/client/v1/agents/{}/a2a", public_base(&app, &extensions), ctx.admitted.agent.id),
        preferred_transport: "JSONRPC".into(),
        version: ctx.version.to_string(),
        capabilities: json!({"streaming": true, "pushNotifications": false, "stateTransitionHistory": false}),
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills: vec![json!({
            "id": "conversation",
            "name": name,
            "description": "Talk with the agent; it may ask a question or an approval (input-required), which your next message answers.",
            "tags": ["chat"],
        })],
        security_schemes: json!({"projectKey": {"type": "http", "scheme": "bearer", "description": "A project key (cpeer_…)."}}),
        security: vec![json!({"projectKey": []})],
    };
    let mut response = Json(card).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// An agent's A2A endpoint (JSON-RPC 2.0).
///
/// `message/send` runs a turn (a task) and answers the task when it ends or waits for input;
/// `message/stream` answers Server-Sent Events, each `data:` a JSON-RPC answer (the task, then
/// its artifact and its final status); `tasks/get` and `tasks/cancel` take `{id}`. A message
/// with the `contextId` of a task that is `input-required` answers what it waits for (a text
/// yes/no for an approval, the text as a question's answers or a client tool's output, or a
/// `data` part with the answer's body) and the same turn carries on. Every failure past
/// authentication and the agent is a JSON-RPC error object (HTTP 200).
#[utoipa::path(
    post,
    path = "/api/client/v1/agents/{agent_id}/a2a",
    tag = "client",
    operation_id = "client-agent-a2a-rpc",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    request_body = A2aRequest,
    responses(
        (status = 200, description = "A JSON-RPC answer (a result or an error object); for `message/stream`, an event stream of JSON-RPC answers.", content(
            (A2aResponse = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
    ),
)]
pub async fn rpc(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(agent_id): Path<String>,
    body: Body,
) -> Result<Response, ClientError> {
    let ctx = published(&app, &auth, &agent_id).await?;
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(ClientError::Body(BodyError::TooLarge));
        }
        Err(_) => return Err(ClientError::Body(BodyError::Unreadable)),
    };
    let request = match rpc::parse(&bytes) {
        Ok(request) => request,
        Err((id, error)) => return Ok(answer(&id, Err(error))),
    };
    let id = request.id.clone();
    let outcome = match request.method.as_str() {
        "message/send" => match prepare(&ctx, &request.params).await {
            Ok(prepared) => execute(&ctx, prepared).await.map(|t| t.value),
            Err(err) => Err(err),
        },
        "message/stream" => match prepare(&ctx, &request.params).await {
            Ok(prepared) => return Ok(stream(ctx, id, prepared)),
            Err(err) => Err(err),
        },
        "tasks/get" => get(&ctx, &request.params).await.map(|t| t.value),
        "tasks/cancel" => cancel(&ctx, &request.params).await.map(|t| t.value),
        "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => {
            Err(RpcError::new(rpc::PUSH_NOTIFICATION_NOT_SUPPORTED, "push notifications are not supported"))
        }
        "tasks/resubscribe" | "agent/getAuthenticatedExtendedCard" => {
            Err(RpcError::new(rpc::UNSUPPORTED_OPERATION, format!("`{}` is not supported", request.method)))
        }
        other => Err(RpcError::new(
            rpc::METHOD_NOT_FOUND,
            format!("no method `{}`", crate::edge::quote::quote(other)),
        )),
    };
    Ok(answer(&id, outcome))
}

fn answer(id: &Value, outcome: Result<Value, RpcError>) -> Response {
    let body = match outcome {
        Ok(value) => rpc::result(id, &value),
        Err(error) => {
            if error.code == rpc::INTERNAL_ERROR {
                tracing::warn!(message = %error.message, "a2a call failed");
            }
            rpc::error(id, &error)
        }
    };
    let mut response = Json(body).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
