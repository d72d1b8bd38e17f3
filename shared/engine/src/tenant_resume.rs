//! Carrying on the turns a tenant's monthly spend limit paused, once the limit allows a model
//! call again: the limit was raised or removed (`PATCH /core/v1/tenants/{id}`), or a new month
//! began (the retention sweep). Each noted pause ([`TenantPause`]) is checked against its session
//! and carried on through the same continuation a session budget raise sends, so a duplicate
//! (two raises at once, a raise and a sweep) is claimed once and the rest do nothing.

use std::collections::HashMap;

use agentplane_domain::Timestamp;
use agentplane_domain::session::{RuntimeStatus, SessionBudget};
use agentplane_domain::tenant::{Tenant, TenantKey, month_of};

use crate::continuation::carry_on_after_budget;
use crate::ports::PortError;
use crate::ports::background::{TenantPause, TenantResume};

/// What a pass over noted pauses came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resumed {
    /// Turns carried on (a continuation sent).
    pub continued: usize,
    /// Noted pauses forgotten without a continuation (the session is gone, idle, or waits for
    /// its own budget).
    pub dropped: usize,
}

/// Carries on the turns `tenant`'s limit paused, when it now allows a model call this month.
pub async fn carry_on_after_tenant_limit<S: TenantResume>(
    store: &S,
    tenant: &Tenant,
    now: Timestamp,
) -> Result<Resumed, PortError> {
    let key = TenantKey::Tenant(tenant.id).key();
    let mut resumed = Resumed::default();
    if !has_room(store, &key, tenant.monthly_spend_limit_usd, now).await? {
        return Ok(resumed);
    }
    for pause in store.tenant_pauses_of(&key).await? {
        carry_on_one(store, &pause, &mut resumed).await?;
    }
    Ok(resumed)
}

/// The sweep's step: every noted pause whose tenant now has room (a new month began, or a
/// raise raced the pause) is carried on.
pub async fn carry_on_tenant_pauses<S: TenantResume>(
    store: &S,
    now: Timestamp,
) -> Result<Resumed, PortError> {
    let mut resumed = Resumed::default();
    let mut room: HashMap<String, bool> = HashMap::new();
    for pause in store.all_tenant_pauses().await? {
        let allowed = match room.get(&pause.tenant_key) {
            Some(allowed) => *allowed,
            None => {
                let limit = match TenantKey::tenant_of(&pause.tenant_key) {
                    Some(id) => match store.tenant(&id).await {
                        Ok(tenant) => tenant.monthly_spend_limit_usd,
                        Err(PortError::NotFound) => None,
                        Err(err) => return Err(err),
                    },
                    None => None,
                };
                let allowed = has_room(store, &pause.tenant_key, limit, now).await?;
                room.insert(pause.tenant_key.clone(), allowed);
                allowed
            }
        };
        if allowed {
            carry_on_one(store, &pause, &mut resumed).await?;
        }
    }
    Ok(resumed)
}

/// Whether the tenant key's spend this month is below `limit` (no limit: always).
async fn has_room<S: TenantResume>(
    store: &S,
    key: &str,
    limit: Option<f64>,
    now: Timestamp,
) -> Result<bool, PortError> {
    let Some(max) = limit else { return Ok(true) };
    Ok(store.month_spent(key, &month_of(now)).await? < max)
}

/// Carries one noted pause on if its session still waits on a budget, then forgets it. A session
/// still running keeps its note: its turn may be about to write the pause the note announced.
async fn carry_on_one<S: TenantResume>(
    store: &S,
    pause: &TenantPause,
    resumed: &mut Resumed,
) -> Result<(), PortError> {
    let session = match store.session(&pause.project_id, &pause.session_id).await {
        Ok(session) => session,
        Err(PortError::NotFound) => {
            store.forget_tenant_pause(pause).await?;
            resumed.dropped += 1;
            return Ok(());
        }
        Err(err) => return Err(err),
    };
    match session.runtime_status {
        RuntimeStatus::Running => return Ok(()),
        RuntimeStatus::BudgetPaused => {
            let agent_budget = agent_budget_of(store, &session).await?;
            if carry_on_after_budget(store, &session, agent_budget).await? {
                resumed.continued += 1;
            } else {
                // Its own budget holds it: raising that carries it on.
                resumed.dropped += 1;
            }
        }
        _ => resumed.dropped += 1,
    }
    store.forget_tenant_pause(pause).await
}

/// The agent's budget, which applies to a session without its own (read live).
pub async fn agent_budget_of<S: TenantResume>(
    store: &S,
    session: &agentplane_domain::session::Session,
) -> Result<Option<SessionBudget>, PortError> {
    match (session.budget, session.agent_id) {
        (None, Some(agent_id)) => match store.agent(&session.project_id, &agent_id).await {
            Ok(agent) => Ok(SessionBudget::effective(None, &agent.execution)),
            Err(PortError::NotFound) => Ok(None),
            Err(err) => Err(err),
        },
        _ => Ok(None),
    }
}
