//! Sessions in the main table, under their project's partition.

use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::session::{Session, SessionPatch};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::types::{ReturnValue, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::{
    ALL_SESSIONS_LIST, SESSION_LOCATOR_SK, project_pk, session_locator_pk, session_sk, sessions_list,
};
use super::page::{Item, created_after, query_index};
use super::{backend, batch_get_as, conditional, s, transaction_conflict};
use crate::resources::BY_DUE;
use crate::{Store, StoreError};

/// Every live-session condition says this: the item exists and was not deleted.
const LIVE: &str = "attribute_exists(PK) AND attribute_not_exists(deleted_at)";

/// The session item as stored (keys, list attributes, the session).
#[derive(Serialize, Deserialize)]
pub(crate) struct SessionItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK", default, skip_serializing_if = "Option::is_none")]
    gsi1pk: Option<String>,
    #[serde(rename = "GSI1SK", default, skip_serializing_if = "Option::is_none")]
    gsi1sk: Option<String>,
    #[serde(rename = "GSI2PK", default, skip_serializing_if = "Option::is_none")]
    gsi2pk: Option<String>,
    #[serde(rename = "GSI2SK", default, skip_serializing_if = "Option::is_none")]
    gsi2sk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deleted_at: Option<Timestamp>,
    #[serde(flatten, deserialize_with = "stored_session")]
    pub(crate) session: Session,
}

/// A session as stored, read in today's shape (`session_placement`: an old Platform session's
/// `none` with an environment reads as self_hosted).
fn stored_session<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Session, D::Error> {
    let mut session = Session::deserialize(deserializer)?;
    super::session_placement::upgrade(&mut session);
    Ok(session)
}

pub(crate) type SessionRecord = SessionItem;

/// `SESSION#{id}` / `LOCATOR`: which project a bare session id belongs to.
#[derive(Serialize, Deserialize)]
struct SessionLocator {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    project_id: ProjectId,
}

pub use agentplane_engine::ports::platform::TurnHolder;

pub struct Sessions<'a> {
    store: &'a Store,
}

impl<'a> Sessions<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    pub async fn create(&self, session: &Session) -> Result<(), StoreError> {
        self.create_with(session, Vec::new()).await
    }

    /// Creates the session with its locator and `extra` writes in one transaction (the
    /// environment's session link and the check that the environment exists); `Conflict` when
    /// a condition of any of them fails.
    pub(crate) async fn create_with(
        &self,
        session: &Session,
        extra: Vec<TransactWriteItem>,
    ) -> Result<(), StoreError> {
        // Core's runtime reads fail on a session whose mode and environment disagree, so such a
        // session is never written (no session write after this one touches either field).
        if !session.placement_is_consistent() {
            return Err(StoreError::Corrupt(format!(
                "a {:?} session {} an environment",
                session.environment_mode,
                if session.environment_id.is_some() { "with" } else { "without" }
            )));
        }
        let item = SessionItem {
            pk: project_pk(&session.project_id),
            sk: session_sk(&session.id),
            gsi1pk: Some(sessions_list(&session.project_id)),
            gsi1sk: Some(created_sort_key(session.created_at, &session.id)),
            gsi2pk: Some(ALL_SESSIONS_LIST.to_owned()),
            gsi2sk: Some(created_sort_key(session.created_at, &session.id)),
            deleted_at: None,
            session: session.clone(),
        };
        let locator = SessionLocator {
            pk: session_locator_pk(&session.id),
            sk: SESSION_LOCATOR_SK.to_owned(),
            project_id: session.project_id,
        };
        // The session and its locator appear together or not at all.
        let put = |item: Item| {
            aws_sdk_dynamodb::types::Put::builder()
                .table_name(&self.store.names.main_table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)
        };
        let transaction = self
            .store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put(serde_dynamo::to_item(item)?)?).build())
            .transact_items(TransactWriteItem::builder().put(put(serde_dynamo::to_item(locator)?)?).build());
        extra
            .into_iter()
            .fold(transaction, |transaction, write| transaction.transact_items(write))
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// The project of a session, from its id alone (a live or deleted one); `NotFound` when no
    /// session has this id.
    pub async fn locate(&self, id: &SessionId) -> Result<ProjectId, StoreError> {
        let item = self
            .store
            .dynamo
            .get_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(session_locator_pk(id)))
            .key("SK", s(SESSION_LOCATOR_SK))
            .send()
            .await
            .map_err(backend)?
            .item
            .ok_or(StoreError::NotFound)?;
        let locator: SessionLocator = serde_dynamo::from_item(item)?;
        Ok(locator.project_id)
    }

    /// Many live sessions at once (BatchGetItem, 100 keys a call), by id; deleted and missing
    /// ones are left out.
    pub async fn get_many(
        &self,
        ids: &[(ProjectId, SessionId)],
    ) -> Result<std::collections::HashMap<SessionId, Session>, StoreError> {
        let keys = ids.iter().map(|(project, id)| (project_pk(project), session_sk(id)));
        let items: Vec<SessionItem> = batch_get_as(self.store, &self.store.names.main_table, keys).await?;
        Ok(items.into_iter().filter(|i| i.deleted_at.is_none()).map(|i| (i.session.id, i.session)).collect())
    }

    /// A page of every live session of every project, by creation time and id. An `after` that
    /// names no live session is `NotFound`.
    pub async fn list_all(
        &self,
        page: &PageRequest,
        after: Option<&SessionId>,
    ) -> Result<Page<Session>, StoreError> {
        let start = match after {
            Some(id) => {
                let project = self.locate(id).await?;
                let item = self.raw(&project, id).await?;
                let mut key = Item::new();
                for attr in ["PK", "SK", "GSI2PK", "GSI2SK"] {
                    key.insert(attr.to_owned(), item.get(attr).ok_or(StoreError::NotFound)?.clone());
                }
                Some(key)
            }
            None => None,
        };
        let page: Page<SessionItem> =
            query_index(self.store, BY_DUE, "GSI2PK", ALL_SESSIONS_LIST, start, page.limit, page.order)
                .await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.session).collect(), has_more: page.has_more })
    }

    /// A live session of `project`; deleted ones and other projects' are `NotFound`.
    pub async fn get(&self, project: &ProjectId, id: &SessionId) -> Result<Session, StoreError> {
        let item: SessionItem = serde_dynamo::from_item(self.raw(project, id).await?)?;
        Ok(item.session)
    }

    async fn raw(&self, project: &ProjectId, id: &SessionId) -> Result<Item, StoreError> {
        let item =
            super::get_item(self.store, &self.store.names.main_table, project_pk(project), session_sk(id))
                .await?
                .ok_or(StoreError::NotFound)?;
        if item.contains_key("deleted_at") {
            return Err(StoreError::NotFound);
        }
        Ok(item)
    }

    /// A page of the project's live sessions. An `after` that names no live session of this
    /// project is `NotFound`.
    pub async fn list(
        &self,
        project: &ProjectId,
        page: &PageRequest,
        after: Option<&SessionId>,
    ) -> Result<Page<Session>, StoreError> {
        let after = after.map(|id| self.raw(project, id));
        created_after(self.store, &sessions_list(project), after, page, |i: SessionItem| i.session).await
    }

    /// Sets a generated title only while the session has none: a title set meanwhile (PATCH,
    /// another generator) wins. `false` when it had one (or is gone).
    pub async fn set_title_if_unset(
        &self,
        project: &ProjectId,
        id: &SessionId,
        title: &agentplane_domain::session::Title,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(format!(
                "{LIVE} AND (attribute_not_exists(title) OR attribute_type(title, :null))"
            ))
            .update_expression("SET title = :title, updated_at = :now")
            .expression_attribute_values(":null", s("NULL"))
            .expression_attribute_values(":title", serde_dynamo::to_attribute_value(title)?)
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) => match conditional(e, |e| e.is_conditional_check_failed_exception()) {
                StoreError::Conflict => Ok(false),
                other => Err(other),
            },
        }
    }

    /// Applies a patch in one conditional update, so concurrent patches of different fields
    /// never undo each other.
    pub async fn update(
        &self,
        project: &ProjectId,
        id: &SessionId,
        patch: SessionPatch,
        now: Timestamp,
    ) -> Result<Session, StoreError> {
        let mut sets = vec!["updated_at = :now"];
        let mut request = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(LIVE)
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .return_values(ReturnValue::AllNew);
        if let Some(title) = patch.title {
            sets.push("title = :title");
            request = request.expression_attribute_values(":title", serde_dynamo::to_attribute_value(title)?);
        }
        if let Some(metadata) = patch.metadata {
            sets.push("metadata = :metadata");
            request =
                request.expression_attribute_values(":metadata", serde_dynamo::to_attribute_value(metadata)?);
        }
        let mut expression = String::new();
        match patch.budget {
            Some(Some(budget)) => {
                sets.push("budget = :budget");
                request =
                    request.expression_attribute_values(":budget", serde_dynamo::to_attribute_value(budget)?);
            }
            Some(None) => expression.push_str(" REMOVE budget"),
            None => {}
        }
        let expression = format!("SET {}{expression}", sets.join(", "));
        let out = request.update_expression(expression).send().await.map_err(|e| {
            match conditional(e, |e| e.is_conditional_check_failed_exception()) {
                StoreError::Conflict => StoreError::NotFound,
                other => other,
            }
        })?;
        let item: SessionItem = serde_dynamo::from_item(out.attributes.unwrap_or_default())?;
        Ok(item.session)
    }

    /// Deletes a session: it leaves lists and reads at once, and joins the purge queue
    /// (`session_purge`), in one write. Deleting twice is `NotFound`.
    pub async fn delete(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(LIVE)
            .update_expression("SET deleted_at = :now, GSI2PK = :purge, GSI2SK = :due REMOVE GSI1PK, GSI1SK")
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .expression_attribute_values(":purge", s(super::session_purge::SESSIONS_PURGE))
            .expression_attribute_values(":due", s(super::session_purge::purge_sort_key(now, project, id)))
            .send()
            .await
            .map_err(|e| match conditional(e, |e| e.is_conditional_check_failed_exception()) {
                StoreError::Conflict => StoreError::NotFound,
                other => other,
            })?;
        Ok(())
    }
}

/// Turn bookkeeping on the session item outside a turn's own writes (those are [`super::turns`]).
impl Sessions<'_> {
    /// The id of the turn holding the live session (`None` when none holds it), and whether a
    /// cancel was recorded for that turn; a strongly consistent read, so a turn that was taken
    /// over, settled or cancelled learns it at once.
    pub async fn turn_holder(&self, project: &ProjectId, id: &SessionId) -> Result<TurnHolder, StoreError> {
        let item = self.raw(project, id).await?;
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        let turn_id = text("current_turn_id");
        let cancel_requested = turn_id.is_some() && text("cancelled_turn_id") == turn_id;
        Ok(TurnHolder { turn_id, cancel_requested })
    }

    /// Records a cancel for the turn holding the session (it stops at its next step and
    /// releases the session with `cancelled`). Only while a live turn holds it (`running`, its
    /// hold not run out at `now`): otherwise `Conflict`, also when the session is gone — the
    /// caller reads the session to tell which (and needs it to answer anyway).
    /// Recording it again for the same turn changes nothing. A paused turn (`requires_action`)
    /// is not marked: nothing runs it, so the engine ends it at once (`TurnEngine::cancel_paused`).
    pub async fn cancel_turn(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> Result<Session, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(format!(
                "{LIVE} AND runtime_status = :running AND attribute_exists(current_turn_id) \
                 AND turn_held_until >= :now"
            ))
            .update_expression("SET cancelled_turn_id = current_turn_id")
            .expression_attribute_values(":running", s("running"))
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        updated_session(result)
    }

    /// Records that the turn holding the session died: idle again, stopped by `error`. Only
    /// while its hold is still past at `now` (a turn that took the session over meanwhile keeps
    /// it); `false` when there was nothing to record.
    pub async fn settle_dead_turn(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(format!("{LIVE} AND runtime_status = :running AND turn_held_until < :now"))
            .update_expression(
                "SET runtime_status = :idle, stop_reason = :reason, updated_at = :now \
                 REMOVE current_turn_id, turn_held_until, cancelled_turn_id",
            )
            .expression_attribute_values(":running", s("running"))
            .expression_attribute_values(":idle", s("idle"))
            .expression_attribute_values(
                ":reason",
                serde_dynamo::to_attribute_value(agentplane_domain::session::StopReason::Error)?,
            )
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                Ok(false)
            }
            Err(err) => Err(backend(err)),
        }
    }

    /// Records that the turn `turn_id` died, whatever its hold says: idle again, stopped by
    /// `error`. For a turn whose executor is known dead by a lease of its own (a Platform Run
    /// taken over), so the session's next turn need not wait for the dead one's hold to lapse.
    /// `false` when that turn no longer holds the session.
    pub async fn settle_turn_of(
        &self,
        project: &ProjectId,
        id: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(format!("{LIVE} AND runtime_status = :running AND current_turn_id = :turn"))
            .update_expression(
                "SET runtime_status = :idle, stop_reason = :reason, updated_at = :now \
                 REMOVE current_turn_id, turn_held_until, cancelled_turn_id",
            )
            .expression_attribute_values(":running", s("running"))
            .expression_attribute_values(":turn", s(turn_id))
            .expression_attribute_values(":idle", s("idle"))
            .expression_attribute_values(
                ":reason",
                serde_dynamo::to_attribute_value(agentplane_domain::session::StopReason::Error)?,
            )
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                Ok(false)
            }
            Err(err) => Err(backend(err)),
        }
    }

    /// Adds one model call's tokens and cost to the session's measured totals (atomic `ADD`,
    /// so concurrent writers never lose an update). A call without a price (`cost_usd: None`)
    /// adds its tokens to the unpriced counts as well, and nothing to the cost. A deleted session is `NotFound`.
    pub async fn add_usage(
        &self,
        project: &ProjectId,
        id: &SessionId,
        usage: agentplane_domain::pricing::Usage,
        cost_usd: Option<f64>,
    ) -> Result<(), StoreError> {
        let n = |v: String| aws_sdk_dynamodb::types::AttributeValue::N(v);
        let unpriced = if cost_usd.is_some() { Default::default() } else { usage };
        self.store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(id)))
            .condition_expression(LIVE)
            .update_expression(
                "ADD #u.input_tokens :i, #u.output_tokens :o, cost_usd :c, \
                 unpriced_input_tokens :ui, unpriced_output_tokens :uo",
            )
            .expression_attribute_names("#u", "usage")
            .expression_attribute_values(":i", n(usage.input_tokens.to_string()))
            .expression_attribute_values(":o", n(usage.output_tokens.to_string()))
            .expression_attribute_values(":c", n(format!("{:.8}", cost_usd.unwrap_or(0.0))))
            .expression_attribute_values(":ui", n(unpriced.input_tokens.to_string()))
            .expression_attribute_values(":uo", n(unpriced.output_tokens.to_string()))
            .send()
            .await
            .map_err(|e| match conditional(e, |e| e.is_conditional_check_failed_exception()) {
                // A deleted session takes no more usage.
                StoreError::Conflict => StoreError::NotFound,
                other => other,
            })?;
        Ok(())
    }
}

/// The session an `ALL_NEW` update answered; a failed condition is `Conflict`.
fn updated_session(
    result: Result<
        aws_sdk_dynamodb::operation::update_item::UpdateItemOutput,
        aws_sdk_dynamodb::error::SdkError<
            aws_sdk_dynamodb::operation::update_item::UpdateItemError,
            aws_sdk_dynamodb::config::http::HttpResponse,
        >,
    >,
) -> Result<Session, StoreError> {
    let out = result.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
    let item: SessionItem = serde_dynamo::from_item(out.attributes.unwrap_or_default())?;
    Ok(item.session)
}
