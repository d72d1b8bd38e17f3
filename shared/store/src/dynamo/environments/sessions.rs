//! The sessions of an environment: created with their link, listed by it.

use super::*;
use crate::dynamo::page::{query_created, start_key};

impl Environments<'_> {
    /// Creates `session` in its environment (`session.environment_id`): the session, its
    /// locator and its link in one transaction, under the condition that the environment
    /// exists in the session's project (`NotFound` otherwise).
    pub async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        let environment = session.environment_id.ok_or(StoreError::NotFound)?;
        let table = &self.store.names.main_table;
        let check = ConditionCheck::builder()
            .table_name(table)
            .key("PK", s(project_pk(&session.project_id)))
            .key("SK", s(environment_sk(&environment)))
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(deleted_at)")
            .build()
            .map_err(StoreError::unavailable)?;
        let link = LinkItem {
            pk: project_pk(&session.project_id),
            sk: link_sk(&environment, &session.id),
            gsi1pk: links_list(&session.project_id, &environment),
            gsi1sk: created_sort_key(session.created_at, &session.id),
            session_id: session.id,
            created_at: session.created_at,
        };
        let put = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(link)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let extra = vec![
            TransactWriteItem::builder().condition_check(check).build(),
            TransactWriteItem::builder().put(put).build(),
        ];
        match self.store.sessions().create_with(session, extra).await {
            // The session id is fresh: a failed condition is the environment's.
            Err(StoreError::Conflict) => Err(StoreError::NotFound),
            other => other,
        }
    }

    /// A page of the environment's live sessions (a deleted one is left out of its page). An
    /// `after` naming no session of this environment is `NotFound`.
    pub async fn list_sessions(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        page: &PageRequest,
        after: Option<&SessionId>,
    ) -> Result<Page<Session>, StoreError> {
        let table = &self.store.names.main_table;
        let start = match after {
            Some(id) => {
                let item = get_item(self.store, table, project_pk(project), link_sk(environment, id))
                    .await?
                    .ok_or(StoreError::NotFound)?;
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let links: Page<LinkItem> =
            query_created(self.store, &links_list(project, environment), start, page.limit, page.order)
                .await?;
        let ids: Vec<(ProjectId, SessionId)> = links.items.iter().map(|l| (*project, l.session_id)).collect();
        let mut found = self.store.sessions().get_many(&ids).await?;
        let items = links.items.iter().filter_map(|l| found.remove(&l.session_id)).collect();
        Ok(Page { items, has_more: links.has_more })
    }
}
