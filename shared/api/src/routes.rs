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

/// Everything one route is, in one place.
pub struct Declaration {
    /// The function binary in functions/ and the Lambda function's name.
    pub function: &'static str,
    /// The stack resources (logical ids in infra/template.yaml) its function may touch, and how.
    pub grants: &'static [Grant],
    pub serving: Serving,
    /// The handler with its OpenAPI operation and the schemas that operation names.
    pub serve: fn() -> UtoipaMethodRouter<App>,
}

const fn decl(
    function: &'static str,
    grants: &'static [Grant],
    serving: Serving,
    serve: fn() -> UtoipaMethodRouter<App>,
) -> Declaration {
    Declaration { function, grants, serving, serve }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    CoreProjectsCreate,
    CoreProjectsList,
    CoreApiKeysCreate,
    CoreApiKeysRevoke,
    CoreBucketsRegister,
    CoreBucketsList,
    CoreBucketsRemove,
    ClientSessionsCreate,
    ClientSessionsList,
    ClientSessionsGet,
    ClientSessionsUpdate,
    ClientSessionsDelete,
    ClientSessionsCancel,
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
    ClientSessionActionsList,
    ClientSessionActionsGet,
    ClientSessionActionsAnswer,
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
    ClientWebhooksCreate,
    ClientWebhooksList,
    ClientWebhooksGet,
    ClientWebhooksUpdate,
    ClientWebhooksDelete,
    ClientWebhooksRotateSecret,
    ClientWebhooksTest,
    ClientWebhooksMessages,
    ClientWebhooksRedeliver,
    ClientCallbackSecretRotate,
    ClientRunsGet,
    ClientRunsList,
    ClientRunsCancel,
    CoreTenantsCreate,
    CoreTenantsGet,
    CoreTenantsUpdate,
    CoreTenantsProjectsAttach,
    CoreTenantWebhooksCreate,
    CoreTenantWebhooksList,
    CoreTenantWebhooksGet,
    CoreTenantWebhooksUpdate,
    CoreTenantWebhooksDelete,
    CoreTenantWebhooksRotateSecret,
    CoreTenantWebhooksTest,
    CoreTenantWebhooksMessages,
    CoreTenantWebhooksRedeliver,
    PlatformEnvironmentsCreate,
    PlatformEnvironmentsList,
    PlatformEnvironmentsGet,
    PlatformEnvironmentsDelete,
    PlatformSessionsCreate,
    PlatformSessionsList,
    PlatformSessionsGet,
    PlatformFilesPut,
    PlatformFilesGet,
    PlatformFilesDelete,
    PlatformRunsCreate,
    PlatformRunsList,
    PlatformRunsGet,
    PlatformRunsStop,
    PlatformRunsRollback,
    ClientSessionFilesCreate,
    ClientSessionFilesList,
    ClientSessionFilesGet,
    ClientSessionFilesDelete,
    ClientSessionFeedbackCreate,
    ClientAgentFeedbackList,
    ClientAgentA2aCard,
    ClientAgentA2aRpc,
    ClientSessionRegenerate,
    ClientSessionMessageEdit,
}

impl Route {
    pub const ALL: &'static [Route] = &[
        Route::CoreProjectsCreate,
        Route::CoreProjectsList,
        Route::CoreApiKeysCreate,
        Route::CoreApiKeysRevoke,
        Route::CoreBucketsRegister,
        Route::CoreBucketsList,
        Route::CoreBucketsRemove,
        Route::ClientSessionsCreate,
        Route::ClientSessionsList,
        Route::ClientSessionsGet,
        Route::ClientSessionsUpdate,
        Route::ClientSessionsDelete,
        Route::ClientSessionsCancel,
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
        Route::ClientSessionActionsList,
        Route::ClientSessionActionsGet,
        Route::ClientSessionActionsAnswer,
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
        Route::ClientWebhooksCreate,
        Route::ClientWebhooksList,
        Route::ClientWebhooksGet,
        Route::ClientWebhooksUpdate,
        Route::ClientWebhooksDelete,
        Route::ClientWebhooksRotateSecret,
        Route::ClientWebhooksTest,
        Route::ClientWebhooksMessages,
        Route::ClientWebhooksRedeliver,
        Route::ClientCallbackSecretRotate,
        Route::ClientRunsGet,
        Route::ClientRunsList,
        Route::ClientRunsCancel,
        Route::CoreTenantsCreate,
        Route::CoreTenantsGet,
        Route::CoreTenantsUpdate,
        Route::CoreTenantsProjectsAttach,
        Route::CoreTenantWebhooksCreate,
        Route::CoreTenantWebhooksList,
        Route::CoreTenantWebhooksGet,
        Route::CoreTenantWebhooksUpdate,
        Route::CoreTenantWebhooksDelete,
        Route::CoreTenantWebhooksRotateSecret,
        Route::CoreTenantWebhooksTest,
        Route::CoreTenantWebhooksMessages,
        Route::CoreTenantWebhooksRedeliver,
        Route::PlatformEnvironmentsCreate,
        Route::PlatformEnvironmentsList,
        Route::PlatformEnvironmentsGet,
        Route::PlatformEnvironmentsDelete,
        Route::PlatformSessionsCreate,
        Route::PlatformSessionsList,
        Route::PlatformSessionsGet,
        Route::PlatformFilesPut,
        Route::PlatformFilesGet,
        Route::PlatformFilesDelete,
        Route::PlatformRunsCreate,
        Route::PlatformRunsList,
        Route::PlatformRunsGet,
        Route::PlatformRunsStop,
        Route::PlatformRunsRollback,
        Route::ClientSessionFilesCreate,
        Route::ClientSessionFilesList,
        Route::ClientSessionFilesGet,
        Route::ClientSessionFilesDelete,
        Route::ClientSessionFeedbackCreate,
        Route::ClientAgentFeedbackList,
        Route::ClientAgentA2aCard,
        Route::ClientAgentA2aRpc,
        Route::ClientSessionRegenerate,
        Route::ClientSessionMessageEdit,
    ];

    /// The route's one declaration. Its method, path and wire (parameters, bodies, answers)
    /// are in the `#[utoipa::path]` on its handler, beside the code; the gateway router, the
    /// Lambda functions, the OpenAPI documents, the template's grants and the infra test all
    /// derive from this.
    pub fn declaration(self) -> Declaration {
        use Route::*;
        use Serving::*;
        match self {
            CoreProjectsCreate => decl("core-projects-create", &[MAIN_W, CORE_KEY], Buffered, || {
                routes!(core::projects::create)
            }),
            CoreProjectsList => {
                decl("core-projects-list", &[MAIN_R, CORE_KEY], Buffered, || routes!(core::projects::list))
            }
            CoreApiKeysCreate => decl("core-api-keys-create", &[MAIN_W, CORE_KEY], Buffered, || {
                routes!(core::api_keys::create)
            }),
            CoreApiKeysRevoke => decl("core-api-keys-revoke", &[MAIN_W, CORE_KEY], Buffered, || {
                routes!(core::api_keys::revoke)
            }),
            // HeadBucket of the bucket it registers (S3ReadPolicy on the DocumentBuckets pattern).
            CoreBucketsRegister => {
                decl("core-buckets-register", &[MAIN_W, CORE_KEY, DOCS_R], Buffered, || {
                    routes!(core::buckets::register)
                })
            }
            CoreBucketsList => {
                decl("core-buckets-list", &[MAIN_R, CORE_KEY], Buffered, || routes!(core::buckets::list))
            }
            CoreBucketsRemove => {
                decl("core-buckets-remove", &[MAIN_W, CORE_KEY], Buffered, || routes!(core::buckets::remove))
            }
            ClientSessionsCreate => decl("client-sessions-create", &[MAIN_W], Buffered, || {
                routes!(client::sessions::handlers::create)
            }),
            ClientSessionsList => decl("client-sessions-list", &[MAIN_R], Buffered, || {
                routes!(client::sessions::handlers::list)
            }),
            ClientSessionsGet => {
                decl("client-sessions-get", &[MAIN_R], Buffered, || routes!(client::sessions::handlers::get))
            }
            ClientSessionsUpdate => decl("client-sessions-update", &[MAIN_W, RUNS_SEND], Buffered, || {
                routes!(client::sessions::handlers::update)
            }),
            ClientSessionsDelete => decl("client-sessions-delete", &[MAIN_W], Buffered, || {
                routes!(client::sessions::handlers::delete)
            }),
            ClientSessionsCancel => {
                // Ending a paused turn appends its `turn.ended` event.
                decl("client-sessions-cancel", &[MAIN_W, EVENTS_W, WEBHOOKS_SEND], Buffered, || {
                    routes!(client::sessions::handlers::cancel)
                })
            }
            ClientAgentsCreate => decl("client-agents-create", &[MAIN_W], Buffered, || {
                routes!(client::agents::handlers::create)
            }),
            ClientAgentsList => {
                decl("client-agents-list", &[MAIN_R], Buffered, || routes!(client::agents::handlers::list))
            }
            ClientAgentsGet => {
                decl("client-agents-get", &[MAIN_R], Buffered, || routes!(client::agents::handlers::get))
            }
            ClientAgentsUpdate => decl("client-agents-update", &[MAIN_W], Buffered, || {
                routes!(client::agents::handlers::update)
            }),
            ClientAgentsPublish => decl("client-agents-publish", &[MAIN_W], Buffered, || {
                routes!(client::agents::handlers::publish)
            }),
            ClientAgentsVersions => decl("client-agents-versions", &[MAIN_R], Buffered, || {
                routes!(client::agents::handlers::versions)
            }),
            ClientResponsesCreate => decl("client-responses-create", TURN_ROUTE, Turn, || {
                routes!(client::responses::handlers::create_draft)
            }),
            ClientAgentResponsesCreate => decl("client-agent-responses-create", TURN_ROUTE, Turn, || {
                routes!(client::responses::handlers::create_published)
            }),
            ClientSessionMessagesCreate => decl("client-session-messages-create", TURN_ROUTE, Turn, || {
                routes!(client::responses::handlers::session_message)
            }),
            ClientSessionEventsList => {
                decl("client-session-events-list", &[MAIN_R, EVENTS_R], Buffered, || {
                    routes!(client::events::poll::list)
                })
            }
            // Writes: the leased places an open stream holds (`stream_slots`).
            ClientSessionEventsStream => {
                decl("client-session-events-stream", &[MAIN_W, EVENTS_R], Stream, || {
                    routes!(client::events::stream::stream)
                })
            }
            ClientSessionActionsList => decl("client-session-actions-list", &[MAIN_R], Buffered, || {
                routes!(client::actions::handlers::list)
            }),
            ClientSessionActionsGet => decl("client-session-actions-get", &[MAIN_R], Buffered, || {
                routes!(client::actions::handlers::get)
            }),
            // Settles the action, and sends the turn's continuation once none of it is pending.
            ClientSessionActionsAnswer => {
                decl("client-session-actions-answer", &[MAIN_W, RUNS_SEND], Buffered, || {
                    routes!(client::actions::handlers::answer)
                })
            }
            CoreSandboxNodesRegister => {
                decl("core-sandbox-nodes-register", &[MAIN_W, CORE_KEY], Buffered, || {
                    routes!(core::nodes::register)
                })
            }
            CoreSandboxNodesList => decl("core-sandbox-nodes-list", &[MAIN_R, CORE_KEY], Buffered, || {
                routes!(core::node_reads::list)
            }),
            CoreSandboxNodeGet => {
                decl("core-sandbox-node-get", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, || {
                    routes!(core::node_reads::get)
                })
            }
            NodeCommandsPoll => {
                decl("node-commands-poll", &[MAIN_W], Buffered, || routes!(node::handlers::poll))
            }
            NodeCommandsComplete => {
                decl("node-commands-complete", &[MAIN_W], Buffered, || routes!(node::handlers::complete))
            }
            NodeHeartbeat => decl("node-heartbeat", &[MAIN_W, TELEMETRY_W], Buffered, || {
                routes!(node::handlers::heartbeat)
            }),
            NodeReports => {
                decl("node-reports", &[MAIN_W, TELEMETRY_W], Buffered, || routes!(node::handlers::reports))
            }
            NodeSandboxesList => {
                decl("node-sandboxes-list", &[MAIN_R], Buffered, || routes!(node::handlers::sandboxes))
            }
            SandboxCreate => {
                decl("sandbox-create", &[MAIN_W], Buffered, || routes!(sandbox::sandboxes::create))
            }
            SandboxList => decl("sandbox-list", &[MAIN_R], Buffered, || routes!(sandbox::sandboxes::list)),
            SandboxGet => decl("sandbox-get", &[MAIN_R], Buffered, || routes!(sandbox::sandboxes::get)),
            SandboxKill => decl("sandbox-kill", &[MAIN_W], Buffered, || routes!(sandbox::sandboxes::kill)),
            SandboxPause => decl("sandbox-pause", &[MAIN_W], Buffered, || routes!(sandbox::sandboxes::pause)),
            SandboxResume => {
                decl("sandbox-resume", &[MAIN_W], Buffered, || routes!(sandbox::sandboxes::resume))
            }
            SandboxTimeout => {
                decl("sandbox-timeout", &[MAIN_W], Buffered, || routes!(sandbox::sandboxes::set_timeout))
            }
            SandboxProcessStart => {
                decl("sandbox-process-start", &[MAIN_W], Buffered, || routes!(sandbox::processes::start))
            }
            SandboxProcessList => {
                decl("sandbox-process-list", &[MAIN_R], Buffered, || routes!(sandbox::processes::list))
            }
            SandboxProcessOutput => decl("sandbox-process-output", &[MAIN_R, TELEMETRY_R], Buffered, || {
                routes!(sandbox::processes::output)
            }),
            CoreRuntimeObservationsList => {
                decl("core-runtime-observations-list", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, || {
                    routes!(core::runtime::list::list)
                })
            }
            CoreRuntimeObservationGet => {
                decl("core-runtime-observation-get", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, || {
                    routes!(core::runtime::observation::retrieve)
                })
            }
            CoreRuntimeHistoryGet => {
                decl("core-runtime-history-get", &[MAIN_R, TELEMETRY_R, CORE_KEY], Buffered, || {
                    routes!(core::runtime::history::history)
                })
            }
            // Webhook endpoints: those that seal or open signing secrets read the deployment's key.
            ClientWebhooksCreate => decl("client-webhooks-create", &[MAIN_W, WEBHOOK_KEY], Buffered, || {
                routes!(client::webhooks::handlers::create)
            }),
            ClientWebhooksList => decl("client-webhooks-list", &[MAIN_R], Buffered, || {
                routes!(client::webhooks::handlers::list)
            }),
            ClientWebhooksGet => {
                decl("client-webhooks-get", &[MAIN_R], Buffered, || routes!(client::webhooks::handlers::get))
            }
            ClientWebhooksUpdate => decl("client-webhooks-update", &[MAIN_W], Buffered, || {
                routes!(client::webhooks::handlers::update)
            }),
            ClientWebhooksDelete => decl("client-webhooks-delete", &[MAIN_W], Buffered, || {
                routes!(client::webhooks::handlers::delete)
            }),
            ClientWebhooksRotateSecret => {
                decl("client-webhooks-rotate-secret", &[MAIN_W, WEBHOOK_KEY], Buffered, || {
                    routes!(client::webhooks::handlers::rotate_secret)
                })
            }
            ClientWebhooksTest => decl("client-webhooks-test", &[MAIN_W, WEBHOOK_KEY], Buffered, || {
                routes!(client::webhooks::handlers::test)
            }),
            ClientWebhooksMessages => decl("client-webhooks-messages", &[MAIN_R], Buffered, || {
                routes!(client::webhooks::handlers::messages)
            }),
            ClientWebhooksRedeliver => {
                decl("client-webhooks-redeliver", &[MAIN_W, WEBHOOK_KEY], Buffered, || {
                    routes!(client::webhooks::handlers::redeliver)
                })
            }
            ClientCallbackSecretRotate => {
                decl("client-callback-secret-rotate", &[MAIN_W, WEBHOOK_KEY], Buffered, || {
                    routes!(client::webhooks::handlers::rotate_callback_secret)
                })
            }
            ClientRunsGet => {
                decl("client-runs-get", &[MAIN_R], Buffered, || routes!(client::runs::handlers::get))
            }
            ClientRunsList => {
                decl("client-runs-list", &[MAIN_R], Buffered, || routes!(client::runs::handlers::list))
            }
            CoreTenantsCreate => {
                decl("core-tenants-create", &[MAIN_W, CORE_KEY], Buffered, || routes!(core::tenants::create))
            }
            CoreTenantsGet => {
                decl("core-tenants-get", &[MAIN_R, CORE_KEY], Buffered, || routes!(core::tenants::get))
            }
            CoreTenantsUpdate => {
                decl("core-tenants-update", &[MAIN_W, CORE_KEY, RUNS_SEND], Buffered, || {
                    routes!(core::tenants::update)
                })
            }
            CoreTenantsProjectsAttach => {
                decl("core-tenants-projects-attach", &[MAIN_W, CORE_KEY], Buffered, || {
                    routes!(core::tenants::attach)
                })
            }
            CoreTenantWebhooksCreate => {
                decl("core-tenant-webhooks-create", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, || {
                    routes!(core::webhooks::create)
                })
            }
            CoreTenantWebhooksList => {
                decl("core-tenant-webhooks-list", &[MAIN_R, CORE_KEY], Buffered, || {
                    routes!(core::webhooks::list)
                })
            }
            CoreTenantWebhooksGet => decl("core-tenant-webhooks-get", &[MAIN_R, CORE_KEY], Buffered, || {
                routes!(core::webhooks::get)
            }),
            CoreTenantWebhooksUpdate => {
                decl("core-tenant-webhooks-update", &[MAIN_W, CORE_KEY], Buffered, || {
                    routes!(core::webhooks::update)
                })
            }
            CoreTenantWebhooksDelete => {
                decl("core-tenant-webhooks-delete", &[MAIN_W, CORE_KEY], Buffered, || {
                    routes!(core::webhooks::delete)
                })
            }
            CoreTenantWebhooksRotateSecret => {
                decl("core-tenant-webhooks-rotate-secret", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, || {
                    routes!(core::webhooks::rotate_secret)
                })
            }
            CoreTenantWebhooksTest => {
                decl("core-tenant-webhooks-test", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, || {
                    routes!(core::webhooks::test)
                })
            }
            CoreTenantWebhooksMessages => {
                decl("core-tenant-webhooks-messages", &[MAIN_R, CORE_KEY], Buffered, || {
                    routes!(core::webhooks::messages)
                })
            }
            CoreTenantWebhooksRedeliver => {
                decl("core-tenant-webhooks-redeliver", &[MAIN_W, CORE_KEY, WEBHOOK_KEY], Buffered, || {
                    routes!(core::webhooks::redeliver)
                })
            }
            // Session files: create signs the upload with the function's role (so it may write
            // the bucket); get asks the bucket for the object's size and marks the file ready
            // (a conditional write), and signs the download; delete removes the bytes.
            ClientSessionFilesCreate => {
                decl("client-session-files-create", &[MAIN_W, FILES_W, DOCS_W], Buffered, || {
                    routes!(client::files::handlers::create)
                })
            }
            ClientSessionFilesList => decl("client-session-files-list", &[MAIN_R], Buffered, || {
                routes!(client::files::handlers::list)
            }),
            ClientSessionFilesGet => {
                decl("client-session-files-get", &[MAIN_W, FILES_R, DOCS_R], Buffered, || {
                    routes!(client::files::handlers::get)
                })
            }
            ClientSessionFilesDelete => {
                decl("client-session-files-delete", &[MAIN_W, FILES_W, DOCS_W], Buffered, || {
                    routes!(client::files::handlers::delete)
                })
            }
            // Feedback reads the session's event (the rated message) and writes the feedback.
            ClientSessionFeedbackCreate => {
                decl("client-session-feedback-create", &[MAIN_W, EVENTS_R], Buffered, || {
                    routes!(client::feedback::handlers::create)
                })
            }
            ClientAgentFeedbackList => decl("client-agent-feedback-list", &[MAIN_R], Buffered, || {
                routes!(client::feedback::handlers::list)
            }),
            // A2A: the card reads the agent; the endpoint runs turns (and answers their
            // actions, carrying the turn on in the call) and streams `message/stream`.
            ClientAgentA2aCard => {
                decl("client-agent-a2a-card", &[MAIN_R], Buffered, || routes!(client::a2a::handlers::card))
            }
            ClientAgentA2aRpc => {
                decl("client-agent-a2a-rpc", TURN_ROUTE, Turn, || routes!(client::a2a::handlers::rpc))
            }
            // Regenerate and edit run a new turn that replaces earlier ones.
            ClientSessionRegenerate => decl("client-session-regenerate", TURN_ROUTE, Turn, || {
                routes!(client::responses::rewind::regenerate)
            }),
            ClientSessionMessageEdit => decl("client-session-message-edit", TURN_ROUTE, Turn, || {
                routes!(client::responses::rewind::edit)
            }),
            // Ends a waiting run's paused turn (its `turn.ended` event) or records the cancel.
            ClientRunsCancel => {
                decl("client-runs-cancel", &[MAIN_W, EVENTS_W, WEBHOOKS_SEND], Buffered, || {
                    routes!(client::runs::handlers::cancel)
                })
            }
            // The Platform API (`/v1`).
            PlatformEnvironmentsCreate => decl("platform-environments-create", &[MAIN_W], Buffered, || {
                routes!(platform::environments::create)
            }),
            PlatformEnvironmentsList => decl("platform-environments-list", &[MAIN_R], Buffered, || {
                routes!(platform::environments::list)
            }),
            PlatformEnvironmentsGet => decl("platform-environments-get", &[MAIN_R], Buffered, || {
                routes!(platform::environments::get)
            }),
            // Marks it deleted; the retention sweep purges it.
            PlatformEnvironmentsDelete => decl("platform-environments-delete", &[MAIN_W], Buffered, || {
                routes!(platform::environments::delete)
            }),
            PlatformSessionsCreate => {
                decl("platform-sessions-create", &[MAIN_W], Buffered, || routes!(platform::sessions::create))
            }
            PlatformSessionsList => {
                decl("platform-sessions-list", &[MAIN_R], Buffered, || routes!(platform::sessions::list))
            }
            PlatformSessionsGet => {
                decl("platform-sessions-get", &[MAIN_R], Buffered, || routes!(platform::sessions::get))
            }
            // Workspace files go to the environment's sandbox node (its command queue: a write).
            PlatformFilesPut => {
                decl("platform-files-put", &[MAIN_W], Buffered, || routes!(platform::files::put))
            }
            PlatformFilesGet => {
                decl("platform-files-get", &[MAIN_W], Buffered, || routes!(platform::files::get))
            }
            PlatformFilesDelete => {
                decl("platform-files-delete", &[MAIN_W], Buffered, || routes!(platform::files::delete))
            }
            PlatformRunsCreate => decl("platform-runs-create", &[MAIN_W, RUNS_SEND], Buffered, || {
                routes!(platform::runs::create)
            }),
            PlatformRunsList => {
                decl("platform-runs-list", &[MAIN_R], Buffered, || routes!(platform::runs::list))
            }
            PlatformRunsGet => {
                decl("platform-runs-get", &[MAIN_R], Buffered, || routes!(platform::runs::get))
            }
            PlatformRunsStop => decl("platform-runs-stop", &[MAIN_W, WEBHOOKS_SEND], Buffered, || {
                routes!(platform::runs::stop)
            }),
            // Freezes the affected set and queues the restore for the `rollback-restore` job.
            PlatformRunsRollback => {
                decl("platform-runs-rollback", &[MAIN_W, ROLLBACKS_SEND], Buffered, || {
                    routes!(platform::rollback::rollback)
                })
            }
        }
    }

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
        let (_, paths, _) = (self.declaration().serve)();
        let Some((path, item)) = paths.paths.into_iter().next() else {
            unreachable!("{self:?}: a route's handler declares its path")
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

    /// The stack resources and how this route's function may use them.
    pub fn grants(self) -> &'static [Grant] {
        self.declaration().grants
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
    let mut by_path: Vec<(&'static str, MethodRouter<App>)> = Vec::new();
    for route in routes {
        let (_, _, handler) = (route.declaration().serve)();
        match by_path.iter_mut().find(|(path, _)| *path == route.path()) {
            Some((_, methods)) => *methods = std::mem::take(methods).merge(handler),
            None => by_path.push((route.path(), handler)),
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
