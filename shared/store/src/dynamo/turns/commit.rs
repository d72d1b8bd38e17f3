//! One step of a turn committed: its events, usage, transcript, actions and the session's move.

use super::*;

impl TurnWrites<'_> {
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
                    TransactWriteItem::builder()
                        .put(crate::dynamo::actions::put_new(self.store, action)?)
                        .build(),
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
}
