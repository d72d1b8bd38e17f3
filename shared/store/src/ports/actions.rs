//! [`ActionAnswers`] over DynamoDB.

use crate::Store;
use agentplane_domain::action::{Action, ActionId, ActionStatus, Answer};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::actions::ActionAnswers;

impl ActionAnswers for Store {
    async fn action(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &ActionId,
    ) -> Result<Action, PortError> {
        Ok(self.actions().get(project, session, id).await?)
    }

    async fn settle_action(
        &self,
        action: &Action,
        status: ActionStatus,
        answer: Option<Answer>,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        Ok(self.actions().settle(action, status, answer, now).await?)
    }
}
