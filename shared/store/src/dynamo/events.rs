//! The session event log in the events table: `PK = SESSION#{id}`, `SK = seq` (a number).
//!
//! Appends are gapless under any number of concurrent writers: each event is a conditional put
//! of `seq = last + 1`; a writer that loses the race moves on to the next number, which is only
//! possible because the one it lost was taken. So every number below the highest is occupied.

use agentplane_domain::event::{Event, EventType, NewEvent};
use agentplane_domain::page::{Order, Page, PageLimit};
use agentplane_domain::{SessionId, Timestamp};
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::page::keyset_page;
use super::{backend, s};
use crate::{Store, StoreError};

pub(crate) fn session_pk(id: &SessionId) -> String {
    format!("SESSION#{id}")
}

#[derive(Serialize, Deserialize)]
pub(crate) struct EventItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: u64,
    session_id: SessionId,
    #[serde(rename = "type")]
    kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    turn_id: Option<String>,
    /// JSON text: any shape the event carries, without DynamoDB's type limits.
    data: String,
    created_at: Timestamp,
    expires_at: i64,
}

impl EventItem {
    /// The item of `event` at `seq`, expiring `retention_days` after `now`.
    pub(crate) fn new(
        session: &SessionId,
        seq: u64,
        event: &NewEvent,
        now: Timestamp,
        retention_days: i64,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            pk: session_pk(session),
            sk: seq,
            session_id: *session,
            kind: event.kind.clone(),
            turn_id: event.turn_id.clone(),
            data: serde_json::to_string(&event.data).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            created_at: now,
            expires_at: now.unix_seconds() + retention_days * 86_400,
        })
    }

    pub(crate) fn into_event(self) -> Event {
        Event {
            session_id: self.session_id,
            seq: self.sk,
            kind: self.kind,
            turn_id: self.turn_id,
            data: serde_json::from_str(&self.data).unwrap_or(serde_json::Value::Null),
            created_at: self.created_at,
        }
    }
}

pub struct EventLog<'a> {
    store: &'a Store,
}

impl<'a> EventLog<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// The highest sequence number of the session's log (0 when empty).
    pub async fn last_seq(&self, session: &SessionId) -> Result<u64, StoreError> {
        let out = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.events_table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(session_pk(session)))
            .scan_index_forward(false)
            .limit(1)
            .consistent_read(true)
            .projection_expression("SK")
            .send()
            .await
            .map_err(backend)?;
        let seq = out
            .items()
            .first()
            .and_then(|item| item.get("SK"))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Ok(seq)
    }

    /// Appends `events` in order; each gets the next free sequence number.
    ///
    /// `from` is where to start looking when the caller knows (a turn that just appended knows
    /// its next number); it must never be above `last + 1`, which would leave a gap, so only
    /// pass a number this log handed out plus one. `None` reads the current end first.
    pub async fn append(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
        now: Timestamp,
        retention_days: i64,
        from: Option<u64>,
    ) -> Result<Vec<Event>, StoreError> {
        let mut next = match from {
            Some(next) => next.max(1),
            None => self.last_seq(session).await? + 1,
        };
        let mut out = Vec::with_capacity(events.len());
        for event in events {
            let data = serde_json::to_string(&event.data).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            loop {
                let item = EventItem {
                    pk: session_pk(session),
                    sk: next,
                    session_id: *session,
                    kind: event.kind.clone(),
                    turn_id: event.turn_id.clone(),
                    data: data.clone(),
                    created_at: now,
                    expires_at: now.unix_seconds() + retention_days * 86_400,
                };
                let result = self
                    .store
                    .dynamo
                    .put_item()
                    .table_name(&self.store.names.events_table)
                    .set_item(Some(serde_dynamo::to_item(&item)?))
                    .condition_expression("attribute_not_exists(PK)")
                    .send()
                    .await;
                match result {
                    Ok(_) => {
                        out.push(item.into_event());
                        next += 1;
                        break;
                    }
                    Err(err)
                        if err
                            .as_service_error()
                            .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
                    {
                        next += 1;
                    }
                    Err(err) => return Err(backend(err)),
                }
            }
        }
        Ok(out)
    }

    /// Events after `after` (exclusive), oldest first.
    pub async fn list_after(
        &self,
        session: &SessionId,
        after: u64,
        limit: PageLimit,
    ) -> Result<Page<Event>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.events_table)
            .key_condition_expression("PK = :pk AND SK > :after")
            .expression_attribute_values(":pk", s(session_pk(session)))
            .expression_attribute_values(":after", AttributeValue::N(after.to_string()))
            .scan_index_forward(true)
            .consistent_read(true);
        keyset_page(
            query,
            limit,
            None,
            |item| Ok(serde_dynamo::from_item::<_, EventItem>(item)?.into_event()),
        )
        .await
    }

    /// One page of the log in `order` from `after` (exclusive: the events after it in `asc`,
    /// those before it in `desc`; `None`: from the start, or from the end), only events of type
    /// `kind` when one is given.
    pub async fn page(
        &self,
        session: &SessionId,
        after: Option<u64>,
        order: Order,
        limit: PageLimit,
        kind: Option<&EventType>,
    ) -> Result<Page<Event>, StoreError> {
        let mut query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.events_table)
            .expression_attribute_values(":pk", s(session_pk(session)))
            .scan_index_forward(order == Order::Asc)
            .consistent_read(true);
        query = match (after, order) {
            (Some(seq), Order::Asc) => query
                .key_condition_expression("PK = :pk AND SK > :after")
                .expression_attribute_values(":after", AttributeValue::N(seq.to_string())),
            (Some(seq), Order::Desc) => query
                .key_condition_expression("PK = :pk AND SK < :after")
                .expression_attribute_values(":after", AttributeValue::N(seq.to_string())),
            (None, _) => query.key_condition_expression("PK = :pk"),
        };
        if let Some(kind) = kind {
            query = query
                .filter_expression("#type = :type")
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":type", s(kind.as_str()));
        }
        keyset_page(
            query,
            limit,
            None,
            |item| Ok(serde_dynamo::from_item::<_, EventItem>(item)?.into_event()),
        )
        .await
    }

    /// The whole log, oldest first (never read to build a model request: see transcripts.rs).
    pub async fn all(&self, session: &SessionId) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .list_after(session, after, PageLimit::new(100).map_err(|e| StoreError::Corrupt(e.message))?)
                .await?;
            after = page.items.last().map_or(after, |e| e.seq);
            out.extend(page.items);
            if !page.has_more {
                return Ok(out);
            }
        }
    }
}

impl EventLog<'_> {
    /// Rewrites the `data` of the session's events of turn `turn` that `erase` gives new data
    /// for (the content retention of a Platform Run); answers how many. Type, time and turn of
    /// every event stay.
    pub async fn erase_turn(
        &self,
        session: &SessionId,
        turn: &str,
        erase: impl Fn(&EventType, &serde_json::Value) -> Option<serde_json::Value>,
    ) -> Result<usize, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.events_table)
            .key_condition_expression("PK = :pk")
            .filter_expression("turn_id = :turn")
            .expression_attribute_values(":pk", s(session_pk(session)))
            .expression_attribute_values(":turn", s(turn))
            .consistent_read(true);
        let items: Vec<EventItem> = super::query_all(query).await?;
        let mut erased = 0;
        for item in items {
            let data: serde_json::Value = serde_json::from_str(&item.data).unwrap_or(serde_json::Value::Null);
            let Some(new) = erase(&item.kind, &data) else { continue };
            if new == data {
                continue;
            }
            let text = serde_json::to_string(&new).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let result = self
                .store
                .dynamo
                .update_item()
                .table_name(&self.store.names.events_table)
                .key("PK", s(item.pk.as_str()))
                .key("SK", AttributeValue::N(item.sk.to_string()))
                .update_expression("SET #d = :d")
                .condition_expression("attribute_exists(PK)")
                .expression_attribute_names("#d", "data")
                .expression_attribute_values(":d", s(text))
                .send()
                .await
                .map_err(|e| super::conditional(e, |e| e.is_conditional_check_failed_exception()));
            match result {
                Ok(_) => erased += 1,
                // Expired meanwhile (its TTL): nothing left to erase.
                Err(StoreError::Conflict) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(erased)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_domain::event::EventPayload;
    use std::collections::HashMap;

    fn stored(kind: &str, data: &str) -> HashMap<String, AttributeValue> {
        let n = |v: &str| AttributeValue::N(v.to_owned());
        HashMap::from([
            ("PK".to_owned(), s("SESSION#x")),
            ("SK".to_owned(), n("3")),
            ("session_id".to_owned(), s(SessionId::from_random([4; 16]).to_string())),
            ("type".to_owned(), s(kind)),
            ("data".to_owned(), s(data)),
            ("created_at".to_owned(), n("1000")),
            ("expires_at".to_owned(), n("2000")),
        ])
    }

    #[test]
    fn an_event_type_written_by_a_newer_release_reads_without_failing_and_is_stored_back_unchanged() {
        let raw = stored("approval.requested", r#"{"action_id":"act_1"}"#);
        let item: EventItem = serde_dynamo::from_item(raw.clone()).unwrap();
        let event = item.into_event();
        assert_eq!(event.kind, EventType::Unknown("approval.requested".into()));
        assert!(
            matches!(event.payload(), EventPayload::Unknown { kind, .. } if kind == "approval.requested")
        );
        assert_eq!(event.data["action_id"], "act_1");
        let again: HashMap<String, AttributeValue> = serde_dynamo::to_item(EventItem {
            pk: "SESSION#x".into(),
            sk: event.seq,
            session_id: event.session_id,
            kind: event.kind,
            turn_id: None,
            data: event.data.to_string(),
            created_at: event.created_at,
            expires_at: 2000,
        })
        .unwrap();
        assert_eq!(again.get("type"), raw.get("type"));
    }

    #[test]
    fn a_known_event_type_reads_typed() {
        let item: EventItem = serde_dynamo::from_item(stored("message.user", r#"{"text":"hi"}"#)).unwrap();
        let event = item.into_event();
        assert_eq!(event.kind, EventType::UserMessage);
        assert!(matches!(event.payload(), EventPayload::UserMessage(m) if m.text == "hi"));
    }
}
