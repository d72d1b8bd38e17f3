//! `/v1/environments/{environmentId}/sessions/{sessionId}/runs`: create (202 `queued`, with its
//! `environmentSequence`), list, get, stop. The spec gives a Run two shapes: the GET shape
//! (with `usage`) and the stop/rollback shape (with `steeringEnabled`, `error`,
//! `contentDeletedAt`); extra fields appear in neither. Create answers the stop/rollback shape
//! (it has what the caller sent, `steeringEnabled` included); lists answer the GET shape.

use agentplane_domain::page::PageRequest;
use agentplane_domain::platform::public_error;
use agentplane_domain::platform::run::ExecuteRun;
use agentplane_domain::platform::run::{
    self, ChangeKind, CheckpointStatus, DiffStatus, NewRun, Run, RunId, RunStatus, StopEffect,
};
use agentplane_store::{RunsMessage, StoreError};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::PlatformAuth;
use super::error::{Found, PlatformError, PlatformErrorEnvelope};
use super::wire::{Data, ListPage, PAGE_PARAMS, Strict, StrictBody, only_query};
use crate::list::PageParams;
use crate::{App, edge};

// ---- wire ----

/// `POST …/runs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRun {
    /// Exact native model ID served by your provider or gateway.
    #[schema(min_length = 1, max_length = 256)]
    pub model: String,
    /// Instructions supplied to the agent for this task.
    #[schema(min_length = 1)]
    pub input: String,
    /// Existing regular workspace files, checked before execution.
    #[serde(default)]
    pub files: Option<Vec<RunFileBody>>,
    /// Native steering is not built yet: `true` is refused (400 `invalid_request`,
    /// `details.param` `steeringEnabled`); `false` or absent runs without it.
    #[serde(default)]
    pub steering_enabled: Option<bool>,
}

impl StrictBody for CreateRun {
    const FIELDS: &'static [&'static str] = &["model", "input", "files", "steeringEnabled"];
}

/// Reference to an existing regular workspace file checked before execution.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFileBody {
    /// Canonical absolute path inside /workspace.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, pattern = "^[a-f0-9]{64}$")]
    pub sha256: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatusBody {
    Queued,
    Running,
    Completed,
    Failed,
    Stopped,
    Reverting,
    Reverted,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileDiffStatusBody {
    Pending,
    Ready,
    Failed,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointStatusBody {
    Pending,
    Ready,
    Failed,
    Skipped,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKindBody {
    Added,
    Modified,
    Deleted,
}

/// Regular workspace file change with before and after content digests.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileChangeBody {
    pub path: String,
    pub kind: ChangeKindBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, pattern = "^[a-f0-9]{64}$")]
    pub before_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, pattern = "^[a-f0-9]{64}$")]
    pub after_sha256: Option<String>,
}

/// RootFS checkpoint state and identifier, tracked separately from native execution.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckpointBody {
    pub status: CheckpointStatusBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub snapshot_id: Option<String>,
    /// `checkpoint_failed: <cause>: <message>`, fixed by cause (the detail is in the log).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
}

/// Execution failure or transient runtime availability diagnostic: a stable code and the
/// fixed message of that code (never an internal error's text).
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunErrorBody {
    pub code: String,
    pub message: String,
}

/// Native model family associated with a historical rated call.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderBody {
    Openai,
    Anthropic,
    Kimi,
    Zai,
    Deepseek,
}

/// A service fee tier: 0, 5, 10 or 15 percent (a number on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceFeePercent {
    Zero,
    Five,
    Ten,
    Fifteen,
}

impl ServiceFeePercent {
    pub const ALL: [Self; 4] = [Self::Zero, Self::Five, Self::Ten, Self::Fifteen];

    pub fn percent(self) -> u8 {
        match self {
            Self::Zero => 0,
            Self::Five => 5,
            Self::Ten => 10,
            Self::Fifteen => 15,
        }
    }
}

impl Serialize for ServiceFeePercent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(self.percent())
    }
}

impl utoipa::PartialSchema for ServiceFeePercent {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::Integer))
            .enum_values(Some(Self::ALL.map(|p| p.percent())))
            .description(Some("A service fee tier in percent: 0, 5, 10 or 15."))
            .into()
    }
}

impl ToSchema for ServiceFeePercent {}

/// One historical rated managed-model call (never present for BYOK Runs).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UsageCallBody {
    pub id: String,
    pub provider: ProviderBody,
    pub model: String,
    /// Immutable version of the published price captured for rating.
    pub price_version: String,
    #[schema(format = "uri")]
    pub price_source_url: String,
    /// Provider-reported usage by category (uncached input, cached input, output tokens…).
    pub usage_categories: std::collections::BTreeMap<String, f64>,
    /// Rated accounting line items for the provider call.
    #[schema(value_type = Vec<serde_json::Value>)]
    pub rated_lines: Vec<serde_json::Value>,
    pub upstream_amount_usd: String,
    pub service_fee_usd: String,
    pub total_amount_usd: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    pub service_fee_percent: ServiceFeePercent,
}

/// Posted Sandbox runtime usage; BYOK Runs have no rated model-call ledger.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UsageBody {
    /// Historical rated managed-model calls only: empty for BYOK Runs.
    pub calls: Vec<UsageCallBody>,
    /// The fee shared by all calls, `null` for mixed historical tiers; 0 for BYOK Runs.
    #[schema(required = true)]
    pub service_fee_percent: Option<ServiceFeePercent>,
    /// Managed-model base charges: `"0"` for BYOK Runs (the provider bills them).
    pub upstream_amount_usd: String,
    /// Managed-model service fees: `"0"` for BYOK Runs.
    pub service_fee_usd: String,
    /// `sandboxAmountUsd` + `upstreamAmountUsd` + `serviceFeeUsd`.
    pub total_amount_usd: String,
    /// `sandboxRuntimeSeconds` × the deployment's price per sandbox-second
    /// (`AGENTPLANE_SANDBOX_USD_PER_SECOND` when the Run was created), exact.
    pub sandbox_amount_usd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, minimum = 0)]
    pub sandbox_runtime_seconds: Option<f64>,
}

/// The fields both Run shapes share.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Common {
    id: String,
    environment_id: String,
    session_id: String,
    environment_sequence: u64,
    model: String,
    input: String,
    files: Vec<RunFileBody>,
    status: RunStatusBody,
    stop_requested: bool,
    output: Option<String>,
    file_diff: Vec<FileChangeBody>,
    file_diff_status: FileDiffStatusBody,
    file_diff_error: Option<String>,
    checkpoint: CheckpointBody,
    created_at: String,
    started_at: Option<String>,
    finished_at: Option<String>,
}

macro_rules! run_shape {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Serialize, ToSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            pub id: String,
            pub environment_id: String,
            pub session_id: String,
            #[schema(minimum = -9007199254740991_i64, maximum = 9007199254740991_i64)]
            pub environment_sequence: u64,
            pub model: String,
            pub input: String,
            pub files: Vec<RunFileBody>,
            pub status: RunStatusBody,
            pub stop_requested: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(nullable = false)]
            pub output: Option<String>,
            pub file_diff: Vec<FileChangeBody>,
            pub file_diff_status: FileDiffStatusBody,
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(nullable = false)]
            pub file_diff_error: Option<String>,
            pub checkpoint: CheckpointBody,
            #[schema(format = DateTime)]
            pub created_at: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(nullable = false, format = DateTime)]
            pub started_at: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schema(nullable = false, format = DateTime)]
            pub finished_at: Option<String>,
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        impl $name {
            fn with_common(c: Common, $($field: $ty),*) -> Self {
                Self {
                    id: c.id,
                    environment_id: c.environment_id,
                    session_id: c.session_id,
                    environment_sequence: c.environment_sequence,
                    model: c.model,
                    input: c.input,
                    files: c.files,
                    status: c.status,
                    stop_requested: c.stop_requested,
                    output: c.output,
                    file_diff: c.file_diff,
                    file_diff_status: c.file_diff_status,
                    file_diff_error: c.file_diff_error,
                    checkpoint: c.checkpoint,
                    created_at: c.created_at,
                    started_at: c.started_at,
                    finished_at: c.finished_at,
                    $($field,)*
                }
            }
        }
    };
}

run_shape!(
    /// Run details with posted Sandbox runtime (the GET shape).
    RunDetails {
        usage: UsageBody,
    }
);

run_shape!(
    /// Native task execution, output, file diff and checkpoint state (the stop and rollback shape).
    RunState {
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        error: Option<RunErrorBody>,
        steering_enabled: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false, format = DateTime)]
        content_deleted_at: Option<String>,
    }
);

fn common(r: &Run) -> Common {
    Common {
        id: r.id.to_string(),
        environment_id: r.environment_id.to_string(),
        session_id: r.session_id.to_string(),
        environment_sequence: r.environment_sequence,
        model: r.model.clone(),
        input: r.input.clone(),
        files: r
            .files
            .iter()
            .map(|f| RunFileBody { path: f.path.clone(), sha256: f.sha256.clone() })
            .collect(),
        status: match r.status {
            RunStatus::Queued => RunStatusBody::Queued,
            RunStatus::Running => RunStatusBody::Running,
            RunStatus::Completed => RunStatusBody::Completed,
            RunStatus::Failed => RunStatusBody::Failed,
            RunStatus::Stopped => RunStatusBody::Stopped,
            RunStatus::Reverting => RunStatusBody::Reverting,
            RunStatus::Reverted => RunStatusBody::Reverted,
        },
        stop_requested: r.stop_requested,
        output: r.output.clone(),
        file_diff: r
            .file_diff
            .iter()
            .map(|c| FileChangeBody {
                path: c.path.clone(),
                kind: match c.kind {
                    ChangeKind::Added => ChangeKindBody::Added,
                    ChangeKind::Modified => ChangeKindBody::Modified,
                    ChangeKind::Deleted => ChangeKindBody::Deleted,
                },
                before_sha256: c.before_sha256.clone(),
                after_sha256: c.after_sha256.clone(),
            })
            .collect(),
        file_diff_status: match r.file_diff_status {
            DiffStatus::Pending => FileDiffStatusBody::Pending,
            DiffStatus::Ready => FileDiffStatusBody::Ready,
            DiffStatus::Failed => FileDiffStatusBody::Failed,
        },
        file_diff_error: r.file_diff_error.as_deref().map(|e| public_error::diff_error(e).to_owned()),
        checkpoint: CheckpointBody {
            status: match r.checkpoint.status {
                CheckpointStatus::Pending => CheckpointStatusBody::Pending,
                CheckpointStatus::Ready => CheckpointStatusBody::Ready,
                CheckpointStatus::Failed => CheckpointStatusBody::Failed,
                CheckpointStatus::Skipped => CheckpointStatusBody::Skipped,
            },
            snapshot_id: r.checkpoint.snapshot_id.clone(),
            error: r.checkpoint.error.as_deref().map(public_error::checkpoint_error),
        },
        created_at: r.created_at.rfc3339(),
        started_at: r.started_at.map(|t| t.rfc3339()),
        finished_at: r.finished_at.map(|t| t.rfc3339()),
    }
}

/// The GET shape. BYOK: no model-call ledger, no fee; the sandbox time as measured, priced at
/// the price per sandbox-second the Run was created with (0 unless one is configured).
pub fn details(r: &Run) -> RunDetails {
    let sandbox = r.sandbox_usd_per_second.unwrap_or_default().amount_usd(r.sandbox_runtime_ms);
    let seconds = (r.started_at.is_some()).then(|| r.sandbox_runtime_ms as f64 / 1000.0);
    let usage = UsageBody {
        calls: Vec::new(),
        service_fee_percent: Some(ServiceFeePercent::Zero),
        upstream_amount_usd: "0".into(),
        service_fee_usd: "0".into(),
        // Sandbox + upstream + fee, the last two 0 for a BYOK Run.
        total_amount_usd: sandbox.clone(),
        sandbox_amount_usd: sandbox,
        sandbox_runtime_seconds: seconds,
    };
    RunDetails::with_common(common(r), usage)
}

/// The stop and rollback shape.
pub fn state(r: &Run) -> RunState {
    let error = r.error.as_ref().map(|e| {
        let shown = public_error::run_error(e);
        RunErrorBody { code: shown.code, message: shown.message }
    });
    RunState::with_common(common(r), error, r.steering_enabled, r.content_deleted_at.map(|t| t.rfc3339()))
}

// ---- handlers ----

fn run_id(text: &str) -> Result<RunId, PlatformError> {
    text.parse().map_err(|_| PlatformError::RunNotFound)
}

/// The Run `id` of session `session` of environment `environment` (each checked in turn:
/// another project's, environment's or session's is a 404).
pub async fn load(
    app: &App,
    auth: &PlatformAuth,
    environment: &str,
    session: &str,
    id: &str,
) -> Result<Run, PlatformError> {
    let session = super::sessions::load(app, auth, environment, session).await?;
    let id = run_id(id)?;
    let found =
        app.store.runs().get(&auth.0.project_id, &id).await.or_not_found(PlatformError::RunNotFound)?;
    if found.session_id != session.id {
        return Err(PlatformError::RunNotFound);
    }
    Ok(found)
}

/// Create a Run in a session: it waits `queued` for execution.
#[utoipa::path(
    post,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs",
    tag = "platform",
    operation_id = "platform-runs-create",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "The environment's id."),
        ("sessionId" = String, Path, min_length = 1, description = "A session of that environment."),
    ),
    request_body(content = CreateRun, description = "Unknown fields are refused."),
    responses(
        (status = 202, description = "The Run, `queued`, with its `environmentSequence`.", body = Data<RunState>),
        (status = 400, description = "Invalid request (`details.param` names the field).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment or session.", body = PlatformErrorEnvelope),
        (status = 409, description = "Too many concurrent creates in this environment; try again (`concurrent_update`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session)): Path<(String, String)>,
    Strict(body): Strict<CreateRun>,
) -> Result<(StatusCode, Json<Data<RunState>>), PlatformError> {
    let session = super::sessions::load(&app, &auth, &environment, &session).await?;
    if body.steering_enabled == Some(true) {
        // Recording `true` would promise steering that nothing honours.
        return Err(PlatformError::invalid(
            "steeringEnabled",
            "native steering is not available on this deployment yet: send `steeringEnabled: false` or leave it out",
        ));
    }
    let files = body.files.unwrap_or_default().into_iter().map(|f| (f.path, f.sha256)).collect();
    let new = NewRun::new(&body.model, &body.input, files, false)?;
    let environment_id = session.environment_id.ok_or(PlatformError::SessionNotFound)?;
    let id = RunId::from_random(edge::random()?);
    for attempt in 0..16u64 {
        let environment = app
            .store
            .environments()
            .get(&auth.0.project_id, &environment_id)
            .await
            .or_not_found(PlatformError::EnvironmentNotFound)?;
        let previous = environment.run_count;
        let mut run = new.clone().into_run(
            id,
            auth.0.project_id,
            environment_id,
            session.id,
            previous + 1,
            edge::now(),
        );
        // The price its sandbox time is charged at, whatever the price is later.
        run.sandbox_usd_per_second = Some(app.sandbox_price);
        match app.store.runs().create(&run, previous).await {
            Ok(()) => {
                // Executed by the `run-execution` job. The create put the environment in the
                // outbox: a message that cannot be sent now is sent by the sweep, so the Run
                // exists (202) and still runs.
                let message = ExecuteRun { project_id: run.project_id, run_id: run.id };
                let sent = match app.store.runs_queue() {
                    Ok(queue) => queue.send_message(&RunsMessage::PlatformRun(message)).await,
                    Err(err) => Err(err),
                };
                if let Err(err) = sent {
                    tracing::error!(error = %err, run = %run.id, "could not queue a Run's execution; the outbox sweep sends it");
                }
                return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
            }
            Err(StoreError::Conflict) => {
                // Another Run took the number (or the session is gone): read again.
                let jitter = u64::from(edge::random::<1>()?[0]) % 10;
                tokio::time::sleep(std::time::Duration::from_millis(5 * attempt + jitter)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(PlatformError::ConcurrentUpdate)
}

/// List a session's Runs, newest first (the GET shape).
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs",
    tag = "platform",
    operation_id = "platform-runs-list",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "The environment's id."),
        ("sessionId" = String, Path, min_length = 1, description = "A session of that environment."),
        PageParams,
    ),
    responses(
        (status = 200, description = "A page of Runs.", body = ListPage<RunDetails>),
        (status = 400, description = "A page parameter is invalid, or the query names another (`details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment or session, or `after` names no Run of it (`cursor_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListPage<RunDetails>>, PlatformError> {
    let page = PageRequest::from_query(&only_query(raw.as_deref(), PAGE_PARAMS)?)?;
    let session = super::sessions::load(&app, &auth, &environment, &session).await?;
    let environment_id = session.environment_id.ok_or(PlatformError::SessionNotFound)?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<RunId>().map_err(|_| PlatformError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .runs()
        .list_session(&auth.0.project_id, &environment_id, &session.id, &page, after.as_ref())
        .await
        .or_not_found(PlatformError::CursorNotFound)?;
    Ok(ListPage::of(&found, details, |r| r.id.to_string()))
}

/// Get Run state and Sandbox usage.
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}",
    tag = "platform",
    operation_id = "platform-runs-get",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "Environment identifier."),
        ("sessionId" = String, Path, min_length = 1, description = "Existing Session identifier within the named Environment."),
        ("runId" = String, Path, min_length = 1, description = "Run identifier within the named Environment and Session."),
    ),
    responses(
        (status = 200, description = "Successful response.", body = Data<RunDetails>),
        (status = 400, description = "Invalid request: a query parameter (this route takes none; `details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "Resource not found or outside token scope.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session, id)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Data<RunDetails>>, PlatformError> {
    only_query(raw.as_deref(), &[])?;
    let run = load(&app, &auth, &environment, &session, &id).await?;
    Ok(Data::of(details(&run)))
}

/// Request Run stop.
///
/// A queued Run is stopped at once (it never runs); a running one records `stopRequested` and
/// stops at its next safe point; a finished one stays as it is.
#[utoipa::path(
    post,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}/stop",
    tag = "platform",
    operation_id = "platform-runs-stop",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "Environment identifier."),
        ("sessionId" = String, Path, min_length = 1, description = "Existing Session identifier within the named Environment."),
        ("runId" = String, Path, min_length = 1, description = "Run identifier within the named Environment and Session."),
    ),
    responses(
        (status = 202, description = "Accepted.", body = Data<RunState>),
        (status = 400, description = "Invalid request: a query parameter (this route takes none; `details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "Resource not found or outside token scope.", body = PlatformErrorEnvelope),
        (status = 409, description = "The Run is reverting or reverted (`run_reverted`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn stop(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session, id)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<(StatusCode, Json<Data<RunState>>), PlatformError> {
    only_query(raw.as_deref(), &[])?;
    let mut run = load(&app, &auth, &environment, &session, &id).await?;
    for _ in 0..8 {
        let expected = run.version;
        let now = edge::now();
        match run::stop_effect(&run) {
            StopEffect::Nothing => return Ok((StatusCode::ACCEPTED, Data::of(state(&run)))),
            StopEffect::Refused => return Err(PlatformError::RunReverted),
            StopEffect::StopNow => {
                run.status = RunStatus::Stopped;
                run.stop_requested = true;
                run.finished_at = Some(now);
                // It never ran: nothing changed and nothing is checkpointed.
                run.file_diff_status = DiffStatus::Ready;
                run.checkpoint.status = CheckpointStatus::Skipped;
            }
            StopEffect::Request => run.stop_requested = true,
        }
        run.version = expected + 1;
        let events: Vec<_> = agentplane_engine::platform::execute::run_event(&run).into_iter().collect();
        match app.store.runs().replace_emitting(&run, expected, &events).await {
            Ok(()) => {
                if let Err(err) = app.store.webhooks().dispatch(&events).await {
                    tracing::warn!(error = %err, "could not send a Run's webhook event");
                }
                if run.status == RunStatus::Running {
                    // The execution ends the turn at its next step (its watcher records the
                    // same cancel, should the turn not hold the session yet).
                    let holder = app.store.sessions().turn_holder(&run.project_id, &run.session_id).await;
                    if holder.is_ok_and(|h| h.turn_id.as_deref() == Some(run.turn_id().as_str())) {
                        let _ = app.store.sessions().cancel_turn(&run.project_id, &run.session_id, now).await;
                    }
                    // An executor that died holds no live lease: a delivery now takes the Run
                    // over and settles it `stopped`.
                    if let Err(err) = agentplane_engine::platform::execute::nudge(&app.store, &run).await {
                        tracing::warn!(error = %err, run = %run.id, "could not send a stopped Run's message");
                    }
                }
                return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
            }
            Err(StoreError::Conflict) => {
                run = app
                    .store
                    .runs()
                    .get(&auth.0.project_id, &run.id)
                    .await
                    .or_not_found(PlatformError::RunNotFound)?;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(PlatformError::ConcurrentUpdate)
}
