//! Runs of one environment under overlap and crashes: one Run executes at a time, in
//! `environmentSequence` order across sessions; a rollback restores exactly the state before
//! the selected Run (API writes before it survive); an executor that dies mid-Run is taken over
//! once its lease lapses and the Run settles once.

use std::time::{Duration, Instant};

use agentplane_domain::platform::run::ExecuteRun;
use agentplane_engine::platform::execute::{Executed, execute};
use agentplane_engine::platform::{Platform, lease};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::platform::{ended, file, run, wait};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

fn diff_paths(run: &Value) -> Vec<String> {
    run["fileDiff"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str().map(str::to_owned))
        .collect()
}

fn writes(id: &str, path: &str) -> Reply {
    Reply::tool(id, "write_file", &json!({"path": path, "content": path}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_of_two_sessions_execute_one_at_a_time_in_sequence_order_and_a_rollback_restores_exactly_the_state_before()
-> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let a = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let b = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    // The model answers in the order Runs execute: A1 (a slow command), then B1, then A2. Were
    // two Runs to execute at once, their replies (and their files) would be mixed.
    model.push(Reply::tool("a1", "run_command", &json!({"command": "sleep 3; echo a1 > a1.txt"})));
    model.push(Reply::text("a1 done"));
    model.push(writes("b1", "b1.txt"));
    model.push(Reply::text("b1 done"));
    model.push(writes("a2", "a2.txt"));
    model.push(Reply::text("a2 done"));
    let a1 = run(&app, &tenant.key, &env, &a, "A1").await?;
    wait(&app, &tenant.key, &a1, Duration::from_secs(30), |r| r["status"] == "running").await?;
    let b1 = run(&app, &tenant.key, &env, &b, "B1").await?;
    let a2 = run(&app, &tenant.key, &env, &a, "A2").await?;
    let a2_done = wait(&app, &tenant.key, &a2, Duration::from_secs(90), ended).await?;
    let a1_done = wait(&app, &tenant.key, &a1, Duration::from_secs(5), ended).await?;
    let b1_done = wait(&app, &tenant.key, &b1, Duration::from_secs(5), ended).await?;
    for (done, sequence) in [(&a1_done, 1), (&b1_done, 2), (&a2_done, 3)] {
        assert_eq!(
            (done["status"].as_str(), done["environmentSequence"].as_u64()),
            (Some("completed"), Some(sequence)),
            "{done}"
        );
    }
    // In order, one after the other.
    let at = |run: &Value, field: &str| run[field].as_str().unwrap_or_default().to_owned();
    assert!(
        at(&b1_done, "startedAt") >= at(&a1_done, "finishedAt"),
        "B1 started before A1 ended: {a1_done} {b1_done}"
    );
    assert!(
        at(&a2_done, "startedAt") >= at(&b1_done, "finishedAt"),
        "A2 started before B1 ended: {b1_done} {a2_done}"
    );
    // Each diff holds only its own Run's file.
    assert_eq!(diff_paths(&a1_done), ["/workspace/a1.txt"]);
    assert_eq!(diff_paths(&b1_done), ["/workspace/b1.txt"]);
    assert_eq!(diff_paths(&a2_done), ["/workspace/a2.txt"]);

    // Rolling back B1 restores the workspace as it was before B1: A1's file kept, B1's and A2's
    // gone; B1 and A2 (a later Run of the other session) reverted, A1 untouched.
    let (status, body) = send(app.v1(&tenant.key, Method::DELETE, &b1)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait(&app, &tenant.key, &b1, Duration::from_secs(60), |r| r["status"] == "reverted").await?;
    let a2_after =
        wait(&app, &tenant.key, &a2, Duration::from_secs(10), |r| r["status"] == "reverted").await?;
    assert_eq!(a2_after["status"], "reverted");
    let a1_after = wait(&app, &tenant.key, &a1, Duration::from_secs(5), ended).await?;
    assert_eq!(a1_after["status"], "completed");
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/a1.txt").await?, (StatusCode::OK, "a1\n".into()));
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/b1.txt").await?.0, StatusCode::NOT_FOUND);
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/a2.txt").await?.0, StatusCode::NOT_FOUND);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollback_restores_the_selected_runs_own_start_so_api_writes_before_it_survive() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(writes("r1", "r1.txt"));
    model.push(Reply::text("r1 done"));
    model.push(writes("r2", "r2.txt"));
    model.push(Reply::text("r2 done"));
    let r1 = run(&app, &tenant.key, &env, &session, "R1").await?;
    wait(&app, &tenant.key, &r1, Duration::from_secs(60), ended).await?;
    // A file written through the API between the two Runs.
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/api.txt"))
            .body("between".as_bytes().to_vec()),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r2 = run(&app, &tenant.key, &env, &session, "R2").await?;
    let r2_done = wait(&app, &tenant.key, &r2, Duration::from_secs(60), ended).await?;
    assert_eq!(diff_paths(&r2_done), ["/workspace/r2.txt"]);
    let (status, body) = send(app.v1(&tenant.key, Method::DELETE, &r2)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait(&app, &tenant.key, &r2, Duration::from_secs(60), |r| r["status"] == "reverted").await?;
    assert_eq!(
        file(&app, &tenant.key, &env, "/workspace/api.txt").await?,
        (StatusCode::OK, "between".into())
    );
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/r1.txt").await?, (StatusCode::OK, "r1.txt".into()));
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/r2.txt").await?.0, StatusCode::NOT_FOUND);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_executor_that_dies_mid_run_is_taken_over_once_its_lease_lapses_and_the_next_run_goes_on() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_without_runs_consumer(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let project = tenant.project_id.parse()?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool("c1", "run_command", &json!({"command": "echo started > marker; sleep 30"})));
    model.push(Reply::text("never asked: its executor died"));
    let first = run(&app, &tenant.key, &env, &session, "slow").await?;
    let second = run(&app, &tenant.key, &env, &session, "next").await?;
    let message = |path: &str| -> anyhow::Result<ExecuteRun> {
        Ok(ExecuteRun { project_id: project, run_id: path.rsplit('/').next().unwrap_or_default().parse()? })
    };
    let lease = Duration::from_secs(3);
    let platform = || Platform { lease, ..agentplane_api::platform::platform(&app.app) };
    // The first executor works until its command runs, then dies (its task dropped, as a crashed
    // function's would be: no ending, no release).
    let dying = {
        let app = app.app.clone();
        let message = message(&first)?;
        tokio::spawn(async move {
            let platform = Platform { lease, ..agentplane_api::platform::platform(&app) };
            execute(&platform, &message).await
        })
    };
    let started = Instant::now();
    while file(&app, &tenant.key, &env, "/workspace/marker").await?.0 != StatusCode::OK {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dying.abort();
    let died_at = Instant::now();
    // The second Run waits its turn meanwhile.
    assert_eq!(execute(&platform(), &message(&second)?).await?, Executed::Waiting);
    // Redeliveries of the first Run's message: refused while the dead lease lasts, then one
    // takes it over and settles the Run; every later one finds nothing to do.
    let settled = loop {
        match execute(&platform(), &message(&first)?).await? {
            Executed::Stale => {}
            other => break other,
        }
        anyhow::ensure!(died_at.elapsed() < lease * 4, "never taken over");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let took = died_at.elapsed();
    assert_eq!(settled, Executed::Ran(agentplane_domain::platform::run::RunStatus::Failed));
    // The executor renewed its lease every third of it, the last time up to a third before it
    // died: the lease lapsed between two thirds of it and all of it after the death.
    let earliest = lease - lease / 3 - Duration::from_millis(200);
    assert!(took >= earliest, "taken over after {took:?}, before the lease lapsed");
    assert_eq!(execute(&platform(), &message(&first)?).await?, Executed::Stale);
    let done = wait(&app, &tenant.key, &first, Duration::from_secs(5), ended).await?;
    assert_eq!(done["status"], "failed", "{done}");
    let stored = app.store.runs().get(&project, &message(&first)?.run_id).await?;
    assert_eq!(stored.error.map(|e| e.code).as_deref(), Some(lease::EXECUTOR_LOST));
    // Its workspace as the dead executor left it is checkpointed: the diff is known.
    assert_eq!(done["checkpoint"]["status"], "ready", "{done}");
    assert_eq!(diff_paths(&done), ["/workspace/marker"]);
    assert_eq!(model.requests().len(), 1, "the taken-over Run called the model again");
    // The next Run goes on: the takeover's end sent it.
    model.push(writes("n1", "next.txt"));
    model.push(Reply::text("next done"));
    assert_eq!(
        execute(&platform(), &message(&second)?).await?,
        Executed::Ran(agentplane_domain::platform::run::RunStatus::Completed)
    );
    let stored = app.store.runs().get(&project, &message(&first)?.run_id).await?;
    let environment = app.store.environments().get(&project, &stored.environment_id).await?;
    assert_eq!(environment.executing, None, "the lease was given back");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_reverted_mid_execution_keeps_the_sandbox_time_it_used() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool("c1", "run_command", &json!({"command": "echo started > marker; sleep 30"})));
    model.push(Reply::text("never asked: the Run was rolled back"));
    let path = run(&app, &tenant.key, &env, &session, "slow").await?;
    let started = Instant::now();
    while file(&app, &tenant.key, &env, "/workspace/marker").await?.0 != StatusCode::OK {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = send(app.v1(&tenant.key, Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let reverted =
        wait(&app, &tenant.key, &path, Duration::from_secs(60), |r| r["status"] == "reverted").await?;
    // The executor's end (not written: the rollback took the Run) still adds the time it ran.
    let project = tenant.project_id.parse()?;
    let id = path.rsplit('/').next().unwrap_or_default().parse()?;
    let started = Instant::now();
    let stored = loop {
        let stored = app.store.runs().get(&project, &id).await?;
        if stored.sandbox_runtime_ms > 0 {
            break stored;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(20),
            "no sandbox time: {stored:?} {reverted}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(stored.status, agentplane_domain::platform::run::RunStatus::Reverted);
    let (_, shown) = send(app.v1(&tenant.key, Method::GET, &path)).await?;
    let seconds = shown["data"]["usage"]["sandboxRuntimeSeconds"].as_f64().unwrap_or(0.0);
    assert!(seconds > 0.0, "{shown}");
    Ok(())
}
