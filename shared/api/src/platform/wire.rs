//! The `/v1` wire: `{data}` around every object, camelCase, RFC 3339 UTC times, and strict
//! request bodies.

use agentplane_domain::page::Page;
use agentplane_domain::platform::{Environment, unknown_field};
use agentplane_domain::query::Query;
use agentplane_domain::session::{RuntimeStatus, Session};
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::PlatformError;
use crate::body::{from_object, read_object};

/// `{"data": …}`: every `/v1` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Data<T> {
    pub data: T,
}

impl<T> Data<T> {
    pub fn of(data: T) -> axum::Json<Self> {
        axum::Json(Self { data })
    }
}

/// One keyset page: `data` in order, `hasMore`, and the ids to page on (`after=lastId`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListPage<T> {
    pub data: Vec<T>,
    pub has_more: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub first_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub last_id: Option<String>,
}

impl<T> ListPage<T> {
    pub fn of<S>(page: &Page<S>, render: impl Fn(&S) -> T, id: impl Fn(&S) -> String) -> axum::Json<Self> {
        axum::Json(Self {
            data: page.items.iter().map(render).collect(),
            has_more: page.has_more,
            first_id: page.items.first().map(&id),
            last_id: page.items.last().map(&id),
        })
    }
}

/// The keyset page parameters every `/v1` list takes.
pub const PAGE_PARAMS: &[&str] = &["after", "limit", "order"];

/// The query of a `/v1` route that takes the parameters `allowed` (none for a single object's
/// GET): any other is 400 `invalid_request` naming it, never silently ignored.
pub fn only_query(raw: Option<&str>, allowed: &[&str]) -> Result<Query, PlatformError> {
    let query = Query::parse(raw);
    if let Some(other) = query.names().find(|n| !allowed.contains(n)) {
        let other = crate::edge::quote::quote(other);
        return Err(PlatformError::invalid(other.clone(), format!("unknown query parameter `{other}`")));
    }
    Ok(query)
}

/// A request body whose fields are exactly these (an unknown one is refused, named).
pub trait StrictBody: DeserializeOwned {
    const FIELDS: &'static [&'static str];
}

/// A strict `/v1` JSON body: an object, no field outside `T::FIELDS`, each of its type.
pub struct Strict<T>(pub T);

impl<S: Send + Sync, T: StrictBody> FromRequest<S> for Strict<T> {
    type Rejection = PlatformError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, PlatformError> {
        let map = read_object::<PlatformError>(req).await?;
        if let Some(field) = unknown_field(map.keys(), T::FIELDS) {
            let field = crate::edge::quote::quote(&field);
            return Err(PlatformError::invalid(field.clone(), format!("unknown field `{field}`")));
        }
        Ok(Self(from_object(map)?))
    }
}

/// `POST /v1/environments`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateEnvironment {
    /// A name for people, 1 to 256 characters.
    #[schema(min_length = 1, max_length = 256)]
    pub name: Option<String>,
    /// Fork: a checkpoint an environment of this project returned (its
    /// `initialCheckpoint.snapshotId`, or a Run's `checkpoint.snapshotId`); the new
    /// environment's workspace starts as it.
    #[schema(pattern = "^[a-f0-9]{64}$")]
    pub snapshot_id: Option<String>,
}

impl StrictBody for CreateEnvironment {
    const FIELDS: &'static [&'static str] = &["name", "snapshotId"];
}

/// The checkpoint of an environment's workspace before its first Run (for a fork, the
/// checkpoint it was forked from).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitialCheckpointBody {
    /// Use it as `snapshotId` to fork the environment as it was then.
    pub snapshot_id: String,
}

/// An environment: one workspace (`/workspace`) its sessions' Runs act on, in order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentBody {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub name: Option<String>,
    /// How many Runs were created in it (the last `environmentSequence` handed out).
    #[schema(minimum = 0)]
    pub run_count: u64,
    /// Absent until its first Run started (or, for a fork, the checkpoint it started from).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub initial_checkpoint: Option<InitialCheckpointBody>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When its deletion was accepted (only on the answer to `DELETE`: a deleted environment
    /// reads 404).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, format = DateTime)]
    pub deleted_at: Option<String>,
    /// The last rollback that was given up (its restore kept failing): no file was reverted and
    /// its Runs read as they did; absent when none failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub rollback_failure: Option<RollbackFailureBody>,
}

/// A rollback given up: the Run it was asked for, a fixed code and message, and when.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollbackFailureBody {
    pub run_id: String,
    /// `rollback_failed`.
    pub code: String,
    pub message: String,
    #[schema(format = DateTime)]
    pub failed_at: String,
}

impl From<&Environment> for EnvironmentBody {
    fn from(e: &Environment) -> Self {
        Self {
            id: e.id.to_string(),
            name: e.name.clone(),
            run_count: e.run_count,
            initial_checkpoint: e
                .initial_checkpoint
                .as_ref()
                .map(|id| InitialCheckpointBody { snapshot_id: id.clone() }),
            created_at: e.created_at.rfc3339(),
            deleted_at: e.deleted_at.map(|t| t.rfc3339()),
            rollback_failure: e.rollback_failure.as_ref().map(|f| RollbackFailureBody {
                run_id: f.run_id.to_string(),
                code: f.code.clone(),
                message: f.message.clone(),
                failed_at: f.at.rfc3339(),
            }),
        }
    }
}

/// `POST /v1/environments/{environmentId}/sessions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// At most 256 characters.
    #[schema(max_length = 256)]
    pub title: Option<String>,
    /// String values; the client API's metadata rules.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub metadata: Option<serde_json::Value>,
}

impl StrictBody for CreateSession {
    const FIELDS: &'static [&'static str] = &["title", "metadata"];
}

/// What a session is doing now.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Idle,
    Running,
    RequiresAction,
    BudgetPaused,
}

/// A session of an environment: the client API's session item, in this surface's style.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionBody {
    pub id: String,
    pub environment_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub title: Option<String>,
    pub metadata: std::collections::BTreeMap<String, String>,
    pub status: SessionStatus,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<&Session> for SessionBody {
    fn from(s: &Session) -> Self {
        Self {
            id: s.id.to_string(),
            environment_id: s.environment_id.map(|e| e.to_string()).unwrap_or_default(),
            title: s.title.as_ref().map(|t| t.as_str().to_owned()),
            metadata: s.metadata.as_map().clone(),
            status: match s.runtime_status {
                RuntimeStatus::Idle => SessionStatus::Idle,
                RuntimeStatus::Running => SessionStatus::Running,
                RuntimeStatus::RequiresAction => SessionStatus::RequiresAction,
                RuntimeStatus::BudgetPaused => SessionStatus::BudgetPaused,
            },
            created_at: s.created_at.rfc3339(),
            updated_at: s.updated_at.rfc3339(),
        }
    }
}
