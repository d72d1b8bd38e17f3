//! Beginning a turn: the session held and the turn's first events appended, or why not.

use super::*;

impl TurnWrites<'_> {
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
}
