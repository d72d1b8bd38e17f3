//! A session's latest turn as its Response reads it back: found in the session's event log (the
//! newest turn, or the one holding the session) and read into what `POST /responses` answers a
//! finished call with: a `TurnOutcome` and the output items, plus whether the turn still runs.

use agentplane_domain::Timestamp;
use agentplane_domain::action::Action;
use agentplane_domain::event::payload::{BudgetReached, TurnEnded, TurnStarted};
use agentplane_domain::event::{Event, EventPayload, EventType};
use agentplane_domain::page::{Order, PageLimit};
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::{RuntimeStatus, Session, StopReason};
use agentplane_engine::TurnOutcome;
use agentplane_engine::turn::BudgetHit;

use super::output::{Items, OutputItem};
use crate::App;
use crate::client::error::ClientError;

/// The events of the session's latest turn, oldest first (none: the session has had no turn).
/// Read from the end of the log back to the turn's `turn.started`; the turn holding the session
/// is the latest even before its first event is in.
pub async fn events(app: &App, session: &Session) -> Result<Vec<Event>, ClientError> {
    let limit = PageLimit::new(100)?;
    let mut turn = session.current_turn_id.clone();
    let mut found = Vec::new();
    let mut before = None;
    loop {
        let page = app.store.events().page(&session.id, before, Order::Desc, limit, None).await?;
        before = page.items.last().map(|e| e.seq).or(before);
        for event in page.items {
            let Some(of) = event.turn_id.as_deref() else { continue };
            if turn.is_none() {
                turn = Some(of.to_owned());
            }
            if turn.as_deref() != Some(of) {
                continue;
            }
            let started = event.kind == EventType::TurnStarted;
            found.push(event);
            if started {
                found.reverse();
                return Ok(found);
            }
        }
        if !page.has_more {
            found.reverse();
            return Ok(found);
        }
    }
}

/// A turn read from its events and the session as it is now.
pub struct LatestTurn {
    pub started: TurnStarted,
    pub started_at: Timestamp,
    pub outcome: TurnOutcome,
    pub output: Vec<OutputItem>,
    /// It has not stopped: neither ended nor paused.
    pub running: bool,
}

impl LatestTurn {
    /// The turn of `events` (oldest first, one turn's); `session` settled, `actions` those of
    /// the session still pending. `None` when the events hold no `turn.started`.
    pub fn read(session: &Session, events: &[Event], actions: Vec<Action>) -> Option<Self> {
        let mut started = None;
        let mut ended: Option<TurnEnded> = None;
        let mut answer = None;
        let mut error = None;
        let mut budget: Option<BudgetReached> = None;
        let (mut usage, mut unpriced, mut cost_usd) = (Usage::default(), Usage::default(), 0.0);
        let mut items = Items::new(session.id);
        for event in events {
            items.push(event);
            match event.payload() {
                EventPayload::TurnStarted(t) => started = Some((t, event.created_at)),
                EventPayload::AssistantMessage(m) => answer = Some(m.text),
                EventPayload::Error(f) => error = Some((f.code, f.message)),
                EventPayload::BudgetReached(b) => budget = Some(b),
                EventPayload::TurnEnded(t) => ended = Some(t),
                EventPayload::Usage(u) => {
                    let tokens = if u.priced { &mut usage } else { &mut unpriced };
                    tokens.input_tokens += u.input_tokens;
                    tokens.output_tokens += u.output_tokens;
                    cost_usd += u.cost_usd;
                }
                _ => {}
            }
        }
        let (started, started_at) = started?;
        let turn_id = events.first().and_then(|e| e.turn_id.clone()).unwrap_or_default();
        let holds = session.current_turn_id.as_deref() == Some(turn_id.as_str());
        let (stop_reason, running) = match (&ended, session.runtime_status) {
            (Some(t), _) => (t.stop_reason, false),
            (None, RuntimeStatus::Running) if holds => (StopReason::EndTurn, true),
            (None, RuntimeStatus::RequiresAction) if holds => (StopReason::RequiresAction, false),
            (None, RuntimeStatus::BudgetPaused) if holds => (StopReason::BudgetReached, false),
            // Unended and not holding the session: its holder died (the session, settled, says so).
            (None, _) => (session.stop_reason.unwrap_or(StopReason::Error), false),
        };
        if let Some(t) = &ended {
            // The end's totals: the usage events add the priced and unpriced calls up apart.
            usage = Usage { input_tokens: t.usage.input_tokens, output_tokens: t.usage.output_tokens };
            unpriced = Usage {
                input_tokens: t.usage.unpriced_input_tokens,
                output_tokens: t.usage.unpriced_output_tokens,
            };
            cost_usd = t.cost_usd;
        } else {
            usage.input_tokens += unpriced.input_tokens;
            usage.output_tokens += unpriced.output_tokens;
        }
        let outcome = TurnOutcome {
            stop_reason,
            output_text: answer.filter(|_| stop_reason == StopReason::EndTurn),
            usage,
            cost_usd,
            unpriced,
            error: error.filter(|_| stop_reason == StopReason::Error),
            actions: if stop_reason == StopReason::RequiresAction {
                actions.into_iter().filter(|a| a.turn_id == turn_id).collect()
            } else {
                Vec::new()
            },
            budget: budget.filter(|_| stop_reason == StopReason::BudgetReached).map(|b| BudgetHit {
                paused: ended.is_none(),
                spent_usd: b.spent_usd,
                max_cost_usd: b.max_cost_usd,
            }),
            turn_id,
            handed_over: None,
        };
        Some(Self { started, started_at, outcome, output: items.into_items(), running })
    }
}

#[cfg(test)]
mod tests {
    use agentplane_domain::agent::Channel;
    use agentplane_domain::event::NewEvent;
    use agentplane_domain::event::payload::{MessageText, TurnUsage, UsageRecorded};
    use agentplane_domain::session::NewSession;
    use agentplane_domain::{ProjectId, SessionId};
    use serde_json::Map;

    use super::*;

    fn event(session: SessionId, seq: u64, payload: &EventPayload) -> Event {
        let new = NewEvent::from_payload(payload, Some("turn_1".into()));
        Event {
            session_id: session,
            seq,
            kind: new.kind,
            turn_id: new.turn_id,
            data: new.data,
            created_at: Timestamp::from_unix_seconds(100 + seq as i64),
        }
    }

    fn session(status: RuntimeStatus, turn: Option<&str>) -> Session {
        let id = SessionId::from_random([3; 16]);
        let mut session = NewSession::default().into_session(
            id,
            ProjectId::from_random([4; 16]),
            Timestamp::from_unix_seconds(0),
        );
        session.runtime_status = status;
        session.current_turn_id = turn.map(str::to_owned);
        session
    }

    fn started() -> EventPayload {
        EventPayload::TurnStarted(TurnStarted {
            agent_id: agentplane_domain::ids::AgentId::from_random([5; 16]),
            channel: Channel::Published,
            version: Some(2),
            model: "gpt-4o-mini".into(),
            extra: Map::new(),
        })
    }

    fn usage(priced: bool) -> EventPayload {
        EventPayload::Usage(UsageRecorded {
            step: 1,
            model: "m".into(),
            input_tokens: 10,
            output_tokens: 5,
            cost_usd: if priced { 0.5 } else { 0.0 },
            priced,
            extra: Map::new(),
        })
    }

    #[test]
    fn a_running_turn_reads_in_progress_with_the_usage_so_far() {
        let s = session(RuntimeStatus::Running, Some("turn_1"));
        let log = [
            event(s.id, 1, &started()),
            event(s.id, 2, &EventPayload::UserMessage(MessageText::new("hi"))),
            event(s.id, 3, &usage(true)),
            event(s.id, 4, &usage(false)),
        ];
        let turn = LatestTurn::read(&s, &log, Vec::new()).expect("a turn");
        assert!(turn.running);
        assert_eq!(turn.outcome.usage, Usage { input_tokens: 20, output_tokens: 10 });
        assert_eq!(turn.outcome.unpriced, Usage { input_tokens: 10, output_tokens: 5 });
        assert!((turn.outcome.cost_usd - 0.5).abs() < 1e-12);
        assert_eq!(turn.started.version, Some(2));
        assert_eq!(turn.started_at.unix_seconds(), 101);
        assert_eq!(turn.outcome.turn_id, "turn_1");
    }

    #[test]
    fn an_ended_turn_reads_its_end_and_its_answer() {
        let s = session(RuntimeStatus::Idle, None);
        let ended = EventPayload::TurnEnded(TurnEnded {
            stop_reason: StopReason::EndTurn,
            limit: None,
            usage: TurnUsage {
                input_tokens: 7,
                output_tokens: 3,
                total_tokens: 10,
                unpriced_input_tokens: 0,
                unpriced_output_tokens: 0,
            },
            cost_usd: 0.25,
            extra: Map::new(),
        });
        let log = [
            event(s.id, 1, &started()),
            event(s.id, 2, &usage(true)),
            event(s.id, 3, &EventPayload::AssistantMessage(MessageText::new("done"))),
            event(s.id, 4, &ended),
        ];
        let turn = LatestTurn::read(&s, &log, Vec::new()).expect("a turn");
        assert!(!turn.running);
        assert_eq!(turn.outcome.stop_reason, StopReason::EndTurn);
        assert_eq!(turn.outcome.output_text.as_deref(), Some("done"));
        assert_eq!(turn.outcome.usage, Usage { input_tokens: 7, output_tokens: 3 });
        assert_eq!(turn.output.len(), 1);
    }

    #[test]
    fn an_unended_turn_that_no_longer_holds_the_session_reads_as_the_session_settled_it() {
        let mut s = session(RuntimeStatus::Idle, None);
        s.stop_reason = Some(StopReason::Error);
        let log = [event(s.id, 1, &started())];
        let turn = LatestTurn::read(&s, &log, Vec::new()).expect("a turn");
        assert!(!turn.running);
        assert_eq!(turn.outcome.stop_reason, StopReason::Error);
        assert!(LatestTurn::read(&s, &[], Vec::new()).is_none(), "no turn.started: no turn");
    }
}
