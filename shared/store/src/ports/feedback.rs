//! [`MessageFeedback`] over DynamoDB.

use crate::Store;
use agentplane_domain::event::Event;
use agentplane_domain::feedback::Feedback;
use agentplane_domain::page::{Page, PageLimit};
use agentplane_domain::{ProjectId, SessionId};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::feedback::MessageFeedback;

impl MessageFeedback for Store {
    async fn events_after(
        &self,
        session: &SessionId,
        after: u64,
        limit: PageLimit,
    ) -> Result<Page<Event>, PortError> {
        Ok(self.events().list_after(session, after, limit).await?)
    }

    async fn feedback_on(
        &self,
        project: &ProjectId,
        session: &SessionId,
        event: u64,
    ) -> Result<Option<Feedback>, PortError> {
        Ok(self.feedback().on_message(project, session, event).await?)
    }

    async fn put_feedback(&self, feedback: &Feedback, replaces: bool) -> Result<(), PortError> {
        Ok(self.feedback().put(feedback, replaces).await?)
    }
}
