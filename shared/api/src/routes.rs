//! Every route of every surface, named once. A Lambda function serves exactly one route (its
//! binary in functions/ is named by `Route::function_name`); the local gateway serves them all.

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use http::{HeaderValue, Method, StatusCode, header};

use std::sync::OnceLock;

use utoipa_axum::router::UtoipaMethodRouter;
use utoipa_axum::routes;

use crate::envelope::ApiError;
use crate::grants::*;
use crate::{App, client, core, node, platform, sandbox};

/// How API Gateway integrates a route's function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// A buffered answer (API Gateway's 29 s integration ceiling).
    Buffered,
    /// A streamed integration (Lambda response streaming, `responseTransferMode: STREAM`) that
    /// stays open: the event stream.
    Stream,
    /// A streamed integration that holds the call while an agent turn runs (up to the 600 s
    /// synchronous ceiling).
    Turn,
}

impl Serving {
    /// Whether the integration streams (Lambda response streaming).
    pub const fn streams(self) -> bool {
        !matches!(self, Serving::Buffered)
    }
}

/// Everything one route is, in one place.
#[derive(Clone, Copy)]
pub struct Declaration {
    /// The function binary in functions/ and the Lambda function's name.
    pub function: &'static str,
    /// The stack resources (logical ids in infra/template.yaml) its function may touch, and how.
    pub grants: &'static [Grant],
    pub serving: Serving,
    /// The handler with its OpenAPI operation and the schemas that operation names.
    pub serve: fn() -> UtoipaMethodRouter<App>,
    /// A `POST` that reads no body (publish, pause, resume): it accepts at most a few bytes.
    pub bodyless: bool,
    /// Its Lambda timeout in seconds, when neither the template's default (`Globals`: 29 s, a
    /// buffered integration's ceiling) nor its serving's ([`Declaration::timeout_s`]) fits.
    pub timeout: Option<u32>,
}

impl Declaration {
    /// The method and path the handler's `#[utoipa::path]` declares.
    pub fn endpoint(&self) -> (Method, String) {
        let (_, paths, _) = (self.serve)();
        let Some((path, item)) = paths.paths.into_iter().next() else {
            unreachable!("{}: a route's handler declares its path", self.function)
        };
        let method = if item.post.is_some() {
            Method::POST
        } else if item.patch.is_some() {
            Method::PATCH
        } else if item.delete.is_some() {
            Method::DELETE
        } else if item.put.is_some() {
            Method::PUT
        } else {
            Method::GET
        };
        (method, path)
    }

    /// Whether a request of `method` to this route reads a body (edge::guard bounds the others
    /// to a few bytes).
    pub fn takes_body(&self, method: &Method) -> bool {
        matches!(*method, Method::POST | Method::PATCH | Method::PUT) && !self.bodyless
    }

    /// The same route, reading no request body.
    const fn without_body(mut self) -> Self {
        self.bodyless = true;
        self
    }

    /// The same route, its function timing out after `seconds`.
    const fn with_timeout(mut self, seconds: u32) -> Self {
        self.timeout = Some(seconds);
        self
    }

    /// The function's Lambda timeout in seconds (infra/template.yaml, written by
    /// `cargo xtask template`); `None`: the template's default (`Globals`, 29 s). A turn route
    /// holds the call while its turn runs and lives on past the 600 s sync ceiling to record the
    /// turn's end: 660 s (its streamed integration waits as long; shared/domain/src/ceilings.rs
    /// fits the ceiling under it). The event stream outlives its 14-minute end (StreamMaxSeconds)
    /// and clients resume with Last-Event-ID: 900 s.
    pub const fn timeout_s(&self) -> Option<u32> {
        match (self.timeout, self.serving) {
            (Some(seconds), _) => Some(seconds),
            (None, Serving::Turn) => Some(660),
            (None, Serving::Stream) => Some(900),
            (None, Serving::Buffered) => None,
        }
    }

    /// The function's memory in MB; `None`: the template's default (`Globals`, 256 MB). A turn
    /// route gets 512 MB, as run-execution (the job that carries turns on) does.
    pub const fn memory_mb(&self) -> Option<u32> {
        match self.serving {
            Serving::Turn => Some(512),
            Serving::Buffered | Serving::Stream => None,
        }
    }
}

const fn decl(
    function: &'static str,
    grants: &'static [Grant],
    serving: Serving,
    serve: fn() -> UtoipaMethodRouter<App>,
) -> Declaration {
    Declaration { function, grants, serving, serve, bodyless: false, timeout: None }
}

/// Declares every route once: its variant, function name, grants, serving, handler (whose
/// `#[utoipa::path]` holds its method, path and wire) and its modifiers: `without_body` for a
/// `POST` that reads no body, `with_timeout(seconds)` for a function that needs its own timeout.
/// It gives [`Route`], [`Route::ALL`] and [`Route::declaration`]; the gateway router, the Lambda
/// functions (functions/src/bin/, written from `Route::ALL` by `cargo xtask functions`), the
/// OpenAPI documents, the template's functions, roles and streamed integrations (written by
/// `cargo xtask template`) and the infra test all derive from them.
macro_rules! route_table {
    ($($variant:ident => $function:literal, $grants:expr, $serving:ident, $($segment:ident)::+ $(, $modifier:ident $(($($arg:expr),*))?)*;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Route {
            $($variant),*
        }

        impl Route {
            pub const ALL: &'static [Route] = &[$(Route::$variant),*];

            /// The route's one declaration. A `const fn`, so a function binary takes its own
            /// declaration at compile time (`const D: Declaration = Route::X.declaration()`)
            /// and links no other handler.
            pub const fn declaration(self) -> Declaration {
                match self {
                    $(Route::$variant => {
                        fn serve() -> UtoipaMethodRouter<App> {
                            routes!($($segment)::+)
                        }
                        decl($function, $grants, Serving::$serving, serve)$(.$modifier($($($arg),*)?))*
                    })*
                }
            }
        }
    };
}

route_table! {
    CoreProjectsCreate => "core-projects-create", &[MAIN_W, CORE_KEY], Buffered, core::projects::create;
    CoreProjectsList => "core-projects-list", &[MAIN_R, CORE_KEY], Buffered, core::projects::list;
    CoreApiKeysCreate => "core-api-keys-create", &[MAIN_W, CORE_KEY], Buffered, core::api_keys::create;
    CoreApiKeysRevoke => "core-api-keys-revoke", &[MAIN_W, CORE_KEY], Buffered, core::api_keys::revoke;
    // HeadBucket of the bucket it registers (S3ReadPolicy on the DocumentBuckets pattern).
    CoreBucketsRegister => "core-buckets-register", &[MAIN_W, CORE_KEY, DOCS_R], Buffered, core::buckets::register;
    CoreBucketsList => "core-buckets-list", &[MAIN_R, CORE_KEY], Buffered, core::buckets::list;
    CoreBucketsRemove => "core-buckets-remove", &[MAIN_W, CORE_KEY], Buffered, core::buckets::remove;
    ClientSessionsCreate => "client-sessions-create", &[MAIN_W], Buffered, client::sessions::handlers::create;
    ClientSessionsList => "client-sessions-list", &[MAIN_R], Buffered, client::sessions::handlers::list;
    ClientSessionsGet => "client-sessions-get", &[MAIN_R], Buffered, client::sessions::handlers::get;
    ClientSessionsUpdate => "client-sessions-update", &[MAIN_W, RUNS_SEND], Buffered, client::sessions::handlers::update;
    ClientSessionsDelete => "client-sessions-delete", &[MAIN_W], Buffered, client::sessions::handlers::delete;
    // Ending a paused turn appends its `turn.ended` event.
    ClientSessionsCancel => "client-sessions-cancel", &[MAIN_W, EVENTS_W, WEBHOOKS_SEND], Buffered, client::sessions::handlers::cancel;
    ClientAgentsCreate => "client-agents-create", &[MAIN_W], Buffered, client::agents::handlers::create;
    ClientAgentsList => "client-agents-list", &[MAIN_R], Buffered, client::agents::handlers::list;
    ClientAgentsGet => "client-agents-get", &[MAIN_R], Buffered, client::agents::handlers::get;
    ClientAgentsUpdate => "client-agents-update", &[MAIN_W], Buffered, client::agents::handlers::update;
    ClientAgentsPublish => "client-agents-publish", &[MAIN_W], Buffered, client::agents::handlers::publish, without_body;
    ClientAgentsVersions => "client-agents-versions", &[MAIN_R], Buffered, client::agents::handlers::versions;
    ClientResponsesCreate => "client-responses-create", TURN_ROUTE, Turn, client::responses::handlers::create_draft;
    ClientAgentResponsesCreate => "client-agent-responses-create", TURN_ROUTE, Turn, client::responses::handlers::create_published;
    ClientSessionMessagesCreate => "client-session-messages-create", TURN_ROUTE, Turn, client::responses::handlers::session_message;
    // A Response is its session's latest turn: read back from the session and its log;
    // cancel ends a paused turn (its `turn.ended`), delete is the session's.
    ClientResponsesGet => "client-responses-get", &[MAIN_R, EVENTS_R], Buffered, client::responses::retrieve::get;
    ClientResponsesCancel => "client-responses-cancel", &[MAIN_W, EVENTS_W, WEBHOOKS_SEND], Buffered, client::responses::retrieve::cancel, without_body;
    ClientResponsesDelete => "client-responses-delete", &[MAIN_W], Buffered, client::responses::retrieve::delete;
    ClientResponsesInputItems => "client-responses-input-items", &[MAIN_R, EVENTS_R], Buffered, client::responses::retrieve::input_items;
    ClientSessionEventsList => "client-session-events-list", &[MAIN_R, EVENTS_R], Buffered, client::events::poll::list;
    // Writes: the leased places an open stream holds (`stream_slots`).
    ClientSessionEventsStream => "client-session-events-stream", &[MAIN_W, EVENTS_R], Stream, client::events::stream::stream;
    ClientSessionActionsList => "client-session-actions-list", &[MAIN_R], Buffered, client::actions::handlers::list;
    ClientSessionActionsGet => "client-session-actions-get", &[MAIN_R], Buffered, client::actions::handlers::get;
    // Settles the action, and sends the turn's continuation once none of it is pending.
    ClientSessionActionsAnswer => "client-session-actions-answer", &[MAIN_W, RUNS_SEND], Buffered, client::actions::handlers::answer;
    CoreSandboxNodesRegister => "core-sandbox-nodes-register", &[MAIN_W, CORE_KEY], Buffered, core::nodes::register;
    CoreSandboxNodesList => "core-sandbox-nodes-list", &[MAIN_R, CORE_KEY], Buffered, core::node_reads::list;
    CoreSandboxNodeGet => "core-sandbox-node-get", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, core::node_reads::get;
    // Deletes the node's tokens (a scan finds those of nodes registered before tokens rotated).
    CoreSandboxNodeTokenReissue => "core-sandbox-node-token-reissue", &[MAIN_W, CORE_KEY], Buffered, core::nodes::reissue_token, without_body;
    NodeCommandsPoll => "node-commands-poll", &[MAIN_W], Buffered, node::handlers::poll;
    NodeCommandsComplete => "node-commands-complete", &[MAIN_W], Buffered, node::handlers::complete;
    NodeHeartbeat => "node-heartbeat", &[MAIN_W, TELEMETRY_W], Buffered, node::handlers::heartbeat;
    NodeReports => "node-reports", &[MAIN_W, TELEMETRY_W], Buffered, node::handlers::reports;
    NodeSandboxesList => "node-sandboxes-list", &[MAIN_R], Buffered, node::handlers::sandboxes;
    // The obs-<n> number of a process the node starts itself (envd).
    NodeProcessReserve => "node-process-reserve", &[MAIN_W], Buffered, node::processes::reserve, without_body;
    NodeTokenRotate => "node-token-rotate", &[MAIN_W], Buffered, node::tokens::rotate, without_body;
    NodeEnroll => "node-enroll", &[MAIN_W, NODE_ENROLLMENT_KEY], Buffered, node::tokens::enroll;
    // Sandboxes clients make get an envd access token sealed with the deployment's key, shown
    // back to the project on create, connect, resume and read.
    SandboxCreate => "sandbox-create", &[MAIN_W, WEBHOOK_KEY], Buffered, sandbox::sandboxes::create;
    SandboxList => "sandbox-list", &[MAIN_R], Buffered, sandbox::sandboxes::list;
    SandboxGet => "sandbox-get", &[MAIN_R, WEBHOOK_KEY], Buffered, sandbox::sandboxes::get;
    SandboxV2Create => "sandbox-v2-create", &[MAIN_W, WEBHOOK_KEY], Buffered, sandbox::e2b::create;
    SandboxV2List => "sandbox-v2-list", &[MAIN_R], Buffered, sandbox::e2b::list;
    SandboxConnect => "sandbox-connect", &[MAIN_W, WEBHOOK_KEY], Buffered, sandbox::e2b::connect;
    SandboxV2Connect => "sandbox-v2-connect", &[MAIN_W, WEBHOOK_KEY], Buffered, sandbox::e2b::connect_v2;
    SandboxKill => "sandbox-kill", &[MAIN_W], Buffered, sandbox::sandboxes::kill;
    SandboxPause => "sandbox-pause", &[MAIN_W], Buffered, sandbox::sandboxes::pause, without_body;
    SandboxResume => "sandbox-resume", &[MAIN_W, WEBHOOK_KEY], Buffered, sandbox::sandboxes::resume, without_body;
    SandboxTimeout => "sandbox-timeout", &[MAIN_W], Buffered, sandbox::sandboxes::set_timeout;
    SandboxProcessStart => "sandbox-process-start", &[MAIN_W], Buffered, sandbox::processes::start;
    SandboxProcessList => "sandbox-process-list", &[MAIN_R], Buffered, sandbox::processes::list;
    SandboxProcessOutput => "sandbox-process-output", &[MAIN_R, TELEMETRY_R], Buffered, sandbox::processes::output;
    CoreRuntimeObservationsList => "core-runtime-observations-list", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, core::runtime::list::list;
    CoreRuntimeObservationGet => "core-runtime-observation-get", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, core::runtime::observation::retrieve;
    CoreRuntimeHistoryGet => "core-runtime-history-get", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, core::runtime::history::history;
    // Webhook endpoints: those that seal or open signing secrets read the deployment's key.
    ClientWebhooksCreate => "client-webhooks-create", &[MAIN_W, WEBHOOK_KEY], Buffered, client::webhooks::handlers::create;
    ClientWebhooksList => "client-webhooks-list", &[MAIN_R], Buffered, client::webhooks::handlers::list;
    ClientWebhooksGet => "client-webhooks-get", &[MAIN_R], Buffered, client::webhooks::handlers::get;
    ClientWebhooksUpdate => "client-webhooks-update", &[MAIN_W], Buffered, client::webhooks::handlers::update;
    ClientWebhooksDelete => "client-webhooks-delete", &[MAIN_W], Buffered, client::webhooks::handlers::delete;
    ClientWebhooksRotateSecret => "client-webhooks-rotate-secret", &[MAIN_W, WEBHOOK_KEY], Buffered, client::webhooks::handlers::rotate_secret;
    // Test and redeliver send the message themselves: up to the 10 s delivery timeout.
    ClientWebhooksTest => "client-webhooks-test", &[MAIN_W, WEBHOOK_KEY], Buffered, client::webhooks::handlers::test, with_timeout(20);
    ClientWebhooksMessages => "client-webhooks-messages", &[MAIN_R], Buffered, client::webhooks::handlers::messages;
    ClientWebhooksRedeliver => "client-webhooks-redeliver", &[MAIN_W, WEBHOOK_KEY], Buffered, client::webhooks::handlers::redeliver, with_timeout(20);
    ClientCallbackSecretRotate => "client-callback-secret-rotate", &[MAIN_W, WEBHOOK_KEY], Buffered, client::webhooks::handlers::rotate_callback_secret;
    ClientRunsGet => "client-runs-get", &[MAIN_R], Buffered, client::runs::handlers::get;
    ClientRunsList => "client-runs-list", &[MAIN_R], Buffered, client::runs::handlers::list;
    // Ends a waiting run's paused turn (its `turn.ended` event) or records the cancel.
    ClientRunsCancel => "client-runs-cancel", &[MAIN_W, EVENTS_W, WEBHOOKS_SEND], Buffered, client::runs::handlers::cancel;
    CoreTenantsCreate => "core-tenants-create", &[MAIN_W, CORE_KEY], Buffered, core::tenants::create;
    CoreTenantsGet => "core-tenants-get", &[MAIN_R, CORE_KEY], Buffered, core::tenants::get;
    CoreTenantsUpdate => "core-tenants-update", &[MAIN_W, CORE_KEY, RUNS_SEND], Buffered, core::tenants::update;
    CoreTenantsProjectsAttach => "core-tenants-projects-attach", &[MAIN_W, CORE_KEY], Buffered, core::tenants::attach;
    CoreTenantWebhooksCreate => "core-tenant-webhooks-create", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, core::webhooks::create;
    CoreTenantWebhooksList => "core-tenant-webhooks-list", &[MAIN_R, CORE_KEY], Buffered, core::webhooks::list;
    CoreTenantWebhooksGet => "core-tenant-webhooks-get", &[MAIN_R, CORE_KEY], Buffered, core::webhooks::get;
    CoreTenantWebhooksUpdate => "core-tenant-webhooks-update", &[MAIN_W, CORE_KEY], Buffered, core::webhooks::update;
    CoreTenantWebhooksDelete => "core-tenant-webhooks-delete", &[MAIN_W, CORE_KEY], Buffered, core::webhooks::delete;
    CoreTenantWebhooksRotateSecret => "core-tenant-webhooks-rotate-secret", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, core::webhooks::rotate_secret;
    CoreTenantWebhooksTest => "core-tenant-webhooks-test", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, core::webhooks::test;
    CoreTenantWebhooksMessages => "core-tenant-webhooks-messages", &[MAIN_R, CORE_KEY], Buffered, core::webhooks::messages;
    CoreTenantWebhooksRedeliver => "core-tenant-webhooks-redeliver", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, core::webhooks::redeliver;
    // The Platform API (`/v1`).
    PlatformEnvironmentsCreate => "platform-environments-create", &[MAIN_W], Buffered, platform::environments::create;
    PlatformEnvironmentsList => "platform-environments-list", &[MAIN_R], Buffered, platform::environments::list;
    PlatformEnvironmentsGet => "platform-environments-get", &[MAIN_R], Buffered, platform::environments::get;
    // Marks it deleted; the retention sweep purges it.
    PlatformEnvironmentsDelete => "platform-environments-delete", &[MAIN_W], Buffered, platform::environments::delete;
    PlatformSessionsCreate => "platform-sessions-create", &[MAIN_W], Buffered, platform::sessions::create;
    PlatformSessionsList => "platform-sessions-list", &[MAIN_R], Buffered, platform::sessions::list;
    PlatformSessionsGet => "platform-sessions-get", &[MAIN_R], Buffered, platform::sessions::get;
    // Workspace files go to the environment's sandbox node (its command queue: a write).
    PlatformFilesPut => "platform-files-put", &[MAIN_W], Buffered, platform::files::put;
    PlatformFilesGet => "platform-files-get", &[MAIN_W], Buffered, platform::files::get;
    PlatformFilesDelete => "platform-files-delete", &[MAIN_W], Buffered, platform::files::delete;
    PlatformRunsCreate => "platform-runs-create", &[MAIN_W, RUNS_SEND], Buffered, platform::runs::create;
    PlatformRunsList => "platform-runs-list", &[MAIN_R], Buffered, platform::runs::list;
    PlatformRunsGet => "platform-runs-get", &[MAIN_R], Buffered, platform::runs::get;
    PlatformRunsStop => "platform-runs-stop", &[MAIN_W, WEBHOOKS_SEND], Buffered, platform::runs::stop;
    // Freezes the affected set and queues the restore for the `rollback-restore` job.
    PlatformRunsRollback => "platform-runs-rollback", &[MAIN_W, ROLLBACKS_SEND], Buffered, platform::rollback::rollback;
    // Session files: create signs the upload with the function's role (so it may write
    // the bucket); get asks the bucket for the object's size and marks the file ready
    // (a conditional write), and signs the download; delete removes the bytes.
    ClientSessionFilesCreate => "client-session-files-create", &[MAIN_W, FILES_W, DOCS_W], Buffered, client::files::handlers::create;
    ClientSessionFilesList => "client-session-files-list", &[MAIN_R], Buffered, client::files::handlers::list;
    ClientSessionFilesGet => "client-session-files-get", &[MAIN_W, FILES_R, DOCS_R], Buffered, client::files::handlers::get;
    ClientSessionFilesDelete => "client-session-files-delete", &[MAIN_W, FILES_W, DOCS_W], Buffered, client::files::handlers::delete;
    // Feedback reads the session's event (the rated message) and writes the feedback.
    ClientSessionFeedbackCreate => "client-session-feedback-create", &[MAIN_W, EVENTS_R], Buffered, client::feedback::handlers::create;
    ClientAgentFeedbackList => "client-agent-feedback-list", &[MAIN_R], Buffered, client::feedback::handlers::list;
    // A2A: the card reads the agent; the endpoint runs turns (and answers their
    // actions, carrying the turn on in the call) and streams `message/stream`.
    ClientAgentA2aCard => "client-agent-a2a-card", &[MAIN_R], Buffered, client::a2a::handlers::card;
    ClientAgentA2aRpc => "client-agent-a2a-rpc", TURN_ROUTE, Turn, client::a2a::handlers::rpc;
    // Regenerate and edit run a new turn that replaces earlier ones.
    ClientSessionRegenerate => "client-session-regenerate", TURN_ROUTE, Turn, client::responses::rewind::regenerate;
    ClientSessionMessageEdit => "client-session-message-edit", TURN_ROUTE, Turn, client::responses::rewind::edit;
}

impl Route {
    pub fn function_name(self) -> &'static str {
        self.declaration().function
    }

    pub fn method(self) -> Method {
        self.endpoint().0.clone()
    }

    pub fn path(self) -> &'static str {
        self.endpoint().1.as_str()
    }

    /// The method and path the handler's `#[utoipa::path]` declares, read once.
    fn endpoint(self) -> &'static (Method, String) {
        static ENDPOINTS: OnceLock<Vec<(Method, String)>> = OnceLock::new();
        let endpoints = ENDPOINTS.get_or_init(|| Route::ALL.iter().map(|r| r.read_endpoint()).collect());
        let index = Route::ALL.iter().position(|r| *r == self).unwrap_or_default();
        &endpoints[index]
    }

    fn read_endpoint(self) -> (Method, String) {
        self.declaration().endpoint()
    }

    /// The stack resources and how this route's function may use them.
    pub fn grants(self) -> &'static [Grant] {
        self.declaration().grants
    }

    /// Routes that read a request body; the others accept at most a few bytes (edge::guard).
    pub fn takes_body(self) -> bool {
        self.declaration().takes_body(&self.method())
    }

    /// Routes served through a streamed integration (Lambda response streaming, API Gateway
    /// `responseTransferMode: STREAM`): the event stream, and the turn routes, whose answer can
    /// come later than a buffered integration's 29 s.
    pub fn streaming(self) -> bool {
        !matches!(self.declaration().serving, Serving::Buffered)
    }

    /// Routes that hold the call while an agent turn runs (up to the 600 s sync ceiling).
    pub fn runs_turns(self) -> bool {
        matches!(self.declaration().serving, Serving::Turn)
    }

    /// The stack resources (logical ids in infra/template.yaml) this route's function may
    /// touch; how (read or write) is in [`crate::grants`], the one table tests/infra.rs checks.
    pub fn resources(self) -> Vec<&'static str> {
        crate::grants::resources(self.grants())
    }

    pub fn by_function_name(name: &str) -> Option<Route> {
        Self::ALL.iter().copied().find(|r| r.function_name() == name)
    }
}

/// A router serving `routes`, with the behaviour every surface shares: `Cache-Control:
/// no-store` on every answer, enveloped 404/405 for paths and methods it does not serve, and
/// the edge guard (bounded heads and bodies, every error in the surface's envelope).
pub fn router(app: App, routes: &[Route]) -> Router {
    let declarations: Vec<Declaration> = routes.iter().map(|r| r.declaration()).collect();
    router_of(app, &declarations)
}

/// [`router`] over the declarations themselves: a function binary's way, which names no route
/// but its own (so it links no other handler).
pub fn router_of(app: App, declarations: &[Declaration]) -> Router {
    let mut by_path: Vec<(String, MethodRouter<App>)> = Vec::new();
    let mut bodies = crate::edge::guard::BodyRoutes::default();
    for declaration in declarations {
        let (method, path) = declaration.endpoint();
        if declaration.takes_body(&method) {
            bodies.add(method, &path);
        }
        let (_, _, handler) = (declaration.serve)();
        match by_path.iter_mut().find(|(p, _)| *p == path) {
            Some((_, methods)) => *methods = std::mem::take(methods).merge(handler),
            None => by_path.push((path, handler)),
        }
    }
    let mut router = Router::new();
    for (path, methods) in by_path {
        router = router.route(&path, methods.fallback(method_not_allowed));
    }
    router
        .fallback(no_such_route)
        .layer(middleware::from_fn_with_state(bodies, crate::edge::guard::guard))
        .layer(middleware::from_fn(no_store))
        .with_state(app)
}

/// Every route on one port, and the surfaces' OpenAPI documents at `/openapi/{surface}.json`:
/// the local gateway's router.
pub fn full_router(app: App) -> Router {
    Router::new().route("/openapi/{file}", get(openapi_document)).merge(router(app, Route::ALL))
}

async fn openapi_document(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let surface = file.strip_suffix(".json").and_then(crate::openapi::Surface::by_name);
    match surface {
        Some(surface) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            crate::openapi::document_json(surface),
        )
            .into_response(),
        None => no_such_route().await,
    }
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
