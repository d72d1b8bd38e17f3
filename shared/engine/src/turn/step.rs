//! A turn's steps: the model call, its tool calls, and one commit per step.

use agentplane_domain::action::{ASK_USER_TOOL, ActionType};
use agentplane_domain::event::payload::{MessageText, ToolCall, ToolResult, UsageRecorded};
use agentplane_domain::event::{EventPayload, NewEvent};
use agentplane_domain::session::StopReason;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::model::{ChatMessage, ModelError, ToolDefinition, WireToolCall};
use crate::ports::OutboxEvent;
use crate::ports::{
    ChatModel, Refused, SessionMove, StepCommit, TranscriptWrite, TurnHold, TurnStore, TurnWriteError,
};

use super::{BudgetHit, Ending, Interrupt, Turn, Write, arguments_of, ended_event};

impl<S: TurnStore, M: ChatModel> Turn<'_, S, M> {
    /// Writes one step; a refusal becomes the interrupt it means.
    pub(super) async fn commit(
        &mut self,
        events_in: &[EventPayload],
        write: Write<'_>,
    ) -> Result<(), Interrupt> {
        let events: Vec<NewEvent> =
            events_in.iter().map(|p| NewEvent::from_payload(p, Some(self.turn_id.clone()))).collect();
        let body = match write.save {
            true => Some(crate::transcript::encode(&self.messages[self.start..], &self.marks)?),
            false => None,
        };
        let emit = if self.webhooks { self.webhook_events(events_in, &write) } else { Vec::new() };
        let commit = StepCommit {
            project: &self.plan.project_id,
            session: &self.plan.session_id,
            turn_id: &self.turn_id,
            now: self.engine.now(),
            events: &events,
            retention_days: self.engine.bus.retention_days(),
            from_seq: self.next_seq,
            usage: write.usage,
            transcript: body.as_deref().map(|body| TranscriptWrite {
                body,
                expected: self.transcript_version,
                replaces: self.transcript_object.as_deref(),
                paused: write.paused,
            }),
            session_move: write.session_move,
            actions: write.actions,
            despite_cancel: write.despite_cancel,
            spend_counter: self.plan.tenant.as_ref().map(|t| t.key.as_str()),
            emit: &emit,
        };
        match self.engine.store.commit(&commit).await {
            Ok(committed) => {
                self.engine.store.dispatch_webhooks(&emit).await;
                if let Some(last) = committed.events.last() {
                    self.next_seq = last.seq + 1;
                }
                if let Some((version, object)) = committed.transcript {
                    self.transcript_version = version;
                    self.transcript_object = object;
                }
                if !committed.events.is_empty() {
                    self.engine.bus.notify(&self.plan.session_id);
                }
                if let Some(watch) = &self.engine.watch {
                    // A watcher that went away is no reason to stop the turn.
                    for event in committed.events {
                        let _ = watch.sink.send(crate::Watched::Committed(event));
                    }
                }
                Ok(())
            }
            Err(TurnWriteError::Refused(Refused::NotHeld)) => Err(self.why_not_held().await),
            Err(TurnWriteError::Refused(_)) => Err(Interrupt::LeaseLost),
            Err(TurnWriteError::Store(err)) => Err(err.into()),
        }
    }

    /// The webhook events a step's write emits: `budget.reached` with the budget's event,
    /// `session.idled` when the session goes idle, `action.required` when it pauses for actions.
    pub(super) fn webhook_events(&self, events: &[EventPayload], write: &Write<'_>) -> Vec<OutboxEvent> {
        use agentplane_domain::webhook::events as hook;
        let (p, s, t) = (&self.plan.project_id, &self.plan.session_id, self.turn_id.as_str());
        let mut found: Vec<(&str, Value)> = Vec::new();
        for event in events {
            if let EventPayload::BudgetReached(b) = event {
                found.push((
                    hook::BUDGET_REACHED,
                    hook::budget_reached(p, s, t, b.on_exceed, b.spent_usd, b.max_cost_usd),
                ));
            }
        }
        match &write.session_move {
            SessionMove::End(reason) => {
                found.push((hook::SESSION_IDLED, hook::session_idled(p, s, t, *reason)))
            }
            SessionMove::Pause { budget: false } => {
                found.push((hook::ACTION_REQUIRED, hook::action_required(p, s, t, write.actions)))
            }
            SessionMove::Pause { budget: true } | SessionMove::Stay | SessionMove::HandOver { .. } => {}
        }
        let now = self.engine.now();
        found
            .into_iter()
            .map(|(kind, data)| {
                let id = agentplane_domain::webhook::MessageId::from_random(crate::random::unique::<12>());
                OutboxEvent::new(id, *p, kind, &data, now)
            })
            .collect()
    }

    pub(super) async fn why_not_held(&self) -> Interrupt {
        match self.engine.store.turn_hold(&self.plan.project_id, &self.plan.session_id, &self.turn_id).await {
            Ok(TurnHold::Cancelled) => Interrupt::Cancelled,
            Ok(TurnHold::Held | TurnHold::Lost) => Interrupt::LeaseLost,
            Err(err) => err.into(),
        }
    }

    /// Stops the turn once the session is deleted or another turn holds it; a recorded cancel
    /// stops it too.
    pub(super) async fn ensure_live(&self) -> Result<(), Interrupt> {
        match self.engine.store.turn_hold(&self.plan.project_id, &self.plan.session_id, &self.turn_id).await?
        {
            TurnHold::Held => Ok(()),
            TurnHold::Cancelled => Err(Interrupt::Cancelled),
            TurnHold::Lost => Err(Interrupt::LeaseLost),
        }
    }

    pub(super) fn ending_of(interrupt: Interrupt) -> Ending {
        match interrupt {
            Interrupt::SessionGone => Ending::SessionGone,
            Interrupt::LeaseLost => Ending::LeaseLost,
            Interrupt::Cancelled => Ending::Cancelled,
            Interrupt::Storage(err) => {
                tracing::error!(error = %err, "storage failed during a turn");
                Ending::Failed("storage_unavailable".into(), "storage failed during the turn".into())
            }
        }
    }

    /// Where `view_image` finds images, when the turn offers it: the running config takes
    /// attachments and its model reads images.
    pub(super) fn image_source(&self) -> Option<&dyn crate::images::ImageSource> {
        let config = &self.plan.config;
        self.engine
            .images
            .as_deref()
            .filter(|images| config.attachments.enabled && images.reads_images(&config.model))
    }

    /// The images this step's `view_image` calls showed, as a user message after its tool
    /// results (where the next model call sees them; later requests get a note instead).
    pub(super) fn show_viewed(&mut self) {
        if self.viewed.is_empty() {
            return;
        }
        let urls = std::mem::take(&mut self.viewed);
        self.messages.push(ChatMessage::User {
            content: crate::model::UserContent::with_images(crate::images::VIEWED_NOTE.into(), &urls),
        });
    }

    /// The tools the model is offered: the agent's, `ask_user` when questions are on, its
    /// client tools, and `view_image` when the turn can show images.
    pub(super) fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let config = &self.plan.config;
        let mut tools = self.engine.tools.definitions(&config.tools);
        if self.image_source().is_some() {
            tools.push(crate::images::definition());
        }
        if config.human_in_the_loop.questions_enabled {
            tools.push(ToolDefinition {
                name: ASK_USER_TOOL.into(),
                description: "Ask the user a question and wait for the answer.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"question": {"type": "string", "description": "What to ask."}},
                    "required": ["question"],
                }),
            });
        }
        tools.extend(config.human_in_the_loop.client_tools.iter().map(|t| ToolDefinition {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        }));
        tools
    }

    /// The action a call waits for, if any.
    pub(super) fn action_type(&self, name: &str) -> Option<ActionType> {
        let hitl = &self.plan.config.human_in_the_loop;
        if name == ASK_USER_TOOL && hitl.questions_enabled {
            Some(ActionType::Question)
        } else if hitl.client_tools.iter().any(|t| t.name == name) {
            Some(ActionType::ClientTool)
        } else if hitl.tool_approvals.iter().any(|t| t == name)
            && self.plan.config.tools.iter().any(|t| t == name)
        {
            Some(ActionType::Approval)
        } else {
            None
        }
    }

    pub(super) async fn drive(&mut self, from_step: u32, check_first: bool) -> Ending {
        match self.steps(from_step, check_first).await {
            Ok(ending) => ending,
            Err(interrupt) => Self::ending_of(interrupt),
        }
    }

    pub(super) async fn steps(&mut self, from_step: u32, check_first: bool) -> Result<Ending, Interrupt> {
        let tools = self.tool_definitions();
        for step in from_step..=self.plan.config.max_steps {
            if Instant::now() >= self.plan.deadline {
                return Ok(Ending::Limit("timeout"));
            }
            // At least one step per invocation, so a handover always makes progress.
            if step > from_step && self.plan.handover_at.is_some_and(|at| Instant::now() >= at) {
                return self.hand_over(step).await;
            }
            // The step's commit checked the hold; a step after a tool round checks it again,
            // so a cancel that came meanwhile costs no model call.
            if step > from_step || check_first {
                self.ensure_live().await?;
            }
            if let Some(budget) = self.plan.spend_budget {
                let spent = self.spent_base + self.cost_usd;
                if budget.reached(spent) {
                    let paused = budget.on_exceed == agentplane_domain::agent::BudgetAction::Pause;
                    let hit = BudgetHit { paused, spent_usd: spent, max_cost_usd: budget.max_cost_usd };
                    if !paused {
                        return Ok(Ending::BudgetStopped(hit));
                    }
                    return self.pause_for_budget(step, hit).await;
                }
            }
            if let Some((key, hit)) = self.tenant_limit_hit().await? {
                // Noted first: a noted pause that never happened is skipped by its reader.
                self.engine
                    .store
                    .note_tenant_pause(&key, &self.plan.project_id, &self.plan.session_id)
                    .await?;
                return self.pause_for_budget(step, hit).await;
            }
            let reply = match self.call_model(&tools).await {
                Ok(reply) => reply,
                Err(ModelError::Timeout) if Instant::now() >= self.plan.deadline => {
                    return Ok(Ending::Limit("timeout"));
                }
                Err(ModelError::StreamBroken { sent }) => {
                    // What the watcher was shown is in the log, marked: never part of the
                    // conversation, never sent again.
                    let mut shown = MessageText::new(sent);
                    shown.extra.insert("interrupted".into(), Value::Bool(true));
                    self.commit(&[EventPayload::AssistantMessage(shown)], Write::default()).await?;
                    let err = ModelError::StreamBroken { sent: String::new() };
                    return Ok(Ending::Failed(err.code().into(), err.to_string()));
                }
                Err(err) => return Ok(Ending::Failed(err.code().into(), err.to_string())),
            };
            // A model without a price is recorded as unpriced, never as a $0 spend.
            let cost = self.engine.prices.cost_usd(&self.plan.config.model, reply.usage);
            self.usage = self.usage + reply.usage;
            self.cost_usd += cost.unwrap_or(0.0);
            if cost.is_none() {
                self.unpriced = self.unpriced + reply.usage;
            }
            let recorded = UsageRecorded {
                step,
                model: self.plan.config.model.clone(),
                input_tokens: reply.usage.input_tokens,
                output_tokens: reply.usage.output_tokens,
                cost_usd: cost.unwrap_or(0.0),
                priced: cost.is_some(),
                extra: Map::new(),
            };
            self.unrecorded = Some((recorded.clone(), reply.usage, cost));
            let usage_event = EventPayload::Usage(recorded);

            if reply.tool_calls.is_empty() {
                let text = reply.text.unwrap_or_default();
                self.messages
                    .push(ChatMessage::Assistant { content: Some(text.clone()), tool_calls: Vec::new() });
                let ended = ended_event(StopReason::EndTurn, None, self.usage, self.unpriced, self.cost_usd);
                let events =
                    [usage_event, EventPayload::AssistantMessage(MessageText::new(text.clone())), ended];
                let write = Write {
                    usage: Some((reply.usage, cost)),
                    save: true,
                    session_move: SessionMove::End(StopReason::EndTurn),
                    ..Write::default()
                };
                if let Err(interrupt) = self.commit(&events, write).await {
                    // Not saved: the answer is not part of the conversation.
                    self.messages.pop();
                    return Err(interrupt);
                }
                self.unrecorded = None;
                return Ok(Ending::Answered(text));
            }

            // All of the step's calls first (as the model asked for them), then each result.
            let mut events = vec![usage_event];
            events.extend(reply.tool_calls.iter().enumerate().map(|(i, call)| {
                EventPayload::ToolCall(ToolCall {
                    step,
                    call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    arguments: arguments_of(call),
                    arguments_text: call.function.arguments.clone(),
                    assistant_text: if i == 0 { reply.text.clone() } else { None },
                    truncated: false,
                    extra: Map::new(),
                })
            }));
            self.messages.push(ChatMessage::Assistant {
                content: reply.text.clone(),
                tool_calls: reply.tool_calls.clone(),
            });
            let waits: Vec<(WireToolCall, Option<ActionType>)> =
                reply.tool_calls.iter().map(|c| (c.clone(), self.action_type(&c.function.name))).collect();
            if waits.iter().any(|(_, kind)| kind.is_some()) {
                return self.pause(step, events, waits, (reply.usage, cost)).await;
            }
            let written =
                self.commit(&events, Write { usage: Some((reply.usage, cost)), ..Write::default() }).await;
            if let Err(interrupt) = written {
                self.messages.pop();
                return Err(interrupt);
            }
            self.unrecorded = None;
            let mut results = Vec::with_capacity(reply.tool_calls.len());
            for call in &reply.tool_calls {
                results.push(self.run_tool(step, call).await);
            }
            self.show_viewed();
            self.commit(&results, Write { save: true, ..Write::default() }).await?;
        }
        Ok(Ending::Limit("max_steps"))
    }

    /// One model call: streamed to the watcher when there is one (each piece of text as it
    /// arrives, under the log position the step's text event will get), else whole.
    async fn call_model(&self, tools: &[ToolDefinition]) -> Result<crate::model::ModelReply, ModelError> {
        let (model, messages, deadline) = (&self.plan.config.model, &self.messages, self.plan.deadline);
        let Some(watch) = self.engine.watch.as_ref().filter(|w| w.text).map(|w| &w.sink) else {
            return self.engine.model.complete(model, messages, tools, deadline).await;
        };
        // The step's events: its usage first, then the text's event.
        let seq = self.next_seq + 1;
        let text = move |delta: &str| {
            let _ = watch.send(crate::Watched::Text { seq, delta: delta.to_owned() });
        };
        self.engine.model.complete_streamed(model, messages, tools, deadline, &text).await
    }

    /// Runs one call and returns its `tool.result`; the result joins the conversation.
    pub(super) async fn run_tool(&mut self, step: u32, call: &WireToolCall) -> EventPayload {
        let remaining = self.plan.deadline.saturating_duration_since(Instant::now());
        let run = async {
            match self.image_source() {
                Some(images) if call.function.name == crate::images::VIEW_IMAGE_TOOL => {
                    let file_id = crate::images::file_id_of(&call.function.arguments)?;
                    let viewed = images.view(&self.plan.project_id, &self.plan.session_id, &file_id).await?;
                    Ok((viewed.about, Some(viewed.url)))
                }
                _ => self
                    .engine
                    .tools
                    .call(&self.plan.config.tools, &call.function.name, &call.function.arguments)
                    .await
                    .map(|output| (output, None)),
            }
        };
        let outcome = tokio::time::timeout(remaining, run)
            .await
            .unwrap_or_else(|_| Err("the tool did not finish before the turn's deadline".into()));
        let outcome = outcome.map(|(output, url)| {
            self.viewed.extend(url);
            output
        });
        let (output, is_error) = match outcome {
            Ok(value) => (value, false),
            Err(message) => (json!(message), true),
        };
        self.result_of(step, call, output, is_error)
    }

    /// A call's result: the event, and the tool message the model reads.
    pub(super) fn result_of(
        &mut self,
        step: u32,
        call: &WireToolCall,
        output: Value,
        is_error: bool,
    ) -> EventPayload {
        let content = match (&output, is_error) {
            (Value::String(message), true) => format!("error: {message}"),
            (other, true) => format!("error: {other}"),
            (other, false) => other.to_string(),
        };
        self.messages.push(ChatMessage::Tool { tool_call_id: call.id.clone(), content });
        EventPayload::ToolResult(ToolResult {
            step,
            call_id: call.id.clone(),
            name: call.function.name.clone(),
            output,
            is_error,
            truncated: false,
            extra: Map::new(),
        })
    }
}
