//! The node read's response: the node object of the node list plus `host` and `history`.

use agentplane_domain::telemetry::check::{CheckError, check_host, check_node_history};
use agentplane_domain::telemetry::{HostObservation, NodeHistory, NodeId, NodeRange};
use serde_json::{Map, Value};

/// A node with its host observation and history. The node list's own fields are not defined by
/// the telemetry spec, so the client requires only `id` (the requested node) and `online` (a
/// boolean, needed to judge freshness) and keeps the rest as received in `node`; `host` and
/// `history` are checked field for field.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDetail {
    pub id: NodeId,
    pub online: bool,
    /// Every node-list field except `host` and `history`, as received.
    pub node: Map<String, Value>,
    pub host: HostObservation,
    pub history: NodeHistory,
}

impl NodeDetail {
    pub(crate) fn from_json(body: Value, node_id: NodeId, range: NodeRange) -> Result<Self, CheckError> {
        let Value::Object(mut node) = body else {
            return Err(CheckError("the node is not an object".into()));
        };
        let id = node
            .get("id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<NodeId>().ok())
            .ok_or_else(|| CheckError("the node has no valid id".into()))?;
        if id != node_id {
            return Err(CheckError("the node is not the requested node".into()));
        }
        let online = node
            .get("online")
            .and_then(Value::as_bool)
            .ok_or_else(|| CheckError("online must be a boolean".into()))?;
        let host = node.remove("host").ok_or_else(|| CheckError("the node has no host".into()))?;
        let history = node.remove("history").ok_or_else(|| CheckError("the node has no history".into()))?;
        let host: HostObservation =
            serde_json::from_value(host).map_err(|e| CheckError(format!("host: {e}")))?;
        let history: NodeHistory =
            serde_json::from_value(history).map_err(|e| CheckError(format!("history: {e}")))?;
        check_host(&host)?;
        check_node_history(&history, range)?;
        Ok(Self { id, online, node, host, history })
    }
}
