//! Authoring agents: create one, change its draft, publish the draft as a version. Each write
//! checks what the draft refers to first — tools this engine offers, a bucket registered to
//! the project, a callback URL deliveries may reach, live answer keys — and a change or a
//! publish is written only over the agent as it was read (read again up to five times).

use agentplane_domain::agent::{self, Agent, AgentFields, AgentVersion};
use agentplane_domain::ceilings::Ceilings;
use agentplane_domain::ids::AgentId;
use agentplane_domain::{ProjectId, ValidationError};

use crate::ToolRegistry;
use crate::ports::PortError;
use crate::ports::agents::AgentAuthoring;
use crate::webhooks::WebhookConfig;
use crate::webhooks::reach::{Unreachable, check_reachable};

/// Attempts at a change before it is given up as `ConcurrentUpdate`.
const ATTEMPTS: usize = 5;

/// Why an agent was not written.
#[derive(Debug, thiserror::Error)]
pub enum AuthoringError {
    /// The body, or what the draft refers to, is invalid (names the parameter).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The draft's callback URL may not receive deliveries.
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    /// The project has no such agent.
    #[error("agent not found")]
    NotFound,
    /// Somebody changed the agent at every attempt.
    #[error("the agent changed meanwhile")]
    ConcurrentUpdate,
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for AuthoringError {
    fn from(err: PortError) -> Self {
        match err {
            PortError::NotFound => Self::NotFound,
            other => Self::Port(other),
        }
    }
}

/// What authoring needs besides the store: the tools an agent may name, where callbacks may go,
/// and the deployment's ceilings on an agent's settings.
pub struct Authoring<'a, S> {
    pub store: &'a S,
    pub tools: &'a ToolRegistry,
    pub webhooks: &'a WebhookConfig,
    pub ceilings: Ceilings,
}

impl<S: AgentAuthoring> Authoring<'_, S> {
    /// Creates the agent `id` of `project` from a create request's body.
    pub async fn create(
        &self,
        project: ProjectId,
        id: AgentId,
        fields: AgentFields,
    ) -> Result<Agent, AuthoringError> {
        let agent = agent::new_agent_within(fields, id, project, crate::now(), &self.ceilings)?;
        self.check_tools(&agent)?;
        self.check_bucket(&agent).await?;
        self.check_default_callback(&agent).await?;
        self.check_answer_keys(&agent).await?;
        self.store.create_agent(&agent).await.map_err(AuthoringError::Port)?;
        Ok(agent)
    }

    /// Lays a PATCH body over the agent's draft; what changed of its references is checked again.
    pub async fn update(
        &self,
        project: &ProjectId,
        id: &AgentId,
        fields: AgentFields,
    ) -> Result<Agent, AuthoringError> {
        for _ in 0..ATTEMPTS {
            let mut agent = self.store.agent(project, id).await?;
            let previous = agent.updated_at;
            let before = agent.clone();
            let now = crate::now().max(previous.plus_millis(1));
            agent::patch_agent_within(&mut agent, fields.clone(), now, &self.ceilings)?;
            self.check_tools(&agent)?;
            if agent.draft.attachments.bucket != before.draft.attachments.bucket {
                self.check_bucket(&agent).await?;
            }
            if agent.execution.default_callback_url != before.execution.default_callback_url {
                self.check_default_callback(&agent).await?;
            }
            if agent.draft.human_in_the_loop.answer_key_ids != before.draft.human_in_the_loop.answer_key_ids {
                self.check_answer_keys(&agent).await?;
            }
            match self.store.replace_agent(&agent, previous).await {
                Ok(()) => return Ok(agent),
                Err(PortError::Conflict) => continue,
                Err(err) => return Err(AuthoringError::Port(err)),
            }
        }
        Err(AuthoringError::ConcurrentUpdate)
    }

    /// Publishes the agent's draft as its next version.
    pub async fn publish(&self, project: &ProjectId, id: &AgentId) -> Result<AgentVersion, AuthoringError> {
        for _ in 0..ATTEMPTS {
            let agent = self.store.agent(project, id).await?;
            let now = crate::now().max(agent.updated_at.plus_millis(1));
            match self.store.publish_agent(&agent, now).await {
                Ok(version) => return Ok(version),
                Err(PortError::Conflict) => continue,
                Err(err) => return Err(AuthoringError::Port(err)),
            }
        }
        Err(AuthoringError::ConcurrentUpdate)
    }

    fn check_tools(&self, agent: &Agent) -> Result<(), ValidationError> {
        for (i, name) in agent.draft.tools.iter().enumerate() {
            if !self.tools.contains(name) {
                let known: Vec<&str> = self.tools.names().collect();
                return Err(ValidationError::new(
                    format!("tools[{i}]"),
                    format!("unknown tool `{name}`; known: {}", known.join(", ")),
                ));
            }
        }
        Ok(())
    }

    async fn check_bucket(&self, agent: &Agent) -> Result<(), AuthoringError> {
        let Some(name) = agent.draft.attachments.bucket_name()? else { return Ok(()) };
        match self.store.registered_bucket(&agent.project_id, &name).await {
            Ok(_) => Ok(()),
            Err(PortError::NotFound) => Err(ValidationError::new(
                "config.attachments.bucket",
                format!("`{name}` is not a bucket registered to this project (Core: POST /core/v1/projects/{{project_id}}/buckets)"),
            )
            .into()),
            Err(err) => Err(AuthoringError::Port(err)),
        }
    }

    async fn check_default_callback(&self, agent: &Agent) -> Result<(), Unreachable> {
        let Some(url) = &agent.execution.default_callback_url else { return Ok(()) };
        check_reachable(self.webhooks, "config.execution.default_callback_url", url).await
    }

    async fn check_answer_keys(&self, agent: &Agent) -> Result<(), AuthoringError> {
        let Some(ids) = &agent.draft.human_in_the_loop.answer_key_ids else { return Ok(()) };
        for (i, id) in ids.iter().enumerate() {
            let live = match self.store.api_key(&agent.project_id, id).await {
                Ok(key) => key.revoked_at.is_none(),
                Err(PortError::NotFound) => false,
                Err(err) => return Err(AuthoringError::Port(err)),
            };
            if !live {
                return Err(ValidationError::new(
                    format!("config.humanInTheLoop.answer_key_ids[{i}]"),
                    format!("`{id}` is not a live key of this project"),
                )
                .into());
            }
        }
        Ok(())
    }
}
