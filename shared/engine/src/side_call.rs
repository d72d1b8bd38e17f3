//! A model call made for a session outside its turns (the title call): recorded like a call of a
//! turn, its usage on the session, its cost on the tenant's monthly counter, and a `usage`
//! event (`purpose` names what it was for) in the session's log, in one write.

use agentplane_domain::event::payload::UsageRecorded;
use agentplane_domain::event::{EventPayload, NewEvent};
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::Session;
use agentplane_domain::tenant::TenantKey;
use serde_json::{Map, Value};

use crate::TurnEngine;
use crate::ports::PortError;
use crate::ports::sessions::{SessionCalls, SideCall};

/// Records one call of `model` for `session`, made for `purpose` (`title`), which used `usage`;
/// its cost from the engine's prices (`None`: unpriced). `NotFound` once the session is gone.
pub async fn record<S: SessionCalls, M>(
    engine: &TurnEngine<S, M>,
    session: &Session,
    purpose: &str,
    model: &str,
    usage: Usage,
) -> Result<(), PortError> {
    let cost = engine.prices.cost_usd(model, usage);
    let tenant = engine.store.project(&session.project_id).await?.tenant_id;
    let spend_counter = tenant.map(|t| TenantKey::Tenant(t).key());
    let mut extra = Map::new();
    extra.insert("purpose".into(), Value::String(purpose.into()));
    let recorded = UsageRecorded {
        step: 0,
        model: model.to_owned(),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: cost.unwrap_or(0.0),
        priced: cost.is_some(),
        extra,
    };
    let event = NewEvent::from_payload(&EventPayload::Usage(recorded), None);
    let call = SideCall {
        project: &session.project_id,
        session: &session.id,
        usage,
        cost_usd: cost,
        spend_counter: spend_counter.as_deref(),
        event: &event,
        now: crate::now(),
        retention_days: engine.bus.retention_days(),
    };
    engine.store.record_side_call(&call).await?;
    engine.bus.notify(&session.id);
    Ok(())
}
