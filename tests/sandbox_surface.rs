//! The edges of the sandbox API's request surface: size limits on a process's command, working
//! directories and environments the kernel would refuse, concurrent deletes, and the metadata
//! keys Agentplane keeps for itself. A refused request is a 400 in the E2B format and changes
//! nothing; what is within the limits runs.
// The helpers below are test code too: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use agentplane_domain::sandbox::SESSION_METADATA_KEY;
use agentplane_domain::sandbox::request::MAX_PROCESS_COMMAND_BYTES;
use agentplane_tests::sandbox::{Env, env};
use agentplane_tests::{send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A start whose answer the test judges itself.
async fn try_start(env: &Env, sandbox: &str, body: Value) -> (StatusCode, Value) {
    env.call(Method::POST, &format!("/sandboxes/{sandbox}/processes"), Some(body)).await
}

/// The process's stdout once it has exited (all of it is retained here).
async fn stdout(env: &Env, sandbox: &str, id: &str) -> String {
    env.wait_exit(sandbox, id).await;
    String::from_utf8_lossy(&env.output(sandbox, id).await.0).into_owned()
}

async fn sandbox_ids(env: &Env) -> Vec<String> {
    let (status, body) = env.call(Method::GET, "/sandboxes", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().expect("list").iter().filter_map(|s| s["sandboxID"].as_str().map(str::to_owned)).collect()
}

#[track_caller]
#[allow(clippy::needless_pass_by_value)]
fn assert_e2b(actual: &(StatusCode, Value), status: StatusCode, what: &str) {
    assert_eq!(actual.0, status, "{what}: body {}", actual.1);
    assert_eq!(actual.1["code"], status.as_u16(), "{what}: body {}", actual.1);
    assert!(actual.1["message"].is_string(), "{what}: body {}", actual.1);
}

/// A shell that prints the total length of its arguments.
fn counting(args: Vec<String>) -> Value {
    let mut all =
        vec!["-c".to_owned(), "n=0; for a; do n=$((n+${#a})); done; echo $n".to_owned(), "sh".to_owned()];
    all.extend(args);
    json!({"cmd": "sh", "args": all})
}

#[tokio::test]
async fn a_large_command_within_the_limit_runs_and_a_larger_one_is_a_400_not_a_503() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 300})).await;

    // 6 arguments of 10,000 bytes: close to the 64 KiB limit, and it runs with every byte.
    let body = counting((0..6).map(|i| char::from(b'a' + i).to_string().repeat(10_000)).collect());
    assert!(serde_json::to_vec(&body).expect("json").len() < MAX_PROCESS_COMMAND_BYTES);
    let started = try_start(&env, &sandbox, body).await;
    assert_eq!(started.0, StatusCode::OK, "{}", started.1);
    let id = str_field(&started.1, "processId").expect("processId");
    let exited = env.wait_exit(&sandbox, &id).await;
    assert_eq!(exited["exitCode"], 0, "{exited}");
    assert_eq!(stdout(&env, &sandbox, &id).await.trim(), "60000");
    let args = exited["config"]["args"].as_array().expect("args");
    assert_eq!(args.len(), 9, "the listing keeps the whole command");
    assert_eq!(args[8].as_str().map(str::len), Some(10_000));

    // Just past the limit, and a body near 1 MiB (once a 503 "storage is unavailable"):
    // a 400 in the E2B format that names the limit, and nothing starts.
    let over = counting((0..7).map(|_| "x".repeat(10_000)).collect());
    let huge = counting((0..60).map(|_| "y".repeat(16_000)).collect());
    for (what, body) in [("past the limit", over), ("near 1 MiB", huge)] {
        let refused = try_start(&env, &sandbox, body).await;
        assert_e2b(&refused, StatusCode::BAD_REQUEST, what);
        let message = refused.1["message"].as_str().unwrap_or_default();
        assert!(message.contains(&MAX_PROCESS_COMMAND_BYTES.to_string()), "{what}: {message}");
    }
    assert_eq!(env.processes(&sandbox, "all").await.len(), 1, "only the process within the limit started");
}

#[tokio::test]
async fn bad_working_directories_and_environments_are_a_400_and_start_nothing() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 300})).await;
    let sh = |extra: Value| {
        let mut body = json!({"cmd": "sh", "args": ["-c", "exit 0"]});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        body
    };
    let cases = [
        ("relative cwd", sh(json!({"cwd": "workspace"}))),
        ("empty cwd", sh(json!({"cwd": ""}))),
        ("cwd with NUL", sh(json!({"cwd": "/workspace\u{0}/x"}))),
        ("cwd past PATH_MAX", sh(json!({"cwd": format!("/{}", "d/".repeat(2100))}))),
        ("cwd component past NAME_MAX", sh(json!({"cwd": format!("/workspace/{}", "n".repeat(256))}))),
        ("empty PATH", sh(json!({"envs": {"PATH": ""}}))),
        ("PATH with NUL", sh(json!({"envs": {"PATH": "/usr/bin\u{0}"}}))),
        ("relative PATH entry", sh(json!({"envs": {"PATH": "bin:/usr/bin"}}))),
        ("empty PATH entry", sh(json!({"envs": {"PATH": "/usr/bin::/bin"}}))),
        ("name with =", sh(json!({"envs": {"A=B": "x"}}))),
        ("empty name", sh(json!({"envs": {"": "x"}}))),
        ("value with NUL", sh(json!({"envs": {"X": "a\u{0}b"}}))),
    ];
    for (what, body) in cases {
        assert_e2b(&try_start(&env, &sandbox, body).await, StatusCode::BAD_REQUEST, what);
    }
    assert!(env.processes(&sandbox, "all").await.is_empty(), "nothing started");

    // The same rules hold for a sandbox's envVars; a refused create leaves no sandbox.
    let before = sandbox_ids(&env).await;
    for bad in [json!({"PATH": ""}), json!({"PATH": "/bin\u{0}"}), json!({"A=B": "x"})] {
        let refused = env.call(Method::POST, "/sandboxes", Some(json!({"envVars": bad.clone()}))).await;
        assert_e2b(&refused, StatusCode::BAD_REQUEST, &bad.to_string());
    }
    assert_eq!(sandbox_ids(&env).await, before);

    // What is valid runs: a custom PATH of absolute directories and an empty value.
    let fine = sh(json!({"cwd": "/workspace", "envs": {"PATH": "/usr/bin:/bin", "EMPTY": ""}}));
    let started = try_start(&env, &sandbox, fine).await;
    assert_eq!(started.0, StatusCode::OK, "{}", started.1);
    let id = str_field(&started.1, "processId").expect("processId");
    assert_eq!(env.wait_exit(&sandbox, &id).await["exitCode"], 0);
}

#[tokio::test]
async fn twenty_concurrent_deletes_answer_one_204_and_nineteen_404() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 300})).await;
    let path = format!("/sandboxes/{sandbox}");
    let deletes = (0..20).map(|_| env.call(Method::DELETE, &path, None));
    let answers = futures_util::future::join_all(deletes).await;
    let deleted = answers.iter().filter(|(status, _)| *status == StatusCode::NO_CONTENT).count();
    assert_eq!(deleted, 1, "exactly one delete wins: {answers:?}");
    for answer in answers.iter().filter(|(status, _)| *status != StatusCode::NO_CONTENT) {
        assert_e2b(answer, StatusCode::NOT_FOUND, "a losing delete reads as a later delete");
    }
    // What a later delete reads, and what is stored: the sandbox was killed.
    assert_e2b(&env.call(Method::DELETE, &path, None).await, StatusCode::NOT_FOUND, "a later delete");
    let (status, body) = env.call(Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "killed", "{body}");
}

#[tokio::test]
async fn agentplane_metadata_keys_are_refused_on_create_and_managed_compute_still_carries_one() {
    let env = env().await;
    for key in [SESSION_METADATA_KEY, "agentplane.anything", "AgentPlane.Session_Id"] {
        let refused = env
            .call(Method::POST, "/sandboxes", Some(json!({"metadata": {key: "sess_forged", "ok": "1"}})))
            .await;
        assert_e2b(&refused, StatusCode::BAD_REQUEST, key);
        let message = refused.1["message"].as_str().unwrap_or_default();
        assert!(message.contains("agentplane."), "{message}");
    }
    assert!(sandbox_ids(&env).await.is_empty(), "a refused create leaves no sandbox");
    // Keys that only look alike are the client's own.
    let own = env.create(json!({"metadata": {"agentplane": "x", "my.agentplane.key": "y"}})).await;

    // The managed path sets the reserved key itself, and still does.
    let (status, session) = send(
        env.app
            .client(&env.tenant.key, Method::POST, "/sessions")
            .json(&json!({ "environment_mode": "openai_hosted" })),
    )
    .await
    .expect("create session");
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let session_id = str_field(&session, "id").expect("id");
    let (status, list) = env.call(Method::GET, "/sandboxes", None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let managed: Vec<&Value> =
        list.as_array().expect("list").iter().filter(|s| s["sandboxID"] != own.as_str()).collect();
    assert_eq!(managed.len(), 1, "{list}");
    assert_eq!(managed[0]["metadata"][SESSION_METADATA_KEY], session_id.as_str(), "{list}");
    assert_eq!(managed[0]["state"], "running", "{list}");

    let (status, body) =
        send(env.app.client(&env.tenant.key, Method::DELETE, &format!("/sessions/{session_id}")))
            .await
            .expect("delete session");
    assert!(status.is_success(), "{status} {body}");
}

#[tokio::test]
async fn a_wrong_typed_field_is_a_400_naming_the_field_and_changes_nothing() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 300})).await;
    let (_, before) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    let start = format!("/sandboxes/{sandbox}/processes");
    let timeout = format!("/sandboxes/{sandbox}/timeout");
    let cases = [
        ("/sandboxes", json!({"timeout": "a secret 60"}), "`timeout` must be an integer"),
        ("/sandboxes", json!({"timeout": 60.5}), "`timeout` must be an integer"),
        ("/sandboxes", json!({"metadata": ["x"]}), "`metadata` must be an object"),
        ("/sandboxes", json!({"envVars": {"A": 1}}), "`envVars.A` must be a string"),
        (&start, json!({"args": ["x"]}), "`cmd` is required"),
        (&start, json!({"cmd": 7}), "`cmd` must be a string"),
        (&start, json!({"cmd": "sh", "args": "-c true"}), "`args` must be an array of strings"),
        (&start, json!({"cmd": "sh", "args": ["-c", 1]}), "`args[1]` must be a string"),
        (&start, json!({"cmd": "sh", "envs": {"A": true}}), "`envs.A` must be a string"),
        (&start, json!({"cmd": "sh", "cwd": ["/"]}), "`cwd` must be a string"),
        (&timeout, json!({}), "`timeout` is required"),
        (&timeout, json!({"timeout": "3600"}), "`timeout` must be an integer"),
    ];
    for (path, body, message) in cases {
        let refused = env.call(Method::POST, path, Some(body.clone())).await;
        assert_e2b(&refused, StatusCode::BAD_REQUEST, &body.to_string());
        assert_eq!(refused.1["message"], message, "{path} {body}");
    }
    assert_eq!(sandbox_ids(&env).await, vec![sandbox.clone()], "no sandbox was created");
    assert!(env.processes(&sandbox, "all").await.is_empty(), "no process was started");
    let (_, after) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(after["endAt"], before["endAt"], "the deadline did not move");
    // Fields may be null where absent is allowed.
    let nulls = json!({"cmd": "sh", "args": null, "envs": null, "cwd": null, "tag": null});
    let started = try_start(&env, &sandbox, nulls).await;
    assert_eq!(started.0, StatusCode::OK, "{}", started.1);
    let created =
        env.call(Method::POST, "/sandboxes", Some(json!({"timeout": null, "metadata": null}))).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
}

/// The component `name` of the served document, `$ref`s followed.
fn component<'a>(doc: &'a Value, name: &str) -> &'a Value {
    &doc["components"]["schemas"][name]
}

/// `value` has every property `schema` requires and none it does not describe; nested objects
/// and array items that are components are checked the same way.
#[track_caller]
fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) {
    let schema = match schema["$ref"].as_str() {
        Some(r) => component(doc, r.trim_start_matches("#/components/schemas/")),
        None => schema,
    };
    if let Some(items) = value.as_array() {
        for (i, item) in items.iter().enumerate() {
            conforms(doc, &schema["items"], item, &format!("{at}[{i}]"));
        }
        return;
    }
    let (Some(object), Some(properties)) = (value.as_object(), schema["properties"].as_object()) else {
        return;
    };
    for required in schema["required"].as_array().into_iter().flatten() {
        let name = required.as_str().unwrap_or_default();
        assert!(object.contains_key(name), "{at}: `{name}` is required by the document: {value}");
    }
    for (name, field) in object {
        let described = properties.get(name).unwrap_or_else(|| panic!("{at}: `{name}` is not documented"));
        conforms(doc, described, field, &format!("{at}.{name}"));
    }
}

#[tokio::test]
async fn every_answer_has_the_shape_the_served_document_gives_it() {
    let env = env().await;
    let (status, doc) = send(env.app.request(Method::GET, "/openapi/sandbox.json")).await.expect("document");
    assert_eq!(status, StatusCode::OK, "{doc}");
    let response = |path: &str, method: &str, status: u16| -> Value {
        doc["paths"][format!("/sandbox/v1{path}")][method]["responses"][status.to_string()]["content"]
            ["application/json"]["schema"]
            .clone()
    };

    let (status, created) = env
        .call(Method::POST, "/sandboxes", Some(json!({"metadata": {"team": "a"}, "envVars": {"A": "1"}})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    conforms(&doc, &response("/sandboxes", "post", 201), &created, "create");
    let id = str_field(&created, "sandboxID").expect("sandboxID");
    let (_, list) = env.call(Method::GET, "/sandboxes", None).await;
    conforms(&doc, &response("/sandboxes", "get", 200), &list, "list");
    let (_, one) = env.call(Method::GET, &format!("/sandboxes/{id}"), None).await;
    conforms(&doc, &response("/sandboxes/{sandbox_id}", "get", 200), &one, "get");
    assert_eq!(one, created, "a read answers what create answered");

    let body = json!({"cmd": "sh", "args": ["-c", "echo out; echo err >&2"], "tag": "t"});
    let (status, started) = env.call(Method::POST, &format!("/sandboxes/{id}/processes"), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    conforms(&doc, &response("/sandboxes/{sandbox_id}/processes", "post", 200), &started, "start");
    let process = str_field(&started, "processId").expect("processId");
    env.wait_exit(&id, &process).await;
    let (_, processes) = env.call(Method::GET, &format!("/sandboxes/{id}/processes?state=all"), None).await;
    conforms(&doc, &response("/sandboxes/{sandbox_id}/processes", "get", 200), &processes, "processes");
    assert_eq!(processes["processes"][0]["exitCode"], 0, "{processes}");
    let (_, output) =
        env.call(Method::GET, &format!("/sandboxes/{id}/processes/{process}/output"), None).await;
    let output_path = "/sandboxes/{sandbox_id}/processes/{process_id}/output";
    conforms(&doc, &response(output_path, "get", 200), &output, "output");
    assert!(!output["chunks"].as_array().expect("chunks").is_empty(), "{output}");

    // Errors are E2B's, as documented.
    let (status, missing) = env.call(Method::GET, "/sandboxes/sbx_nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    conforms(&doc, &response("/sandboxes/{sandbox_id}", "get", 404), &missing, "404");
    assert_eq!(missing, json!({"code": 404, "message": "sandbox not found"}));
    let (status, paused) = env.call(Method::POST, &format!("/sandboxes/{id}/pause"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{paused}");
    let (status, resumed) = env.call(Method::POST, &format!("/sandboxes/{id}/resume"), None).await;
    assert_eq!(status, StatusCode::CREATED, "{resumed}");
    conforms(&doc, &response("/sandboxes/{sandbox_id}/resume", "post", 201), &resumed, "resume");
    env.kill(&id).await;
}
