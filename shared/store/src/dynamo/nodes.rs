//! Sandbox nodes, their tokens, their heartbeats, and the durable command queue Core keeps for
//! each node.
//!
//! | item                 | table     | PK                   | SK                 | notes                        |
//! |----------------------|-----------|----------------------|--------------------|------------------------------|
//! | node                 | main      | `NODE#{id}`          | `NODE`             | GSI1 `NODES` / created#id    |
//! | node token lookup    | main      | `NODETOKEN#{sha256}` | `NODETOKEN`        | the plaintext is never kept; `expires_at` once rotated away (grace) |
//! | node name (enrolled) | main      | `NODENAME#{name}`    | `NODENAME`         | one node per enrolled name   |
//! | queued command       | main      | `NODE#{id}`          | `CMD#{command id}` | deleted when answered        |
//! | command outcome      | main      | `CMDRESULT#{id}`     | `RESULT`           | TTL 1 h; the waiting caller reads it |
//! | heartbeat history    | telemetry | `NODE#{id}`          | `OBS#{ms:015}`     | TTL 25 h; host values only   |
//!
//! A history item holds only the host values of one heartbeat (no per-sandbox counters: those
//! are kept elsewhere), so a day at the daemon's cadence stays a few pages; reads take only the
//! requested sort-key range and follow every page.

use agentplane_domain::Timestamp;
use agentplane_domain::api_key::KeyHash;
use agentplane_domain::ids::{CommandId, NodeId};
use agentplane_domain::page::created_sort_key;
use agentplane_domain::sandbox::Node;
use agentplane_domain::sandbox::command::{CommandEnvelope, CommandOutcome};
use agentplane_domain::sandbox::host::HostObservation;
use agentplane_domain::telemetry::node::NodeObservation;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use serde::{Deserialize, Serialize};

use super::{backend, conditional, get_as, put_new, query_all, s, transaction_conflict};
use crate::resources::BY_CREATED;
use crate::{Store, StoreError};

mod tokens;
pub use tokens::Enrollment;

pub fn node_pk(id: &NodeId) -> String {
    format!("NODE#{id}")
}
pub const NODE_SK: &str = "NODE";
pub const NODES_LIST: &str = "NODES";
fn token_pk(hash: &str) -> String {
    format!("NODETOKEN#{hash}")
}
const TOKEN_SK: &str = "NODETOKEN";
fn command_sk(id: &CommandId) -> String {
    format!("CMD#{id}")
}
fn result_pk(id: &CommandId) -> String {
    format!("CMDRESULT#{id}")
}
const RESULT_SK: &str = "RESULT";

/// Heartbeat history is kept 25 hours.
pub const NODE_HISTORY_TTL_S: i64 = 25 * 3600;

#[derive(Serialize, Deserialize)]
struct NodeItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(flatten)]
    node: Node,
    /// The SHA-256 of the node's current token and of the one it rotated away from (still
    /// accepted until its grace ends): what a Core revocation deletes. Absent on nodes
    /// registered before tokens rotated (a revocation then finds their tokens by a scan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous_token_hash: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct TokenItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    node_id: NodeId,
    /// Unix seconds after which the token is refused (the table's TTL attribute, so it is
    /// deleted some time later); absent: a current token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct CommandItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    status: String,
    /// The envelope as JSON text: commands are read whole by one reader.
    envelope: String,
    expires_at: i64,
}

#[derive(Serialize, Deserialize)]
struct ResultItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    outcome: String,
    expires_at: i64,
}

#[derive(Serialize, Deserialize)]
struct HistoryItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    /// JSON of the host values ([`NodeObservation`]). Items written before this shape carried
    /// the whole heartbeat; their extra fields are ignored on the way back.
    observation: String,
    expires_at: i64,
}

fn history_sk(at: Timestamp) -> String {
    format!("OBS#{:015}", at.unix_millis().max(0))
}

fn history_item(id: &NodeId, observation: &NodeObservation) -> Result<HistoryItem, StoreError> {
    Ok(HistoryItem {
        pk: node_pk(id),
        sk: history_sk(observation.observed_at),
        observation: serde_json::to_string(observation).map_err(StoreError::unavailable)?,
        expires_at: observation.observed_at.unix_seconds() + NODE_HISTORY_TTL_S,
    })
}

/// What one history read fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeHistoryRead {
    /// Oldest first.
    pub observations: Vec<NodeObservation>,
    /// DynamoDB items read (the queries' scanned counts).
    pub items_read: u64,
    pub requests: u32,
}

pub struct Nodes<'a> {
    store: &'a Store,
}

impl<'a> Nodes<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    pub async fn register(&self, node: &Node, token: &KeyHash) -> Result<(), StoreError> {
        let item = NodeItem {
            pk: node_pk(&node.id),
            sk: NODE_SK.into(),
            gsi1pk: NODES_LIST.into(),
            gsi1sk: created_sort_key(node.created_at, &node.id),
            node: node.clone(),
            token_hash: Some(token.as_str().to_owned()),
            previous_token_hash: None,
        };
        let lookup = TokenItem::current(token, node.id);
        let put = |item| {
            Put::builder()
                .table_name(self.table())
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)
        };
        self.store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put(serde_dynamo::to_item(item)?)?).build())
            .transact_items(TransactWriteItem::builder().put(put(serde_dynamo::to_item(lookup)?)?).build())
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// The node whose token hashes to `token`, unless that token's grace ended before `now`.
    pub async fn authenticate(&self, token: &KeyHash, now: Timestamp) -> Result<Option<NodeId>, StoreError> {
        let item: Option<TokenItem> =
            get_as(self.store, self.table(), token_pk(token.as_str()), TOKEN_SK).await?;
        Ok(item.filter(|i| i.expires_at.is_none_or(|at| now.unix_seconds() < at)).map(|i| i.node_id))
    }

    pub async fn get(&self, id: &NodeId) -> Result<Node, StoreError> {
        let item: Option<NodeItem> = get_as(self.store, self.table(), node_pk(id), NODE_SK).await?;
        Ok(item.ok_or(StoreError::NotFound)?.node)
    }

    /// Every registered node (a deployment has few).
    pub async fn all(&self) -> Result<Vec<Node>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .index_name(BY_CREATED)
            .key_condition_expression("GSI1PK = :list")
            .expression_attribute_values(":list", s(NODES_LIST));
        let items: Vec<NodeItem> = query_all(query).await?;
        Ok(items.into_iter().map(|i| i.node).collect())
    }

    /// Appends the observation to the node's history, then keeps it on the node's item: in that
    /// order, so whatever the node item shows is already in its history (a reader that sees the
    /// second heartbeat on the item finds both in the history).
    pub async fn record_heartbeat(
        &self,
        id: &NodeId,
        observation: &HostObservation,
    ) -> Result<(), StoreError> {
        let history = history_item(id, &observation.telemetry())?;
        self.store
            .dynamo
            .put_item()
            .table_name(&self.store.names.telemetry_table)
            .set_item(Some(serde_dynamo::to_item(history)?))
            .send()
            .await
            .map_err(backend)?;
        self.store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(node_pk(id)))
            .key("SK", s(NODE_SK))
            .condition_expression("attribute_exists(PK)")
            .update_expression("SET #host = :host, #conn = :conn, #seen = :at")
            .expression_attribute_names("#host", "host")
            .expression_attribute_names("#conn", "connection_id")
            .expression_attribute_names("#seen", "last_seen_at")
            .expression_attribute_values(":host", serde_dynamo::to_attribute_value(observation)?)
            .expression_attribute_values(":conn", s(observation.connection_id.clone()))
            .expression_attribute_values(":at", serde_dynamo::to_attribute_value(observation.observed_at)?)
            .send()
            .await
            .map_err(|e| match conditional(e, |e| e.is_conditional_check_failed_exception()) {
                StoreError::Conflict => StoreError::NotFound,
                other => other,
            })?;
        Ok(())
    }

    /// Appends host observations to a node's history in batches (BatchWriteItem, 25 a call),
    /// with the same items a heartbeat writes; for backfills and tests of long histories.
    pub async fn append_history(
        &self,
        id: &NodeId,
        observations: &[NodeObservation],
    ) -> Result<(), StoreError> {
        let table = &self.store.names.telemetry_table;
        let mut requests = Vec::with_capacity(observations.len());
        for observation in observations {
            let put = PutRequest::builder()
                .set_item(Some(serde_dynamo::to_item(history_item(id, observation)?)?))
                .build()
                .map_err(StoreError::unavailable)?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        super::batch_write(self.store, table, requests).await
    }

    /// The stored host observations of a node taken in `[from, to]`, oldest first: only that
    /// sort-key range is read, every page of it.
    pub async fn history(
        &self,
        id: &NodeId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<NodeHistoryRead, StoreError> {
        let mut read = NodeHistoryRead { observations: Vec::new(), items_read: 0, requests: 0 };
        let mut start = None;
        loop {
            let page = self
                .store
                .dynamo
                .query()
                .table_name(&self.store.names.telemetry_table)
                .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(node_pk(id)))
                .expression_attribute_values(":from", s(history_sk(from)))
                .expression_attribute_values(":to", s(history_sk(to)))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            read.requests += 1;
            read.items_read += u64::try_from(page.scanned_count).unwrap_or(0);
            for item in page.items.unwrap_or_default() {
                let h: HistoryItem = serde_dynamo::from_item(item)?;
                read.observations.push(
                    serde_json::from_str(&h.observation).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                );
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(read),
            }
        }
    }

    pub async fn enqueue(&self, node: &NodeId, envelope: &CommandEnvelope) -> Result<(), StoreError> {
        let item = CommandItem {
            pk: node_pk(node),
            sk: command_sk(&envelope.id),
            status: "pending".into(),
            envelope: serde_json::to_string(envelope).map_err(StoreError::unavailable)?,
            expires_at: envelope.expires_at.unix_seconds() + 3600,
        };
        put_new(self.store, self.table(), item).await
    }

    /// Claims the node's pending commands for `connection`, oldest first. A claimed command is
    /// not handed out again; one answered is deleted.
    pub async fn claim_pending(
        &self,
        node: &NodeId,
        connection: &str,
    ) -> Result<Vec<CommandEnvelope>, StoreError> {
        let out = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk AND begins_with(SK, :cmd)")
            .filter_expression("#status = :pending")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":pk", s(node_pk(node)))
            .expression_attribute_values(":cmd", s("CMD#"))
            .expression_attribute_values(":pending", s("pending"))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        let mut claimed = Vec::new();
        for item in out.items.unwrap_or_default() {
            let item: CommandItem = serde_dynamo::from_item(item)?;
            let result = self
                .store
                .dynamo
                .update_item()
                .table_name(self.table())
                .key("PK", s(item.pk.clone()))
                .key("SK", s(item.sk.clone()))
                .condition_expression("#status = :pending")
                .update_expression("SET #status = :claimed, #conn = :conn")
                .expression_attribute_names("#conn", "connection_id")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":pending", s("pending"))
                .expression_attribute_values(":claimed", s("claimed"))
                .expression_attribute_values(":conn", s(connection))
                .send()
                .await
                .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
            match result {
                Ok(_) => claimed.push(
                    serde_json::from_str::<CommandEnvelope>(&item.envelope)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                ),
                Err(StoreError::Conflict) => {}
                Err(err) => return Err(err),
            }
        }
        claimed.sort_by_key(|c| c.issued_at);
        Ok(claimed)
    }

    /// Records a command's outcome and removes it from the queue, in one transaction; answering
    /// twice, or answering a command of another node, is `NotFound`.
    pub async fn complete(
        &self,
        node: &NodeId,
        command: &CommandId,
        outcome: &CommandOutcome,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let result = ResultItem {
            pk: result_pk(command),
            sk: RESULT_SK.into(),
            outcome: serde_json::to_string(outcome).map_err(StoreError::unavailable)?,
            expires_at: now.unix_seconds() + 3600,
        };
        let delete = aws_sdk_dynamodb::types::Delete::builder()
            .table_name(self.table())
            .key("PK", s(node_pk(node)))
            .key("SK", s(command_sk(command)))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(result)?))
            .build()
            .map_err(StoreError::unavailable)?;
        let out = self
            .store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().delete(delete).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .send()
            .await
            .map_err(transaction_conflict);
        match out {
            Ok(_) => Ok(()),
            Err(StoreError::Conflict) => Err(StoreError::NotFound),
            Err(err) => Err(err),
        }
    }

    /// Takes back a command nobody claimed yet (its caller gave up). `Conflict` when the node
    /// already has it.
    pub async fn withdraw(&self, node: &NodeId, command: &CommandId) -> Result<(), StoreError> {
        self.store
            .dynamo
            .delete_item()
            .table_name(self.table())
            .key("PK", s(node_pk(node)))
            .key("SK", s(command_sk(command)))
            .condition_expression("#status = :pending")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":pending", s("pending"))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// The outcome of a command, once it has one.
    pub async fn outcome(&self, command: &CommandId) -> Result<Option<CommandOutcome>, StoreError> {
        let item: Option<ResultItem> =
            get_as(self.store, self.table(), result_pk(command), RESULT_SK).await?;
        match item {
            Some(item) => {
                Ok(Some(serde_json::from_str(&item.outcome).map_err(|e| StoreError::Corrupt(e.to_string()))?))
            }
            None => Ok(None),
        }
    }
}
