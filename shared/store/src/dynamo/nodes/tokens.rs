//! Node tokens that rotate, are revoked, and are handed out by enrollment.
//!
//! - A node rotates its own token: the new token is written, the presented one (and the node's
//!   recorded current one, if the node presented an older token still in its grace) is kept
//!   until a grace end, and the node item records the new current token. One transaction,
//!   conditioned on the node item's current token as read, so two concurrent rotations end
//!   with one winner (the other answers a conflict and the node retries with what it holds).
//! - Core reissues a node's token (a leaked one): every token the node item records is deleted
//!   at once and a new one becomes current. Nodes registered before tokens were recorded on the
//!   node item have their tokens found by a scan.
//! - Enrollment creates a node under a name (`NODENAME#…`), or reissues the token of the node
//!   that name already has.

use std::collections::HashMap;

use agentplane_domain::Timestamp;
use agentplane_domain::api_key::KeyHash;
use agentplane_domain::ids::NodeId;
use agentplane_domain::page::created_sort_key;
use agentplane_domain::sandbox::Node;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use super::{NODE_SK, NODES_LIST, NodeItem, Nodes, TOKEN_SK, TokenItem, node_pk, token_pk};
use crate::StoreError;
use crate::dynamo::{backend, get_as, s, transaction_conflict};

const NAME_SK: &str = "NODENAME";
fn name_pk(name: &str) -> String {
    format!("NODENAME#{name}")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct NameItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    node_id: NodeId,
}

impl TokenItem {
    pub(super) fn current(hash: &KeyHash, node: NodeId) -> Self {
        Self { pk: token_pk(hash.as_str()), sk: TOKEN_SK.into(), node_id: node, expires_at: None }
    }
}

/// What an enrollment did.
#[derive(Debug, Clone, PartialEq)]
pub enum Enrollment {
    /// A new node under the name.
    Created(Node),
    /// The name's node, whose earlier tokens are revoked.
    Reissued(Node),
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

impl Nodes<'_> {
    fn put(&self, item: HashMap<String, AttributeValue>) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Keeps the token `hash` until `until` (an earlier end it already has stays).
    fn expire(&self, hash: &str, node: &NodeId, until: Timestamp) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(self.table())
            .key("PK", s(token_pk(hash)))
            .key("SK", s(TOKEN_SK))
            .update_expression("SET expires_at = if_not_exists(expires_at, :until)")
            .condition_expression("node_id = :node")
            .expression_attribute_values(":until", n(until.unix_seconds()))
            .expression_attribute_values(":node", s(node.to_string()))
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    fn delete(&self, hash: &str) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(self.table())
            .key("PK", s(token_pk(hash)))
            .key("SK", s(TOKEN_SK))
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// Records `new` as the node's current token and `previous` (or none) as the one in grace,
    /// if the node item still records `read_current` (none: a node from before tokens were
    /// recorded).
    fn record(
        &self,
        node: &NodeId,
        read_current: Option<&str>,
        new: &KeyHash,
        previous: Option<&str>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(self.table())
            .key("PK", s(node_pk(node)))
            .key("SK", s(NODE_SK))
            .expression_attribute_values(":new", s(new.as_str()));
        update = match previous {
            Some(previous) => update
                .update_expression("SET token_hash = :new, previous_token_hash = :previous")
                .expression_attribute_values(":previous", s(previous)),
            None => update.update_expression("SET token_hash = :new REMOVE previous_token_hash"),
        };
        update = match read_current {
            Some(current) => update
                .condition_expression("attribute_exists(PK) AND token_hash = :current")
                .expression_attribute_values(":current", s(current)),
            None => update.condition_expression("attribute_exists(PK) AND attribute_not_exists(token_hash)"),
        };
        Ok(TransactWriteItem::builder().update(update.build().map_err(StoreError::unavailable)?).build())
    }

    async fn item(&self, node: &NodeId) -> Result<NodeItem, StoreError> {
        get_as::<NodeItem>(self.store, self.table(), node_pk(node), NODE_SK)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// The node's token `presented` (one it authenticated with) is replaced by `new`: `new` is
    /// current, and `presented` — with the recorded current token, when the node presented an
    /// older one — is accepted until `grace_until`. `Conflict`: a concurrent rotation won.
    pub async fn rotate_token(
        &self,
        node: &NodeId,
        presented: &KeyHash,
        new: &KeyHash,
        grace_until: Timestamp,
    ) -> Result<(), StoreError> {
        let item = self.item(node).await?;
        let current = item.token_hash.as_deref();
        let mut writes = vec![
            self.put(serde_dynamo::to_item(TokenItem::current(new, *node))?)?,
            self.expire(presented.as_str(), node, grace_until)?,
        ];
        if let Some(current) = current.filter(|c| *c != presented.as_str()) {
            writes.push(self.expire(current, node, grace_until)?);
        }
        writes.push(self.record(node, current, new, Some(presented.as_str()))?);
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// Every token of the node is refused from now on and `new` is its one token.
    /// `NotFound`: no such node; `Conflict`: the node rotated meanwhile (try again).
    pub async fn reissue_token(&self, node: &NodeId, new: &KeyHash) -> Result<(), StoreError> {
        let item = self.item(node).await?;
        let current = item.token_hash.clone();
        let mut old: Vec<String> = match &current {
            Some(current) => {
                std::iter::once(current.clone()).chain(item.previous_token_hash.clone()).collect()
            }
            None => self.scan_tokens(node).await?,
        };
        old.sort();
        old.dedup();
        let mut writes = vec![self.put(serde_dynamo::to_item(TokenItem::current(new, *node))?)?];
        for hash in &old {
            writes.push(self.delete(hash)?);
        }
        writes.push(self.record(node, current.as_deref(), new, None)?);
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// The token hashes of a node whose item records none (registered before rotation): a
    /// scan, paged, of the token lookups naming it. Rare (once per such node) and bounded by the
    /// table's size.
    async fn scan_tokens(&self, node: &NodeId) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .store
                .dynamo
                .scan()
                .table_name(self.table())
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .filter_expression("begins_with(PK, :prefix) AND node_id = :node")
                .expression_attribute_values(":prefix", s(token_pk("")))
                .expression_attribute_values(":node", s(node.to_string()))
                .projection_expression("PK")
                .send()
                .await
                .map_err(backend)?;
            for item in out.items() {
                if let Some(hash) =
                    item.get("PK").and_then(|v| v.as_s().ok()).and_then(|pk| pk.strip_prefix(&token_pk("")))
                {
                    found.push(hash.to_owned());
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(found),
            }
        }
    }

    /// `node` (its name the enrolled name) with the token `token`: created when no node has the
    /// name, else the name's node gets `token` as its one token.
    pub async fn enroll(&self, node: &Node, token: &KeyHash) -> Result<Enrollment, StoreError> {
        let item = NodeItem {
            pk: node_pk(&node.id),
            sk: NODE_SK.into(),
            gsi1pk: NODES_LIST.into(),
            gsi1sk: created_sort_key(node.created_at, &node.id),
            node: node.clone(),
            token_hash: Some(token.as_str().to_owned()),
            previous_token_hash: None,
        };
        let name = NameItem { pk: name_pk(&node.name), sk: NAME_SK.into(), node_id: node.id };
        let created = self
            .store
            .dynamo
            .transact_write_items()
            .transact_items(self.put(serde_dynamo::to_item(item)?)?)
            .transact_items(self.put(serde_dynamo::to_item(TokenItem::current(token, node.id))?)?)
            .transact_items(self.put(serde_dynamo::to_item(name)?)?)
            .send()
            .await
            .map_err(transaction_conflict);
        match created {
            Ok(_) => return Ok(Enrollment::Created(node.clone())),
            Err(StoreError::Conflict) => {}
            Err(err) => return Err(err),
        }
        let existing: NameItem = get_as(self.store, self.table(), name_pk(&node.name), NAME_SK)
            .await?
            .ok_or(StoreError::Conflict)?;
        self.reissue_token(&existing.node_id, token).await?;
        Ok(Enrollment::Reissued(self.get(&existing.node_id).await?))
    }
}
