//! Actions of paused turns in the main table.
//!
//! | item   | PK              | SK                            | GSI1 (by_created)                        | GSI2 (by_due), while pending with an expiry |
//! |--------|-----------------|-------------------------------|------------------------------------------|---------------------------------------------|
//! | action | `PROJECT#{pid}` | `SESSION#{sid}#ACTION#{act}`  | `PROJECT#{pid}#SESSION#{sid}#ACTIONS` / created#act | `ACTIONS_DUE` / expires#act          |
//!
//! An action leaves `pending` once, by a conditional update; leaving it also leaves
//! `ACTIONS_DUE`, so that partition holds only actions that can still expire. An answered or
//! expired action moves to `ACTIONS_SETTLED` (by settle time) until its turn's continuation was
//! sent; the retention sweep sends again for any left there (a send that failed).

use agentplane_domain::action::{Action, ActionId, ActionStatus, Answer};
use agentplane_domain::page::{Order, Page, PageRequest, created_sort_key};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::types::{Put, ReturnValue};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{keyset_page, start_key};
use super::{backend, conditional, get_as, query_all, s};
use crate::resources::{BY_CREATED, BY_DUE};
use crate::{Store, StoreError};

/// GSI2 partition of every pending action that can expire.
pub const ACTIONS_DUE: &str = "ACTIONS_DUE";
/// GSI2 partition of answered or expired actions until their turn is known to be carried on.
pub const ACTIONS_SETTLED: &str = "ACTIONS_SETTLED";

pub fn action_sk(session: &SessionId, id: &ActionId) -> String {
    format!("SESSION#{session}#ACTION#{id}")
}

/// The SK prefix of every action of a session.
pub fn session_actions_prefix(session: &SessionId) -> String {
    format!("SESSION#{session}#ACTION#")
}

/// GSI1 partition: a session's actions by creation time.
pub fn actions_list(project: &ProjectId, session: &SessionId) -> String {
    format!("PROJECT#{project}#SESSION#{session}#ACTIONS")
}

/// GSI2 sort key: when it falls due, then the id.
pub fn due_sort_key(action: &Action) -> Option<String> {
    action.expires_at.map(|at| format!("{:015}#{}", at.unix_millis().max(0), action.id))
}

#[derive(Serialize, Deserialize)]
pub(crate) struct ActionItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "GSI1PK")]
    pub gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    pub gsi1sk: String,
    #[serde(rename = "GSI2PK", default, skip_serializing_if = "Option::is_none")]
    pub gsi2pk: Option<String>,
    #[serde(rename = "GSI2SK", default, skip_serializing_if = "Option::is_none")]
    pub gsi2sk: Option<String>,
    #[serde(flatten)]
    pub action: Action,
}

impl ActionItem {
    pub fn new(action: &Action) -> Self {
        let due = matches!(action.status, ActionStatus::Pending).then(|| due_sort_key(action)).flatten();
        Self {
            pk: project_pk(&action.project_id),
            sk: action_sk(&action.session_id, &action.id),
            gsi1pk: actions_list(&action.project_id, &action.session_id),
            gsi1sk: created_sort_key(action.created_at, &action.id),
            gsi2pk: due.as_ref().map(|_| ACTIONS_DUE.to_owned()),
            gsi2sk: due,
            action: action.clone(),
        }
    }
}

/// A transaction's put of a new action (it must not exist yet): what a pausing turn writes
/// along with its step.
pub fn put_new(store: &Store, action: &Action) -> Result<Put, StoreError> {
    Put::builder()
        .table_name(&store.names.main_table)
        .set_item(Some(serde_dynamo::to_item(ActionItem::new(action))?))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(StoreError::unavailable)
}

pub struct Actions<'a> {
    store: &'a Store,
}

impl<'a> Actions<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }
}

/// The reads of actions.
impl Actions<'_> {
    /// One action of a session of `project`; `NotFound` for another project's or a missing one.
    pub async fn get(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &ActionId,
    ) -> Result<Action, StoreError> {
        self.raw(project, session, id).await?.map(|item| item.action).ok_or(StoreError::NotFound)
    }

    async fn raw(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &ActionId,
    ) -> Result<Option<ActionItem>, StoreError> {
        get_as(self.store, &self.store.names.main_table, project_pk(project), action_sk(session, id)).await
    }

    /// Every pending action of the session (a strongly consistent query of the base table, so
    /// an answer just given is seen), oldest first.
    pub async fn pending(&self, project: &ProjectId, session: &SessionId) -> Result<Vec<Action>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.main_table)
            .consistent_read(true)
            .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
            .filter_expression("#status = :pending")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":pk", s(project_pk(project)))
            .expression_attribute_values(":prefix", s(session_actions_prefix(session)))
            .expression_attribute_values(":pending", s(ActionStatus::Pending.as_str()));
        let items: Vec<ActionItem> = query_all(query).await?;
        Ok(oldest_first(items.into_iter().map(|i| i.action).collect()))
    }

    /// A page of the session's actions by creation time (`status`: only those), after the
    /// action `after` of the same session (`NotFound` when it names none).
    pub async fn list(
        &self,
        project: &ProjectId,
        session: &SessionId,
        status: Option<ActionStatus>,
        page: &PageRequest,
        after: Option<&ActionId>,
    ) -> Result<Page<Action>, StoreError> {
        let start = match after {
            Some(id) => {
                let item = self.raw(project, session, id).await?.ok_or(StoreError::NotFound)?;
                Some(start_key(&serde_dynamo::to_item(item)?).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let mut query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.main_table)
            .index_name(BY_CREATED)
            .key_condition_expression("GSI1PK = :list")
            .expression_attribute_values(":list", s(actions_list(project, session)))
            .scan_index_forward(page.order == Order::Asc);
        if let Some(status) = status {
            query = query
                .filter_expression("#status = :status")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":status", s(status.as_str()));
        }
        let page = keyset_page(query, page.limit, start, |item| {
            let item: ActionItem = serde_dynamo::from_item(item)?;
            Ok(item.action)
        })
        .await?;
        Ok(page)
    }

    /// Pending actions that expire at or before `now`, the soonest due first, at most `limit`
    /// (the retention sweep expires them).
    pub async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<Action>, StoreError> {
        self.by_time(ACTIONS_DUE, now, limit).await
    }

    /// Settled actions (answered or expired at or before `before`) whose turn was not known to
    /// be carried on: a continuation that could not be sent. The sweep sends it again.
    pub async fn waiting(&self, before: Timestamp, limit: usize) -> Result<Vec<Action>, StoreError> {
        self.by_time(ACTIONS_SETTLED, before, limit).await
    }

    /// Up to `limit` actions of a `by_due` partition whose time is at or before `until`, oldest
    /// first.
    async fn by_time(
        &self,
        partition: &str,
        until: Timestamp,
        limit: usize,
    ) -> Result<Vec<Action>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        while found.len() < limit {
            let room = i32::try_from(limit - found.len()).unwrap_or(i32::MAX);
            let out = self
                .store
                .dynamo
                .query()
                .table_name(&self.store.names.main_table)
                .index_name(BY_DUE)
                .key_condition_expression("GSI2PK = :partition AND GSI2SK <= :until")
                .expression_attribute_values(":partition", s(partition))
                .expression_attribute_values(":until", s(due_until(until)))
                .scan_index_forward(true)
                .limit(room)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            for item in out.items.unwrap_or_default() {
                let item: ActionItem = serde_dynamo::from_item(item)?;
                found.push(item.action);
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        found.truncate(limit);
        Ok(found)
    }
}

/// The one state move of actions.
impl Actions<'_> {
    /// Moves a pending action to `status` (with the answer, at `now`), conditionally on it
    /// still being pending: `Conflict` when it is not (the caller reads it for its status),
    /// `NotFound` when it does not exist. Leaving `pending` also leaves the due-work index.
    /// Returns the action as stored.
    pub async fn settle(
        &self,
        action: &Action,
        status: ActionStatus,
        answer: Option<Answer>,
        now: Timestamp,
    ) -> Result<Action, StoreError> {
        let mut request = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(&action.project_id)))
            .key("SK", s(action_sk(&action.session_id, &action.id)))
            .condition_expression("attribute_exists(PK) AND #status = :pending")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":pending", s(ActionStatus::Pending.as_str()))
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .return_values(ReturnValue::AllNew);
        let set = match answer {
            Some(answer) => {
                request =
                    request.expression_attribute_values(":answer", serde_dynamo::to_attribute_value(answer)?);
                "SET #status = :status, answer = :answer, settled_at = :now"
            }
            None => "SET #status = :status, settled_at = :now",
        };
        // An answered or expired action waits in the index until its turn is carried on; a
        // cancelled one has no turn to carry on.
        let index = match status {
            ActionStatus::Resolved | ActionStatus::Expired => {
                request = request
                    .expression_attribute_values(":waiting", s(ACTIONS_SETTLED))
                    .expression_attribute_values(":waiting_key", s(waiting_key(now, &action.id)));
                ", GSI2PK = :waiting, GSI2SK = :waiting_key"
            }
            _ => " REMOVE GSI2PK, GSI2SK",
        };
        let result = request.update_expression(format!("{set}{index}")).send().await;
        match result {
            Ok(out) => {
                let item: ActionItem = serde_dynamo::from_item(out.attributes.unwrap_or_default())?;
                Ok(item.action)
            }
            Err(err) => match conditional(err, |e| e.is_conditional_check_failed_exception()) {
                // Tell "answered already" from "never existed".
                StoreError::Conflict => {
                    match self.raw(&action.project_id, &action.session_id, &action.id).await? {
                        Some(_) => Err(StoreError::Conflict),
                        None => Err(StoreError::NotFound),
                    }
                }
                other => Err(other),
            },
        }
    }

    /// The action's turn was carried on (or another action of it will be): it leaves the index
    /// of settled actions waiting for that. Done already is fine.
    pub async fn mark_carried_on(&self, action: &Action) -> Result<(), StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(&action.project_id)))
            .key("SK", s(action_sk(&action.session_id, &action.id)))
            .condition_expression("GSI2PK = :waiting")
            .update_expression("REMOVE GSI2PK, GSI2SK")
            .expression_attribute_values(":waiting", s(ACTIONS_SETTLED))
            .send()
            .await;
        match result.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception())) {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Cancels every pending action of the turn `turn_id` (each conditionally: one answered
    /// meanwhile keeps its answer) and returns those it cancelled.
    pub async fn cancel_pending(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Action>, StoreError> {
        let pending = self.pending(project, session).await?.into_iter().filter(|a| a.turn_id == turn_id);
        self.cancel_each(pending, now).await
    }

    /// Cancels every pending action of the session, whatever its turn (the session is being
    /// deleted: nobody can answer them any more, and the sweep must not expire and carry them
    /// on). Each conditionally, as [`Self::cancel_pending`]; returns those it cancelled.
    pub async fn cancel_all_pending(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<Vec<Action>, StoreError> {
        let pending = self.pending(project, session).await?;
        self.cancel_each(pending, now).await
    }

    async fn cancel_each(
        &self,
        actions: impl IntoIterator<Item = Action>,
        now: Timestamp,
    ) -> Result<Vec<Action>, StoreError> {
        let mut cancelled = Vec::new();
        for action in actions {
            match self.settle(&action, ActionStatus::Cancelled, None, now).await {
                Ok(settled) => cancelled.push(settled),
                Err(StoreError::Conflict | StoreError::NotFound) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(cancelled)
    }
}

/// GSI2 sort key of a settled action waiting for its turn to be carried on.
fn waiting_key(settled: Timestamp, id: &ActionId) -> String {
    format!("{:015}#{id}", settled.unix_millis().max(0))
}

/// The highest GSI2 sort key due at `now`: every `{expires:015}#act_…` at or before it.
fn due_until(now: Timestamp) -> String {
    format!("{:015}#~", now.unix_millis().max(0))
}

/// Creation time, then id.
fn oldest_first(mut actions: Vec<Action>) -> Vec<Action> {
    actions.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    actions
}

#[cfg(test)]
mod tests {
    use agentplane_domain::action::{ActionType, expires_at};
    use serde_json::json;

    use super::*;
    use crate::dynamo::page::Item;

    fn action(id: u8, created_ms: i64, timeout_minutes: u32) -> Action {
        let created_at = Timestamp::from_unix_millis(created_ms);
        Action {
            id: ActionId::from_random([id; 12]),
            project_id: ProjectId::from_random([1; 16]),
            session_id: SessionId::from_random([2; 16]),
            turn_id: "turn_1".into(),
            pause_version: 1,
            call_id: format!("call_{id}"),
            kind: ActionType::Question,
            status: ActionStatus::Pending,
            tool: "ask_user".into(),
            args: json!({"question": "Which?", "Some Key": 1}),
            question: Some("Which?".into()),
            answer: None,
            created_at,
            expires_at: expires_at(created_at, timeout_minutes),
            settled_at: None,
            answer_key_ids: None,
        }
    }

    #[test]
    fn only_pending_actions_that_can_expire_are_in_the_due_index() {
        let item = ActionItem::new(&action(1, 1_000, 5));
        assert_eq!(item.gsi2pk.as_deref(), Some(ACTIONS_DUE));
        assert_eq!(item.gsi2sk, due_sort_key(&action(1, 1_000, 5)));
        assert_eq!(ActionItem::new(&action(1, 1_000, 0)).gsi2pk, None);
        let mut settled = action(1, 1_000, 5);
        settled.status = ActionStatus::Resolved;
        assert_eq!(ActionItem::new(&settled).gsi2sk, None);
    }

    #[test]
    fn an_action_is_due_once_its_expiry_is_reached_and_not_before() {
        let a = action(0xff, 1_000, 1);
        let due = due_sort_key(&a).unwrap_or_default();
        let expiry = Timestamp::from_unix_millis(1_000 + 60_000);
        assert!(due.as_str() <= due_until(expiry).as_str());
        assert!(due.as_str() > due_until(Timestamp::from_unix_millis(1_000 + 59_999)).as_str());
        // Padding keeps string order time order across digit counts.
        assert!(due_until(Timestamp::from_unix_millis(999)) < due_until(Timestamp::from_unix_millis(1_000)));
    }

    #[test]
    fn pending_actions_come_oldest_first_then_by_id() {
        let sorted = oldest_first(vec![action(3, 2_000, 0), action(2, 1_000, 0), action(1, 1_000, 0)]);
        let ids: Vec<u8> =
            sorted.iter().map(|a| a.call_id.trim_start_matches("call_").parse().unwrap_or(0)).collect();
        assert_eq!(ids, vec![1, 2, 3]);
    }

    #[test]
    fn the_item_keeps_args_and_answers_exactly() {
        let mut a = action(1, 1_000, 5);
        a.status = ActionStatus::Resolved;
        a.answer = Some(Answer::Question { answers: json!({"Some Key": 1, "camelCase": [true, null]}) });
        let item = serde_dynamo::to_item(ActionItem::new(&a)).map_err(|e| e.to_string());
        let back: Result<ActionItem, String> =
            item.and_then(|i: Item| serde_dynamo::from_item(i).map_err(|e| e.to_string()));
        assert_eq!(back.map(|i| i.action), Ok(a));
    }
}
