//! Every route of every surface, named once. A Lambda function serves exactly one route (its
//! binary in functions/ is named by `Route::function_name`); the local gateway serves them all.

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, patch, post};
use http::{HeaderValue, Method, StatusCode, header};

use crate::envelope::ApiError;
use crate::{App, client, core, node, sandbox};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    CoreProjectsCreate,
    CoreProjectsList,
    CoreApiKeysCreate,
    CoreApiKeysRevoke,
    ClientSessionsCreate,
    ClientSessionsList,
    ClientSessionsGet,
    ClientSessionsUpdate,
    ClientSessionsDelete,
    ClientAgentsCreate,
    ClientAgentsList,
    ClientAgentsGet,
    ClientAgentsUpdate,
    ClientAgentsPublish,
    ClientAgentsVersions,
    ClientResponsesCreate,
    ClientAgentResponsesCreate,
    ClientSessionMessagesCreate,
    ClientSessionEventsList,
    ClientSessionEventsStream,
    CoreSandboxNodesRegister,
    CoreSandboxNodesList,
    CoreSandboxNodeGet,
    NodeCommandsPoll,
    NodeCommandsComplete,
    NodeHeartbeat,
    NodeReports,
    NodeSandboxesList,
    SandboxCreate,
    SandboxList,
    SandboxGet,
    SandboxKill,
    SandboxPause,
    SandboxResume,
    SandboxTimeout,
    SandboxProcessStart,
    SandboxProcessList,
    SandboxProcessOutput,
    CoreRuntimeObservationsList,
    CoreRuntimeObservationGet,
    CoreRuntimeHistoryGet,
}

impl Route {
    pub const ALL: &'static [Route] = &[
        Route::CoreProjectsCreate,
        Route::CoreProjectsList,
        Route::CoreApiKeysCreate,
        Route::CoreApiKeysRevoke,
        Route::ClientSessionsCreate,
        Route::ClientSessionsList,
        Route::ClientSessionsGet,
        Route::ClientSessionsUpdate,
        Route::ClientSessionsDelete,
        Route::ClientAgentsCreate,
        Route::ClientAgentsList,
        Route::ClientAgentsGet,
        Route::ClientAgentsUpdate,
        Route::ClientAgentsPublish,
        Route::ClientAgentsVersions,
        Route::ClientResponsesCreate,
        Route::ClientAgentResponsesCreate,
        Route::ClientSessionMessagesCreate,
        Route::ClientSessionEventsList,
        Route::ClientSessionEventsStream,
        Route::CoreSandboxNodesRegister,
        Route::CoreSandboxNodesList,
        Route::CoreSandboxNodeGet,
        Route::NodeCommandsPoll,
        Route::NodeCommandsComplete,
        Route::NodeHeartbeat,
        Route::NodeReports,
        Route::NodeSandboxesList,
        Route::SandboxCreate,
        Route::SandboxList,
        Route::SandboxGet,
        Route::SandboxKill,
        Route::SandboxPause,
        Route::SandboxResume,
        Route::SandboxTimeout,
        Route::SandboxProcessStart,
        Route::SandboxProcessList,
        Route::SandboxProcessOutput,
        Route::CoreRuntimeObservationsList,
        Route::CoreRuntimeObservationGet,
        Route::CoreRuntimeHistoryGet,
    ];

    /// (function binary name, method, path). Paths use `{param}`, which axum and API Gateway
    /// both read.
    const fn spec(self) -> (&'static str, Method, &'static str) {
        match self {
            Route::CoreProjectsCreate => ("core-projects-create", Method::POST, "/core/v1/projects"),
            Route::CoreProjectsList => ("core-projects-list", Method::GET, "/core/v1/projects"),
            Route::CoreApiKeysCreate => {
                ("core-api-keys-create", Method::POST, "/core/v1/projects/{project_id}/api_keys")
            }
            Route::CoreApiKeysRevoke => {
                ("core-api-keys-revoke", Method::DELETE, "/core/v1/projects/{project_id}/api_keys/{key_id}")
            }
            Route::ClientSessionsCreate => {
                ("client-sessions-create", Method::POST, "/api/client/v1/sessions")
            }
            Route::ClientSessionsList => ("client-sessions-list", Method::GET, "/api/client/v1/sessions"),
            Route::ClientSessionsGet => {
                ("client-sessions-get", Method::GET, "/api/client/v1/sessions/{session_id}")
            }
            Route::ClientSessionsUpdate => {
                ("client-sessions-update", Method::PATCH, "/api/client/v1/sessions/{session_id}")
            }
            Route::ClientSessionsDelete => {
                ("client-sessions-delete", Method::DELETE, "/api/client/v1/sessions/{session_id}")
            }
            Route::ClientAgentsCreate => ("client-agents-create", Method::POST, "/api/client/v1/agents"),
            Route::ClientAgentsList => ("client-agents-list", Method::GET, "/api/client/v1/agents"),
            Route::ClientAgentsGet => ("client-agents-get", Method::GET, "/api/client/v1/agents/{agent_id}"),
            Route::ClientAgentsUpdate => {
                ("client-agents-update", Method::PATCH, "/api/client/v1/agents/{agent_id}")
            }
            Route::ClientAgentsPublish => {
                ("client-agents-publish", Method::POST, "/api/client/v1/agents/{agent_id}/publish")
            }
            Route::ClientAgentsVersions => {
                ("client-agents-versions", Method::GET, "/api/client/v1/agents/{agent_id}/versions")
            }
            Route::ClientResponsesCreate => {
                ("client-responses-create", Method::POST, "/api/client/v1/responses")
            }
            Route::ClientAgentResponsesCreate => {
                ("client-agent-responses-create", Method::POST, "/api/client/v1/agents/responses")
            }
            Route::ClientSessionMessagesCreate => (
                "client-session-messages-create",
                Method::POST,
                "/api/client/v1/sessions/{session_id}/messages",
            ),
            Route::ClientSessionEventsList => {
                ("client-session-events-list", Method::GET, "/api/client/v1/sessions/{session_id}/events")
            }
            Route::ClientSessionEventsStream => (
                "client-session-events-stream",
                Method::GET,
                "/api/client/v1/sessions/{session_id}/events/stream",
            ),
            Route::CoreSandboxNodesRegister => {
                ("core-sandbox-nodes-register", Method::POST, "/core/v1/sandbox/nodes")
            }
            Route::CoreSandboxNodesList => ("core-sandbox-nodes-list", Method::GET, "/core/v1/sandbox/nodes"),
            Route::CoreSandboxNodeGet => {
                ("core-sandbox-node-get", Method::GET, "/core/v1/sandbox/nodes/{node_id}")
            }
            Route::NodeCommandsPoll => ("node-commands-poll", Method::GET, "/node/v1/commands"),
            Route::NodeCommandsComplete => {
                ("node-commands-complete", Method::POST, "/node/v1/commands/{command_id}")
            }
            Route::NodeHeartbeat => ("node-heartbeat", Method::POST, "/node/v1/heartbeat"),
            Route::NodeReports => ("node-reports", Method::POST, "/node/v1/reports"),
            Route::NodeSandboxesList => ("node-sandboxes-list", Method::GET, "/node/v1/sandboxes"),
            Route::SandboxCreate => ("sandbox-create", Method::POST, "/sandbox/v1/sandboxes"),
            Route::SandboxList => ("sandbox-list", Method::GET, "/sandbox/v1/sandboxes"),
            Route::SandboxGet => ("sandbox-get", Method::GET, "/sandbox/v1/sandboxes/{sandbox_id}"),
            Route::SandboxKill => ("sandbox-kill", Method::DELETE, "/sandbox/v1/sandboxes/{sandbox_id}"),
            Route::SandboxPause => {
                ("sandbox-pause", Method::POST, "/sandbox/v1/sandboxes/{sandbox_id}/pause")
            }
            Route::SandboxResume => {
                ("sandbox-resume", Method::POST, "/sandbox/v1/sandboxes/{sandbox_id}/resume")
            }
            Route::SandboxTimeout => {
                ("sandbox-timeout", Method::POST, "/sandbox/v1/sandboxes/{sandbox_id}/timeout")
            }
            Route::SandboxProcessStart => {
                ("sandbox-process-start", Method::POST, "/sandbox/v1/sandboxes/{sandbox_id}/processes")
            }
            Route::SandboxProcessList => {
                ("sandbox-process-list", Method::GET, "/sandbox/v1/sandboxes/{sandbox_id}/processes")
            }
            Route::SandboxProcessOutput => (
                "sandbox-process-output",
                Method::GET,
                "/sandbox/v1/sandboxes/{sandbox_id}/processes/{process_id}/output",
            ),
            Route::CoreRuntimeObservationsList => {
                ("core-runtime-observations-list", Method::GET, "/core/v1/sandbox/runtime-observations")
            }
            Route::CoreRuntimeObservationGet => (
                "core-runtime-observation-get",
                Method::GET,
                "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation",
            ),
            Route::CoreRuntimeHistoryGet => (
                "core-runtime-history-get",
                Method::GET,
                "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-history",
            ),
        }
    }

    pub fn function_name(self) -> &'static str {
        self.spec().0
    }

    pub fn method(self) -> Method {
        self.spec().1
    }

    pub fn path(self) -> &'static str {
        self.spec().2
    }

    fn handler(self) -> MethodRouter<App> {
        match self {
            Route::CoreProjectsCreate => post(core::projects::create),
            Route::CoreProjectsList => get(core::projects::list),
            Route::CoreApiKeysCreate => post(core::api_keys::create),
            Route::CoreApiKeysRevoke => delete(core::api_keys::revoke),
            Route::ClientSessionsCreate => post(client::sessions::create),
            Route::ClientSessionsList => get(client::sessions::list),
            Route::ClientSessionsGet => get(client::sessions::get),
            Route::ClientSessionsUpdate => patch(client::sessions::update),
            Route::ClientSessionsDelete => delete(client::sessions::delete),
            Route::ClientAgentsCreate => post(client::agents::create),
            Route::ClientAgentsList => get(client::agents::list),
            Route::ClientAgentsGet => get(client::agents::get),
            Route::ClientAgentsUpdate => patch(client::agents::update),
            Route::ClientAgentsPublish => post(client::agents::publish),
            Route::ClientAgentsVersions => get(client::agents::versions),
            Route::ClientResponsesCreate => post(client::responses::create_draft),
            Route::ClientAgentResponsesCreate => post(client::responses::create_published),
            Route::ClientSessionMessagesCreate => post(client::responses::session_message),
            Route::ClientSessionEventsList => get(client::events::list),
            Route::ClientSessionEventsStream => get(client::events::stream),
            Route::CoreSandboxNodesRegister => post(core::nodes::register),
            Route::CoreSandboxNodesList => get(core::node_reads::list),
            Route::CoreSandboxNodeGet => get(core::node_reads::get),
            Route::NodeCommandsPoll => get(node::handlers::poll),
            Route::NodeCommandsComplete => post(node::handlers::complete),
            Route::NodeHeartbeat => post(node::handlers::heartbeat),
            Route::NodeReports => post(node::handlers::reports),
            Route::NodeSandboxesList => get(node::handlers::sandboxes),
            Route::SandboxCreate => post(sandbox::sandboxes::create),
            Route::SandboxList => get(sandbox::sandboxes::list),
            Route::SandboxGet => get(sandbox::sandboxes::get),
            Route::SandboxKill => delete(sandbox::sandboxes::kill),
            Route::SandboxPause => post(sandbox::sandboxes::pause),
            Route::SandboxResume => post(sandbox::sandboxes::resume),
            Route::SandboxTimeout => post(sandbox::sandboxes::set_timeout),
            Route::SandboxProcessStart => post(sandbox::processes::start),
            Route::SandboxProcessList => get(sandbox::processes::list),
            Route::SandboxProcessOutput => get(sandbox::processes::output),
            Route::CoreRuntimeObservationsList => get(core::runtime::list),
            Route::CoreRuntimeObservationGet => get(core::runtime::retrieve),
            Route::CoreRuntimeHistoryGet => get(core::runtime::history),
        }
    }

    /// Routes that read a request body; the others accept at most a few bytes (edge::guard).
    pub fn takes_body(self) -> bool {
        matches!(self.method(), Method::POST | Method::PATCH | Method::PUT)
            && !matches!(self, Route::ClientAgentsPublish | Route::SandboxPause | Route::SandboxResume)
    }

    /// Routes served through a streamed integration (Lambda response streaming, API Gateway
    /// `responseTransferMode: STREAM`): the event stream, and the turn routes, whose answer can
    /// come later than a buffered integration's 29 s.
    pub fn streaming(self) -> bool {
        matches!(self, Route::ClientSessionEventsStream) || self.runs_turns()
    }

    /// Routes that hold the call while an agent turn runs (up to the 600 s sync ceiling).
    pub fn runs_turns(self) -> bool {
        matches!(
            self,
            Route::ClientResponsesCreate
                | Route::ClientAgentResponsesCreate
                | Route::ClientSessionMessagesCreate
        )
    }

    /// The stack resources (logical ids in infra/template.yaml) this route's function may
    /// touch; how (read or write) is in [`crate::grants`], the one table tests/infra.rs checks.
    pub fn resources(self) -> Vec<&'static str> {
        crate::grants::resources(crate::grants::route(self))
    }

    pub fn by_function_name(name: &str) -> Option<Route> {
        Self::ALL.iter().copied().find(|r| r.function_name() == name)
    }
}

/// A router serving `routes`, with the behaviour every surface shares: `Cache-Control:
/// no-store` on every answer, enveloped 404/405 for paths and methods it does not serve, and
/// the edge guard (bounded heads and bodies, every error in the surface's envelope).
pub fn router(app: App, routes: &[Route]) -> Router {
    let mut by_path: Vec<(&'static str, MethodRouter<App>)> = Vec::new();
    for route in routes {
        match by_path.iter_mut().find(|(path, _)| *path == route.path()) {
            Some((_, methods)) => *methods = std::mem::take(methods).merge(route.handler()),
            None => by_path.push((route.path(), route.handler())),
        }
    }
    let mut router = Router::new();
    for (path, methods) in by_path {
        router = router.route(path, methods.fallback(method_not_allowed));
    }
    router
        .fallback(no_such_route)
        .layer(middleware::from_fn(crate::edge::guard::guard))
        .layer(middleware::from_fn(no_store))
        .with_state(app)
}

pub fn full_router(app: App) -> Router {
    router(app, Route::ALL)
}

async fn no_store(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn no_such_route() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "route_not_found", "no such route")
        .into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        "method not allowed",
    )
    .into_response()
}
