//! The turns a tenant's monthly spend limit paused, so that a raise of the limit (or a new
//! month) finds them again without reading every session; and the outbox of session budget
//! raises (noted under the project's key, which has no limit: the sweep carries such a turn on
//! if its own budget now allows, should the raise's continuation not have been sent).
//!
//! | item         | PK              | SK                                   |
//! |--------------|-----------------|--------------------------------------|
//! | tenant pause | `TENANT_PAUSES` | `{tenant key}#{project}#{session}`   |
//!
//! One partition: only turns waiting on a tenant's limit are in it, and each leaves it once it
//! is carried on (or its session is gone or idle). A pause is noted before the turn's pausing
//! write, so a noted pause may name a session that never paused: the reader checks the session.

use serde::{Deserialize, Serialize};

use super::{backend, query_all, s};
use crate::{Store, StoreError};

pub const TENANT_PAUSES: &str = "TENANT_PAUSES";

pub use agentplane_engine::ports::background::TenantPause;

#[derive(Serialize, Deserialize)]
struct TenantPauseItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(flatten)]
    pause: TenantPause,
}

fn sort_key(pause: &TenantPause) -> String {
    format!("{}#{}#{}", pause.tenant_key, pause.project_id, pause.session_id)
}

pub struct TenantPauses<'a> {
    store: &'a Store,
}

impl<'a> TenantPauses<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Notes the pause (again: the same item).
    pub async fn note(&self, pause: &TenantPause) -> Result<(), StoreError> {
        let item = TenantPauseItem { pk: TENANT_PAUSES.into(), sk: sort_key(pause), pause: pause.clone() };
        self.store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(item)?))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// The noted pauses of one tenant key.
    pub async fn of_tenant(&self, tenant_key: &str) -> Result<Vec<TenantPause>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk AND begins_with(SK, :tenant)")
            .expression_attribute_values(":pk", s(TENANT_PAUSES))
            .expression_attribute_values(":tenant", s(format!("{tenant_key}#")))
            .consistent_read(true);
        let items: Vec<TenantPauseItem> = query_all(query).await?;
        Ok(items.into_iter().map(|i| i.pause).collect())
    }

    /// Every noted pause, of every tenant.
    pub async fn all(&self) -> Result<Vec<TenantPause>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(TENANT_PAUSES))
            .consistent_read(true);
        let items: Vec<TenantPauseItem> = query_all(query).await?;
        Ok(items.into_iter().map(|i| i.pause).collect())
    }

    /// Forgets the pause (nothing when it is gone already).
    pub async fn remove(&self, pause: &TenantPause) -> Result<(), StoreError> {
        self.store
            .dynamo
            .delete_item()
            .table_name(self.table())
            .key("PK", s(TENANT_PAUSES))
            .key("SK", s(sort_key(pause)))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}
