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
use agentplane_domain::event::{Event, NewEvent};
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

mod begin;
mod commit;
mod paused;

/// Every live-session condition says this: the item exists and was not deleted.
const LIVE: &str = "attribute_exists(PK) AND attribute_not_exists(deleted_at)";
/// DynamoDB's most items in one transaction.
const MAX_TRANSACTION_ITEMS: usize = 100;
/// How often a write is tried again after losing an event number or a transaction race.
const ATTEMPTS: usize = 8;

pub use agentplane_engine::ports::turn_writes::{
    Committed, Refused, SessionMove, StepCommit, TranscriptWrite, TurnStart, TurnWriteError,
};

/// A store error ends a turn's write as the port's error.
impl From<StoreError> for TurnWriteError {
    fn from(err: StoreError) -> Self {
        Self::Store(err.into())
    }
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
