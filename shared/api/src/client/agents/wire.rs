use agentplane_domain::agent::{Agent, AgentVersion};
use serde_json::{Value, json};

pub fn render(agent: &Agent) -> Value {
    json!({
        "id": agent.id,
        "object": "agent",
        "name": agent.name.as_str(),
        "model": agent.draft.model,
        "instructions": agent.draft.instructions,
        "tools": agent.draft.tools,
        "max_steps": agent.draft.max_steps,
        "config": {
            "execution": agent.execution,
            "attachments": agent.draft.attachments,
            "humanInTheLoop": agent.draft.human_in_the_loop,
        },
        "latest_version": agent.latest_version,
        "created_at": agent.created_at.unix_seconds(),
        "updated_at": agent.updated_at.unix_seconds(),
    })
}

pub fn render_version(version: &AgentVersion) -> Value {
    json!({
        "object": "agent.version",
        "agent_id": version.agent_id,
        "version": version.version,
        "model": version.config.model,
        "instructions": version.config.instructions,
        "tools": version.config.tools,
        "max_steps": version.config.max_steps,
        // `execution` is read live from the agent; a version freezes only these.
        "config": {
            "attachments": version.config.attachments,
            "humanInTheLoop": version.config.human_in_the_loop,
        },
        "published_at": version.published_at.unix_seconds(),
    })
}
