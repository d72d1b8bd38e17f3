//! The Core admin wire of project keys and sandbox nodes: request structs read with
//! [`crate::body::Wire`], response structs the handlers serialize and the OpenAPI document
//! describes. The runtime telemetry answers are in `runtime::wire`.

use agentplane_domain::Timestamp;
use agentplane_domain::api_key::ApiKey;
use agentplane_domain::sandbox::Node;
use agentplane_domain::telemetry::node::{HostObservation, NodeHistory, NodeHistoryPoint};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// `POST /core/v1/projects/{project_id}/api_keys`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateApiKey {
    /// 1 to 128 characters once surrounding whitespace is trimmed.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
}

/// A project API key. The key itself is shown once, when it is created.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyBody {
    pub id: String,
    /// Always `api_key`.
    #[schema(value_type = String, pattern = "^api_key$")]
    pub object: &'static str,
    pub project_id: String,
    pub name: String,
    /// The key's last four characters.
    pub hint: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds; `null` while the key is valid.
    #[schema(required = true)]
    pub revoked_at: Option<i64>,
}

impl From<&ApiKey> for ApiKeyBody {
    fn from(key: &ApiKey) -> Self {
        Self {
            id: key.id.to_string(),
            object: "api_key",
            project_id: key.project_id.to_string(),
            name: key.name.as_str().to_owned(),
            hint: key.hint.clone(),
            created_at: key.created_at.unix_seconds(),
            revoked_at: key.revoked_at.map(|t| t.unix_seconds()),
        }
    }
}

/// A new project API key, with the key: the only time it leaves the server.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKeyBody {
    #[serde(flatten)]
    pub api_key: ApiKeyBody,
    /// The key (`cpeer_…`); only its SHA-256 is stored.
    pub key: String,
}

/// `POST /core/v1/sandbox/nodes`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct RegisterSandboxNode {
    /// 1 to 128 characters, not only whitespace; `node` when absent or null.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128)]
    pub name: Option<String>,
}

/// A sandbox node.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxNodeBody {
    pub id: String,
    /// Always `sandbox_node`.
    #[schema(value_type = String, pattern = "^sandbox_node$")]
    pub object: &'static str,
    pub name: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Whether the node's last heartbeat is recent.
    pub online: bool,
    /// The daemon connection Core last heard from; `null` before the first.
    #[schema(required = true)]
    pub connection_id: Option<String>,
}

impl SandboxNodeBody {
    pub fn new(node: &Node, now: Timestamp) -> Self {
        Self {
            id: node.id.to_string(),
            object: "sandbox_node",
            name: node.name.clone(),
            created_at: node.created_at.unix_seconds(),
            online: node.online(now),
            connection_id: node.connection_id.clone(),
        }
    }
}

/// A newly registered node, with its token: the only time it leaves the server.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredSandboxNodeBody {
    #[serde(flatten)]
    pub node: SandboxNodeBody,
    /// The node token (`apnode_…`) the daemon authenticates with; only its SHA-256 is stored.
    pub token: String,
}

/// A node with what it last reported about its host and its history.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxNodeDetailBody {
    #[serde(flatten)]
    pub node: SandboxNodeBody,
    pub host: NodeHostBody,
    pub history: NodeHistoryBody,
}

/// The node's last received heartbeat observation; every unavailable value is `null`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeHostBody {
    #[schema(required = true)]
    pub effective_cpu_cores: Option<f64>,
    /// Share of busy ticks between two heartbeats, 0 to 1.
    #[schema(required = true, minimum = 0, maximum = 1)]
    pub cpu_utilization: Option<f64>,
    #[schema(required = true)]
    pub total_memory_bytes: Option<u64>,
    #[schema(required = true)]
    pub available_memory_bytes: Option<u64>,
    #[schema(required = true)]
    pub available_disk_bytes: Option<u64>,
    /// RFC 3339, whole seconds, UTC; `null` before the first heartbeat.
    #[schema(required = true)]
    pub observed_at: Option<String>,
}

impl From<&HostObservation> for NodeHostBody {
    fn from(host: &HostObservation) -> Self {
        Self {
            effective_cpu_cores: host.effective_cpu_cores,
            cpu_utilization: host.cpu_utilization,
            total_memory_bytes: host.total_memory_bytes,
            available_memory_bytes: host.available_memory_bytes,
            available_disk_bytes: host.available_disk_bytes,
            observed_at: host.observed_at.clone(),
        }
    }
}

/// Every complete UTC bucket of the range, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeHistoryBody {
    /// 60 for `1h`, 300 for `6h`, 900 for `24h`.
    pub resolution_seconds: i64,
    pub points: Vec<NodeHistoryPointBody>,
}

/// One bucket; a metric is `null` when the bucket has no recorded value.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeHistoryPointBody {
    /// RFC 3339, UTC.
    pub start: String,
    #[schema(required = true)]
    pub cpu_utilization_max: Option<f64>,
    #[schema(required = true)]
    pub memory_used_bytes_max: Option<u64>,
    #[schema(required = true)]
    pub available_disk_bytes_min: Option<u64>,
}

impl From<&NodeHistory> for NodeHistoryBody {
    fn from(history: &NodeHistory) -> Self {
        Self {
            resolution_seconds: history.resolution_seconds,
            points: history.points.iter().map(NodeHistoryPointBody::from).collect(),
        }
    }
}

impl From<&NodeHistoryPoint> for NodeHistoryPointBody {
    fn from(point: &NodeHistoryPoint) -> Self {
        Self {
            start: point.start.clone(),
            cpu_utilization_max: point.cpu_utilization_max,
            memory_used_bytes_max: point.memory_used_bytes_max,
            available_disk_bytes_min: point.available_disk_bytes_min,
        }
    }
}

/// The node read's query (`NodeRange::from_query` parses it): any other parameter is a 400.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct NodeRangeParams {
    /// `1h` (the default), `6h` or `24h`, at most once.
    #[param(pattern = "^(1h|6h|24h)$")]
    range: Option<String>,
}

#[cfg(test)]
mod tests {
    use agentplane_domain::telemetry::node::{NodeObservation, NodeRange, host_observation, node_history};
    use serde_json::json;

    use super::*;

    /// The admin client parses the node read with the domain's own types: the api's bodies
    /// serialize to exactly the same JSON.
    #[test]
    fn node_host_and_history_serialize_as_the_domain_types() {
        let now = Timestamp::from_unix_seconds(1_790_000_000);
        let observed = NodeObservation {
            observed_at: Timestamp::from_unix_seconds(1_789_999_700),
            effective_cpu_cores: Some(2.0),
            cpu_utilization: Some(0.25),
            total_memory_bytes: Some(1000),
            available_memory_bytes: Some(400),
            available_disk_bytes: None,
        };
        for last in [None, Some(&observed)] {
            let host = host_observation(last);
            assert_eq!(json!(NodeHostBody::from(&host)), json!(host));
        }
        let history = node_history(NodeRange::OneHour, now, &[observed]);
        assert_eq!(json!(NodeHistoryBody::from(&history)), json!(history));
    }

    /// The documents keep one schema per component name: two wire types of one surface that
    /// share a name (the document keeps only the first) would describe one of them wrongly.
    #[test]
    fn component_names_are_unique_within_the_core_and_node_documents() {
        use crate::Route;
        use crate::openapi::Surface;
        for surface in [Surface::Core, Surface::Node] {
            let mut seen: std::collections::BTreeMap<String, String> = Default::default();
            for route in Route::ALL.iter().filter(|r| Surface::of(**r) == surface) {
                let (schemas, _, _) = (route.declaration().serve)();
                for (name, schema) in schemas {
                    let text = serde_json::to_string(&schema).unwrap_or_default();
                    let first = seen.entry(name.clone()).or_insert_with(|| text.clone());
                    assert_eq!(*first, text, "{surface:?}: two schemas are named {name}");
                }
            }
        }
    }
}
