//! A Run on the wire: the create body, and the two shapes the spec gives a Run (the GET shape
//! with `usage`; the stop/rollback shape with `steeringEnabled`, `error`, `contentDeletedAt`).

use agentplane_domain::platform::public_error;
use agentplane_domain::platform::run::{ChangeKind, CheckpointStatus, DiffStatus, Run, RunStatus};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::platform::wire::StrictBody;

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
