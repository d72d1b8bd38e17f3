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

/// Runs a client script of tests/sdk with `program` against `app` as the key's user of `agent`
/// (plus `env`), and reads the JSON object it prints last.
async fn run_client(
    program: String,
    script: &str,
    app: &TestApp,
    key: &str,
    agent: &str,
    env: Vec<(&'static str, String)>,
) -> anyhow::Result<Value> {
    let script = format!("{}/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let (base, key, agent) = (format!("{}/api/client/v1", app.base), key.to_owned(), agent.to_owned());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(program)
            .arg(script)
            .env("AP_BASE", base)
            .env("AP_KEY", key)
            .env("AP_AGENT", agent)
            .envs(env)
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(output.status.success(), "the client script failed:\n{stdout}\n{stderr}");
    Ok(serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())?)
}

#[tokio::test]
async fn openai_python_and_the_agents_sdk_drive_a_turn() -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let body = json!({"name": "support", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["add"],
        "config": {"execution": {"background_enabled": true}}});
    let agent = app.create_agent(&tenant.key, body).await?;
    for reply in [
        Reply::text("Hello there"),
        Reply::text("Streamed hi"),
        Reply::text("Streamed again"),
        Reply::text("Again"),
        Reply::tool("call_1", "lookup", &json!({"q": "x"})),
        Reply::text("It is 42"),
        Reply::tool("call_c", "lookup", &json!({"q": "y"})),
        Reply::text("Done in the background"),
        Reply::tool("call_2", "lookup_order", &json!({"order_id": "A1"})),
        Reply::text("A1 has shipped"),
        Reply::tool("call_3", "lookup_order", &json!({"order_id": "B2"})),
        Reply::text("B2 has shipped"),
        Reply::text("You are welcome"),
    ] {
        model.push(reply);
    }
    let seen = run_client(python(), "openai_python.py", &app, &tenant.key, &agent, Vec::new()).await?;

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

    assert_eq!(seen["retrieve"], json!({"id": id, "status": "completed", "text": "Again"}));
    assert_eq!(seen["cancelled"], json!({"before": "requires_action", "after": "incomplete"}));
    assert_eq!(
        seen["background"],
        json!({"queued": "queued", "status": "completed", "text": "Done in the background"})
    );

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

/// The `data:` payloads of a `text/event-stream` body, in order.
fn stream_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect()
}

#[tokio::test]
async fn text_streams_as_the_model_writes_it_and_a_broken_stream_fails_once() -> anyhow::Result<()> {
    use agentplane_tests::send;
    use reqwest::{Method, StatusCode};

    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let body = json!({"name": "support", "model": "gpt-4o-mini", "tools": ["add"]});
    let agent = app.create_agent(&tenant.key, body).await?;

    // A tool step whose text streams, then the answer, piece by piece.
    model.push(Reply::Tools {
        calls: vec![("c1".into(), "add".into(), json!({"a": 2, "b": 3}).to_string())],
        text: Some("Let me add.".into()),
        input: 12,
        output: 7,
    });
    model.push(Reply::text("The sum is 5"));
    let request = json!({"model": agent, "input": "2+3?", "stream": true});
    let answer = app.client(&tenant.key, Method::POST, "/responses").json(&request).send().await?;
    assert_eq!(answer.status(), StatusCode::OK);
    assert!(answer.headers()["content-type"].to_str()?.starts_with("text/event-stream"));
    let events = stream_events(&answer.text().await?);
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(
        deltas,
        ["Let ", "me ", "add.", "The ", "sum ", "is ", "5"],
        "the model's pieces, as they came"
    );
    assert!(model.requests().iter().all(|r| r["stream"] == true), "the provider was asked to stream");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "response.completed");
    let output = last["response"]["output"].as_array().cloned().unwrap_or_default();
    let kinds: Vec<&str> = output.iter().filter_map(|i| i["type"].as_str()).collect();
    assert_eq!(kinds, ["message", "mcp_call", "message"]);
    assert_eq!(output[1]["output"], json!({"sum": 5.0}).to_string());
    // Each streamed message is added once, under the id it ends with.
    let added: Vec<&Value> = events.iter().filter(|e| e["type"] == "response.output_item.added").collect();
    assert_eq!(added.len(), 3, "{added:?}");
    assert_eq!(added[0]["item"]["id"], output[0]["id"]);
    assert_eq!(added[2]["item"]["id"], output[2]["id"]);
    assert_eq!(added[2]["output_index"], 2);

    // The provider breaks off after two pieces: the stream says so, nothing is retried, and
    // the log records what went out.
    let before = model.requests().len();
    model.push(Reply::Broken(vec!["Partial ".into(), "answ".into()]));
    let request = json!({"model": agent, "input": "go on", "stream": true});
    let answer = app.client(&tenant.key, Method::POST, "/responses").json(&request).send().await?;
    let events = stream_events(&answer.text().await?);
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(deltas, ["Partial ", "answ"]);
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "response.failed", "{events:?}");
    assert_eq!(last["response"]["error"]["code"], "model_stream_interrupted");
    assert_eq!(model.requests().len(), before + 1, "a broken stream is never retried");
    let session = last["response"]["session_id"].as_str().unwrap_or_default().to_owned();
    let (status, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    assert_eq!(status, StatusCode::OK);
    let log = page["data"].as_array().cloned().unwrap_or_default();
    let shown = log.iter().find(|e| e["type"] == "message.assistant").cloned().unwrap_or_default();
    assert_eq!(shown["data"]["text"], "Partial answ");
    assert_eq!(shown["data"]["interrupted"], true);
    assert!(log.iter().any(|e| e["type"] == "error"), "{log:?}");
    Ok(())
}

/// Where the Node `openai` package is: `AGENTPLANE_NODE_MODULES`, else the tools directory's.
fn node_modules() -> String {
    std::env::var("AGENTPLANE_NODE_MODULES")
        .unwrap_or_else(|_| format!("{}/../.localstack/tools/node/node_modules", env!("CARGO_MANIFEST_DIR")))
}

#[tokio::test]
async fn the_node_openai_package_creates_streams_and_continues() -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let body = json!({"name": "support", "model": "gpt-4o-mini", "instructions": "Be brief."});
    let agent = app.create_agent(&tenant.key, body).await?;
    for text in ["Hello from the server", "Streamed to node", "Continued"] {
        model.push(Reply::text(text));
    }
    let env = vec![("NODE_PATH", node_modules())];
    let seen = run_client("node".into(), "openai_node.mjs", &app, &tenant.key, &agent, env).await?;

    let id = seen["create"]["id"].as_str().unwrap_or_default();
    assert!(id.starts_with("resp_"), "{seen}");
    assert_eq!(seen["create"]["text"], "Hello from the server");
    assert_eq!(seen["create"]["total_tokens"], 15);
    let types: Vec<&str> =
        seen["stream"]["types"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(types.first(), Some(&"response.created"));
    assert_eq!(types.last(), Some(&"response.completed"));
    assert!(types.contains(&"response.output_text.delta"), "{types:?}");
    assert_eq!(seen["stream"]["text"], "Streamed to node");
    assert_eq!(seen["stream"]["completed_text"], "Streamed to node");
    assert_eq!(seen["continued"]["id"], id);
    assert_eq!(seen["continued"]["text"], "Continued");
    assert_eq!(seen["refused"], json!([400, "text.format"]));
    Ok(())
}

#[tokio::test]
async fn a_conversation_from_elsewhere_is_replayed_into_a_new_session() -> anyhow::Result<()> {
    use agentplane_tests::send;
    use reqwest::{Method, StatusCode};

    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let body = json!({"name": "support", "model": "gpt-4o-mini", "instructions": "Be brief."});
    let agent = app.create_agent(&tenant.key, body).await?;
    // What the Agents SDK sends without previous_response_id, of a conversation held elsewhere.
    let input = json!([
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "id": "msg_elsewhere", "content": [{"type": "output_text", "text": "hello"}]},
        {"role": "user", "content": "where is A1?"},
        {"type": "function_call", "id": "fc_elsewhere", "call_id": "call_9", "name": "lookup_order", "arguments": "{\"id\":\"A1\"}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "shipped"},
    ]);
    let tools = json!([{"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}]);
    model.push(Reply::text("A1 has shipped"));
    model.push(Reply::text("A1 has shipped"));
    let request = json!({"model": agent, "input": input, "tools": tools});
    let (status, first) = send(app.client(&tenant.key, Method::POST, "/responses").json(&request)).await?;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["output_text"], "A1 has shipped");
    let sent = model.requests().last().cloned().unwrap_or_default();
    let roles: Vec<&str> =
        sent["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "tool"],
        "exactly the replayed items, in order"
    );
    assert_eq!(sent["messages"][4]["tool_calls"][0]["id"], "call_9");
    assert_eq!(sent["messages"][5]["content"], "shipped");
    // The same replay again is a session of its own, and no title is asked for either.
    let (status, second) = send(app.client(&tenant.key, Method::POST, "/responses").json(&request)).await?;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_ne!(first["session_id"], second["session_id"]);
    assert_eq!(model.requests().len(), 2, "no title call for a replayed conversation");
    // The session holds the conversation: a follow-up by previous_response_id sees all of it.
    model.push(Reply::text("You are welcome"));
    let follow = json!({"model": agent, "input": "thanks", "previous_response_id": first["id"]});
    let (status, _) = send(app.client(&tenant.key, Method::POST, "/responses").json(&follow)).await?;
    assert_eq!(status, StatusCode::OK);
    let sent = model.requests().last().cloned().unwrap_or_default();
    let count = sent["messages"].as_array().map_or(0, Vec::len);
    assert_eq!(count, 8, "system, the five replayed messages, the answer, and the new message: {sent}");
    // A function_call_output that answers no call of the conversation is refused, named.
    let orphan = json!({"model": agent, "input": [
        {"role": "user", "content": "x"},
        {"type": "message", "role": "assistant", "content": "y"},
        {"type": "function_call_output", "call_id": "nope", "output": "1"},
    ]});
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(&orphan)).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "input[2].call_id");
    Ok(())
}
