//! Actions of paused turns in the main table.
//!
//! | item   | PK              | SK                            | GSI1 (by_created)                        | GSI2 (by_due), while pending with an expiry |
//! |--------|-----------------|-------------------------------|------------------------------------------|---------------------------------------------|
//! | action | `PROJECT#{pid}` | `SESSION#{sid}#ACTION#{act}`  | `PROJECT#{pid}#SESSION#{sid}#ACTIONS` / created#act | `ACTIONS_DUE` / expires#act          |
//!
//! An action leaves `pending` once, by a conditional update; leaving it also removes its GSI2
//! keys, so the due-work index holds only actions that can still expire.

use agentplane_domain::action::{Action, ActionId};
use agentplane_domain::page::created_sort_key;
use agentplane_domain::{ProjectId, SessionId};
use aws_sdk_dynamodb::types::Put;
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use crate::{Store, StoreError};

/// GSI2 partition of every pending action that can expire.
pub const ACTIONS_DUE: &str = "ACTIONS_DUE";

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
        let due = matches!(action.status, agentplane_domain::action::ActionStatus::Pending)
            .then(|| due_sort_key(action))
            .flatten();
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
    #[allow(dead_code)]
    store: &'a Store,
}

impl<'a> Actions<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }
}

// The reads and the one state move of actions. (Skeleton: filled in by the actions work.)
impl Actions<'_> {
    /// One action of a session of `project`; `NotFound` for another project's or a missing one.
    pub async fn get(
        &self,
        _project: &ProjectId,
        _session: &SessionId,
        _id: &ActionId,
    ) -> Result<Action, StoreError> {
        Err(StoreError::NotFound)
    }

    /// Every pending action of the session (strongly consistent), oldest first.
    pub async fn pending(
        &self,
        _project: &ProjectId,
        _session: &SessionId,
    ) -> Result<Vec<Action>, StoreError> {
        Ok(Vec::new())
    }

    /// Moves a pending action to `status` (with the answer, at `now`), conditionally on it
    /// still being pending: `Conflict` when it is not (the caller reads it for its status),
    /// `NotFound` when it does not exist. Returns the action as stored.
    pub async fn settle(
        &self,
        _action: &Action,
        _status: agentplane_domain::action::ActionStatus,
        _answer: Option<agentplane_domain::action::Answer>,
        _now: agentplane_domain::Timestamp,
    ) -> Result<Action, StoreError> {
        Err(StoreError::Conflict)
    }

    /// Up to `limit` pending actions whose expiry is at or before `now`, soonest first.
    pub async fn due(
        &self,
        _now: agentplane_domain::Timestamp,
        _limit: usize,
    ) -> Result<Vec<Action>, StoreError> {
        Ok(vec![])
    }
}
