//! What the re-seal pass reads and writes: every endpoint item by a paged scan of the main
//! table, each one's `secrets` replaced conditionally, and the pass's position
//! (`JOB#webhook-reseal`, `CURSOR`).

use agentplane_domain::platform::workspace_sweep::ScanPosition;
use agentplane_domain::webhook::StoredSecret;

use crate::dynamo::job_cursor::{self, Cursor};

use super::*;

/// The pass's name in its cursor item (`JOB#webhook-reseal`).
const JOB: &str = "webhook-reseal";
/// Items a scan page evaluates (most are not endpoints).
const SCAN_PAGE: i32 = 200;

impl Webhooks<'_> {
    /// A page of endpoint items after `after`, and where the next page starts.
    pub async fn endpoints_after(
        &self,
        after: Option<&ScanPosition>,
    ) -> Result<(Vec<Endpoint>, Option<ScanPosition>), StoreError> {
        let (items, next) = job_cursor::scan_page(
            self.store,
            after,
            SCAN_PAGE,
            "begins_with(SK, :endpoint) AND (begins_with(PK, :project) OR begins_with(PK, :tenant))",
            &[(":endpoint", "WEBHOOK#"), (":project", "PROJECT#"), (":tenant", "TENANT#")],
        )
        .await?;
        let mut endpoints = Vec::new();
        for item in items {
            let item: EndpointItem = serde_dynamo::from_item(item)?;
            endpoints.push(item.endpoint);
        }
        Ok((endpoints, next))
    }

    /// Writes `secrets` as the endpoint's, if its `updated_at` is still the one read.
    pub async fn replace_secrets(
        &self,
        endpoint: &Endpoint,
        secrets: &[StoredSecret],
    ) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(owner_pk(&endpoint.owner)))
            .key("SK", s(endpoint_sk(&endpoint.id)))
            .update_expression("SET secrets = :secrets")
            .condition_expression("attribute_exists(PK) AND updated_at = :read")
            .expression_attribute_values(":secrets", serde_dynamo::to_attribute_value(secrets)?)
            .expression_attribute_values(":read", serde_dynamo::to_attribute_value(endpoint.updated_at)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    pub async fn reseal_cursor(&self) -> Result<Option<ScanPosition>, StoreError> {
        Ok(match job_cursor::load(self.store, JOB).await? {
            Cursor::After(at) => Some(at),
            Cursor::Start | Cursor::Done => None,
        })
    }

    pub async fn save_reseal_cursor(&self, at: Option<&ScanPosition>) -> Result<(), StoreError> {
        let at = at.map_or(Cursor::Start, |at| Cursor::After(at.clone()));
        job_cursor::save(self.store, JOB, &at).await
    }
}
