//! Platform Runs through `/v1`: create (202 `queued`, a gapless `environmentSequence` across
//! every session of the environment, assigned in one transaction with the Run), list, get and
//! stop, with nobody consuming the runs queue (so a Run stays queued; execution is
//! `platform_exec.rs`). Every answer is checked against the spec's own schemas (`tests/spec/`, transcribed by
//! hand from shared/spec/runs-stop-rollback-api.md; extra fields refused) with the tools
//! Python's `jsonschema_rs`, never against the code's own document.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use agentplane_domain::platform::run::{RunId, RunStatus};
use agentplane_tests::{TestApp, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// Answers to check against the spec: (schema name, body).
#[derive(Default)]
struct Shapes(Vec<(&'static str, Value)>);

impl Shapes {
    fn add(&mut self, schema: &'static str, body: &Value) {
        self.0.push((schema, body.clone()));
    }

    /// Validates every answer collected against the spec's schema; fails naming each mismatch.
    fn check(&self) -> R {
        let python = std::env::var("AGENTPLANE_TOOLS_PYTHON").map(PathBuf::from).unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.localstack/tools/bin/python")
        });
        let schema = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec/runs-stop-rollback.schema.json");
        let script = r#"
import json, sys, jsonschema_rs
doc = json.load(open(sys.argv[1]))
bad = 0
for name, body in json.load(sys.stdin):
    validator = jsonschema_rs.validator_for(doc[name], validate_formats=True)
    for error in validator.iter_errors(body):
        bad += 1
        print(f"{name}: {error.message} at {list(error.instance_path)} in {json.dumps(body)[:400]}")
sys.exit(1 if bad else 0)
"#;
        let mut child = std::process::Command::new(&python)
            .arg("-c")
            .arg(script)
            .arg(&schema)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
            stdin.write_all(serde_json::to_string(&self.0)?.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        anyhow::ensure!(
            out.status.success(),
            "answers that break the spec's schemas:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }
}

/// An environment with `n` sessions.
async fn setup(app: &TestApp, key: &str, n: usize) -> anyhow::Result<(String, Vec<String>)> {
    let env = app.made(key, "/environments").await?;
    let mut sessions = Vec::new();
    for _ in 0..n {
        sessions.push(app.made(key, &format!("/environments/{env}/sessions")).await?);
    }
    Ok((env, sessions))
}

fn runs(env: &str, session: &str) -> String {
    format!("/environments/{env}/sessions/{session}/runs")
}

fn code(body: &Value) -> &str {
    body.pointer("/error/code").and_then(Value::as_str).unwrap_or("")
}

async fn create(
    app: &TestApp,
    key: &str,
    env: &str,
    session: &str,
    body: Value,
) -> anyhow::Result<(StatusCode, Value)> {
    send(app.v1(key, Method::POST, &runs(env, session)).json(&body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_are_created_queued_and_read_in_the_specs_shapes() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let (env, sessions) = setup(&app, &tenant.key, 1).await?;
    let mut shapes = Shapes::default();
    let (status, created) = create(
        &app,
        &tenant.key,
        &env,
        &sessions[0],
        json!({"model": "gpt-test", "input": "Fix the failing test", "files": [{"path": "/workspace/src/lib.rs"}, {"path": "/workspace/README.md", "sha256": "a".repeat(64)}], "steeringEnabled": false}),
    )
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    shapes.add("runAction", &created);
    let data = &created["data"];
    assert_eq!(data["status"], "queued");
    assert_eq!(data["environmentSequence"], 1);
    assert_eq!(data["steeringEnabled"], false);
    assert_eq!(data["stopRequested"], false);
    assert_eq!(data["fileDiff"], json!([]));
    assert_eq!(data["fileDiffStatus"], "pending");
    assert_eq!(data["checkpoint"], json!({"status": "pending"}));
    assert_eq!(data["files"][1], json!({"path": "/workspace/README.md", "sha256": "a".repeat(64)}));
    assert!(data.get("usage").is_none(), "the action shape has no usage");
    let run = data["id"].as_str().unwrap_or_default().to_owned();

    let (status, got) =
        send(app.v1(&tenant.key, Method::GET, &format!("{}/{run}", runs(&env, &sessions[0])))).await?;
    assert_eq!(status, StatusCode::OK, "{got}");
    shapes.add("getRun", &got);
    assert!(got["data"].get("steeringEnabled").is_none(), "the GET shape has no steeringEnabled: {got}");
    assert_eq!(
        got["data"]["usage"],
        json!({"calls": [], "serviceFeePercent": 0, "upstreamAmountUsd": "0", "serviceFeeUsd": "0", "totalAmountUsd": "0", "sandboxAmountUsd": "0"})
    );

    let (status, second) =
        create(&app, &tenant.key, &env, &sessions[0], json!({"model": "m", "input": "again"})).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    shapes.add("runAction", &second);
    let (status, page) =
        send(app.v1(&tenant.key, Method::GET, &format!("{}?limit=1", runs(&env, &sessions[0])))).await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["data"][0]["id"], second["data"]["id"]);
    for item in page["data"].as_array().into_iter().flatten() {
        shapes.add("getRun", &json!({"data": item}));
    }
    let last = page["lastId"].as_str().unwrap_or_default();
    let (_, next) =
        send(app.v1(&tenant.key, Method::GET, &format!("{}?limit=1&after={last}", runs(&env, &sessions[0]))))
            .await?;
    assert_eq!(next["data"][0]["id"].as_str(), Some(run.as_str()));

    // The environment counts its Runs.
    let (_, environment) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(environment["data"]["runCount"], 2);

    // Errors are the spec's envelope.
    let (status, missing) = send(app.v1(
        &tenant.key,
        Method::GET,
        &format!("{}/{}", runs(&env, &sessions[0]), uuid::Uuid::new_v4()),
    ))
    .await?;
    assert_eq!((status, code(&missing)), (StatusCode::NOT_FOUND, "run_not_found"));
    shapes.add("error", &missing);
    shapes.check()?;

    // The check itself refuses what the spec does not allow: an extra field, a GET field in
    // the action shape.
    let mut extra = got.clone();
    extra["data"]["priority"] = json!(1);
    let mut bad = Shapes::default();
    bad.add("getRun", &extra);
    assert!(bad.check().is_err(), "an extra field passed the spec's schema");
    let mut bad = Shapes::default();
    bad.add("runAction", &got);
    assert!(bad.check().is_err(), "the GET shape passed as the action shape");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_environment_sequence_is_gapless_across_sessions_under_concurrency() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let (env, sessions) = setup(&app, &tenant.key, 3).await?;
    let mut tasks = Vec::new();
    for n in 0..24 {
        let request = app
            .v1(&tenant.key, Method::POST, &runs(&env, &sessions[n % 3]))
            .json(&json!({"model": "m", "input": format!("task {n}")}));
        tasks.push(tokio::spawn(send(request)));
    }
    let mut sequences = BTreeSet::new();
    for task in tasks {
        let (status, body) = task.await??;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert!(
            sequences.insert(body["data"]["environmentSequence"].as_u64().unwrap_or(0)),
            "a number twice: {body}"
        );
    }
    assert_eq!(sequences, (1..=24).collect::<BTreeSet<u64>>());
    let (_, environment) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(environment["data"]["runCount"], 24);
    // Another environment counts from 1.
    let (other, other_sessions) = setup(&app, &tenant.key, 1).await?;
    let (_, first) =
        create(&app, &tenant.key, &other, &other_sessions[0], json!({"model": "m", "input": "x"})).await?;
    assert_eq!(first["data"]["environmentSequence"], 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_are_refused_naming_the_field_and_create_nothing() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let (env, sessions) = setup(&app, &tenant.key, 1).await?;
    let s = &sessions[0];
    let cases = [
        (json!({"input": "x"}), "model"),
        (json!({"model": "m"}), "input"),
        (json!({"model": "", "input": "x"}), "model"),
        (json!({"model": "m", "input": "   "}), "input"),
        (json!({"model": "m", "input": "x", "extra": 1}), "extra"),
        (json!({"model": "m", "input": "x", "steering_enabled": true}), "steering_enabled"),
        (
            json!({"model": "m", "input": "x", "files": [{"path": "/workspace/a", "mode": 1}]}),
            "files[0].mode",
        ),
        (
            json!({"model": "m", "input": "x", "files": [{"path": "/workspace/../etc/passwd"}]}),
            "files[0].path",
        ),
        (json!({"model": "m", "input": "x", "files": [{"path": "/workspace/.git/config"}]}), "files[0].path"),
        (
            json!({"model": "m", "input": "x", "files": [{"path": "/workspace/a", "sha256": "ABC"}]}),
            "files[0].sha256",
        ),
        (json!({"model": "m", "input": "x", "steeringEnabled": "yes"}), "steeringEnabled"),
        (json!({"model": 1, "input": "x"}), "model"),
    ];
    for (body, param) in cases {
        let (status, answer) = create(&app, &tenant.key, &env, s, body.clone()).await?;
        assert_eq!((status, code(&answer)), (StatusCode::BAD_REQUEST, "invalid_request"), "{body}: {answer}");
        assert_eq!(
            answer.pointer("/error/details/param").and_then(Value::as_str),
            Some(param),
            "{body}: {answer}"
        );
    }
    let (_, environment) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(environment["data"]["runCount"], 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_of_a_queued_run_stops_it_and_repeats_change_nothing() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let (env, sessions) = setup(&app, &tenant.key, 1).await?;
    let mut shapes = Shapes::default();
    let (_, created) =
        create(&app, &tenant.key, &env, &sessions[0], json!({"model": "m", "input": "x"})).await?;
    let run = created["data"]["id"].as_str().unwrap_or_default().to_owned();
    let stop = format!("{}/{run}/stop", runs(&env, &sessions[0]));
    let (status, stopped) = send(app.v1(&tenant.key, Method::POST, &stop)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{stopped}");
    shapes.add("runAction", &stopped);
    assert_eq!(stopped["data"]["status"], "stopped");
    assert_eq!(stopped["data"]["stopRequested"], true);
    assert_eq!(stopped["data"]["checkpoint"]["status"], "skipped");
    assert!(stopped["data"]["finishedAt"].is_string());
    let (status, again) = send(app.v1(&tenant.key, Method::POST, &stop)).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(again, stopped, "a second stop changes nothing");
    let stored = app.store.runs().get(&tenant.project_id.parse()?, &run.parse()?).await?;
    assert_eq!((stored.status, stored.version), (RunStatus::Stopped, 1));
    shapes.check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_racing_completion_produces_one_consistent_outcome() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let project = tenant.project_id.parse()?;
    let (env, sessions) = setup(&app, &tenant.key, 1).await?;
    // The completion lands at a different moment of the stop request each time (before it, between
    // its read and its write, after it), so the stale-write window is hit, not hoped for.
    for delay_ms in (0..24).map(|i| i * 4) {
        let (_, created) =
            create(&app, &tenant.key, &env, &sessions[0], json!({"model": "m", "input": "x"})).await?;
        let id: RunId = created["data"]["id"].as_str().unwrap_or_default().parse()?;
        // The execution claimed it (as the run-execution job does: a conditional write).
        let mut run = app.store.runs().get(&project, &id).await?;
        run.status = RunStatus::Running;
        run.version = 1;
        app.store.runs().replace(&run, 0).await?;
        // It completes (conditionally on what it read) while a stop arrives.
        let store = app.store.clone();
        let complete = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let mut done = run.clone();
            done.status = RunStatus::Completed;
            done.version = 2;
            store.runs().replace(&done, 1).await.is_ok()
        });
        let stop = app.v1(&tenant.key, Method::POST, &format!("{}/{id}/stop", runs(&env, &sessions[0])));
        let (status, answer) = send(stop).await?;
        let completed = complete.await?;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
        let stored = app.store.runs().get(&project, &id).await?;
        if completed {
            // The completion's conditional write (on version 1) succeeded, so it came before any
            // write of the stop: the stop read it again and changed nothing. A stop that wrote
            // what it read before (a stale write) would leave it `running` with a stop request.
            assert_eq!(
                (stored.status, stored.version, stored.stop_requested),
                (RunStatus::Completed, 2, false)
            );
            assert_eq!(answer["data"]["status"], "completed", "{answer}");
            assert_eq!(answer["data"]["stopRequested"], false, "{answer}");
        } else {
            // The stop's write came first: the execution must read again (it sees stopRequested).
            assert_eq!((stored.status, stored.stop_requested), (RunStatus::Running, true));
        }
        assert_ne!(stored.status, RunStatus::Stopped, "a running Run is never marked stopped by the request");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn other_projects_sessions_and_reverted_runs_are_refused() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let owner = app.tenant().await?;
    let stranger = app.tenant().await?;
    let (env, sessions) = setup(&app, &owner.key, 2).await?;
    let (_, created) =
        create(&app, &owner.key, &env, &sessions[0], json!({"model": "m", "input": "x"})).await?;
    let run = created["data"]["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("{}/{run}", runs(&env, &sessions[0]));
    for (method, path) in [
        (Method::GET, path.clone()),
        (Method::POST, format!("{path}/stop")),
        (Method::GET, runs(&env, &sessions[0])),
        (Method::POST, runs(&env, &sessions[0])),
    ] {
        let request = app.v1(&stranger.key, method.clone(), &path).json(&json!({"model": "m", "input": "x"}));
        let (status, body) = send(request).await?;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::NOT_FOUND, "environment_not_found"),
            "{method} {path}"
        );
    }
    // The Run under its environment's other session: not found.
    let elsewhere = format!("{}/{run}", runs(&env, &sessions[1]));
    let (status, body) = send(app.v1(&owner.key, Method::GET, &elsewhere)).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "run_not_found"));
    let (status, body) = send(app.v1(&owner.key, Method::POST, &format!("{elsewhere}/stop"))).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "run_not_found"));

    // A reverted Run cannot be stopped.
    let project = owner.project_id.parse()?;
    let mut stored = app.store.runs().get(&project, &run.parse()?).await?;
    stored.status = RunStatus::Reverted;
    stored.version = 1;
    app.store.runs().replace(&stored, 0).await?;
    let (status, body) = send(app.v1(&owner.key, Method::POST, &format!("{path}/stop"))).await?;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "run_reverted"), "{body}");
    Ok(())
}
