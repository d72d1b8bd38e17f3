//! A model call made for a session outside its turns (the call that titles it): its usage on
//! the session, its cost on the tenant's monthly counter, and its `usage` event in the log, in
//! one transaction, like a turn's step writes a call of the turn.

use agentplane_domain::event::Event;
use agentplane_domain::pricing::Usage;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};

use super::events::EventItem;
use super::keys::{project_pk, session_sk};
use super::{s, transaction_conflict};
use crate::{Store, StoreError};

/// How often the write is tried again after losing its event number to another writer.
const ATTEMPTS: usize = 8;

pub use agentplane_engine::ports::sessions::SideCall;

pub struct SideCalls<'a> {
    store: &'a Store,
}

impl<'a> SideCalls<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// Records `call`, all or nothing; `NotFound` when the session is gone (deleted).
    pub async fn record(&self, call: &SideCall<'_>) -> Result<Event, StoreError> {
        for _ in 0..ATTEMPTS {
            let seq = self.store.events().last_seq(call.session).await? + 1;
            let item = EventItem::new(call.session, seq, call.event, call.now, call.retention_days)?;
            let put = Put::builder()
                .table_name(&self.store.names.events_table)
                .set_item(Some(serde_dynamo::to_item(&item)?))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)?;
            let mut items =
                vec![self.session_update(call, seq)?, TransactWriteItem::builder().put(put).build()];
            if let (Some(key), Some(cost)) = (call.spend_counter, call.cost_usd) {
                let nanos = agentplane_domain::tenant::nanos_of(cost);
                if nanos > 0 {
                    let month = agentplane_domain::tenant::month_of(call.now);
                    items.push(self.store.tenants().add_spend(key, &month, nanos)?);
                }
            }
            match self.store.dynamo.transact_write_items().set_transact_items(Some(items)).send().await {
                Ok(_) => return Ok(item.into_event()),
                Err(err) => match transaction_conflict(err) {
                    // The session is gone, or a writer took the number: read both again.
                    StoreError::Conflict => {
                        self.store.sessions().get(call.project, call.session).await?;
                    }
                    other => return Err(other),
                },
            }
        }
        Err(StoreError::unavailable("a side call's usage could not be written: its event kept racing"))
    }

    /// The session's usage and cost added, and its `last_event_seq` moved up to `seq` (never
    /// down: a turn that appended past it meanwhile fails the condition, and the write is tried
    /// again after it).
    fn session_update(&self, call: &SideCall<'_>, seq: u64) -> Result<TransactWriteItem, StoreError> {
        let n = |v: String| AttributeValue::N(v);
        let unpriced = if call.cost_usd.is_some() { Usage::default() } else { call.usage };
        let update = Update::builder()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(call.project)))
            .key("SK", s(session_sk(call.session)))
            .condition_expression(
                "attribute_exists(PK) AND attribute_not_exists(deleted_at) \
                 AND (attribute_not_exists(last_event_seq) OR last_event_seq < :seq)",
            )
            .update_expression(
                "SET last_event_seq = :seq ADD #u.input_tokens :i, #u.output_tokens :o, cost_usd :c, \
                 unpriced_input_tokens :ui, unpriced_output_tokens :uo",
            )
            .expression_attribute_names("#u", "usage")
            .expression_attribute_values(":seq", n(seq.to_string()))
            .expression_attribute_values(":i", n(call.usage.input_tokens.to_string()))
            .expression_attribute_values(":o", n(call.usage.output_tokens.to_string()))
            .expression_attribute_values(":c", n(format!("{:.8}", call.cost_usd.unwrap_or(0.0))))
            .expression_attribute_values(":ui", n(unpriced.input_tokens.to_string()))
            .expression_attribute_values(":uo", n(unpriced.output_tokens.to_string()))
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}
