//! Turn admission, shared by every route that runs a turn (Responses, regenerate and edit, A2A):
//! the config a channel runs, the session and transcript a turn continues, and the tenant's
//! spend against its limit.

use agentplane_domain::SessionId;
use agentplane_domain::agent::{Agent, Channel, VersionedConfig};
use agentplane_domain::session::Session;
use agentplane_domain::tenant::TenantId;
use agentplane_engine::TurnContext;
use agentplane_engine::turn::TenantSpend;

use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::{App, edge};

/// The config a channel runs: the draft, or the newest published version.
pub async fn config_for(
    app: &App,
    agent: &Agent,
    channel: Channel,
) -> Result<(VersionedConfig, Option<u32>), ClientError> {
    match channel {
        Channel::Draft => Ok((agent.draft.clone(), None)),
        Channel::Published => {
            let number = agent.latest_version.ok_or(ClientError::AgentNotPublished)?;
            let version = app.store.agents().version(&agent.id, number).await?;
            Ok((version.config, Some(number)))
        }
    }
}

/// A session and its transcript, in one read.
pub async fn read_for_turn(
    app: &App,
    auth: &ProjectAuth,
    id: &SessionId,
) -> Result<(Session, TurnContext), ClientError> {
    let (session, transcript) = app
        .store
        .turns()
        .session_with_transcript(&auth.project_id, id)
        .await
        .or_not_found(ClientError::SessionNotFound)?;
    let context = TurnContext {
        last_event_seq: session.last_event_seq,
        transcript,
        spent_usd: session.cost_usd,
        webhooks: false,
        superseded: session.superseded_turns.clone(),
    };
    Ok((session, context))
}

/// The tenant's monthly spend, for a project of a tenant with a limit: refused with 402 once
/// the limit is reached (two reads, only for such a project); the turn counts toward it.
pub async fn tenant_spend(app: &App, tenant: Option<TenantId>) -> Result<Option<TenantSpend>, ClientError> {
    let Some(id) = tenant else { return Ok(None) };
    let tenant = app.store.tenants().get(&id).await?;
    let key = agentplane_domain::tenant::TenantKey::Tenant(id).key();
    if let Some(max) = tenant.monthly_spend_limit_usd {
        let spent =
            app.store.tenants().spent(&key, &agentplane_domain::tenant::month_of(edge::now())).await?;
        if spent >= max {
            return Err(ClientError::SpendLimitReached { spent_usd: spent, max_cost_usd: max });
        }
    }
    Ok(Some(TenantSpend {
        key,
        monthly_limit_usd: tenant.monthly_spend_limit_usd,
        webhooks: tenant.tenant_endpoint_count > 0,
    }))
}
