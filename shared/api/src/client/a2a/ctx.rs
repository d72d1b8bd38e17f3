//! What every call of an agent's A2A endpoint works with: the caller, and the agent admitted
//! on its published version.

use agentplane_domain::agent::Channel;
use agentplane_domain::ids::AgentId;
use agentplane_engine::admission::Admitted;

use crate::App;
use crate::client::auth::ProjectAuth;
use crate::client::error::ClientError;

/// What every call of the endpoint works with: the caller, and the agent's published version.
#[derive(Clone)]
pub(super) struct Ctx {
    pub(super) app: App,
    pub(super) auth: ProjectAuth,
    pub(super) admitted: Admitted,
    /// The published version the agent runs (`admitted.version`, known to be set).
    pub(super) version: u32,
}

/// The agent of the path, published: another project's (or a malformed id) is not found.
pub(super) async fn published(app: &App, auth: &ProjectAuth, agent_id: &str) -> Result<Ctx, ClientError> {
    let id: AgentId = agent_id.parse().map_err(|_| ClientError::AgentNotFound)?;
    let engine = app.engine();
    let found = engine.turn_agent(&auth.project_id, &id).await?;
    let admitted = engine.admit(found, Channel::Published, None).await?;
    let version = admitted.version.ok_or(ClientError::AgentNotPublished)?;
    Ok(Ctx { app: app.clone(), auth: *auth, admitted, version })
}
