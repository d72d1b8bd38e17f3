//! The tool registry: what an agent may name in `tools` and the model may call. Later work
//! (sandboxes, files, approvals) registers more tools here.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::model::ToolDefinition;

/// A tool's outcome: a JSON result for the model, or an error message it is told about.
pub type ToolOutput = Result<Value, String>;

pub trait Tool: Send + Sync {
    fn definition(&self) -> ToolDefinition;
    fn call(
        &self,
        arguments: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutput> + Send + '_>>;
}

#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// The built-in tools every deployment has.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        registry.register(Arc::new(Echo));
        registry.register(Arc::new(Add));
        registry.register(Arc::new(CurrentTime));
        registry
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.definition().name, tool);
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    pub fn definitions(&self, names: &[String]) -> Vec<ToolDefinition> {
        names.iter().filter_map(|n| self.tools.get(n)).map(|t| t.definition()).collect()
    }

    /// Runs `name` if the agent has it. An unknown tool, a tool the agent was not given, or
    /// arguments that are not JSON become an error result for the model, never a crash.
    pub async fn call(&self, allowed: &[String], name: &str, arguments: &str) -> ToolOutput {
        let Some(tool) = self.tools.get(name).filter(|_| allowed.iter().any(|a| a == name)) else {
            return Err(format!("unknown tool `{name}`"));
        };
        let arguments: Value = if arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments).map_err(|e| format!("arguments are not valid JSON: {e}"))?
        };
        tool.call(arguments).await
    }
}

struct Echo;

impl Tool for Echo {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "echo".into(),
            description: "Returns its arguments unchanged.".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }
    }

    fn call(
        &self,
        arguments: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutput> + Send + '_>> {
        Box::pin(async move { Ok(json!({ "echo": arguments })) })
    }
}

struct Add;

impl Tool for Add {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "add".into(),
            description: "Adds two numbers.".into(),
            parameters: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        }
    }

    fn call(
        &self,
        arguments: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutput> + Send + '_>> {
        Box::pin(async move {
            let a = arguments.get("a").and_then(Value::as_f64).ok_or("`a` must be a number")?;
            let b = arguments.get("b").and_then(Value::as_f64).ok_or("`b` must be a number")?;
            Ok(json!({ "sum": a + b }))
        })
    }
}

struct CurrentTime;

impl Tool for CurrentTime {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "current_time".into(),
            description: "The current UTC time as RFC 3339.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn call(
        &self,
        _arguments: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutput> + Send + '_>> {
        Box::pin(async move {
            let now = time::OffsetDateTime::now_utc();
            let text =
                now.format(&time::format_description::well_known::Rfc3339).map_err(|e| e.to_string())?;
            Ok(json!({ "utc": text }))
        })
    }
}
