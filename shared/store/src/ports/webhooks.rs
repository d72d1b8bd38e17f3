//! The webhook delivery ports over DynamoDB: each call delegates to the store's `webhooks()`.

use crate::Store;
use agentplane_domain::webhook::{Attempt, Endpoint, EndpointId, Message, MessageId, Owner};
use agentplane_domain::{ProjectId, Timestamp};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::webhooks::{
    ClaimedAttempts, OutboxEvent, WebhookAttempts, WebhookEndpoints, WebhookFanOut, WebhookReseal,
    WebhookRetry,
};

impl WebhookAttempts for Store {
    async fn endpoint(&self, owner: &Owner, id: &EndpointId) -> Result<Endpoint, PortError> {
        Ok(self.webhooks().get(owner, id).await?)
    }

    async fn replace_endpoint(
        &self,
        endpoint: &Endpoint,
        previous_update: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.webhooks().replace(endpoint, previous_update).await?)
    }

    async fn record_attempt(&self, message: &Message, attempt: &Attempt) -> Result<(), PortError> {
        Ok(self.webhooks().record_attempt(message, attempt).await?)
    }
}

impl ClaimedAttempts for Store {
    async fn claim_attempt(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
        created_at: Timestamp,
        number: u32,
        now: Timestamp,
        lease_until: Timestamp,
        due_only: bool,
    ) -> Result<Option<Message>, PortError> {
        Ok(self
            .webhooks()
            .claim_attempt(endpoint, id, created_at, number, now, lease_until, due_only)
            .await?)
    }

    async fn record_claimed_attempt(
        &self,
        message: &Message,
        attempt: Option<&Attempt>,
        lease_until: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.webhooks().record_claimed(message, attempt, lease_until).await?)
    }

    async fn drop_undeliverable(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
        created_at: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.webhooks().drop_due(endpoint, id, created_at).await?)
    }
}

impl WebhookFanOut for Store {
    async fn unfanned_event(
        &self,
        project: &ProjectId,
        id: &MessageId,
    ) -> Result<Option<OutboxEvent>, PortError> {
        Ok(self.webhooks().outbox_event(project, id).await?)
    }

    async fn receiving_endpoints(&self, project: &ProjectId) -> Result<Vec<Endpoint>, PortError> {
        Ok(self.webhooks().receiving(project).await?)
    }

    async fn create_messages(
        &self,
        event: &OutboxEvent,
        endpoints: &[Endpoint],
        first_due: Timestamp,
    ) -> Result<Vec<Message>, PortError> {
        Ok(self.webhooks().create_messages(event, endpoints, first_due).await?)
    }

    async fn mark_fanned_out(&self, event: &OutboxEvent) -> Result<(), PortError> {
        Ok(self.webhooks().fanned_out(event).await?)
    }
}

impl WebhookRetry for Store {
    async fn unsent_events(&self, until: Timestamp, limit: usize) -> Result<Vec<OutboxEvent>, PortError> {
        Ok(self.webhooks().unsent_events(until, limit).await?)
    }

    async fn due_messages(&self, until: Timestamp, limit: usize) -> Result<Vec<Message>, PortError> {
        Ok(self.webhooks().due_messages(until, limit).await?)
    }
}

impl WebhookEndpoints for Store {
    async fn create_endpoint(&self, endpoint: &Endpoint, max_per_project: u32) -> Result<(), PortError> {
        Ok(self.webhooks().create_capped(endpoint, max_per_project).await?)
    }

    async fn delete_endpoint(&self, owner: &Owner, id: &EndpointId) -> Result<(), PortError> {
        Ok(self.webhooks().delete(owner, id).await?)
    }

    async fn put_message(&self, message: &Message) -> Result<(), PortError> {
        Ok(self.webhooks().put_message(message).await?)
    }

    async fn message(&self, endpoint: &EndpointId, id: &MessageId) -> Result<Message, PortError> {
        Ok(self.webhooks().message(endpoint, id).await?)
    }

    async fn ensure_callback_signer(&self, signer: &Endpoint) -> Result<bool, PortError> {
        Ok(self.webhooks().ensure_callback_signer(signer).await?)
    }
}

impl WebhookReseal for Store {
    async fn endpoints_after(
        &self,
        after: Option<&agentplane_domain::platform::workspace_sweep::ScanPosition>,
    ) -> Result<(Vec<Endpoint>, Option<agentplane_domain::platform::workspace_sweep::ScanPosition>), PortError>
    {
        Ok(self.webhooks().endpoints_after(after).await?)
    }

    async fn reseal_endpoint(&self, owner: &Owner, id: &EndpointId) -> Result<Endpoint, PortError> {
        Ok(self.webhooks().get(owner, id).await?)
    }

    async fn replace_secrets(
        &self,
        endpoint: &Endpoint,
        secrets: &[agentplane_domain::webhook::StoredSecret],
    ) -> Result<(), PortError> {
        Ok(self.webhooks().replace_secrets(endpoint, secrets).await?)
    }

    async fn reseal_cursor(
        &self,
    ) -> Result<Option<agentplane_domain::platform::workspace_sweep::ScanPosition>, PortError> {
        Ok(self.webhooks().reseal_cursor().await?)
    }

    async fn save_reseal_cursor(
        &self,
        at: Option<&agentplane_domain::platform::workspace_sweep::ScanPosition>,
    ) -> Result<(), PortError> {
        Ok(self.webhooks().save_reseal_cursor(at).await?)
    }
}
