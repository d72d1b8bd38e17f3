//! Platform Runs when messages go missing and things fail: the outbox sweep sends what was never
//! sent (a Run whose create could not queue it answers 202 and still runs) and takes over a Run
//! whose executor died after its message was gone; a stop of such a Run settles it; a Run that
//! waits for a node gives up; a rollback whose restore keeps failing is given up and frees the
//! environment; a stopping Run writes no more; a replacement sandbox gets the workspace back.

use std::time::{Duration, Instant};

use agentplane_api::app::PlatformLimits;
use agentplane_domain::platform::run::ExecuteRun;
use agentplane_engine::platform::execute::execute;
use agentplane_engine::platform::outbox::{OutboxReport, sweep_outbox};
use agentplane_engine::platform::{Platform, rollback};
use agentplane_engine::ports::Compute;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::platform::{ended, file, run, wait};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::json;

type R = anyhow::Result<()>;

fn message(project: agentplane_domain::ProjectId, path: &str) -> anyhow::Result<ExecuteRun> {
    Ok(ExecuteRun { project_id: project, run_id: path.rsplit('/').next().unwrap_or_default().parse()? })
}

/// Takes every message off the `runs` queue (as if each had been lost); how many there were.
async fn lose_run_messages(app: &TestApp) -> anyhow::Result<usize> {
    let queue = app.store.runs_queue()?;
    let mut lost = 0;
    loop {
        let messages = queue.receive(10, 1).await?;
        if messages.is_empty() {
            return Ok(lost);
        }
        for m in &messages {
            queue.delete(&m.receipt_handle).await?;
            lost += 1;
        }
    }
}

/// The app with the full store (the test's: every queue) in place of the one it serves with.
fn with_full_store(app: &TestApp) -> agentplane_api::App {
    let mut full = app.app.clone();
    full.store = app.store.clone();
    full
}

fn later(seconds: i64) -> agentplane_domain::Timestamp {
    agentplane_api::edge::now().plus_millis(seconds * 1000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_message_could_not_be_sent_answers_202_and_the_outbox_sweep_sends_it() -> R {
    let model = ScriptedModel::start().await?;
    // The API cannot reach the runs queue (as when SQS refuses a send).
    let app = TestApp::spawn_with_model_without_runs_consumer_and(&model, |mut app| {
        app.store.runs = None;
        app
    })
    .await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool("w", "write_file", &json!({"path": "out.txt", "content": "sent late"})));
    model.push(Reply::text("done"));
    let path = run(&app, &tenant.key, &env, &session, "write").await?;
    assert_eq!(lose_run_messages(&app).await?, 0, "nothing was queued");
    let give_up = rollback::ROLLBACK_GIVE_UP;
    // Within the grace nothing is due: a message just sent is not sent twice.
    assert_eq!(
        sweep_outbox(&app.store, agentplane_api::edge::now(), give_up).await?,
        OutboxReport::default()
    );
    let report = sweep_outbox(&app.store, later(61), give_up).await?;
    assert_eq!(report.runs_sent, 1, "{report:?}");
    let full = with_full_store(&app);
    assert!(agentplane_api::jobs::consume_runs_once(&full, 5).await? >= 1);
    let done = wait(&app, &tenant.key, &path, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        file(&app, &tenant.key, &env, "/workspace/out.txt").await?,
        (StatusCode::OK, "sent late".into())
    );
    // Everything has ended: the environment leaves the outbox, and later passes find nothing.
    let report = sweep_outbox(&app.store, later(200), give_up).await?;
    assert_eq!((report.runs_sent, report.settled), (0, 1), "{report:?}");
    assert_eq!(sweep_outbox(&app.store, later(400), give_up).await?, OutboxReport::default());
    Ok(())
}

/// Starts executing `path` with a 3 s lease and kills the executor once its command ran (no
/// ending, no release, as a crashed function); every message of the Run is then lost.
async fn die_mid_run(
    app: &TestApp,
    tenant: &agentplane_tests::Tenant,
    env: &str,
    path: &str,
) -> anyhow::Result<Instant> {
    let key = tenant.key.as_str();
    let message = message(tenant.project_id.parse()?, path)?;
    let lease = Duration::from_secs(3);
    let dying = {
        let app = app.app.clone();
        tokio::spawn(async move {
            let platform = Platform { lease, ..agentplane_api::platform::platform(&app) };
            execute(&platform, &message).await
        })
    };
    let started = Instant::now();
    while file(app, key, env, "/workspace/marker").await?.0 != StatusCode::OK {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dying.abort();
    let died = Instant::now();
    lose_run_messages(app).await?;
    Ok(died)
}

fn message_id(path: &str) -> anyhow::Result<agentplane_domain::platform::run::RunId> {
    Ok(path.rsplit('/').next().unwrap_or_default().parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_executor_died_and_whose_message_is_gone_is_taken_over_by_the_sweep() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_without_runs_consumer(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool("c1", "run_command", &json!({"command": "echo started > marker; sleep 30"})));
    let path = run(&app, &tenant.key, &env, &session, "slow").await?;
    let died = die_mid_run(&app, &tenant, &env, &path).await?;
    // Nothing will deliver it again: the sweep sees a running Run no live lease holds.
    while died.elapsed() < Duration::from_millis(3200) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report = sweep_outbox(&app.store, later(61), rollback::ROLLBACK_GIVE_UP).await?;
    assert_eq!(report.runs_sent, 1, "{report:?}");
    assert!(agentplane_api::jobs::consume_runs_once(&app.app, 5).await? >= 1);
    let done = wait(&app, &tenant.key, &path, Duration::from_secs(30), ended).await?;
    eprintln!("takeover by the sweep: settled {:?} after the executor died", died.elapsed());
    assert_eq!(done["status"], "failed", "{done}");
    let stored = app.store.runs().get(&tenant.project_id.parse()?, &message_id(&path)?).await?;
    assert_eq!(stored.error.map(|e| e.code).as_deref(), Some("executor_lost"));
    assert_eq!(done["checkpoint"]["status"], "ready", "{done}");
    assert_eq!(model.requests().len(), 1, "the taken-over Run called the model again");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_of_a_run_whose_executor_died_settles_it() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_without_runs_consumer(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool("c1", "run_command", &json!({"command": "echo started > marker; sleep 30"})));
    let path = run(&app, &tenant.key, &env, &session, "slow").await?;
    let died = die_mid_run(&app, &tenant, &env, &path).await?;
    while died.elapsed() < Duration::from_millis(3200) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The stop finds no live executor: it sends the Run's message, whose delivery settles it.
    let (status, stopped) = send(app.v1(&tenant.key, Method::POST, &format!("{path}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{stopped}");
    assert!(agentplane_api::jobs::consume_runs_once(&app.app, 5).await? >= 1, "the stop sent nothing");
    let done = wait(&app, &tenant.key, &path, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "stopped", "{done}");
    assert_eq!(done["checkpoint"]["status"], "ready", "{done}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_that_waits_for_a_node_too_long_fails_and_frees_its_environment() -> R {
    let model = ScriptedModel::start().await?;
    let limits = PlatformLimits { node_wait: Duration::from_secs(2), ..Default::default() };
    // No sandbox node at all.
    let app = TestApp::spawn_with_model_and(&model, |app| app.with_platform_limits(limits)).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let first = run(&app, &tenant.key, &env, &session, "one").await?;
    let second = run(&app, &tenant.key, &env, &session, "two").await?;
    let project = tenant.project_id.parse()?;
    let code = |run: &agentplane_domain::platform::run::Run| run.error.as_ref().map(|e| e.code.clone());
    let started = Instant::now();
    // It waits first (running, with the diagnostic)…
    loop {
        let stored = app.store.runs().get(&project, &message_id(&first)?).await?;
        if code(&stored).as_deref() == Some("platform_runtime_unavailable") {
            assert_eq!(stored.status, agentplane_domain::platform::run::RunStatus::Running, "{stored:?}");
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(20), "it never waited: {stored:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // …then gives up.
    let done = wait(&app, &tenant.key, &first, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "failed", "{done}");
    let stored = app.store.runs().get(&project, &message_id(&first)?).await?;
    assert_eq!(code(&stored).as_deref(), Some("platform_runtime_unavailable"));
    // The next Run is not held behind it forever: it gets its own turn (and its own wait).
    let next = wait(&app, &tenant.key, &second, Duration::from_secs(40), ended).await?;
    assert_eq!(next["status"], "failed", "{next}");
    assert_eq!(model.requests().len(), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollback_whose_restore_keeps_failing_is_given_up_and_the_environment_works_again() -> R {
    let model = ScriptedModel::start().await?;
    let limits = PlatformLimits { rollback_give_up: Duration::from_secs(2), ..Default::default() };
    let app = TestApp::spawn_with_model_and(&model, |app| app.with_platform_limits(limits)).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let write = |content: &str| Reply::tool("w", "write_file", &json!({"path": "a.txt", "content": content}));
    model.push(write("first"));
    model.push(Reply::text("one"));
    let first = run(&app, &tenant.key, &env, &session, "one").await?;
    wait(&app, &tenant.key, &first, Duration::from_secs(30), ended).await?;
    model.push(write("second"));
    model.push(Reply::text("two"));
    let second = run(&app, &tenant.key, &env, &session, "two").await?;
    let done = wait(&app, &tenant.key, &second, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "completed", "{done}");
    // The blobs a restore would fetch are gone from the workspaces bucket.
    let bucket = app.store.workspaces()?;
    let mut deleted = 0;
    for key in bucket.keys("blobs/").await? {
        bucket.delete(&key).await?;
        deleted += 1;
    }
    assert!(deleted > 0, "no blob to delete");
    let (status, accepted) = send(app.v1(&tenant.key, Method::DELETE, &second)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["data"]["status"], "reverting");
    // The restore fails, is retried, and is given up: the Run reads as it did, not reverted.
    let back =
        wait(&app, &tenant.key, &second, Duration::from_secs(60), |r| r["status"] != "reverting").await?;
    assert_eq!(back["status"], "completed", "{back}");
    let (_, environment) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(environment["data"]["rollbackFailure"]["code"], "rollback_failed", "{environment}");
    assert_eq!(environment["data"]["rollbackFailure"]["runId"], message_id(&second)?.to_string());
    // The environment is usable again: a write and a new Run.
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/b.txt"))
            .body("b"),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    model.push(Reply::text("three"));
    let third = run(&app, &tenant.key, &env, &session, "three").await?;
    let done = wait(&app, &tenant.key, &third, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "completed", "{done}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_run_writes_and_deletes_no_more() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/keep.txt"))
            .body("k"),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    // One step: a slow command, then a write and a delete (the stop comes during the command).
    model.push(Reply::Tools {
        calls: vec![
            ("c".into(), "run_command".into(), json!({"command": "echo go > marker; sleep 5"}).to_string()),
            ("w".into(), "write_file".into(), json!({"path": "late.txt", "content": "late"}).to_string()),
            ("d".into(), "delete_file".into(), json!({"path": "keep.txt"}).to_string()),
        ],
        text: None,
        input: 10,
        output: 5,
    });
    model.push(Reply::text("never asked"));
    let path = run(&app, &tenant.key, &env, &session, "stop me").await?;
    let started = Instant::now();
    while file(&app, &tenant.key, &env, "/workspace/marker").await?.0 != StatusCode::OK {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = send(app.v1(&tenant.key, Method::POST, &format!("{path}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let done = wait(&app, &tenant.key, &path, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "stopped", "{done}");
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/late.txt").await?.0, StatusCode::NOT_FOUND);
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/keep.txt").await?, (StatusCode::OK, "k".into()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sandbox_that_ended_is_replaced_with_the_workspace_restored() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let project = tenant.project_id.parse()?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::Tools {
        calls: vec![
            ("a".into(), "write_file".into(), json!({"path": "a.txt", "content": "kept"}).to_string()),
            ("b".into(), "write_file".into(), json!({"path": "dir/b.txt", "content": "deep"}).to_string()),
            (
                "x".into(),
                "run_command".into(),
                json!({"command": "printf 'echo ran' > run.sh && chmod 750 run.sh"}).to_string(),
            ),
        ],
        text: None,
        input: 10,
        output: 5,
    });
    model.push(Reply::text("written"));
    let path = run(&app, &tenant.key, &env, &session, "write").await?;
    let done = wait(&app, &tenant.key, &path, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "completed", "{done}");
    // The sandbox ends from outside the API (as an expiry or a lost node would end it).
    let environment = app.store.environments().get(&project, &env.parse()?).await?;
    let old = environment.sandbox_id.clone().ok_or_else(|| anyhow::anyhow!("no sandbox"))?;
    let sandbox = app.store.sandboxes().get_any(&old).await?;
    agentplane_api::platform::platform(&app.app).compute.end(&sandbox).await;
    // The next use starts a replacement holding every earlier file.
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/a.txt").await?, (StatusCode::OK, "kept".into()));
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/dir/b.txt").await?, (StatusCode::OK, "deep".into()));
    let environment = app.store.environments().get(&project, &env.parse()?).await?;
    assert_ne!(environment.sandbox_id, Some(old), "the sandbox was not replaced");
    // The script kept its mode: it still runs as an executable.
    model.push(Reply::tool(
        "m",
        "run_command",
        &json!({"command": "stat -c %a run.sh > mode.txt && ./run.sh > out.txt"}),
    ));
    model.push(Reply::text("checked"));
    let path = run(&app, &tenant.key, &env, &session, "check").await?;
    let done = wait(&app, &tenant.key, &path, Duration::from_secs(30), ended).await?;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/mode.txt").await?, (StatusCode::OK, "750\n".into()));
    assert_eq!(file(&app, &tenant.key, &env, "/workspace/out.txt").await?, (StatusCode::OK, "ran\n".into()));
    Ok(())
}
