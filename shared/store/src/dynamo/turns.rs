//! A turn's writes, each one transaction: the session's state (held, usage, idle, paused), the
//! events of the step, the transcript and the actions of a pause commit together or not at all.
//! A plain turn is two of them (begin, end), after one read of the session and its transcript.
//!
//! Event numbers stay gapless: each event is a put of `seq` that must not exist yet, in the same
//! transaction; when a number is taken (another writer appended), nothing of the transaction
//! remains and it is tried again from the log's end. `last_event_seq` on the session tells the
//! next turn where the log ended without a query.

use std::collections::HashMap;

use agentplane_domain::action::Action;
use agentplane_domain::agent::Channel;
use agentplane_domain::event::{Event, NewEvent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::{Session, StopReason};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, KeysAndAttributes, Put, ReturnValue, TransactWriteItem, Update,
};

use super::events::EventItem;
use super::keys::{project_pk, session_sk};
use super::transcripts::{INLINE_TRANSCRIPT_BYTES, transcript_object_key, transcript_sk};
use super::{backend, s};
use crate::{Store, StoreError, StoredTranscript};

/// Every live-session condition says this: the item exists and was not deleted.
const LIVE: &str = "attribute_exists(PK) AND attribute_not_exists(deleted_at)";
/// DynamoDB's most items in one transaction.
const MAX_TRANSACTION_ITEMS: usize = 100;
/// How often a write is tried again after losing an event number or a transaction race.
const ATTEMPTS: usize = 8;

/// Why a turn's write was refused (nothing of it remains).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A live turn holds the session.
    Busy,
    /// The session's turn is paused for actions.
    Paused,
    /// The session's turn is paused by its budget.
    BudgetPaused,
    /// No live session.
    Gone,
    /// Another writer saved the transcript since the caller read it.
    TranscriptMoved,
    /// The writing turn no longer holds the session, or a cancel was recorded for it: the
    /// caller reads the hold to tell which.
    NotHeld,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnWriteError {
    #[error("refused: {0:?}")]
    Refused(Refused),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<serde_dynamo::Error> for TurnWriteError {
    fn from(err: serde_dynamo::Error) -> Self {
        Self::Store(err.into())
    }
}

/// Starting a turn.
#[derive(Debug, Clone)]
pub struct TurnStart<'a> {
    pub project: &'a ProjectId,
    pub session: &'a SessionId,
    pub turn_id: &'a str,
    pub agent: &'a AgentId,
    pub channel: Channel,
    pub now: Timestamp,
    pub hold_until: Timestamp,
    /// The turn's first events (`turn.started`, the user's message).
    pub events: &'a [NewEvent],
    pub retention_days: i64,
    /// One past the last event number the caller knows of.
    pub from_seq: u64,
    /// The transcript version the caller read (0: none).
    pub transcript_version: u64,
    /// Earlier turns this one replaces (regenerate, edit): added to the session's
    /// `superseded_turns` in the same write.
    pub supersedes: &'a [String],
}

/// What the session does after a step.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionMove {
    /// The turn holds it on.
    Stay,
    /// The turn ends: idle, with this stop reason.
    End(StopReason),
    /// The turn pauses for the commit's actions (`requires_action`), or for its budget
    /// (`budget`: `budget_paused`); the transcript version this commit writes is the one a
    /// continuation claims.
    Pause { budget: bool },
    /// The turn hands itself over to a continuation (a background run nearing its invocation's
    /// end): the session stays `running` and held until `hold_until`, and the transcript version
    /// this commit writes is the one the continuation claims.
    HandOver { hold_until: Timestamp },
}

/// The transcript a step saves.
#[derive(Debug, Clone)]
pub struct TranscriptWrite<'a> {
    pub body: &'a str,
    /// The version the turn holds (0: none yet).
    pub expected: u64,
    /// The S3 object the held version lives in, if any (deleted once replaced).
    pub replaces: Option<&'a str>,
    /// The saved state of a pausing turn.
    pub paused: Option<&'a str>,
}

/// One step of a turn, written at once.
#[derive(Debug, Clone)]
pub struct StepCommit<'a> {
    pub project: &'a ProjectId,
    pub session: &'a SessionId,
    pub turn_id: &'a str,
    pub now: Timestamp,
    pub events: &'a [NewEvent],
    pub retention_days: i64,
    pub from_seq: u64,
    /// A model call's usage (`None` cost: unpriced).
    pub usage: Option<(Usage, Option<f64>)>,
    pub transcript: Option<TranscriptWrite<'a>>,
    pub session_move: SessionMove,
    /// The actions a pausing step creates.
    pub actions: &'a [Action],
    /// Write even though a cancel was recorded for the turn (the commit that ends it so).
    pub despite_cancel: bool,
    /// The tenant key whose monthly spend counter the usage's cost is added to (a project of
    /// a tenant), in the same transaction.
    pub spend_counter: Option<&'a str>,
    /// The webhook events this step emits, written in its transaction (see `webhook_events`).
    pub emit: &'a [crate::OutboxEvent],
}

/// What a committed step wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub events: Vec<Event>,
    /// The transcript's new version and the S3 object it lives in (if any).
    pub transcript: Option<(u64, Option<String>)>,
}

pub struct TurnWrites<'a> {
    store: &'a Store,
}

fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn attr<T: serde::Serialize>(value: T) -> Result<AttributeValue, StoreError> {
    Ok(serde_dynamo::to_attribute_value(value)?)
}

/// The index of the first item a cancelled transaction failed on, and whether any failed on
/// a race with another transaction (worth retrying as is).
fn cancellation(
    err: &SdkError<TransactWriteItemsError, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> Option<(Option<usize>, bool)> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
            let reasons = c.cancellation_reasons();
            let failed = reasons.iter().position(|r| r.code() == Some("ConditionalCheckFailed"));
            let raced = reasons.iter().any(|r| r.code() == Some("TransactionConflict"));
            Some((failed, raced))
        }
        Some(TransactWriteItemsError::TransactionInProgressException(_)) => Some((None, true)),
        _ => None,
    }
}

impl<'a> TurnWrites<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// A live session and its transcript in one read (both strongly consistent).
    pub async fn session_with_transcript(
        &self,
        project: &ProjectId,
        id: &SessionId,
    ) -> Result<(Session, Option<StoredTranscript>), StoreError> {
        let key =
            |sk: String| HashMap::from([("PK".to_owned(), s(project_pk(project))), ("SK".to_owned(), s(sk))]);
        let mut request = Some(
            KeysAndAttributes::builder()
                .keys(key(session_sk(id)))
                .keys(key(transcript_sk(id)))
                .consistent_read(true)
                .build()
                .map_err(StoreError::unavailable)?,
        );
        let mut items = Vec::new();
        for _ in 0..ATTEMPTS {
            let Some(keys) = request.take() else { break };
            let out = self
                .store
                .dynamo
                .batch_get_item()
                .request_items(self.table(), keys)
                .send()
                .await
                .map_err(backend)?;
            items.extend(out.responses.and_then(|mut r| r.remove(self.table())).unwrap_or_default());
            request = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(self.table()))
                .filter(|k| !k.keys().is_empty());
        }
        if request.is_some() {
            return Err(StoreError::unavailable("batch read left keys unprocessed"));
        }
        let sk_of =
            |item: &HashMap<String, AttributeValue>| item.get("SK").and_then(|v| v.as_s().ok()).cloned();
        let session_key = session_sk(id);
        let mut session = None;
        let mut transcript = None;
        for item in items {
            if sk_of(&item).as_deref() == Some(session_key.as_str()) {
                if item.contains_key("deleted_at") {
                    return Err(StoreError::NotFound);
                }
                session = Some(item);
            } else {
                transcript = Some(self.store.transcripts().decode(&item).await?);
            }
        }
        let session = session.ok_or(StoreError::NotFound)?;
        let session: super::sessions::SessionRecord = serde_dynamo::from_item(session)?;
        Ok((session.session, transcript))
    }

    /// Holds the session for a new turn (idle, or its holder died) and appends its first
    /// events, over the transcript version the caller read.
    pub async fn begin(&self, start: &TurnStart<'_>) -> Result<Vec<Event>, TurnWriteError> {
        let mut from = start.from_seq.max(1);
        for attempt in 0..ATTEMPTS {
            let last = from + start.events.len() as u64 - 1;
            // A turn that replaces earlier ones records them on the session in this write.
            let mut expression =
                "SET runtime_status = :running, current_turn_id = :turn, agent_id = :agent, \
                 agent_channel = :channel, updated_at = :now, turn_held_until = :hold, \
                 last_event_seq = :last"
                    .to_owned();
            if !start.supersedes.is_empty() {
                expression.push_str(
                    ", superseded_turns = list_append(if_not_exists(superseded_turns, :none), :sup)",
                );
            }
            let mut update = Update::builder()
                .table_name(self.table())
                .key("PK", s(project_pk(start.project)))
                .key("SK", s(session_sk(start.session)))
                .condition_expression(format!(
                    "{LIVE} AND (runtime_status = :idle OR (runtime_status = :running AND turn_held_until < :now))"
                ))
                .update_expression(expression)
                .expression_attribute_values(":hold", attr(start.hold_until)?)
                .expression_attribute_values(":idle", s("idle"))
                .expression_attribute_values(":running", s("running"))
                .expression_attribute_values(":turn", s(start.turn_id))
                .expression_attribute_values(":agent", attr(start.agent)?)
                .expression_attribute_values(":channel", attr(start.channel)?)
                .expression_attribute_values(":now", attr(start.now)?)
                .expression_attribute_values(":last", n(last));
            if !start.supersedes.is_empty() {
                update = update
                    .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
                    .expression_attribute_values(
                        ":sup",
                        AttributeValue::L(start.supersedes.iter().map(|t| s(t.as_str())).collect()),
                    );
            }
            let mut items = vec![
                TransactWriteItem::builder().update(update.build().map_err(StoreError::unavailable)?).build(),
            ];
            let mut check = ConditionCheck::builder()
                .table_name(self.table())
                .key("PK", s(project_pk(start.project)))
                .key("SK", s(transcript_sk(start.session)));
            check = if start.transcript_version == 0 {
                check.condition_expression("attribute_not_exists(PK)")
            } else {
                check
                    .condition_expression("version = :v")
                    .expression_attribute_values(":v", n(start.transcript_version))
            };
            items.push(
                TransactWriteItem::builder()
                    .condition_check(check.build().map_err(StoreError::unavailable)?)
                    .build(),
            );
            let events = self.event_puts(
                start.session,
                start.events,
                from,
                start.now,
                start.retention_days,
                &mut items,
            )?;
            match self.store.dynamo.transact_write_items().set_transact_items(Some(items)).send().await {
                Ok(_) => return Ok(events),
                Err(err) => match cancellation(&err) {
                    Some((Some(0), _)) => {
                        return Err(TurnWriteError::Refused(
                            self.why_not_idle(start.project, start.session).await?,
                        ));
                    }
                    Some((Some(1), _)) => return Err(TurnWriteError::Refused(Refused::TranscriptMoved)),
                    Some((Some(_), _)) => from = self.store.events().last_seq(start.session).await? + 1,
                    Some((None, true)) => backoff(attempt).await,
                    _ => return Err(backend(err).into()),
                },
            }
        }
        Err(StoreError::unavailable("a turn could not begin: its writes kept racing").into())
    }

    /// Why a session could not be held: a live turn holds it, it is paused, or it is gone.
    async fn why_not_idle(&self, project: &ProjectId, id: &SessionId) -> Result<Refused, StoreError> {
        match self.store.sessions().get(project, id).await {
            Ok(session) => Ok(match session.runtime_status {
                agentplane_domain::session::RuntimeStatus::RequiresAction => Refused::Paused,
                agentplane_domain::session::RuntimeStatus::BudgetPaused => Refused::BudgetPaused,
                _ => Refused::Busy,
            }),
            Err(StoreError::NotFound) => Ok(Refused::Gone),
            Err(err) => Err(err),
        }
    }

    fn event_puts(
        &self,
        session: &SessionId,
        events: &[NewEvent],
        from: u64,
        now: Timestamp,
        retention_days: i64,
        items: &mut Vec<TransactWriteItem>,
    ) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::with_capacity(events.len());
        for (i, event) in events.iter().enumerate() {
            let item = EventItem::new(session, from + i as u64, event, now, retention_days)?;
            let put = Put::builder()
                .table_name(&self.store.names.events_table)
                .set_item(Some(serde_dynamo::to_item(&item)?))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)?;
            items.push(TransactWriteItem::builder().put(put).build());
            out.push(item.into_event());
        }
        Ok(out)
    }

    /// Writes one step of the turn `commit.turn_id` holds, all or nothing.
    pub async fn commit(&self, commit: &StepCommit<'_>) -> Result<Committed, TurnWriteError> {
        // A step with more events than a transaction holds writes the first ones ahead.
        let fixed = 1 + usize::from(commit.transcript.is_some()) + commit.actions.len() + commit.emit.len();
        let room = MAX_TRANSACTION_ITEMS.saturating_sub(fixed).max(1);
        let mut from = commit.from_seq.max(1);
        let mut ahead = Vec::new();
        let split = commit.events.len().saturating_sub(room);
        if split > 0 {
            ahead = self
                .store
                .events()
                .append(
                    commit.session,
                    commit.events[..split].to_vec(),
                    commit.now,
                    commit.retention_days,
                    Some(from),
                )
                .await?;
            from = ahead.last().map_or(from, |e| e.seq + 1);
        }
        let events = &commit.events[split..];
        let object = self.put_transcript_object(commit).await?;
        for attempt in 0..ATTEMPTS {
            let mut items =
                vec![self.session_update(commit, (from + events.len() as u64).saturating_sub(1))?];
            let transcript_version = match &commit.transcript {
                Some(t) => {
                    items.push(self.transcript_put(commit, t, object.as_deref())?);
                    Some(t.expected + 1)
                }
                None => None,
            };
            let events_at = items.len();
            let written =
                self.event_puts(commit.session, events, from, commit.now, commit.retention_days, &mut items)?;
            for action in commit.actions {
                items.push(
                    TransactWriteItem::builder().put(super::actions::put_new(self.store, action)?).build(),
                );
            }
            if let (Some(key), Some((_, Some(cost)))) = (commit.spend_counter, commit.usage) {
                let nanos = agentplane_domain::tenant::nanos_of(cost);
                if nanos > 0 {
                    let month = agentplane_domain::tenant::month_of(commit.now);
                    items.push(self.store.tenants().add_spend(key, &month, nanos)?);
                }
            }
            for event in commit.emit {
                items.push(self.store.webhooks().emit_item(event)?);
            }
            match self.store.dynamo.transact_write_items().set_transact_items(Some(items)).send().await {
                Ok(_) => {
                    if let (Some(old), Some(_)) =
                        (commit.transcript.as_ref().and_then(|t| t.replaces), &transcript_version)
                        && object.as_deref() != Some(old)
                        && let Err(err) = self.store.transcripts_objects()?.delete(old).await
                    {
                        tracing::warn!(error = %err, "could not delete a replaced transcript object");
                    }
                    let mut all = ahead;
                    all.extend(written);
                    return Ok(Committed {
                        events: all,
                        transcript: transcript_version.map(|v| (v, object)),
                    });
                }
                Err(err) => {
                    let refused = match cancellation(&err) {
                        Some((Some(0), _)) => Some(Refused::NotHeld),
                        Some((Some(1), _)) if commit.transcript.is_some() => Some(Refused::TranscriptMoved),
                        Some((Some(i), _)) if i >= events_at && i < events_at + events.len() => {
                            from = self.store.events().last_seq(commit.session).await? + 1;
                            None
                        }
                        Some((Some(_), _)) => Some(Refused::NotHeld),
                        Some((None, true)) => {
                            backoff(attempt).await;
                            None
                        }
                        _ => return Err(backend(err).into()),
                    };
                    if let Some(refused) = refused {
                        if let Some(key) = &object
                            && let Err(e) = self.store.transcripts_objects()?.delete(key).await
                        {
                            tracing::warn!(error = %e, "could not delete a transcript object that lost its write");
                        }
                        return Err(TurnWriteError::Refused(refused));
                    }
                }
            }
        }
        Err(StoreError::unavailable("a turn's step could not be written: its writes kept racing").into())
    }

    /// A body past the item limit goes to S3 first; the item then points at it.
    async fn put_transcript_object(&self, commit: &StepCommit<'_>) -> Result<Option<String>, StoreError> {
        let Some(t) = &commit.transcript else { return Ok(None) };
        if t.body.len() <= INLINE_TRANSCRIPT_BYTES {
            return Ok(None);
        }
        let key = transcript_object_key(commit.project, commit.session, t.expected + 1, commit.turn_id);
        self.store.transcripts_objects()?.put(&key, t.body.as_bytes().to_vec()).await?;
        Ok(Some(key))
    }

    fn transcript_put(
        &self,
        commit: &StepCommit<'_>,
        t: &TranscriptWrite<'_>,
        object: Option<&str>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut put = Put::builder()
            .table_name(self.table())
            .item("PK", s(project_pk(commit.project)))
            .item("SK", s(transcript_sk(commit.session)))
            .item("version", n(t.expected + 1))
            .item("bytes", n(t.body.len() as u64));
        put = match object {
            Some(key) => put.item("object", s(key)),
            None => put.item("body", s(t.body)),
        };
        if let Some(paused) = t.paused {
            put = put.item("paused", s(paused));
        }
        put = if t.expected == 0 {
            put.condition_expression("attribute_not_exists(PK)")
        } else {
            put.condition_expression("version = :expected")
                .expression_attribute_values(":expected", n(t.expected))
        };
        Ok(TransactWriteItem::builder().put(put.build().map_err(StoreError::unavailable)?).build())
    }

    fn session_update(&self, commit: &StepCommit<'_>, last: u64) -> Result<TransactWriteItem, StoreError> {
        let mut condition = format!("{LIVE} AND current_turn_id = :turn");
        if !commit.despite_cancel {
            condition
                .push_str(" AND (attribute_not_exists(cancelled_turn_id) OR cancelled_turn_id <> :turn)");
        }
        let mut sets = vec!["updated_at = :now", "last_event_seq = :last"];
        let mut removes: Vec<&str> = Vec::new();
        let mut adds: Vec<&str> = Vec::new();
        let mut update = Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(commit.project)))
            .key("SK", s(session_sk(commit.session)))
            .expression_attribute_values(":turn", s(commit.turn_id))
            .expression_attribute_values(":now", attr(commit.now)?)
            .expression_attribute_values(":last", n(last));
        match &commit.session_move {
            SessionMove::Stay => {}
            SessionMove::End(reason) => {
                sets.extend(["runtime_status = :idle", "stop_reason = :reason"]);
                removes.extend(["current_turn_id", "cancelled_turn_id", "pause_version"]);
                update = update
                    .expression_attribute_values(":idle", s("idle"))
                    .expression_attribute_values(":reason", attr(reason)?);
            }
            SessionMove::Pause { budget } => {
                let version = commit.transcript.as_ref().map_or(0, |t| t.expected + 1);
                let (status, reason) = if *budget {
                    ("budget_paused", "budget_reached")
                } else {
                    ("requires_action", "requires_action")
                };
                sets.extend([
                    "runtime_status = :paused",
                    "stop_reason = :paused_reason",
                    "pause_version = :pv",
                ]);
                removes.push("turn_held_until");
                update = update
                    .expression_attribute_values(":paused", s(status))
                    .expression_attribute_values(":paused_reason", s(reason))
                    .expression_attribute_values(":pv", n(version));
            }
            SessionMove::HandOver { hold_until } => {
                let version = commit.transcript.as_ref().map_or(0, |t| t.expected + 1);
                sets.extend(["pause_version = :pv", "turn_held_until = :handover_hold"]);
                update = update
                    .expression_attribute_values(":pv", n(version))
                    .expression_attribute_values(":handover_hold", attr(hold_until)?);
            }
        }
        if let Some((usage, cost)) = commit.usage {
            let unpriced = if cost.is_some() { Usage::default() } else { usage };
            adds.extend([
                "#u.input_tokens :i",
                "#u.output_tokens :o",
                "cost_usd :c",
                "unpriced_input_tokens :ui",
                "unpriced_output_tokens :uo",
            ]);
            update = update
                .expression_attribute_names("#u", "usage")
                .expression_attribute_values(":i", n(usage.input_tokens))
                .expression_attribute_values(":o", n(usage.output_tokens))
                .expression_attribute_values(":c", AttributeValue::N(format!("{:.8}", cost.unwrap_or(0.0))))
                .expression_attribute_values(":ui", n(unpriced.input_tokens))
                .expression_attribute_values(":uo", n(unpriced.output_tokens));
        }
        let mut expression = format!("SET {}", sets.join(", "));
        if !adds.is_empty() {
            expression.push_str(&format!(" ADD {}", adds.join(", ")));
        }
        if !removes.is_empty() {
            expression.push_str(&format!(" REMOVE {}", removes.join(", ")));
        }
        let update = update
            .condition_expression(condition)
            .update_expression(expression)
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Claims the turn paused at `version` for its continuation: `requires_action` → `running`
    /// (held until `hold_until`), conditionally, so exactly one delivery claims it. `None`: not
    /// this delivery's (claimed already, cancelled, paused again at another version, or gone).
    pub async fn claim(
        &self,
        project: &ProjectId,
        id: &SessionId,
        turn_id: &str,
        version: u64,
        now: Timestamp,
        hold_until: Timestamp,
    ) -> Result<Option<Session>, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(format!(
                "{LIVE} AND runtime_status IN (:paused, :budget_paused, :running) AND current_turn_id = :turn AND pause_version = :v"
            ))
            .expression_attribute_values(":budget_paused", s("budget_paused"))
            .update_expression("SET runtime_status = :running, turn_held_until = :hold, updated_at = :now REMOVE pause_version")
            .expression_attribute_values(":paused", s("requires_action"))
            .expression_attribute_values(":running", s("running"))
            .expression_attribute_values(":turn", s(turn_id))
            .expression_attribute_values(":v", n(version))
            .expression_attribute_values(":hold", attr(hold_until)?)
            .expression_attribute_values(":now", attr(now)?)
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => {
                let item =
                    out.attributes.ok_or_else(|| StoreError::Corrupt("claim returned no session".into()))?;
                let record: super::sessions::SessionRecord = serde_dynamo::from_item(item)?;
                Ok(Some(record.session))
            }
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                Ok(None)
            }
            Err(err) => Err(backend(err)),
        }
    }

    /// Ends a paused turn from outside (a cancel): idle with `stop_reason`, only while
    /// `turn_id` is paused; appends `events` and emits `emit` in the same write.
    /// `Refused(NotHeld)` otherwise.
    #[allow(clippy::too_many_arguments)]
    pub async fn end_paused(
        &self,
        project: &ProjectId,
        id: &SessionId,
        turn_id: &str,
        stop_reason: StopReason,
        events: &[NewEvent],
        from_seq: u64,
        now: Timestamp,
        retention_days: i64,
        emit: &[crate::OutboxEvent],
    ) -> Result<Vec<Event>, TurnWriteError> {
        let mut from = from_seq.max(1);
        for attempt in 0..ATTEMPTS {
            let last = from + events.len() as u64 - 1;
            let update = Update::builder()
                .table_name(self.table())
                .key("PK", s(project_pk(project)))
                .key("SK", s(session_sk(id)))
                .condition_expression(format!(
                    "{LIVE} AND runtime_status IN (:paused, :budget_paused) AND current_turn_id = :turn"
                ))
                .expression_attribute_values(":budget_paused", s("budget_paused"))
                .update_expression(
                    "SET runtime_status = :idle, stop_reason = :reason, updated_at = :now, last_event_seq = :last \
                     REMOVE current_turn_id, cancelled_turn_id, pause_version, turn_held_until",
                )
                .expression_attribute_values(":paused", s("requires_action"))
                .expression_attribute_values(":idle", s("idle"))
                .expression_attribute_values(":turn", s(turn_id))
                .expression_attribute_values(":reason", attr(stop_reason)?)
                .expression_attribute_values(":now", attr(now)?)
                .expression_attribute_values(":last", n(last))
                .build()
                .map_err(StoreError::unavailable)?;
            let mut items = vec![TransactWriteItem::builder().update(update).build()];
            let written = self.event_puts(id, events, from, now, retention_days, &mut items)?;
            for event in emit {
                items.push(self.store.webhooks().emit_item(event)?);
            }
            match self.store.dynamo.transact_write_items().set_transact_items(Some(items)).send().await {
                Ok(_) => return Ok(written),
                Err(err) => match cancellation(&err) {
                    Some((Some(0), _)) => return Err(TurnWriteError::Refused(Refused::NotHeld)),
                    Some((Some(_), _)) => from = self.store.events().last_seq(id).await? + 1,
                    Some((None, true)) => backoff(attempt).await,
                    _ => return Err(backend(err).into()),
                },
            }
        }
        Err(StoreError::unavailable("a paused turn could not be ended: its writes kept racing").into())
    }

    /// Actions of a session by id (missing ones left out).
    pub async fn actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
        ids: &[agentplane_domain::action::ActionId],
    ) -> Result<Vec<Action>, StoreError> {
        let items: Vec<super::actions::ActionItem> = super::batch_get_as(
            self.store,
            self.table(),
            ids.iter().map(|id| (project_pk(project), super::actions::action_sk(session, id))),
        )
        .await?;
        Ok(items.into_iter().map(|i| i.action).collect())
    }
}

async fn backoff(attempt: usize) {
    tokio::time::sleep(std::time::Duration::from_millis(10 * (attempt as u64 + 1))).await;
}
