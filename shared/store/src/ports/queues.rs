//! [`Queues`] over SQS.

use crate::Store;

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::queues::{Queues, RollbacksMessage, RunsMessage, WebhooksMessage};

impl Queues for Store {
    async fn send_run(&self, message: &RunsMessage, delay_s: i32) -> Result<(), PortError> {
        Ok(self.runs_queue()?.send_delayed(message, delay_s).await?)
    }

    fn sends_webhooks(&self) -> bool {
        self.webhooks_queue().is_ok()
    }

    async fn send_webhook(&self, message: &WebhooksMessage) -> Result<(), PortError> {
        Ok(self.webhooks_queue()?.send_json(message).await?)
    }

    async fn send_rollback(&self, message: &RollbacksMessage) -> Result<(), PortError> {
        Ok(self.rollbacks_queue()?.send_json(message).await?)
    }
}
