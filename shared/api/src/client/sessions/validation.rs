//! What a sessions request body may hold.

use agentplane_domain::ValidationError;
use agentplane_domain::ids::AgentId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::session::{EnvironmentMode, NewSession, SessionPatch, Title};
use serde_json::{Map, Value};

/// POST body: `agent_id`, `title`, `metadata`, `environment_mode`, all optional. Unknown fields
/// are ignored (forward compatibility for clients that send newer fields).
pub fn new_session(body: &Map<String, Value>) -> Result<NewSession, ValidationError> {
    let agent_id = match body.get("agent_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(
            text.parse::<AgentId>()
                .map_err(|_| ValidationError::new("agent_id", "`agent_id` must be an agent id"))?,
        ),
        Some(_) => {
            return Err(ValidationError::new("agent_id", "`agent_id` must be a string"));
        }
    };
    Ok(NewSession {
        agent_id,
        title: body.get("title").map(|v| Title::from_json("title", v)).transpose()?.flatten(),
        metadata: body
            .get("metadata")
            .map(|v| Metadata::from_json("metadata", v))
            .transpose()?
            .unwrap_or_default(),
        environment_mode: EnvironmentMode::from_json("environment_mode", body.get("environment_mode"))?,
    })
}

/// PATCH body: `title` and/or `metadata`; at least one of them.
pub fn patch(body: &Map<String, Value>) -> Result<SessionPatch, ValidationError> {
    let patch = SessionPatch {
        title: body.get("title").map(|v| Title::from_json("title", v)).transpose()?,
        metadata: body.get("metadata").map(|v| Metadata::from_json("metadata", v)).transpose()?,
    };
    if patch.is_empty() {
        return Err(ValidationError::body("give `title` or `metadata` to change"));
    }
    Ok(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn everything_is_optional_on_create() {
        assert_eq!(new_session(&Map::new()), Ok(NewSession::default()));
    }

    #[test]
    fn wrong_types_name_their_field() {
        let err = new_session(&obj(json!({"title": 3}))).err().and_then(|e| e.param);
        assert_eq!(err.as_deref(), Some("title"));
        let err = new_session(&obj(json!({"agent_id": "x"}))).err().and_then(|e| e.param);
        assert_eq!(err.as_deref(), Some("agent_id"));
    }

    #[test]
    fn an_empty_patch_is_refused_and_null_clears_the_title() {
        assert!(patch(&Map::new()).is_err());
        assert_eq!(patch(&obj(json!({"title": null}))).map(|p| p.title), Ok(Some(None)));
    }
}
