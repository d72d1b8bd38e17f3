//! The stored-shape migration of a session's runtime placement. Sessions created in a Platform
//! environment before this release were stored with `environment_mode: none` beside their
//! `environment_id`: a pair Core's runtime rules call an inconsistent identity, so every
//! runtime-observation page that held one answered 500, for every operator. Such a session is
//! self_hosted (its environment's workspace is a sandbox on a node, not a managed allocation).
//!
//! - Reading: an item of the old shape reads as self_hosted ([`upgrade`], applied where the
//!   session item is decoded), so no reader sees the old pair, before or during the backfill.
//! - Rewriting: the retention sweep's [`SessionPlacement::backfill`] walks every session (the
//!   all-sessions partition of `by_due`, oldest first, in bounded pages, only the old items
//!   returned), rewrites each with a conditional update (`environment_mode = none` and an
//!   `environment_id` present: idempotent; a session changed meanwhile is left as it is), and
//!   keeps its cursor in one item (`MIGRATION` / `SESSION_PLACEMENT`), so a pass that stops is
//!   resumed by the next. At the end it marks itself done; later passes cost one read. The store
//!   refuses to write the old pair (`Sessions::create`), so once done it stays done.

use std::collections::HashMap;

use agentplane_domain::session::{EnvironmentMode, Session};
use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::ALL_SESSIONS_LIST;
use super::{backend, conditional, get_item, s};
use crate::resources::BY_DUE;
use crate::{Store, StoreError};

const MIGRATION_PK: &str = "MIGRATION";
const MIGRATION_SK: &str = "SESSION_PLACEMENT";
/// Sessions one page of the walk reads.
const PAGE: i32 = 100;

/// Reads a session stored in the old shape as what it is: a none session with an environment
/// is self_hosted. `true` when it changed something.
pub fn upgrade(session: &mut Session) -> bool {
    if session.environment_mode == EnvironmentMode::None && session.environment_id.is_some() {
        session.environment_mode = EnvironmentMode::SelfHosted;
        return true;
    }
    false
}

/// What one backfill pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backfilled {
    /// Sessions rewritten from the old shape.
    pub rewritten: usize,
    /// Whether the walk has reached the end (now or in an earlier pass).
    pub done: bool,
}

pub struct SessionPlacement<'a> {
    store: &'a Store,
}

impl<'a> SessionPlacement<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Rewrites the old-shape sessions of up to `max_pages` pages of the walk, from where the
    /// last pass stopped.
    pub async fn backfill(&self, max_pages: usize) -> Result<Backfilled, StoreError> {
        self.backfill_pages(max_pages, PAGE).await
    }

    /// [`Self::backfill`] with pages of `page` sessions (tests walk in small pages).
    pub async fn backfill_pages(&self, max_pages: usize, page: i32) -> Result<Backfilled, StoreError> {
        let marker = get_item(self.store, self.table(), MIGRATION_PK, MIGRATION_SK).await?;
        if marker.as_ref().and_then(|m| m.get("done")).and_then(|d| d.as_bool().ok()) == Some(&true) {
            return Ok(Backfilled { rewritten: 0, done: true });
        }
        let mut start: Option<HashMap<String, AttributeValue>> =
            marker.and_then(|mut m| m.remove("cursor")).and_then(|c| c.as_m().ok().cloned());
        let mut rewritten = 0;
        for _ in 0..max_pages {
            let found = self
                .store
                .dynamo
                .query()
                .table_name(self.table())
                .index_name(BY_DUE)
                .key_condition_expression("GSI2PK = :p")
                .filter_expression("environment_mode = :none AND attribute_exists(environment_id)")
                .projection_expression("PK, SK")
                .expression_attribute_values(":p", s(ALL_SESSIONS_LIST))
                .expression_attribute_values(":none", s("none"))
                .set_exclusive_start_key(start.take())
                .limit(page.max(1))
                .send()
                .await
                .map_err(backend)?;
            for item in found.items.unwrap_or_default() {
                if self.rewrite(item).await? {
                    rewritten += 1;
                }
            }
            match found.last_evaluated_key.filter(|k| !k.is_empty()) {
                Some(next) => {
                    self.save(Some(next.clone())).await?;
                    start = Some(next);
                }
                None => {
                    self.save(None).await?;
                    return Ok(Backfilled { rewritten, done: true });
                }
            }
        }
        Ok(Backfilled { rewritten, done: false })
    }

    /// One old-shape session made self_hosted; `false` when it was not of the old shape any more.
    async fn rewrite(&self, item: HashMap<String, AttributeValue>) -> Result<bool, StoreError> {
        let (Some(pk), Some(sk)) = (item.get("PK").cloned(), item.get("SK").cloned()) else {
            return Ok(false);
        };
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", pk)
            .key("SK", sk)
            .condition_expression("environment_mode = :none AND attribute_exists(environment_id)")
            .update_expression("SET environment_mode = :self_hosted")
            .expression_attribute_values(":none", s("none"))
            .expression_attribute_values(":self_hosted", s("self_hosted"))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Where the walk goes on (`None`: it is done).
    async fn save(&self, cursor: Option<HashMap<String, AttributeValue>>) -> Result<(), StoreError> {
        let mut put = self
            .store
            .dynamo
            .put_item()
            .table_name(self.table())
            .item("PK", s(MIGRATION_PK))
            .item("SK", s(MIGRATION_SK))
            .item("done", AttributeValue::Bool(cursor.is_none()));
        if let Some(cursor) = cursor {
            put = put.item("cursor", AttributeValue::M(cursor));
        }
        put.send().await.map_err(backend)?;
        Ok(())
    }
}
