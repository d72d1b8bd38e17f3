//! Feedback on assistant messages in the main table.
//!
//! | item     | PK              | SK                                 | GSI1 (by_created)                             |
//! |----------|-----------------|------------------------------------|-----------------------------------------------|
//! | feedback | `PROJECT#{pid}` | `FEEDBACK#{sid}#{event:020}`       | `PROJECT#{pid}#AGENT#{aid}#FEEDBACK` / created#fb |
//! | locator  | `PROJECT#{pid}` | `FEEDBACKID#{fb}`                  | —                                             |
//!
//! One item per message: a second rating replaces the first (same id and creation time), by a
//! put conditional on the item read (none, or the same `updated_at`). The locator (written with
//! a new item) finds an item by its id, for list cursors.

use agentplane_domain::feedback::{Feedback, FeedbackId, Rating};
use agentplane_domain::ids::AgentId;
use agentplane_domain::page::{Order, Page, PageRequest, created_sort_key};
use agentplane_domain::{ProjectId, SessionId};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{Item, keyset_page, start_key};
use super::{conditional, s};
use crate::resources::BY_CREATED;
use crate::{Store, StoreError};

fn feedback_sk(session: &SessionId, event: u64) -> String {
    format!("FEEDBACK#{session}#{event:020}")
}
fn locator_sk(id: &FeedbackId) -> String {
    format!("FEEDBACKID#{id}")
}
fn agent_list(project: &ProjectId, agent: &AgentId) -> String {
    format!("PROJECT#{project}#AGENT#{agent}#FEEDBACK")
}

#[derive(Serialize, Deserialize)]
struct FeedbackItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    rating: Rating,
    feedback: Feedback,
}

impl FeedbackItem {
    fn of(f: &Feedback) -> Self {
        Self {
            pk: project_pk(&f.project_id),
            sk: feedback_sk(&f.session_id, f.event_id),
            gsi1pk: agent_list(&f.project_id, &f.agent_id),
            gsi1sk: created_sort_key(f.created_at, &f.id),
            rating: f.rating,
            feedback: f.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct LocatorItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    session_id: SessionId,
    event_id: u64,
}

pub struct FeedbackStore<'a> {
    store: &'a Store,
}

impl<'a> FeedbackStore<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// The feedback on one message, if any.
    pub async fn on_message(
        &self,
        project: &ProjectId,
        session: &SessionId,
        event: u64,
    ) -> Result<Option<Feedback>, StoreError> {
        let item: Option<FeedbackItem> =
            super::get_as(self.store, self.table(), project_pk(project), feedback_sk(session, event)).await?;
        Ok(item.map(|i| i.feedback))
    }

    /// Writes `feedback`: a new one (with its locator) unless `replaces`, else a later rating of
    /// the same feedback (the same id: the last writer's rating stands, and concurrent raters
    /// never conflict with each other). `Conflict` when a new one finds one there already, or a
    /// replacement finds none.
    pub async fn put(&self, feedback: &Feedback, replaces: bool) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(FeedbackItem::of(feedback))?;
        match replaces {
            true => {
                self.store
                    .dynamo
                    .put_item()
                    .table_name(self.table())
                    .set_item(Some(item))
                    .condition_expression("#f.id = :id")
                    .expression_attribute_names("#f", "feedback")
                    .expression_attribute_values(":id", super::s(feedback.id.to_string()))
                    .send()
                    .await
                    .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
                Ok(())
            }
            false => {
                let locator = LocatorItem {
                    pk: project_pk(&feedback.project_id),
                    sk: locator_sk(&feedback.id),
                    session_id: feedback.session_id,
                    event_id: feedback.event_id,
                };
                let mut tx = self.store.dynamo.transact_write_items();
                for item in [item, serde_dynamo::to_item(locator)?] {
                    let put = Put::builder()
                        .table_name(self.table())
                        .set_item(Some(item))
                        .condition_expression("attribute_not_exists(PK)")
                        .build()
                        .map_err(StoreError::unavailable)?;
                    tx = tx.transact_items(TransactWriteItem::builder().put(put).build());
                }
                tx.send().await.map_err(super::transaction_conflict)?;
                Ok(())
            }
        }
    }

    async fn raw_by_id(&self, project: &ProjectId, id: &FeedbackId) -> Result<Item, StoreError> {
        let locator: LocatorItem =
            super::get_as(self.store, self.table(), project_pk(project), locator_sk(id))
                .await?
                .ok_or(StoreError::NotFound)?;
        super::get_item(
            self.store,
            self.table(),
            project_pk(project),
            feedback_sk(&locator.session_id, locator.event_id),
        )
        .await?
        .ok_or(StoreError::NotFound)
    }

    /// An agent's feedback by creation time, only of `rating` when given; `after` must be
    /// feedback on this agent (else `NotFound`).
    pub async fn list(
        &self,
        project: &ProjectId,
        agent: &AgentId,
        rating: Option<Rating>,
        page: &PageRequest,
        after: Option<&FeedbackId>,
    ) -> Result<Page<Feedback>, StoreError> {
        let list = agent_list(project, agent);
        let start = match after {
            Some(id) => {
                let item = self.raw_by_id(project, id).await?;
                if item.get("GSI1PK").and_then(|v| v.as_s().ok()) != Some(&list) {
                    return Err(StoreError::NotFound);
                }
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let mut query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .index_name(BY_CREATED)
            .key_condition_expression("GSI1PK = :list")
            .expression_attribute_values(":list", s(list))
            .scan_index_forward(page.order == Order::Asc);
        if let Some(rating) = rating {
            query = query
                .filter_expression("rating = :rating")
                .expression_attribute_values(":rating", s(rating.as_str()));
        }
        keyset_page(query, page.limit, start, |item| {
            Ok(serde_dynamo::from_item::<_, FeedbackItem>(item)?.feedback)
        })
        .await
    }
}
