//! One turn: a user message and everything the agent does until it answers, stops or pauses.
//!
//! Each step is one write ([`TurnStore::commit`]): its events, its usage, the session's state and
//! the transcript together, so a plain turn (one model call) is two writes — begin and end —
//! after the route's one read of the session and its transcript. Every commit holds only while
//! this turn holds the session and no cancel was recorded for it; a refused commit tells the
//! turn that the session was deleted (it stops and writes nothing more), that another turn took
//! it over (it stops and leaves the session to its new holder), or that it was cancelled (it
//! ends with `cancelled`, its last call's spend recorded, its reply unused). Before every model
//! call after the first, one read checks the same.
//!
//! A step whose tool calls need a person (an approval, an `ask_user` question, a client tool)
//! pauses the turn: the commit writes the actions, the transcript with the turn's saved state
//! ([`PausedTurn`]) and `requires_action` on the session, at one transcript version. When the
//! actions are settled, a continuation claims that version once ([`TurnEngine::continue_turn`])
//! and the same turn carries on: each call's result (the tool's, or the answer, denial or
//! expiry) goes to the model.
//!
//! The model's conversation is the session transcript ([`crate::transcript`]); the event log is
//! only written.

use agentplane_domain::action::{Action, ActionId};
use agentplane_domain::agent::{Channel, VersionedConfig};
use agentplane_domain::event::EventPayload;
use agentplane_domain::event::payload::{BudgetReached, TurnEnded, TurnUsage, UsageRecorded};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::{SessionBudget, StopReason};
use agentplane_domain::{ProjectId, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;
use tokio::time::{Duration, Instant};

use crate::TurnEngine;
use crate::model::{ChatMessage, WireToolCall};
use crate::ports::{PortError as StoreError, SessionMove, StoredTranscript};

/// What the route read before the turn: where the session's event log ends and its transcript.
#[derive(Debug, Clone, Default)]
pub struct TurnContext {
    pub last_event_seq: u64,
    pub transcript: Option<StoredTranscript>,
    /// The session's spend before this turn (what its budget is checked against).
    pub spent_usd: f64,
    /// Whether the project has webhook endpoints: the turn's state changes then emit events
    /// (`session.idled`, `action.required`, `budget.reached`) in their own commits.
    pub webhooks: bool,
    /// The session's superseded turns: left out of the conversation the model is given.
    pub superseded: Vec<String>,
}

/// Earlier turns a new turn replaces: the last one (`regenerate`, the same user message again)
/// or an edited message's turn and every later one (`edit`).
#[derive(Debug, Clone, PartialEq)]
pub struct Supersede {
    pub turn_ids: Vec<String>,
    pub reason: agentplane_domain::event::payload::SupersedeReason,
    /// The edited message's event.
    pub event_id: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub agent_id: AgentId,
    pub channel: Channel,
    pub version: Option<u32>,
    pub config: VersionedConfig,
    pub input: String,
    /// When the turn must stop (the synchronous timeout): it then ends with `limit`.
    pub deadline: Instant,
    /// The session as the route read it; `None`: the turn reads it.
    pub context: Option<TurnContext>,
    /// The session budget the turn runs under (the session's own, else the agent's).
    pub budget: Option<SessionBudget>,
    /// The turn's id; `None`: a fresh one (a background run names its own).
    pub turn_id: Option<String>,
    /// When the turn hands itself over to a continuation instead of going on (a background run
    /// nearing its invocation's end); `None`: it never does.
    pub handover_at: Option<Instant>,
    /// The tenant whose monthly spend the turn counts toward, and its limit.
    pub tenant: Option<TenantSpend>,
    /// Short-lived URLs of the session's image files given with this message (the model reads
    /// images); later requests carry a note in their place.
    pub images: Vec<String>,
    /// The earlier turns this one replaces (written with its start: `turn.superseded`).
    pub supersede: Option<Supersede>,
    /// A conversation the caller replays into a new session (its transcript starts with it).
    pub replay: Option<Replay>,
}

/// A conversation held elsewhere, replayed into a new session: `before` is the conversation
/// ahead of this turn's user message, `after` what followed that message within the turn (the
/// model's calls and their results, run by the caller). Neither is in the session's event log:
/// the log starts with this turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    pub before: Vec<ChatMessage>,
    pub after: Vec<ChatMessage>,
}

/// A project of a tenant: the turn's spend is added to the tenant's monthly counter, and at the
/// tenant's limit the turn pauses before its next model call, as for a session budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantSpend {
    pub key: String,
    pub monthly_limit_usd: Option<f64>,
    /// The tenant has webhook endpoints of its own: the turn emits events for them even when
    /// its project has none (read with the tenant, no extra round trip).
    #[serde(default)]
    pub webhooks: bool,
}

/// A session budget that stopped a turn before a model call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetHit {
    /// `true`: the turn waits (raise the budget to carry it on); `false`: it ended.
    pub paused: bool,
    pub spent_usd: f64,
    pub max_cost_usd: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub turn_id: String,
    pub stop_reason: StopReason,
    pub output_text: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    /// The part of `usage` spent on models with no price (not in `cost_usd`).
    pub unpriced: Usage,
    /// Why a turn ended in `error`: a stable code and a message safe to show.
    pub error: Option<(String, String)>,
    /// The actions the turn waits for (`stop_reason: requires_action`).
    pub actions: Vec<Action>,
    /// Set when the session budget paused or ended the turn (`stop_reason: budget_reached`).
    pub budget: Option<BudgetHit>,
    /// Set when the turn handed itself over: the transcript version its continuation claims.
    pub handed_over: Option<u64>,
}

#[derive(Debug, Error)]
pub enum TurnError {
    #[error("another turn is running in this session")]
    Busy,
    #[error("the session's turn waits for actions")]
    ActionsPending(Vec<ActionId>),
    #[error("the session's turn is paused by its budget")]
    BudgetPaused { spent_usd: f64, max_cost_usd: Option<f64> },
    #[error("the model has no price, and a budget applies")]
    ModelNotPriced { model: String },
    #[error("session not found")]
    SessionNotFound,
    #[error(transparent)]
    Storage(StoreError),
}

/// How long past its deadline a turn keeps its session before another turn may take it over.
const HOLD_GRACE_MS: i64 = 60_000;
/// The longest a continuation runs (Lambda's 15 minutes, less room for the bookkeeping).
const CONTINUATION_CEILING: Duration = Duration::from_secs(14 * 60);

/// A paused turn's saved state, kept with the transcript at the version the pause wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PausedTurn {
    pub agent_id: AgentId,
    pub channel: Channel,
    pub version: Option<u32>,
    pub config: VersionedConfig,
    /// The step whose calls wait.
    pub step: u32,
    /// That step's calls in the model's order, with the action each waits for.
    pub calls: Vec<PausedCall>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub unpriced: Usage,
    /// How long the turn may run once it carries on.
    pub budget_ms: u64,
    /// Paused by the session budget (no calls wait): it carries on once the budget is raised.
    #[serde(default)]
    pub for_budget: bool,
    /// The budget the turn ran under (the agent's applies again on carrying on unless the
    /// session has its own by then).
    #[serde(default)]
    pub spend_budget: Option<SessionBudget>,
    /// Handed over (no calls wait, nothing to answer): it carries on at once, with what is left
    /// of its time (`budget_ms`).
    #[serde(default)]
    pub for_handover: bool,
    #[serde(default)]
    pub tenant: Option<TenantSpend>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PausedCall {
    pub call: WireToolCall,
    pub action_id: Option<ActionId>,
}

/// How the loop ended, before bookkeeping.
enum Ending {
    /// Answered; the ending is written.
    Answered(String),
    /// Paused for actions; written.
    Paused(Vec<Action>),
    /// Paused by the budget; written.
    BudgetPaused(BudgetHit),
    /// The budget ended it (`on_exceed: stop`).
    BudgetStopped(BudgetHit),
    /// Handed over to a continuation; written.
    HandedOver,
    Limit(&'static str),
    Failed(String, String),
    /// A cancel was recorded for this turn: it ends with `cancelled`.
    Cancelled,
    /// The session was deleted while the turn ran: nothing more is written for it.
    SessionGone,
    /// Another turn holds the session now: nothing more is written, the session is not released.
    LeaseLost,
}

/// Why the loop stopped before an ending of its own.
enum Interrupt {
    SessionGone,
    LeaseLost,
    Cancelled,
    Storage(StoreError),
}

impl From<StoreError> for Interrupt {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Self::SessionGone,
            other => Self::Storage(other),
        }
    }
}

/// The config and limits a turn runs with, from its request or its saved state.
struct Plan {
    project_id: ProjectId,
    session_id: SessionId,
    agent_id: AgentId,
    channel: Channel,
    version: Option<u32>,
    config: VersionedConfig,
    deadline: Instant,
    budget: Duration,
    spend_budget: Option<SessionBudget>,
    handover_at: Option<Instant>,
    tenant: Option<TenantSpend>,
}

struct Turn<'a, S, M> {
    engine: &'a TurnEngine<S, M>,
    plan: Plan,
    turn_id: String,
    usage: Usage,
    cost_usd: f64,
    unpriced: Usage,
    /// The session's spend apart from this turn's (the budget counts both).
    spent_base: f64,
    /// The budget that ended the turn (`on_exceed: stop`).
    budget_hit: Option<BudgetHit>,
    /// A model call's usage not written yet (a refused commit): the ending writes it.
    unrecorded: Option<(UsageRecorded, Usage, Option<f64>)>,
    /// Where the next append starts: one past the last event this turn wrote.
    next_seq: u64,
    /// The transcript version this turn holds, and the S3 object it lives in.
    transcript_version: u64,
    transcript_object: Option<String>,
    messages: Vec<ChatMessage>,
    /// `messages[start..]` is the transcript (the instructions come first, afresh each turn).
    start: usize,
    /// Where each turn of the transcript begins, this one's last.
    marks: Vec<crate::transcript::TurnMark>,
    /// Whether its state changes emit webhook events (the project has endpoints).
    webhooks: bool,
    /// URLs of the images this step's `view_image` calls showed, for the next model call.
    viewed: Vec<String>,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

fn storage(err: StoreError) -> TurnError {
    match err {
        StoreError::NotFound => TurnError::SessionNotFound,
        other => TurnError::Storage(other),
    }
}

fn ended_event(
    stop_reason: StopReason,
    limit: Option<&str>,
    usage: Usage,
    unpriced: Usage,
    cost_usd: f64,
) -> EventPayload {
    EventPayload::TurnEnded(TurnEnded {
        stop_reason,
        limit: limit.map(str::to_owned),
        usage: TurnUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens(),
            unpriced_input_tokens: unpriced.input_tokens,
            unpriced_output_tokens: unpriced.output_tokens,
        },
        cost_usd,
        extra: Map::new(),
    })
}

/// What a step's commit writes besides its events.
struct Write<'a> {
    usage: Option<(Usage, Option<f64>)>,
    save: bool,
    paused: Option<&'a str>,
    session_move: SessionMove,
    actions: &'a [Action],
    despite_cancel: bool,
}

impl Default for Write<'_> {
    fn default() -> Self {
        Self {
            usage: None,
            save: false,
            paused: None,
            session_move: SessionMove::Stay,
            actions: &[],
            despite_cancel: false,
        }
    }
}

fn budget_event(hit: BudgetHit) -> EventPayload {
    EventPayload::BudgetReached(BudgetReached {
        spent_usd: hit.spent_usd,
        max_cost_usd: hit.max_cost_usd,
        on_exceed: if hit.paused {
            agentplane_domain::agent::BudgetAction::Pause
        } else {
            agentplane_domain::agent::BudgetAction::Stop
        },
        extra: Map::new(),
    })
}

/// A call's arguments as JSON, or the model's text when it was not JSON.
fn arguments_of(call: &WireToolCall) -> Value {
    serde_json::from_str(&call.function.arguments).unwrap_or(Value::String(call.function.arguments.clone()))
}

mod finish;
mod pause;
mod start;
mod step;
#[cfg(test)]
mod tests;
