//! Rust client of Agentplane's Core admin telemetry routes (`/core/v1`), the counterpart of the
//! spec's `AdminClient` and `SandboxAdminClient`. It authenticates with the Core key, validates
//! queries before sending them, and checks every response exhaustively (exact fields, enums,
//! nullability, numbers, timestamps, order, totals, limits) with the same rules the domain's
//! builders follow (`agentplane_domain::telemetry::check`). A response that breaks any rule is
//! rejected whole: `invalid_runtime_observation` for a single observation, `invalid_admin_response`
//! for a list page (one bad row rejects the page), a history or a node.

mod error;
mod node;
mod transport;

use agentplane_domain::page::{Order, PageLimit};
use agentplane_domain::telemetry::check::{self, CheckError};
use agentplane_domain::telemetry::{
    HistoryQuery, NodeId, NodeRange, RuntimeHistory, RuntimeObservation, RuntimeObservationList,
};
use agentplane_domain::{ProjectId, SessionId};

pub use error::{AdminClientError, INVALID_ADMIN_RESPONSE, INVALID_RUNTIME_OBSERVATION};
pub use node::NodeDetail;
pub use transport::MAX_RESPONSE_BYTES;

use transport::Transport;

/// Parameters of `list_runtime_observations`; `None` leaves the server default (20, desc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListRuntimeObservations {
    pub after: Option<SessionId>,
    pub limit: Option<u16>,
    pub order: Option<Order>,
}

/// Parameters of `retrieve_runtime_history`: Unix seconds, `start` inclusive, `end` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeHistoryRequest {
    pub start: i64,
    pub end: i64,
    /// 2 to 1000; `None` for the server default of 120.
    pub max_points: Option<u32>,
}

/// Runtime observations and history.
#[derive(Debug, Clone)]
pub struct AdminClient {
    transport: Transport,
}

impl AdminClient {
    /// `base_url` is the deployment's origin (the client appends `/core/v1/…`).
    pub fn new(base_url: &str, core_key: &str) -> Self {
        Self::with_http_client(reqwest::Client::new(), base_url, core_key)
    }

    pub fn with_http_client(http: reqwest::Client, base_url: &str, core_key: &str) -> Self {
        Self { transport: Transport::new(http, base_url, core_key) }
    }

    /// `GET /core/v1/sandbox/runtime-observations`.
    pub async fn list_runtime_observations(
        &self,
        params: ListRuntimeObservations,
    ) -> Result<RuntimeObservationList, AdminClientError> {
        let mut query = Vec::new();
        if let Some(after) = params.after {
            query.push(format!("after={after}"));
        }
        if let Some(limit) = params.limit {
            query.push(format!("limit={}", PageLimit::new(i64::from(limit))?.get()));
        }
        if let Some(order) = params.order {
            query.push(format!("order={}", if order == Order::Asc { "asc" } else { "desc" }));
        }
        let mut path = "/core/v1/sandbox/runtime-observations".to_owned();
        if !query.is_empty() {
            path = format!("{path}?{}", query.join("&"));
        }
        let page: RuntimeObservationList = self.transport.get(&path, INVALID_ADMIN_RESPONSE).await?;
        check::check_observation_list(&page).map_err(invalid(INVALID_ADMIN_RESPONSE))?;
        let limit = params.limit.map_or(PageLimit::DEFAULT.get(), usize::from);
        ensure_len(page.data.len(), limit)?;
        Ok(page)
    }

    /// `GET /core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation`.
    pub async fn retrieve_runtime_observation(
        &self,
        project_id: ProjectId,
        session_id: SessionId,
    ) -> Result<RuntimeObservation, AdminClientError> {
        let path = format!("/core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation");
        let observation: RuntimeObservation = self.transport.get(&path, INVALID_RUNTIME_OBSERVATION).await?;
        check::check_observation(&observation, None).map_err(invalid(INVALID_RUNTIME_OBSERVATION))?;
        if observation.session_id != session_id {
            return Err(AdminClientError::invalid(
                INVALID_RUNTIME_OBSERVATION,
                "the observation is of another Session",
            ));
        }
        Ok(observation)
    }

    /// `GET /core/v1/projects/{project_id}/sessions/{session_id}/runtime-history`. The query is
    /// validated before sending. The "at most one second in the future" rule is left to the
    /// server, whose clock decides it; a skewed admin clock must not refuse a valid read.
    pub async fn retrieve_runtime_history(
        &self,
        project_id: ProjectId,
        session_id: SessionId,
        request: RuntimeHistoryRequest,
    ) -> Result<RuntimeHistory, AdminClientError> {
        let query = HistoryQuery::new(request.start, request.end, request.max_points)?;
        let path = format!(
            "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-history?{}",
            query.to_query_string()
        );
        let history: RuntimeHistory = self.transport.get(&path, INVALID_ADMIN_RESPONSE).await?;
        check::check_history(&history, session_id, query).map_err(invalid(INVALID_ADMIN_RESPONSE))?;
        Ok(history)
    }
}

/// Sandbox nodes.
#[derive(Debug, Clone)]
pub struct SandboxAdminClient {
    transport: Transport,
}

impl SandboxAdminClient {
    pub fn new(base_url: &str, core_key: &str) -> Self {
        Self::with_http_client(reqwest::Client::new(), base_url, core_key)
    }

    pub fn with_http_client(http: reqwest::Client, base_url: &str, core_key: &str) -> Self {
        Self { transport: Transport::new(http, base_url, core_key) }
    }

    /// `GET /core/v1/sandbox/nodes/{node_id}?range=…`.
    pub async fn retrieve_node(
        &self,
        node_id: NodeId,
        range: NodeRange,
    ) -> Result<NodeDetail, AdminClientError> {
        let path = format!("/core/v1/sandbox/nodes/{node_id}?range={}", range.as_str());
        let body: serde_json::Value = self.transport.get(&path, INVALID_ADMIN_RESPONSE).await?;
        NodeDetail::from_json(body, node_id, range).map_err(invalid(INVALID_ADMIN_RESPONSE))
    }
}

fn invalid(code: &'static str) -> impl Fn(CheckError) -> AdminClientError {
    move |e| AdminClientError::invalid(code, e.0)
}

fn ensure_len(len: usize, limit: usize) -> Result<(), AdminClientError> {
    if len > limit {
        return Err(AdminClientError::invalid(
            INVALID_ADMIN_RESPONSE,
            "the page holds more rows than the limit",
        ));
    }
    Ok(())
}
