//! The background run object as the client API shows it (snake_case, Unix seconds), and the
//! list's filters.

use agentplane_domain::agent_run::{AgentRun, RunStatus};
use agentplane_domain::session::StopReason;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

/// Where a run is. `queued` and `running` move on by themselves; `requires_action` waits for an
/// answer (or a raised budget); the other three are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = AgentRunStatus)]
pub enum RunStatusName {
    Queued,
    Running,
    RequiresAction,
    Succeeded,
    Failed,
    Canceled,
}

impl From<RunStatus> for RunStatusName {
    fn from(status: RunStatus) -> Self {
        match status {
            RunStatus::Queued => Self::Queued,
            RunStatus::Running => Self::Running,
            RunStatus::RequiresAction => Self::RequiresAction,
            RunStatus::Succeeded => Self::Succeeded,
            RunStatus::Failed => Self::Failed,
            RunStatus::Canceled => Self::Canceled,
        }
    }
}

/// Why a run failed.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentRunError)]
pub struct RunErrorBody {
    pub code: String,
    pub message: String,
}

/// What the run's model calls used.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentRunUsage)]
pub struct RunUsageBody {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

/// The callback the run's end was recorded for.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentRunCallback)]
pub struct RunCallbackBody {
    pub url: String,
    pub event_type: String,
    /// Unix seconds.
    pub recorded_at: i64,
}

/// A background run.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentRun)]
pub struct RunBody {
    /// `run_` and 24 hex characters.
    #[schema(pattern = "^run_[0-9a-f]{24}$")]
    pub id: String,
    /// Always `agent_run`.
    #[schema(pattern = "^agent_run$")]
    pub object: &'static str,
    pub status: RunStatusName,
    pub session_id: String,
    pub agent_id: String,
    /// The turn the run executes (its events carry this `turn_id`).
    pub turn_id: String,
    /// Unix seconds.
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    #[schema(value_type = Option<String>)]
    pub stop_reason: Option<StopReason>,
    pub output_text: Option<String>,
    pub error: Option<RunErrorBody>,
    pub usage: RunUsageBody,
    pub cost_usd: f64,
    /// A cancel was asked for; the run stops at its next step.
    pub cancel_requested: bool,
    /// The actions a `requires_action` run waits for.
    pub pending_action_ids: Vec<String>,
    pub callback_url: Option<String>,
    pub callback: Option<RunCallbackBody>,
    /// Unix seconds: when the run is deleted.
    pub expires_at: i64,
    /// The project's callback signing secret (`whsec_…`), only in the answer of the request
    /// that made it (the project's first run with a callback): shown once, never in reads;
    /// `POST /api/client/v1/callback_secret` rotates it and shows the new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub callback_secret: Option<String>,
}

impl From<&AgentRun> for RunBody {
    fn from(run: &AgentRun) -> Self {
        Self {
            id: run.id.to_string(),
            object: "agent_run",
            status: run.status.into(),
            session_id: run.session_id.to_string(),
            agent_id: run.agent_id.to_string(),
            turn_id: run.id.turn_id(),
            created_at: run.created_at.unix_seconds(),
            started_at: run.started_at.map(|t| t.unix_seconds()),
            ended_at: run.ended_at.map(|t| t.unix_seconds()),
            stop_reason: run.stop_reason,
            output_text: run.output_text.clone(),
            error: run
                .error
                .as_ref()
                .map(|e| RunErrorBody { code: e.code.clone(), message: e.message.clone() }),
            usage: RunUsageBody {
                input_tokens: run.usage.input_tokens,
                output_tokens: run.usage.output_tokens,
                total_tokens: run.usage.total_tokens(),
            },
            cost_usd: run.cost_usd,
            cancel_requested: run.cancel_requested,
            pending_action_ids: run.pending_action_ids.clone(),
            callback_url: run.callback_url.clone(),
            callback: run.callback.as_ref().map(|c| RunCallbackBody {
                url: c.url.clone(),
                event_type: c.event_type.clone(),
                recorded_at: c.recorded_at.unix_seconds(),
            }),
            expires_at: run.expires_at.unix_seconds(),
            callback_secret: None,
        }
    }
}

/// The runs list's filters.
#[derive(Debug, Clone, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct RunsParams {
    /// Only the runs of this session.
    session_id: Option<String>,
    /// Only runs in this status.
    #[param(value_type = Option<RunStatusName>)]
    status: Option<String>,
}
