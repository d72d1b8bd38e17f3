//! What the re-seal pass reads and writes: every endpoint item by a paged scan of the main
//! table, each one's `secrets` replaced conditionally, and the pass's position
//! (`JOB#webhook-reseal`, `CURSOR`).

use std::collections::HashMap;

use agentplane_domain::platform::workspace_sweep::ScanPosition;
use agentplane_domain::webhook::StoredSecret;

use super::*;

const CURSOR_PK: &str = "JOB#webhook-reseal";
const CURSOR_SK: &str = "CURSOR";
/// Items a scan page evaluates (most are not endpoints).
const SCAN_PAGE: i32 = 200;

#[derive(Serialize, Deserialize)]
struct CursorItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    at_pk: String,
    at_sk: String,
}

impl Webhooks<'_> {
    /// A page of endpoint items after `after`, and where the next page starts.
    pub async fn endpoints_after(
        &self,
        after: Option<&ScanPosition>,
    ) -> Result<(Vec<Endpoint>, Option<ScanPosition>), StoreError> {
        let start = after.map(|p| HashMap::from([("PK".to_owned(), s(&p.pk)), ("SK".to_owned(), s(&p.sk))]));
        let out = self
            .store
            .dynamo
            .scan()
            .table_name(self.table())
            .consistent_read(true)
            .limit(SCAN_PAGE)
            .set_exclusive_start_key(start)
            .filter_expression(
                "begins_with(SK, :endpoint) AND (begins_with(PK, :project) OR begins_with(PK, :tenant))",
            )
            .expression_attribute_values(":endpoint", s("WEBHOOK#"))
            .expression_attribute_values(":project", s("PROJECT#"))
            .expression_attribute_values(":tenant", s("TENANT#"))
            .send()
            .await
            .map_err(backend)?;
        let mut endpoints = Vec::new();
        for item in out.items.unwrap_or_default() {
            let item: EndpointItem = serde_dynamo::from_item(item)?;
            endpoints.push(item.endpoint);
        }
        let next = out.last_evaluated_key.filter(|k| !k.is_empty()).and_then(|key| {
            let text = |name: &str| key.get(name).and_then(|v| v.as_s().ok()).cloned();
            Some(ScanPosition { pk: text("PK")?, sk: text("SK")? })
        });
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
        let item: Option<CursorItem> =
            crate::dynamo::get_as(self.store, self.table(), CURSOR_PK, CURSOR_SK).await?;
        Ok(item.map(|i| ScanPosition { pk: i.at_pk, sk: i.at_sk }))
    }

    pub async fn save_reseal_cursor(&self, at: Option<&ScanPosition>) -> Result<(), StoreError> {
        match at {
            Some(at) => {
                let item = CursorItem {
                    pk: CURSOR_PK.into(),
                    sk: CURSOR_SK.into(),
                    at_pk: at.pk.clone(),
                    at_sk: at.sk.clone(),
                };
                self.store
                    .dynamo
                    .put_item()
                    .table_name(self.table())
                    .set_item(Some(serde_dynamo::to_item(item)?))
                    .send()
                    .await
                    .map_err(backend)?;
            }
            None => {
                self.store
                    .dynamo
                    .delete_item()
                    .table_name(self.table())
                    .key("PK", s(CURSOR_PK))
                    .key("SK", s(CURSOR_SK))
                    .send()
                    .await
                    .map_err(backend)?;
            }
        }
        Ok(())
    }
}
