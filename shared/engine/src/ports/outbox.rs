//! The webhook events a state change emits: written in the change's own write, so that a
//! retried change emits once, and fanned out to the endpoints after.

use agentplane_domain::webhook::{self, MessageId};
use agentplane_domain::{ProjectId, Timestamp};
use serde::{Deserialize, Serialize};

/// One event of a project, as emitted: its `evt_` id (the `webhook-id` of every message made of
/// it), its type and the exact body every endpoint receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEvent {
    pub id: MessageId,
    pub project_id: ProjectId,
    pub event_type: String,
    pub payload: String,
    pub created_at: Timestamp,
}

impl OutboxEvent {
    /// The event `event_type` of `project` with `data` (camelCase, see
    /// `agentplane_domain::webhook::events`), its body built now.
    pub fn new(
        id: MessageId,
        project_id: ProjectId,
        event_type: &str,
        data: &serde_json::Value,
        now: Timestamp,
    ) -> Self {
        Self {
            id,
            project_id,
            event_type: event_type.to_owned(),
            payload: webhook::payload(event_type, data, now),
            created_at: now,
        }
    }
}
