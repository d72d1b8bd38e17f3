//! Sessions: one conversation with an agent. The client session, the platform Session and the
//! Core session are this one record.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::{BudgetAction, Channel};
use crate::ids::AgentId;
use crate::metadata::Metadata;
use crate::pricing::Usage;
use crate::{ProjectId, SessionId, Timestamp, ValidationError};

pub const MAX_TITLE_CHARS: usize = 256;

/// What the session is doing now. `Idle` includes a session that has never run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeStatus {
    #[default]
    Idle,
    Running,
    RequiresAction,
    BudgetPaused,
}

/// Why the last turn stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    RequiresAction,
    Limit,
    Cancelled,
    Error,
    BudgetReached,
}

/// Where the session's runtime lives: nowhere, on the customer's hosts, or on managed compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentMode {
    #[default]
    None,
    SelfHosted,
    OpenaiHosted,
}

impl EnvironmentMode {
    /// Whether a session in this mode may have `environment`: a none session has no
    /// environment; self_hosted and openai_hosted ones always have one. Core's runtime rules call
    /// any other pair an inconsistent identity (a 500 for the whole read), so no such session is
    /// ever stored.
    pub fn admits(self, environment: Option<&crate::telemetry::EnvironmentId>) -> bool {
        match self {
            Self::None => environment.is_none(),
            Self::SelfHosted | Self::OpenaiHosted => environment.is_some(),
        }
    }

    pub fn from_json(param: &str, value: Option<&Value>) -> Result<Self, ValidationError> {
        match value {
            None | Some(Value::Null) => Ok(Self::None),
            Some(Value::String(s)) => match s.as_str() {
                "none" => Ok(Self::None),
                "self_hosted" => Ok(Self::SelfHosted),
                "openai_hosted" => Ok(Self::OpenaiHosted),
                _ => Err(ValidationError::new(
                    param,
                    format!("`{param}` must be one of none, self_hosted, openai_hosted"),
                )),
            },
            Some(_) => Err(ValidationError::new(param, format!("`{param}` must be a string"))),
        }
    }
}

/// An optional title: `null` or a string of at most 256 characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Title(String);

impl Title {
    /// A title from a model's answer: its first non-empty line, without surrounding quotes,
    /// a `Title:` prefix or a final period, whitespace collapsed, at most 80 characters.
    /// `None` when nothing is left.
    pub fn generated(answer: &str) -> Option<Self> {
        let line = answer.lines().map(str::trim).find(|l| !l.is_empty())?;
        let line = line.strip_prefix("Title:").or_else(|| line.strip_prefix("title:")).unwrap_or(line);
        let line = line.trim().trim_matches(|c: char| matches!(c, '"' | '\'' | '*' | '`' | '“' | '”')).trim();
        let line = line.strip_suffix('.').unwrap_or(line);
        let words: Vec<&str> = line.split_whitespace().collect();
        let text: String = words.join(" ").chars().take(80).collect();
        let text = text.trim().to_owned();
        (!text.is_empty()).then_some(Self(text))
    }

    pub fn from_json(param: &str, value: &Value) -> Result<Option<Self>, ValidationError> {
        match value {
            Value::Null => Ok(None),
            Value::String(s) if s.chars().count() <= MAX_TITLE_CHARS => Ok(Some(Self(s.clone()))),
            Value::String(_) => Err(ValidationError::new(
                param,
                format!("`{param}` may be at most {MAX_TITLE_CHARS} characters"),
            )),
            _ => Err(ValidationError::new(param, format!("`{param}` must be a string or null"))),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A cap on what the whole session may spend, and what happens when it is reached.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SessionBudget {
    pub max_cost_usd: f64,
    pub on_exceed: BudgetAction,
}

impl SessionBudget {
    /// A budget of `max_cost_usd` (finite, not negative; `param` names it when it is not).
    pub fn new(param: &str, max_cost_usd: f64, on_exceed: BudgetAction) -> Result<Self, ValidationError> {
        let Some(max_cost_usd) = crate::pricing::usd_amount(max_cost_usd) else {
            return Err(ValidationError::new(
                format!("{param}.max_cost_usd"),
                format!("`{param}.max_cost_usd` must be a number of USD from 0 to 1000000000"),
            ));
        };
        Ok(Self { max_cost_usd, on_exceed })
    }

    /// The budget a turn runs under: the session's own, else the agent's (read live).
    pub fn effective(session: Option<Self>, execution: &crate::agent::Execution) -> Option<Self> {
        session.or_else(|| {
            execution
                .max_cost_usd
                .map(|max_cost_usd| Self { max_cost_usd, on_exceed: execution.budget_action })
        })
    }

    /// Whether `spent_usd` has reached the cap (a model call is not made at the cap).
    pub fn reached(&self, spent_usd: f64) -> bool {
        spent_usd >= self.max_cost_usd
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: SessionId,
    pub project_id: ProjectId,
    pub agent_id: Option<AgentId>,
    pub title: Option<Title>,
    pub metadata: Metadata,
    pub environment_mode: EnvironmentMode,
    /// The environment the session runs in; set for every mode but none (Core telemetry names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<crate::telemetry::EnvironmentId>,
    pub runtime_status: RuntimeStatus,
    pub stop_reason: Option<StopReason>,
    /// Which config the session's turns run (set by the turn that last ran).
    #[serde(default)]
    pub agent_channel: Option<Channel>,
    /// Measured usage: the sum of every recorded turn's token snapshot, running turns included.
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub cost_usd: f64,
    /// Tokens of models with no configured price (part of `usage`, not of `cost_usd`): kept
    /// apart so that an unpriced model never reads as a $0 spend.
    #[serde(default)]
    pub unpriced_input_tokens: u64,
    #[serde(default)]
    pub unpriced_output_tokens: u64,
    /// Until when the running turn holds the session; past it (and its grace, which the engine
    /// adds) the turn's process died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_held_until: Option<Timestamp>,
    /// The highest event sequence number a turn of this session wrote: where the next turn's
    /// appends start (a hint; other writers may have appended since).
    #[serde(default)]
    pub last_event_seq: u64,
    /// The session's own budget (`None`: the agent's applies, if it has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<SessionBudget>,
    /// The turn holding the session (running or paused); written by the turn's own writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_turn_id: Option<String>,
    /// The saved-state version a paused turn's continuation claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_version: Option<u64>,
    /// Turns replaced by a later one (a regenerated answer, an edited message): kept in the
    /// log, left out of the model's conversation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded_turns: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Session {
    /// Whether its mode and its environment agree (see [`EnvironmentMode::admits`]).
    pub fn placement_is_consistent(&self) -> bool {
        self.environment_mode.admits(self.environment_id.as_ref())
    }

    /// True when a turn still reads as running although its hold has run out: its process
    /// died (a Lambda timeout, a crash) before it could release the session.
    pub fn holder_died(&self, now: Timestamp) -> bool {
        self.runtime_status == RuntimeStatus::Running && self.turn_held_until.is_some_and(|until| until < now)
    }

    /// The session as it is at `now`: a turn whose holder died ended in `error`, so the
    /// session is `idle` again (the next write records it).
    pub fn settled(mut self, now: Timestamp) -> Self {
        if self.holder_died(now) {
            self.runtime_status = RuntimeStatus::Idle;
            self.stop_reason = Some(StopReason::Error);
            self.turn_held_until = None;
        }
        self
    }

    pub fn unpriced_usage(&self) -> Usage {
        Usage { input_tokens: self.unpriced_input_tokens, output_tokens: self.unpriced_output_tokens }
    }
}

/// What a client may set when creating a session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewSession {
    pub agent_id: Option<AgentId>,
    pub title: Option<Title>,
    pub metadata: Metadata,
    pub environment_mode: EnvironmentMode,
    pub budget: Option<SessionBudget>,
}

impl NewSession {
    pub fn into_session(self, id: SessionId, project_id: ProjectId, now: Timestamp) -> Session {
        Session {
            id,
            project_id,
            agent_id: self.agent_id,
            title: self.title,
            metadata: self.metadata,
            environment_mode: self.environment_mode,
            environment_id: None,
            runtime_status: RuntimeStatus::Idle,
            stop_reason: None,
            agent_channel: None,
            usage: Usage::default(),
            cost_usd: 0.0,
            unpriced_input_tokens: 0,
            unpriced_output_tokens: 0,
            turn_held_until: None,
            last_event_seq: 0,
            budget: self.budget,
            current_turn_id: None,
            pause_version: None,
            superseded_turns: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// What a client may change. `title: Some(None)` clears the title.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionPatch {
    pub title: Option<Option<Title>>,
    pub metadata: Option<Metadata>,
    /// `Some(None)` removes the session's own budget (the agent's applies again).
    pub budget: Option<Option<SessionBudget>>,
}

impl SessionPatch {
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.metadata.is_none() && self.budget.is_none()
    }

    pub fn apply(self, session: &mut Session, now: Timestamp) {
        if let Some(title) = self.title {
            session.title = title;
        }
        if let Some(metadata) = self.metadata {
            session.metadata = metadata;
        }
        if let Some(budget) = self.budget {
            session.budget = budget;
        }
        session.updated_at = now;
    }
}

#[cfg(test)]
mod title_tests {
    use super::Title;

    #[test]
    fn a_generated_title_is_one_clean_short_line() {
        let t = |a: &str| Title::generated(a).map(|t| t.as_str().to_owned());
        assert_eq!(t("\n  \"Trip to  Paris.\"\nmore"), Some("Trip to Paris".into()));
        assert_eq!(t("Title: Budget review"), Some("Budget review".into()));
        assert_eq!(t("   \n\n"), None);
        assert_eq!(t("\"\""), None);
        assert_eq!(t(&"word ".repeat(40)).map(|s| s.chars().count()), Some(79));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_new_session_is_idle_with_no_stop_reason() {
        let s = NewSession::default().into_session(
            SessionId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            Timestamp::from_unix_millis(5),
        );
        assert_eq!(s.runtime_status, RuntimeStatus::Idle);
        assert_eq!(s.stop_reason, None);
        assert_eq!(s.environment_mode, EnvironmentMode::None);
        assert_eq!(s.created_at, s.updated_at);
    }

    #[test]
    fn only_a_none_session_lacks_an_environment() {
        let env = crate::telemetry::EnvironmentId::from_random([3; 16]);
        assert!(EnvironmentMode::None.admits(None));
        assert!(!EnvironmentMode::None.admits(Some(&env)));
        for mode in [EnvironmentMode::SelfHosted, EnvironmentMode::OpenaiHosted] {
            assert!(mode.admits(Some(&env)));
            assert!(!mode.admits(None));
        }
    }

    #[test]
    fn a_turn_whose_holder_died_reads_as_ended_in_error() {
        let mut s = NewSession::default().into_session(
            SessionId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            Timestamp::from_unix_millis(5),
        );
        s.runtime_status = RuntimeStatus::Running;
        s.turn_held_until = Some(Timestamp::from_unix_millis(100));
        let within = s.clone().settled(Timestamp::from_unix_millis(100));
        assert_eq!(within.runtime_status, RuntimeStatus::Running);
        assert_eq!(within.stop_reason, None);
        let past = s.clone().settled(Timestamp::from_unix_millis(101));
        assert_eq!(past.runtime_status, RuntimeStatus::Idle);
        assert_eq!(past.stop_reason, Some(StopReason::Error));
        // A session idle since has nothing to settle, whatever hold it last had.
        s.runtime_status = RuntimeStatus::Idle;
        s.stop_reason = Some(StopReason::EndTurn);
        assert_eq!(s.clone().settled(Timestamp::from_unix_millis(1_000)), s);
    }

    #[test]
    fn titles_and_modes_validate() {
        assert_eq!(Title::from_json("title", &Value::Null), Ok(None));
        assert!(Title::from_json("title", &json!(1)).is_err());
        assert!(Title::from_json("title", &json!("x".repeat(257))).is_err());
        assert_eq!(
            EnvironmentMode::from_json("m", Some(&json!("openai_hosted"))),
            Ok(EnvironmentMode::OpenaiHosted)
        );
        assert!(EnvironmentMode::from_json("m", Some(&json!("cloud"))).is_err());
    }
}
