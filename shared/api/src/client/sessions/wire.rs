//! The sessions routes' wire: request bodies as read, the session object as the client API
//! shows it (snake_case, Unix seconds).

use std::collections::BTreeMap;

use agentplane_domain::ValidationError;
use agentplane_domain::agent::BudgetAction;
use agentplane_domain::ids::AgentId;
use agentplane_domain::session::{
    EnvironmentMode, NewSession, RuntimeStatus, Session, SessionBudget, SessionPatch, StopReason, Title,
};
use agentplane_domain::{SessionId, metadata::Metadata};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::client::wire::metadata;

/// `POST /api/client/v1/sessions`: every field optional (an empty body too). Unknown fields are
/// ignored, for clients that send newer ones.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CreateSession {
    /// An agent of the caller's project; another project's agent answers 404.
    pub agent_id: Option<String>,
    /// At most 256 characters.
    #[schema(max_length = 256)]
    pub title: Option<String>,
    /// At most 16 string values; keys 1 to 64 characters, values at most 512.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Where the session's runtime lives (default `none`).
    #[schema(value_type = Option<EnvironmentModeName>)]
    pub environment_mode: Option<String>,
    /// The session's own budget (absent: the agent's `config.execution` budget applies).
    pub budget: Option<BudgetInput>,
}

/// A session budget: what the whole session may spend, and what a turn does at the cap.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    /// USD, 0 to 1000000000 (kept to the nano-dollar).
    #[schema(minimum = 0, maximum = 1_000_000_000)]
    pub max_cost_usd: f64,
    /// `pause` (default): the turn waits, resumable by raising the budget; `stop`: it ends
    /// with `budget_reached`.
    #[serde(default)]
    #[schema(value_type = Option<BudgetActionName>)]
    pub on_exceed: Option<BudgetAction>,
}

impl BudgetInput {
    fn into_budget(self, param: &str) -> Result<SessionBudget, ValidationError> {
        SessionBudget::new(param, self.max_cost_usd, self.on_exceed.unwrap_or(BudgetAction::Pause))
    }
}

/// What a turn does when the session budget is reached.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = BudgetAction)]
pub enum BudgetActionName {
    Pause,
    Stop,
}

impl From<BudgetAction> for BudgetActionName {
    fn from(action: BudgetAction) -> Self {
        match action {
            BudgetAction::Pause => Self::Pause,
            BudgetAction::Stop => Self::Stop,
        }
    }
}

/// The session's own budget as shown (its spend is the session's `cost_usd`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SessionBudget)]
pub struct BudgetBody {
    pub max_cost_usd: f64,
    pub on_exceed: BudgetActionName,
}

impl TryFrom<CreateSession> for NewSession {
    type Error = ValidationError;

    fn try_from(body: CreateSession) -> Result<Self, ValidationError> {
        let agent_id = body
            .agent_id
            .map(|text| {
                text.parse::<AgentId>()
                    .map_err(|_| ValidationError::new("agent_id", "`agent_id` must be an agent id"))
            })
            .transpose()?;
        Ok(NewSession {
            agent_id,
            title: body.title.map(|t| Title::from_json("title", &Value::String(t))).transpose()?.flatten(),
            metadata: body.metadata.map(|m| metadata("metadata", m)).transpose()?.unwrap_or_default(),
            environment_mode: EnvironmentMode::from_json(
                "environment_mode",
                body.environment_mode.map(Value::String).as_ref(),
            )?,
            budget: body.budget.map(|b| b.into_budget("budget")).transpose()?,
        })
    }
}

/// `PATCH /api/client/v1/sessions/{session_id}`: `title` and/or `metadata`, at least one.
/// `null` clears a field; an absent field is left as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(min_properties = 1)]
pub struct UpdateSession {
    /// At most 256 characters; `null` removes the title.
    #[serde(default, deserialize_with = "crate::body::nullable")]
    #[schema(value_type = Option<String>, max_length = 256)]
    pub title: Option<Option<String>>,
    /// Replaces the whole metadata; `null` empties it.
    #[serde(default, deserialize_with = "crate::body::nullable")]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Option<Option<BTreeMap<String, String>>>,
    /// The session's own budget; `null` removes it (the agent's applies again). Raising it
    /// above the spend carries a turn paused by the budget on.
    #[serde(default, deserialize_with = "crate::body::nullable")]
    #[schema(value_type = Option<BudgetInput>)]
    pub budget: Option<Option<BudgetInput>>,
}

impl TryFrom<UpdateSession> for SessionPatch {
    type Error = ValidationError;

    fn try_from(body: UpdateSession) -> Result<Self, ValidationError> {
        let title = match body.title {
            None => None,
            Some(None) => Some(None),
            Some(Some(text)) => Some(Title::from_json("title", &Value::String(text))?),
        };
        let metadata = match body.metadata {
            None => None,
            Some(None) => Some(Metadata::default()),
            Some(Some(map)) => Some(metadata("metadata", map)?),
        };
        let budget = match body.budget {
            None => None,
            Some(None) => Some(None),
            Some(Some(budget)) => Some(Some(budget.into_budget("budget")?)),
        };
        let patch = SessionPatch { title, metadata, budget };
        if patch.is_empty() {
            return Err(ValidationError::body("give `title`, `metadata` or `budget` to change"));
        }
        Ok(patch)
    }
}

/// Where a session's runtime lives: nowhere, on the customer's hosts, or on managed compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = EnvironmentMode)]
pub enum EnvironmentModeName {
    None,
    SelfHosted,
    OpenaiHosted,
}

impl From<EnvironmentMode> for EnvironmentModeName {
    fn from(mode: EnvironmentMode) -> Self {
        match mode {
            EnvironmentMode::None => Self::None,
            EnvironmentMode::SelfHosted => Self::SelfHosted,
            EnvironmentMode::OpenaiHosted => Self::OpenaiHosted,
        }
    }
}

/// What the session is doing now (`idle` includes a session that never ran).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = RuntimeStatus)]
pub enum RuntimeStatusName {
    Idle,
    Running,
    RequiresAction,
    BudgetPaused,
}

impl From<RuntimeStatus> for RuntimeStatusName {
    fn from(status: RuntimeStatus) -> Self {
        match status {
            RuntimeStatus::Idle => Self::Idle,
            RuntimeStatus::Running => Self::Running,
            RuntimeStatus::RequiresAction => Self::RequiresAction,
            RuntimeStatus::BudgetPaused => Self::BudgetPaused,
        }
    }
}

/// Why the session's last turn stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = StopReason)]
pub enum StopReasonName {
    EndTurn,
    RequiresAction,
    Limit,
    Cancelled,
    Error,
    BudgetReached,
}

impl From<StopReason> for StopReasonName {
    fn from(stop: StopReason) -> Self {
        match stop {
            StopReason::EndTurn => Self::EndTurn,
            StopReason::RequiresAction => Self::RequiresAction,
            StopReason::Limit => Self::Limit,
            StopReason::Cancelled => Self::Cancelled,
            StopReason::Error => Self::Error,
            StopReason::BudgetReached => Self::BudgetReached,
        }
    }
}

/// Measured usage: every recorded turn's tokens, a running turn's included.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SessionUsage)]
pub struct SessionUsageBody {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The part spent on models with no price: counted, but not in `cost_usd`.
    pub unpriced_input_tokens: u64,
    pub unpriced_output_tokens: u64,
}

/// A session: one conversation with an agent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Session)]
pub struct SessionBody {
    #[schema(value_type = String)]
    pub id: SessionId,
    /// Always `session`.
    #[schema(value_type = String, pattern = "^session$")]
    pub object: &'static str,
    #[schema(value_type = Option<String>)]
    pub agent_id: Option<AgentId>,
    pub title: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub environment_mode: EnvironmentModeName,
    pub runtime_status: RuntimeStatusName,
    pub stop_reason: Option<StopReasonName>,
    pub usage: SessionUsageBody,
    /// Spend in USD on priced models.
    pub cost_usd: f64,
    /// The session's own budget (`null`: the agent's applies, if any).
    pub budget: Option<BudgetBody>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

impl From<&Session> for SessionBody {
    fn from(session: &Session) -> Self {
        Self {
            id: session.id,
            object: "session",
            agent_id: session.agent_id,
            title: session.title.as_ref().map(|t| t.as_str().to_owned()),
            metadata: session.metadata.as_map().clone(),
            environment_mode: session.environment_mode.into(),
            runtime_status: session.runtime_status.into(),
            stop_reason: session.stop_reason.map(Into::into),
            usage: SessionUsageBody {
                input_tokens: session.usage.input_tokens,
                output_tokens: session.usage.output_tokens,
                total_tokens: session.usage.total_tokens(),
                unpriced_input_tokens: session.unpriced_input_tokens,
                unpriced_output_tokens: session.unpriced_output_tokens,
            },
            cost_usd: session.cost_usd,
            budget: session
                .budget
                .map(|b| BudgetBody { max_cost_usd: b.max_cost_usd, on_exceed: b.on_exceed.into() }),
            created_at: session.created_at.unix_seconds(),
            updated_at: session.updated_at.unix_seconds(),
        }
    }
}

/// What `DELETE /api/client/v1/sessions/{session_id}` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionDeleted {
    #[schema(value_type = String)]
    pub id: SessionId,
    /// Always `session.deleted`.
    #[schema(value_type = String, pattern = "^session\\.deleted$")]
    pub object: &'static str,
    /// Always `true`.
    pub deleted: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::body::from_object;

    fn read<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ValidationError> {
        match value {
            Value::Object(map) => from_object(map),
            _ => Err(ValidationError::body("not an object")),
        }
    }

    fn create(value: Value) -> Result<NewSession, ValidationError> {
        read::<CreateSession>(value).and_then(NewSession::try_from)
    }

    fn patch(value: Value) -> Result<SessionPatch, ValidationError> {
        read::<UpdateSession>(value).and_then(SessionPatch::try_from)
    }

    #[test]
    fn everything_is_optional_on_create() {
        assert_eq!(create(json!({})), Ok(NewSession::default()));
        let nulls = json!({"agent_id": null, "title": null, "metadata": null, "environment_mode": null});
        assert_eq!(create(nulls), Ok(NewSession::default()));
    }

    #[test]
    fn wrong_types_name_their_field() {
        for (body, param) in [
            (json!({"title": 3}), "title"),
            (json!({"title": "x".repeat(257)}), "title"),
            (json!({"agent_id": "x"}), "agent_id"),
            (json!({"agent_id": 7}), "agent_id"),
            (json!({"metadata": []}), "metadata"),
            (json!({"metadata": {"a": 1}}), "metadata.a"),
            (json!({"metadata": {"a": "x".repeat(513)}}), "metadata.a"),
            (json!({"environment_mode": "cloud"}), "environment_mode"),
            (json!({"environment_mode": 1}), "environment_mode"),
        ] {
            let err = create(body.clone()).err();
            assert_eq!(err.and_then(|e| e.param).as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn a_patch_tells_null_from_absent() {
        assert!(patch(json!({})).is_err());
        assert_eq!(patch(json!({"title": null})).map(|p| (p.title, p.metadata)), Ok((Some(None), None)));
        assert_eq!(
            patch(json!({"metadata": null})).map(|p| (p.title, p.metadata)),
            Ok((None, Some(Metadata::default())))
        );
        let err = patch(json!({"title": ["x"]})).err().and_then(|e| e.param);
        assert_eq!(err.as_deref(), Some("title"));
    }
}
