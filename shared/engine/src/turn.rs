//! One turn: a user message and everything the agent does until it answers or stops. Every step
//! is written to the event log as it happens. The session is held (`running`) for the whole
//! turn and always released, whatever ends it. A turn whose session is deleted stops at its
//! next step: the session is checked before every model call and every append, and usage is
//! added only to a live session (a conditional write), so nothing more is recorded for it. The
//! same check stops a turn that lost its hold (another turn took the session over after this
//! one's hold ran out): it writes nothing more, and leaves the session to its new holder.
//! The same read tells the turn that it was cancelled (`POST …/sessions/{id}/cancel`, from any
//! process): it then makes no further model call and ends with `cancelled`.
//!
//! The model's conversation is the session transcript ([`crate::transcript`]), read whole at
//! the start of the turn and saved at the end of every step; the event log is only written.
//!
//! The loop runs over the engine's ports ([`crate::ports`]): any session store, transcript store
//! and event log, any model.

use agentplane_domain::agent::{Channel, VersionedConfig};
use agentplane_domain::event::payload::{
    MessageText, ToolCall, ToolResult, TurnEnded, TurnFailure, TurnStarted, TurnUsage, UsageRecorded,
};
use agentplane_domain::event::{EventPayload, NewEvent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::StopReason;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use serde_json::{Map, Value, json};
use thiserror::Error;
use tokio::time::Instant;

use crate::TurnEngine;
use crate::model::{ChatMessage, ModelError};
use crate::ports::{ChatModel, EventLog, PortError as StoreError, SessionTurns, TranscriptStore, TurnHold};

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
}

#[derive(Debug, Error)]
pub enum TurnError {
    #[error("another turn is running in this session")]
    Busy,
    #[error("session not found")]
    SessionNotFound,
    #[error(transparent)]
    Storage(StoreError),
}

/// How long past its deadline a turn keeps its session before another turn may take it over.
const HOLD_GRACE_MS: i64 = 60_000;

/// How the loop ended, before bookkeeping.
enum Ending {
    Answer(String),
    Limit(&'static str),
    Failed(String, String),
    /// The session was deleted while the turn ran: nothing more is written for it.
    SessionGone,
    /// Another turn holds the session now: nothing more is written, the session is not released.
    LeaseLost,
    /// A cancel was recorded for this turn: it ends with `cancelled`.
    Cancelled,
}

/// Why the loop stopped before an ending of its own.
enum Interrupt {
    SessionGone,
    LeaseLost,
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

struct Turn<'a, S, M> {
    engine: &'a TurnEngine<S, M>,
    request: &'a TurnRequest,
    turn_id: String,
    usage: Usage,
    cost_usd: f64,
    unpriced: Usage,
    /// Where the next append starts: one past the last event this turn wrote.
    next_seq: Option<u64>,
    /// A cancel was seen by the last check of the hold: the loop stops at the next decision.
    cancelled: bool,
}

impl<S: SessionTurns + EventLog + TranscriptStore, M: ChatModel> TurnEngine<S, M> {
    /// Runs a turn to its end. Call it from a spawned task: the turn must finish (and release
    /// the session) even when the caller goes away.
    pub async fn run_turn(&self, request: TurnRequest) -> Result<TurnOutcome, TurnError> {
        let turn_id = format!("turn_{}", crate::random_hex::<12>());
        let now = self.now();
        // The session is ours until the deadline plus a grace for the bookkeeping after it;
        // past that, a new turn may take it over from a holder that died.
        let remaining = request.deadline.saturating_duration_since(Instant::now());
        let hold_until =
            now.plus_millis(i64::try_from(remaining.as_millis()).unwrap_or(i64::MAX / 2) + HOLD_GRACE_MS);
        match self
            .store
            .begin_turn(
                &request.project_id,
                &request.session_id,
                &turn_id,
                &request.agent_id,
                request.channel,
                now,
                hold_until,
            )
            .await
        {
            Ok(_) => {}
            Err(StoreError::Conflict) => return Err(TurnError::Busy),
            Err(StoreError::NotFound) => return Err(TurnError::SessionNotFound),
            Err(other) => return Err(TurnError::Storage(other)),
        }
        let mut turn = Turn {
            engine: self,
            request: &request,
            turn_id,
            usage: Usage::default(),
            cost_usd: 0.0,
            unpriced: Usage::default(),
            next_seq: None,
            cancelled: false,
        };
        let ending = match turn.drive().await {
            Ok(ending) => ending,
            Err(Interrupt::SessionGone) => Ending::SessionGone,
            Err(Interrupt::LeaseLost) => Ending::LeaseLost,
            Err(Interrupt::Storage(err)) => {
                tracing::error!(error = %err, "storage failed during a turn");
                Ending::Failed("storage_unavailable".into(), "storage failed during the turn".into())
            }
        };
        if matches!(ending, Ending::SessionGone) {
            tracing::info!(session = %request.session_id, "the session was deleted during its turn; the turn stopped");
            return Err(TurnError::SessionNotFound);
        }
        if matches!(ending, Ending::LeaseLost) {
            tracing::warn!(session = %request.session_id, "a turn lost its hold on the session; the turn stopped");
            return Ok(turn.outcome(
                StopReason::Error,
                None,
                Some((
                    "turn_lease_lost".into(),
                    "another turn took the session over; this turn stopped".into(),
                )),
            ));
        }
        Ok(turn.finish(ending).await)
    }
}

impl<S: SessionTurns + EventLog + TranscriptStore, M: ChatModel> Turn<'_, S, M> {
    async fn log(&mut self, payload: EventPayload) -> Result<(), Interrupt> {
        self.log_many(vec![payload]).await
    }

    /// Stops the turn once the session is deleted (or gone) or another turn holds it; notes a
    /// recorded cancel (the turn still holds the session, and ends it with `cancelled`).
    async fn ensure_live(&mut self) -> Result<(), Interrupt> {
        match self
            .engine
            .store
            .turn_hold(&self.request.project_id, &self.request.session_id, &self.turn_id)
            .await?
        {
            TurnHold::Held => Ok(()),
            TurnHold::Cancelled => {
                self.cancelled = true;
                Ok(())
            }
            TurnHold::Lost => Err(Interrupt::LeaseLost),
        }
    }

    async fn log_many(&mut self, events: Vec<EventPayload>) -> Result<(), Interrupt> {
        self.ensure_live().await?;
        let events = events.iter().map(|p| NewEvent::from_payload(p, Some(self.turn_id.clone()))).collect();
        let appended = self
            .engine
            .bus
            .append_from(
                &self.engine.store,
                &self.request.session_id,
                events,
                self.engine.now(),
                self.next_seq,
            )
            .await?;
        if let Some(last) = appended.last() {
            self.next_seq = Some(last.seq + 1);
        }
        Ok(())
    }

    async fn drive(&mut self) -> Result<Ending, Interrupt> {
        let request = self.request;
        let (history, mut version) = self.load_transcript().await?;
        let mut messages = Vec::new();
        if !request.config.instructions.is_empty() {
            messages.push(ChatMessage::System { content: request.config.instructions.clone() });
        }
        // The transcript is what follows the instructions.
        let start = messages.len();
        messages.extend(history);
        messages.push(ChatMessage::User { content: request.input.clone() });
        self.log_many(vec![
            EventPayload::TurnStarted(TurnStarted {
                agent_id: request.agent_id,
                channel: request.channel,
                version: request.version,
                model: request.config.model.clone(),
                extra: Map::new(),
            }),
            EventPayload::UserMessage(MessageText::new(request.input.clone())),
        ])
        .await?;
        let tools = self.engine.tools.definitions(&request.config.tools);

        for step in 1..=request.config.max_steps {
            if Instant::now() >= request.deadline {
                return Ok(Ending::Limit("timeout"));
            }
            self.ensure_live().await?;
            if self.cancelled {
                return Ok(Ending::Cancelled);
            }
            let reply = match self
                .engine
                .model
                .complete(&request.config.model, &messages, &tools, request.deadline)
                .await
            {
                Ok(reply) => reply,
                Err(ModelError::Timeout) if Instant::now() >= request.deadline => {
                    return Ok(Ending::Limit("timeout"));
                }
                Err(err) => return Ok(Ending::Failed(err.code().into(), err.to_string())),
            };
            // A model without a price is recorded as unpriced, never as a $0 spend.
            let cost = self.engine.prices.cost_usd(&request.config.model, reply.usage);
            self.usage = self.usage + reply.usage;
            self.cost_usd += cost.unwrap_or(0.0);
            if cost.is_none() {
                self.unpriced = self.unpriced + reply.usage;
            }
            self.engine.store.add_usage(&request.project_id, &request.session_id, reply.usage, cost).await?;
            self.log(EventPayload::Usage(UsageRecorded {
                step,
                model: request.config.model.clone(),
                input_tokens: reply.usage.input_tokens,
                output_tokens: reply.usage.output_tokens,
                cost_usd: cost.unwrap_or(0.0),
                priced: cost.is_some(),
                extra: Map::new(),
            }))
            .await?;
            // A cancel that came while the model worked: the spend is recorded, the reply unused.
            if self.cancelled {
                return Ok(Ending::Cancelled);
            }

            if reply.tool_calls.is_empty() {
                let text = reply.text.unwrap_or_default();
                self.log(EventPayload::AssistantMessage(MessageText::new(text.clone()))).await?;
                messages.push(ChatMessage::Assistant { content: Some(text.clone()), tool_calls: Vec::new() });
                self.save_transcript(&messages[start..], &mut version).await?;
                return Ok(Ending::Answer(text));
            }

            // All of the step's calls first (as the model asked for them), then each result.
            let calls: Vec<EventPayload> = reply
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    let arguments: Value = serde_json::from_str(&call.function.arguments)
                        .unwrap_or(Value::String(call.function.arguments.clone()));
                    EventPayload::ToolCall(ToolCall {
                        step,
                        call_id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments,
                        arguments_text: call.function.arguments.clone(),
                        assistant_text: if i == 0 { reply.text.clone() } else { None },
                        truncated: false,
                        extra: Map::new(),
                    })
                })
                .collect();
            self.log_many(calls).await?;
            messages.push(ChatMessage::Assistant {
                content: reply.text.clone(),
                tool_calls: reply.tool_calls.clone(),
            });
            for call in &reply.tool_calls {
                let remaining = request.deadline.saturating_duration_since(Instant::now());
                let outcome = tokio::time::timeout(
                    remaining,
                    self.engine.tools.call(
                        &request.config.tools,
                        &call.function.name,
                        &call.function.arguments,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err("the tool did not finish before the turn's deadline".into()));
                let (output, is_error, content) = match outcome {
                    Ok(value) => (value.clone(), false, value.to_string()),
                    Err(message) => (json!(message), true, format!("error: {message}")),
                };
                self.log(EventPayload::ToolResult(ToolResult {
                    step,
                    call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    output,
                    is_error,
                    truncated: false,
                    extra: Map::new(),
                }))
                .await?;
                messages.push(ChatMessage::Tool { tool_call_id: call.id.clone(), content });
            }
            self.save_transcript(&messages[start..], &mut version).await?;
        }
        Ok(Ending::Limit("max_steps"))
    }

    /// The session's transcript and its version (a session without one starts empty: 0).
    async fn load_transcript(&self) -> Result<(Vec<ChatMessage>, u64), Interrupt> {
        let stored =
            self.engine.store.load_transcript(&self.request.project_id, &self.request.session_id).await?;
        match stored {
            Some(stored) => Ok((crate::transcript::decode(&stored.body)?, stored.version)),
            None => Ok((Vec::new(), 0)),
        }
    }

    /// Saves the conversation at the end of a step, over the version this turn read or last
    /// wrote. Another writer in between means this turn no longer holds the session.
    async fn save_transcript(&self, messages: &[ChatMessage], version: &mut u64) -> Result<(), Interrupt> {
        let body = crate::transcript::encode(messages)?;
        match self
            .engine
            .store
            .save_transcript(
                &self.request.project_id,
                &self.request.session_id,
                &body,
                *version,
                &self.turn_id,
            )
            .await
        {
            Ok(saved) => {
                *version = saved;
                Ok(())
            }
            Err(StoreError::Conflict) => Err(Interrupt::LeaseLost),
            Err(err) => Err(err.into()),
        }
    }

    /// Records the end and releases the session; storage failures here are logged, never
    /// swallowed into a wrong answer.
    async fn finish(mut self, ending: Ending) -> TurnOutcome {
        let (stop_reason, output_text, error, detail) = match ending {
            Ending::Answer(text) => (StopReason::EndTurn, Some(text), None, None),
            Ending::Limit(which) => (StopReason::Limit, None, None, Some(which)),
            Ending::Cancelled => (StopReason::Cancelled, None, None, None),
            Ending::Failed(code, message) => (StopReason::Error, None, Some((code, message)), None),
            Ending::SessionGone | Ending::LeaseLost => {
                (StopReason::Cancelled, None, None, Some("session_deleted"))
            }
        };
        if let Some((code, message)) = &error
            && let Err(err) = self
                .log(EventPayload::Error(TurnFailure {
                    code: code.clone(),
                    message: message.clone(),
                    extra: Map::new(),
                }))
                .await
        {
            err.trace("could not record a turn error");
        }
        let ended = EventPayload::TurnEnded(TurnEnded {
            stop_reason,
            limit: detail.map(str::to_owned),
            usage: TurnUsage {
                input_tokens: self.usage.input_tokens,
                output_tokens: self.usage.output_tokens,
                total_tokens: self.usage.total_tokens(),
                unpriced_input_tokens: self.unpriced.input_tokens,
                unpriced_output_tokens: self.unpriced.output_tokens,
            },
            cost_usd: self.cost_usd,
            extra: Map::new(),
        });
        if let Err(err) = self.log(ended).await {
            err.trace("could not record the end of a turn");
        }
        let now: Timestamp = self.engine.now();
        if let Err(err) = self
            .engine
            .store
            .end_turn(&self.request.project_id, &self.request.session_id, &self.turn_id, stop_reason, now)
            .await
        {
            tracing::error!(error = %err, "could not release the session after a turn");
        }
        self.outcome(stop_reason, output_text, error)
    }

    fn outcome(
        self,
        stop_reason: StopReason,
        output_text: Option<String>,
        error: Option<(String, String)>,
    ) -> TurnOutcome {
        TurnOutcome {
            turn_id: self.turn_id,
            stop_reason,
            output_text,
            usage: self.usage,
            cost_usd: self.cost_usd,
            unpriced: self.unpriced,
            error,
        }
    }
}

impl Interrupt {
    fn trace(&self, what: &str) {
        match self {
            Self::SessionGone => tracing::info!("{what}: the session was deleted"),
            Self::LeaseLost => tracing::warn!("{what}: another turn holds the session"),
            Self::Storage(err) => tracing::error!(error = %err, "{what}"),
        }
    }
}

#[cfg(test)]
mod tests;
