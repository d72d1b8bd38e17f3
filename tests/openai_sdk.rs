//! The Responses API driven by the real OpenAI clients (tests/sdk/openai_python.py): what a user
//! of openai-python and the OpenAI Agents SDK reads — text, usage, ids, streamed events,
//! `previous_response_id`, errors, and a local function tool that actually runs.

use agentplane_tests::TestApp;
use agentplane_tests::model::{Reply, ScriptedModel};
use serde_json::{Value, json};

fn python() -> String {
    std::env::var("AGENTPLANE_TOOLS_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.localstack/tools/bin/python", env!("CARGO_MANIFEST_DIR")))
}

#[tokio::test]
async fn openai_python_and_the_agents_sdk_drive_a_turn() -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let body =
        json!({"name": "support", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["add"]});
    let agent = app.create_agent(&tenant.key, body).await?;
    for reply in [
        Reply::text("Hello there"),
        Reply::text("Streamed hi"),
        Reply::text("Streamed again"),
        Reply::text("Again"),
        Reply::tool("call_1", "lookup", &json!({"q": "x"})),
        Reply::text("It is 42"),
        Reply::tool("call_2", "lookup_order", &json!({"order_id": "A1"})),
        Reply::text("A1 has shipped"),
        Reply::tool("call_3", "lookup_order", &json!({"order_id": "B2"})),
        Reply::text("B2 has shipped"),
        Reply::text("You are welcome"),
    ] {
        model.push(reply);
    }
    let script = format!("{}/sdk/openai_python.py", env!("CARGO_MANIFEST_DIR"));
    let (base, key, agent_id) = (format!("{}/api/client/v1", app.base), tenant.key.clone(), agent.clone());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python())
            .arg(script)
            .env("AP_BASE", base)
            .env("AP_KEY", key)
            .env("AP_AGENT", agent_id)
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(output.status.success(), "the SDK script failed:\n{stdout}\n{stderr}");
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())?;

    let create = &seen["create"];
    let id = create["id"].as_str().unwrap_or_default();
    assert!(id.starts_with("resp_"), "{seen}");
    assert_eq!(create["text"], "Hello there");
    assert_eq!(create["status"], "completed");
    assert_eq!(create["total_tokens"], 15);
    assert!(create["item_id"].as_str().is_some_and(|i| i.starts_with("msg_")), "{seen}");

    let types: Vec<&str> =
        seen["stream_types"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(types.first(), Some(&"response.created"), "{types:?}");
    assert_eq!(types.last(), Some(&"response.completed"), "{types:?}");
    for kind in [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.output_item.done",
    ] {
        assert!(types.contains(&kind), "{kind} missing from {types:?}");
    }
    let sequence: Vec<u64> =
        seen["stream_sequence"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    assert_eq!(sequence, (0..sequence.len() as u64).collect::<Vec<_>>());
    assert_eq!(seen["stream_text"], "Streamed hi");
    assert_eq!(seen["helper_text"], "Streamed again");

    assert_eq!(seen["continued_id"], id, "previous_response_id continues the same session");
    assert_eq!(seen["continued_text"], "Again");
    assert_eq!(seen["unknown_previous"], "session_not_found");
    assert_eq!(seen["refused"], json!(["invalid_request_error", "tool_choice"]));

    assert_eq!(seen["function_call"]["name"], "lookup");
    assert_eq!(seen["function_call"]["arguments"], json!({"q": "x"}));
    assert!(seen["function_call"]["call_id"].as_str().is_some_and(|c| c.starts_with("act_")), "{seen}");
    assert_eq!(seen["function_answer"], "It is 42");

    assert_eq!(seen["agents_run"], "A1 has shipped");
    assert_eq!(seen["agents_streamed"], "B2 has shipped");
    assert_eq!(seen["agents_multi_turn"], "You are welcome");
    assert_eq!(seen["agents_tool_ran"], json!(["A1", "B2"]), "the local tool ran once per call");

    // What the model was given: the caller's tool, with its output after the pause.
    let requests = model.requests();
    let tool_round = &requests[5];
    let offered: Vec<&str> = tool_round["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"lookup"), "{offered:?}");
    let last = tool_round["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], "42");
    Ok(())
}
