//! Messages and their attempts: written, read a page at a time, and deleted once expired.

use super::*;

impl Webhooks<'_> {
    /// The items that write a new message and its locator, for a transaction (each must not
    /// exist yet, so a retried transaction writes them once).
    pub fn message_items(&self, message: &Message) -> Result<Vec<TransactWriteItem>, StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let item = MessageItem::of(message);
        let locator = LocatorItem { pk, sk: locator_sk(&message.id), created_at: message.created_at };
        let mut items = Vec::new();
        for item in [serde_dynamo::to_item(item)?, serde_dynamo::to_item(locator)?] {
            let put = Put::builder()
                .table_name(self.table())
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        Ok(items)
    }

    /// Writes a new message and its locator.
    pub async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        let items = self.message_items(message)?;
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(crate::dynamo::transaction_conflict)?;
        Ok(())
    }

    /// The message `id` of `endpoint`; `NotFound` when it has none such.
    pub async fn message(&self, endpoint: &EndpointId, id: &MessageId) -> Result<Message, StoreError> {
        let pk = messages_pk(endpoint);
        let locator: LocatorItem =
            crate::dynamo::get_as(self.store, self.table(), pk.clone(), locator_sk(id))
                .await?
                .ok_or(StoreError::NotFound)?;
        let sk = message_sk_at(locator.created_at, id);
        let item: MessageItem =
            crate::dynamo::get_as(self.store, self.table(), pk, sk).await?.ok_or(StoreError::NotFound)?;
        Ok(item.message)
    }

    /// Records one attempt of `message` and the message's state after it, together.
    pub async fn record_attempt(&self, message: &Message, attempt: &Attempt) -> Result<(), StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let attempt_item =
            AttemptItem { pk, sk: attempt_sk(message, attempt.number), attempt: attempt.clone() };
        let message_item = MessageItem::of(message);
        let puts = [serde_dynamo::to_item(message_item)?, serde_dynamo::to_item(attempt_item)?];
        let mut tx = self.store.dynamo.transact_write_items();
        for item in puts {
            let put = Put::builder()
                .table_name(self.table())
                .set_item(Some(item))
                .build()
                .map_err(StoreError::unavailable)?;
            tx = tx.transact_items(TransactWriteItem::builder().put(put).build());
        }
        tx.send().await.map_err(backend)?;
        Ok(())
    }

    /// The endpoint's newest `limit` messages, newest first, each with its attempts.
    pub async fn messages(
        &self,
        endpoint: &EndpointId,
        limit: PageLimit,
    ) -> Result<Vec<MessageWithAttempts>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk AND begins_with(SK, :msg)")
            .expression_attribute_values(":pk", s(messages_pk(endpoint)))
            .expression_attribute_values(":msg", s("MSG#"))
            .scan_index_forward(false)
            .consistent_read(true);
        let page = crate::dynamo::page::keyset_page(query, limit, None, |item| {
            Ok(serde_dynamo::from_item::<_, MessageItem>(item)?.message)
        })
        .await?;
        let (Some(newest), Some(oldest)) = (page.items.first(), page.items.last()) else {
            return Ok(Vec::new());
        };
        let attempts: Vec<AttemptItem> = crate::dynamo::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .key_condition_expression("PK = :pk AND SK BETWEEN :low AND :high")
                .expression_attribute_values(":pk", s(messages_pk(endpoint)))
                .expression_attribute_values(":low", s(attempt_prefix(oldest)))
                .expression_attribute_values(":high", s(format!("{}~", attempt_prefix(newest))))
                .consistent_read(true),
        )
        .await?;
        Ok(page
            .items
            .into_iter()
            .map(|message| {
                let mut of: Vec<Attempt> = attempts
                    .iter()
                    .filter(|a| a.attempt.message_id == message.id)
                    .map(|a| a.attempt.clone())
                    .collect();
                of.sort_by_key(|a| a.number);
                MessageWithAttempts { message, attempts: of }
            })
            .collect())
    }
}

impl Webhooks<'_> {
    /// Up to `limit` messages whose records expired at `now`, the oldest first (what the
    /// retention sweep deletes; what it deletes leaves the index, so the next read starts where
    /// this one's work stopped).
    pub async fn expired_records(&self, now: Timestamp, limit: usize) -> Result<Vec<Message>, StoreError> {
        let until = format!("{:015}#~", now.unix_millis().max(0));
        let items: Vec<MessageItem> =
            crate::dynamo::due_page(self.store, self.table(), RECORDS_EXPIRE, until, limit).await?;
        Ok(items.into_iter().map(|item| item.message).collect())
    }

    /// Deletes `message` with its locator and attempts, while it is still in the records'
    /// expiry partition (`Conflict` once a redelivery took it back; `NotFound` when it is gone).
    pub async fn delete_records(&self, message: &Message) -> Result<(), StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let attempts: Vec<AttemptItem> = crate::dynamo::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                .expression_attribute_values(":pk", s(pk.clone()))
                .expression_attribute_values(":prefix", s(attempt_prefix(message)))
                .consistent_read(true),
        )
        .await?;
        let delete = |sk: String| {
            aws_sdk_dynamodb::types::Delete::builder()
                .table_name(self.table())
                .key("PK", s(pk.clone()))
                .key("SK", s(sk))
        };
        let mut items = vec![
            delete(message_sk(message))
                .condition_expression("GSI2PK = :records")
                .expression_attribute_values(":records", s(RECORDS_EXPIRE)),
            delete(locator_sk(&message.id)),
        ];
        items.extend(attempts.into_iter().map(|a| delete(a.sk)));
        let items = items
            .into_iter()
            .map(|d| {
                Ok(TransactWriteItem::builder().delete(d.build().map_err(StoreError::unavailable)?).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // The message (conditional) is in the first transaction; attempts beyond what one
        // transaction holds follow it, orphans by then.
        for (n, chunk) in items.chunks(100).enumerate() {
            let sent = self
                .store
                .dynamo
                .transact_write_items()
                .set_transact_items(Some(chunk.to_vec()))
                .send()
                .await;
            match sent.map_err(crate::dynamo::transaction_conflict) {
                Ok(_) => {}
                // The condition failed: the message is gone, or a redelivery took it back.
                Err(StoreError::Conflict) if n == 0 => {
                    return Err(match self.message(&message.endpoint_id, &message.id).await {
                        Err(StoreError::NotFound) => StoreError::NotFound,
                        _ => StoreError::Conflict,
                    });
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}
