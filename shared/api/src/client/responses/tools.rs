//! A request's `tools`: `function` tools the caller runs. Each joins the turn as a client tool
//! (the model's call pauses the turn and the answer lists it as a `function_call` item); they
//! travel with the turn's saved state, so the turn carries on with them after the answer.

use agentplane_domain::ValidationError;
use agentplane_domain::agent::{ClientTool, MAX_CLIENT_TOOLS, VersionedConfig};
use serde_json::{Map, Value};

/// The request's function tools, as client tools and as given (the Response echoes them).
pub fn request_tools(
    body: &Map<String, Value>,
    config: &VersionedConfig,
) -> Result<(Vec<ClientTool>, Vec<Value>), ValidationError> {
    let items = match body.get("tools") {
        None | Some(Value::Null) => return Ok((Vec::new(), Vec::new())),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ValidationError::new("tools", "`tools` must be an array")),
    };
    let taken = config.human_in_the_loop.client_tools.len();
    if items.len() + taken > MAX_CLIENT_TOOLS {
        return Err(ValidationError::new(
            "tools",
            format!("at most {MAX_CLIENT_TOOLS} tools run by the caller, the agent's {taken} included"),
        ));
    }
    let mut tools: Vec<ClientTool> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let param = format!("tools[{i}]");
        let Some(tool) = item.as_object() else {
            return Err(ValidationError::new(param, "a tool must be an object"));
        };
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ValidationError::new(
                format!("{param}.type"),
                "only `function` tools are taken (the agent's own tools run on the server)",
            ));
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        let valid = (1..=64).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(ValidationError::new(
                format!("{param}.name"),
                "a tool's name is 1-64 letters, digits, `_` or `-`",
            ));
        }
        let clash = name == agentplane_domain::action::ASK_USER_TOOL
            || config.tools.iter().any(|t| t == name)
            || config.human_in_the_loop.client_tools.iter().any(|t| t.name == name)
            || tools.iter().any(|t| t.name == name);
        if clash {
            return Err(ValidationError::new(
                format!("{param}.name"),
                format!("the tool name `{name}` is taken by the agent or another tool of the request"),
            ));
        }
        let description = match tool.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) if text.chars().count() <= 1024 => text.clone(),
            Some(_) => {
                return Err(ValidationError::new(
                    format!("{param}.description"),
                    "a tool's description is a string of at most 1024 characters",
                ));
            }
        };
        let parameters = match tool.get("parameters") {
            None | Some(Value::Null) => agentplane_domain::agent::empty_schema(),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(_) => {
                return Err(ValidationError::new(
                    format!("{param}.parameters"),
                    "`parameters` must be a JSON schema object",
                ));
            }
        };
        tools.push(ClientTool { name: name.to_owned(), description, parameters });
    }
    Ok((tools, items.clone()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config() -> VersionedConfig {
        VersionedConfig {
            model: "m".into(),
            instructions: String::new(),
            tools: vec!["add".into()],
            max_steps: 10,
            attachments: Default::default(),
            human_in_the_loop: Default::default(),
            experience: Default::default(),
        }
    }

    fn param(tools: &Value) -> Option<String> {
        let body = json!({"tools": tools});
        request_tools(body.as_object().unwrap_or(&Map::new()), &config()).err().and_then(|e| e.param)
    }

    #[test]
    fn function_tools_join_the_turn_and_others_are_refused_named() {
        let body = json!({"tools": [{"type": "function", "name": "lookup", "strict": true,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]});
        let (tools, given) =
            request_tools(body.as_object().unwrap_or(&Map::new()), &config()).unwrap_or_default();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "lookup");
        assert_eq!(given.len(), 1);
        assert_eq!(param(&json!([{"type": "web_search"}])).as_deref(), Some("tools[0].type"));
        assert_eq!(param(&json!([{"type": "function", "name": "add"}])).as_deref(), Some("tools[0].name"));
        assert_eq!(param(&json!([{"type": "function", "name": "a b"}])).as_deref(), Some("tools[0].name"));
        let twice = json!([{"type": "function", "name": "x"}, {"type": "function", "name": "x"}]);
        assert_eq!(param(&twice).as_deref(), Some("tools[1].name"));
        assert_eq!(
            param(&json!([{"type": "function", "name": "x", "parameters": 5}])).as_deref(),
            Some("tools[0].parameters")
        );
    }
}
