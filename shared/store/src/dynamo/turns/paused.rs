//! A paused turn from outside: claimed by its continuation, or ended by a cancel.

use super::*;

impl TurnWrites<'_> {
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
                let record: crate::dynamo::sessions::SessionRecord = serde_dynamo::from_item(item)?;
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
}
