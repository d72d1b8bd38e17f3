//! Quotas (issue 27, item 4): a request rate per project key, counted in DynamoDB by the read
//! that authenticates the key, answered 429 with `Retry-After` in each surface's envelope; and
//! caps on what a project holds (environments, webhook endpoints), taken by conditional
//! transactions so concurrent creates at the cap make one, and given back by a delete.

use std::time::Duration;

use agentplane_domain::ProjectId;
use agentplane_domain::quota::{ProjectCaps, RateLimit};
use agentplane_store::metrics::OpCounter;
use agentplane_tests::{Tenant, TestApp, assert_error, fresh_store, send};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

fn limit(max: u32, window_s: u32) -> Option<RateLimit> {
    Some(RateLimit { max, window_s })
}

/// Waits until a fresh window of `window_s` seconds has just begun (so a test's requests fall
/// in one window), 150 ms into it.
async fn window_start(window_s: u64) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let into = now.as_millis() % (u128::from(window_s) * 1000);
    let wait = u128::from(window_s) * 1000 - into + 150;
    tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
}

async fn answer(request: RequestBuilder) -> anyhow::Result<(StatusCode, Option<u64>, Value)> {
    let response: Response = request.send().await?;
    let status = response.status();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok());
    let body = serde_json::from_str(&response.text().await?).unwrap_or(Value::Null);
    Ok((status, retry_after, body))
}

/// The three project-key surfaces, one read each.
fn client_read(app: &TestApp, key: &str) -> RequestBuilder {
    app.client(key, Method::GET, "/sessions")
}
fn platform_read(app: &TestApp, key: &str) -> RequestBuilder {
    app.v1(key, Method::GET, "/environments")
}
fn sandbox_read(app: &TestApp, key: &str) -> RequestBuilder {
    app.sandbox(key, Method::GET, "/sandboxes")
}

/// Spends `n` requests of `key` (each must pass).
async fn spend(app: &TestApp, key: &str, n: u32) -> R {
    for i in 0..n {
        let (status, _, body) = answer(client_read(app, key)).await?;
        anyhow::ensure!(status == StatusCode::OK, "request {i}: {status} {body}");
    }
    Ok(())
}

#[tokio::test]
async fn over_the_limit_each_surface_answers_429_in_its_envelope_with_retry_after() -> R {
    let app = TestApp::spawn_with(|app| app.with_rate_limit(limit(3, 30))).await?;
    let t = app.tenant().await?;
    window_start(30).await;
    spend(&app, &t.key, 3).await?;

    // Client: {"error":{"type","code","message"}}.
    let (status, retry, body) = answer(client_read(&app, &t.key)).await?;
    assert_error((status, &body), StatusCode::TOO_MANY_REQUESTS, "rate_limit_exceeded");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(body["error"]["max_requests"], 3, "{body}");
    assert_eq!(body["error"]["window_seconds"], 30, "{body}");
    let retry = retry.expect("Retry-After on the client surface");
    assert!((1..=30).contains(&retry), "Retry-After {retry}");

    // Platform: {"error":{"code","message","requestId","details"}} and X-Request-Id.
    let response = platform_read(&app, &t.key).send().await?;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    assert!(retry.is_some_and(|s| (1..=30).contains(&s)), "{retry:?}");
    let request_id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body: Value = response.json().await?;
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
    assert_eq!(body["error"]["details"], json!({"maxRequests": 3, "windowSeconds": 30}), "{body}");
    assert!(body["error"].get("type").is_none(), "{body}");
    assert_eq!(body["error"]["requestId"].as_str(), request_id.as_deref(), "{body}");

    // Sandbox (E2B): {"code": 429, "message"}.
    let (status, retry, body) = answer(sandbox_read(&app, &t.key)).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["code"], 429, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("3 requests")), "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "only code and message: {body}");
    assert!(retry.is_some_and(|s| (1..=30).contains(&s)), "{retry:?}");

    // A refused request is not counted as served, and a revoked key is refused as revoked (401),
    // not as limited: revocation stays immediate.
    let path = format!("/core/v1/projects/{}/api_keys/{}", t.project_id, t.key_id);
    let (status, body) = send(app.core(Method::DELETE, &path)).await?;
    anyhow::ensure!(status.is_success(), "revoke: {status} {body}");
    let (status, _, body) = answer(client_read(&app, &t.key)).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_api_key");
    Ok(())
}

#[tokio::test]
async fn the_count_starts_again_when_the_window_ends() -> R {
    let app = TestApp::spawn_with(|app| app.with_rate_limit(limit(2, 3))).await?;
    let t = app.tenant().await?;
    window_start(3).await;
    spend(&app, &t.key, 2).await?;
    let (status, retry, body) = answer(platform_read(&app, &t.key)).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let retry = retry.expect("Retry-After");
    assert!((1..=3).contains(&retry), "{retry}");
    // Waiting what Retry-After says is enough.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    spend(&app, &t.key, 2).await?;
    let (status, _, _) = answer(sandbox_read(&app, &t.key)).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    Ok(())
}

#[tokio::test]
async fn one_keys_limit_leaves_other_keys_and_projects_alone() -> R {
    let app = TestApp::spawn_with(|app| app.with_rate_limit(limit(3, 30))).await?;
    let a = app.tenant().await?;
    let (_, a_second_key) = app.create_key(&a.project_id).await?;
    let b = app.tenant().await?;
    window_start(30).await;
    spend(&app, &a.key, 3).await?;
    let (status, _, _) = answer(client_read(&app, &a.key)).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // The same project's other key, and another project, have their own counts.
    spend(&app, &a_second_key, 3).await?;
    spend(&app, &b.key, 3).await?;
    let (status, _, _) = answer(client_read(&app, &b.key)).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    Ok(())
}

#[tokio::test]
async fn concurrent_requests_of_one_key_pass_exactly_the_limit() -> R {
    let app = TestApp::spawn_with(|app| app.with_rate_limit(limit(5, 30))).await?;
    let t = app.tenant().await?;
    window_start(30).await;
    let requests = (0..12).map(|_| answer(client_read(&app, &t.key)));
    let answers = futures_util::future::join_all(requests).await;
    let mut ok = 0;
    let mut limited = 0;
    for answer in answers {
        match answer?.0 {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => limited += 1,
            other => anyhow::bail!("unexpected {other}"),
        }
    }
    assert_eq!((ok, limited), (5, 7));
    Ok(())
}

#[tokio::test]
async fn the_counted_check_is_one_update_within_a_window_and_two_when_one_begins() -> R {
    let counter = OpCounter::new();
    let store = fresh_store().await?.with_op_counter(&counter);
    let app = TestApp::serve(store).await?;
    let t = app.tenant().await?;
    // The harness's limit (a million a minute) is far away.
    let path = "/sessions/not-a-session-id";
    counter.take();
    let (status, body) = send(app.client(&t.key, Method::GET, path)).await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let first = counter.take();
    let (status, _) = send(app.client(&t.key, Method::GET, path)).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let second = counter.take();
    // The key's first request of its window: the counted update finds no window, a second
    // starts it. Later ones: the counted update alone, in place of the plain read.
    // (Where DynamoDB returns no item with the failed condition, a read says why: one more.)
    let names = first.names();
    assert!(names.len() <= 3, "{first}");
    assert_eq!(
        (names.first().map(String::as_str), names.last().map(String::as_str)),
        (Some("UpdateItem"), Some("UpdateItem")),
        "{first}"
    );
    assert_eq!(names.iter().filter(|n| n.as_str() == "UpdateItem").count(), 2, "{first}");
    assert_eq!(second.names(), ["UpdateItem"], "{second}");
    // An unknown key: one failed update (and a read where the emulator returns no item).
    let unknown = format!("cpeer_{}", "A".repeat(43));
    let (status, _) = send(app.client(&unknown, Method::GET, path)).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let refused = counter.take();
    assert!(
        refused.total() <= 2 && refused.names().first().map(String::as_str) == Some("UpdateItem"),
        "{refused}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Caps.

fn caps(environments: u32, webhook_endpoints: u32) -> ProjectCaps {
    ProjectCaps { environments, webhook_endpoints, ..ProjectCaps::default() }
}

async fn new_environment(app: &TestApp, key: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(app.v1(key, Method::POST, "/environments").json(&json!({}))).await
}

#[tokio::test]
async fn environments_are_capped_per_project_even_under_concurrent_creates() -> R {
    let app = TestApp::spawn_with(|app| app.with_caps(caps(3, 50))).await?;
    let a: Tenant = app.tenant().await?;
    let b: Tenant = app.tenant().await?;
    let project: ProjectId = a.project_id.parse()?;
    for _ in 0..2 {
        let (status, body) = new_environment(&app, &a.key).await?;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // Two concurrent creates for the last place: one is made.
    let (one, two) = tokio::join!(new_environment(&app, &a.key), new_environment(&app, &a.key));
    let mut statuses = [one?.0, two?.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::CREATED, StatusCode::CONFLICT]);
    assert_eq!(app.store.environments().count(&project).await?, 3);

    let (status, body) = new_environment(&app, &a.key).await?;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    assert_eq!(body["error"]["details"], json!({"quota": "environments", "max": 3}), "{body}");
    assert!(body["error"]["requestId"].is_string(), "{body}");
    let (_, list) = send(app.v1(&a.key, Method::GET, "/environments")).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(3), "{list}");

    // Another project is not touched by a's cap.
    let (status, body) = new_environment(&app, &b.key).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // A delete gives one place back (a repeated delete gives back no second one).
    let first = list["data"][0]["id"].as_str().unwrap_or_default().to_owned();
    for _ in 0..2 {
        let (status, body) = send(app.v1(&a.key, Method::DELETE, &format!("/environments/{first}"))).await?;
        assert!(status.is_success(), "{status} {body}");
    }
    assert_eq!(app.store.environments().count(&project).await?, 2);
    let (status, body) = new_environment(&app, &a.key).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _) = new_environment(&app, &a.key).await?;
    assert_eq!(status, StatusCode::CONFLICT);
    Ok(())
}

async fn new_endpoint(app: &TestApp, key: &str, i: u32) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(key, Method::POST, "/webhooks").json(&json!({"url": format!("https://example.com/{i}")})))
        .await
}

#[tokio::test]
async fn webhook_endpoints_are_capped_per_project_by_the_deployment() -> R {
    let app = TestApp::spawn_with(|app| app.with_caps(caps(100, 2))).await?;
    let a = app.tenant().await?;
    let b = app.tenant().await?;
    let project: ProjectId = a.project_id.parse()?;
    let (status, body) = new_endpoint(&app, &a.key, 0).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (one, two) = tokio::join!(new_endpoint(&app, &a.key, 1), new_endpoint(&app, &a.key, 2));
    let (one, two) = (one?, two?);
    let mut statuses = [one.0, two.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::CREATED, StatusCode::CONFLICT], "{one:?} {two:?}");
    let refused = if one.0 == StatusCode::CONFLICT { one.1 } else { two.1 };
    assert_error((StatusCode::CONFLICT, &refused), StatusCode::CONFLICT, "webhook_limit_reached");
    assert_eq!(app.store.webhooks().count(&project).await?, 2);

    let (status, body) = new_endpoint(&app, &b.key, 0).await?;
    assert_eq!(status, StatusCode::CREATED, "another project: {body}");

    let (_, list) = send(app.client(&a.key, Method::GET, "/webhooks")).await?;
    let id = list["data"][0]["id"].as_str().unwrap_or_default().to_owned();
    let (status, body) = send(app.client(&a.key, Method::DELETE, &format!("/webhooks/{id}"))).await?;
    assert!(status.is_success(), "{status} {body}");
    let (status, body) = new_endpoint(&app, &a.key, 3).await?;
    assert_eq!(status, StatusCode::CREATED, "after a delete: {body}");
    Ok(())
}

/// A session whose agent takes files.
async fn file_session(app: &TestApp, key: &str) -> anyhow::Result<String> {
    let agent = app
        .create_agent(
            key,
            json!({"name": "files", "model": "gpt-4o-mini", "config": {"attachments": {"enabled": true}}}),
        )
        .await?;
    let (status, body) =
        send(app.client(key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    agentplane_tests::str_field(&body, "id")
}

async fn new_file(app: &TestApp, key: &str, session: &str, size: u64) -> anyhow::Result<(StatusCode, Value)> {
    let body = json!({"filename": "notes.txt", "content_type": "text/plain", "size": size});
    send(app.client(key, Method::POST, &format!("/sessions/{session}/files")).json(&body)).await
}

#[tokio::test]
async fn stored_bytes_are_capped_per_project_exactly_even_under_concurrent_creates() -> R {
    let app = TestApp::spawn_with(|app| {
        app.with_caps(ProjectCaps { stored_bytes: 1000, ..ProjectCaps::default() })
    })
    .await?;
    let a = app.tenant().await?;
    let b = app.tenant().await?;
    let project: ProjectId = a.project_id.parse()?;
    // Two sessions of one project share its bytes.
    let one = file_session(&app, &a.key).await?;
    let two = file_session(&app, &a.key).await?;
    let (status, first) = new_file(&app, &a.key, &one, 600).await?;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(app.store.files().stored_bytes(&project).await?, 600);

    // Two concurrent 300-byte files for the last 400 bytes: one is made.
    let (x, y) = tokio::join!(new_file(&app, &a.key, &one, 300), new_file(&app, &a.key, &two, 300));
    let (x, y) = (x?, y?);
    let mut statuses = [x.0, y.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::CREATED, StatusCode::CONFLICT], "{x:?} {y:?}");
    // What session two will hold after the next file: its share of the race, and 100.
    let two_holds: u64 = if y.0 == StatusCode::CREATED { 400 } else { 100 };
    let refused = if x.0 == StatusCode::CONFLICT { x.1 } else { y.1 };
    assert_error((StatusCode::CONFLICT, &refused), StatusCode::CONFLICT, "quota_exceeded");
    assert_eq!(refused["error"]["quota"], "stored_bytes", "{refused}");
    assert_eq!(refused["error"]["max"], 1000, "{refused}");
    assert_eq!(refused["error"]["stored"], 900, "{refused}");
    assert_eq!(app.store.files().stored_bytes(&project).await?, 900);

    // 100 bytes still fit exactly; one more byte does not.
    let (status, body) = new_file(&app, &a.key, &two, 100).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _) = new_file(&app, &a.key, &two, 1).await?;
    assert_eq!(status, StatusCode::CONFLICT);

    // Another project stores its own bytes.
    let other = file_session(&app, &b.key).await?;
    let (status, body) = new_file(&app, &b.key, &other, 1000).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Deleting the 600-byte file gives its bytes back (a second delete gives nothing).
    let id = first["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("/sessions/{one}/files/{id}");
    let (status, body) = send(app.client(&a.key, Method::DELETE, &path)).await?;
    assert!(status.is_success(), "{status} {body}");
    let (status, _) = send(app.client(&a.key, Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(app.store.files().stored_bytes(&project).await?, 400);
    let (status, body) = new_file(&app, &a.key, &one, 600).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Deleting a session gives its files' bytes back once it is purged.
    let (status, body) = send(app.client(&a.key, Method::DELETE, &format!("/sessions/{one}"))).await?;
    assert!(status.is_success(), "{status} {body}");
    for _ in 0..3 {
        app.sweep().await?;
    }
    let left = app.store.files().stored_bytes(&project).await?;
    assert_eq!(left, two_holds, "the purge gave back the deleted session's bytes, and only those");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Live sandboxes.

#[tokio::test]
async fn live_sandboxes_are_capped_per_project_and_an_ended_one_gives_its_place_back() -> R {
    let env = agentplane_tests::sandbox::env_with(|app| {
        app.with_caps(ProjectCaps { sandboxes: 2, ..ProjectCaps::default() })
    })
    .await;
    let one = env.create(json!({"timeout": 120})).await;
    let two = env.create(json!({"timeout": 120})).await;
    // Paused still holds its place (its node keeps it frozen).
    let (status, body) = env.call(Method::POST, &format!("/sandboxes/{two}/pause"), None).await;
    assert!(status.is_success(), "{status} {body}");
    let (status, body) = env.call(Method::POST, "/sandboxes", Some(json!({"timeout": 120}))).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["code"], 429, "E2B's envelope: {body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("2 live sandboxes"), "{body}");
    // Another project of the same deployment is not held back by this one's sandboxes.
    let other = env.app.tenant().await?;
    let (status, body) =
        send(env.app.sandbox(&other.key, Method::POST, "/sandboxes").json(&json!({"timeout": 120}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let theirs = body["sandboxID"].as_str().unwrap_or_default().to_owned();
    send(env.app.sandbox(&other.key, Method::DELETE, &format!("/sandboxes/{theirs}"))).await?;
    // A kill gives the place back at once.
    env.kill(&one).await;
    let three = env.create(json!({"timeout": 120})).await;
    let (status, _) = env.call(Method::POST, "/sandboxes", Some(json!({"timeout": 120}))).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    env.kill(&two).await;
    env.kill(&three).await;
    Ok(())
}

#[tokio::test]
async fn concurrent_sandbox_creates_at_the_cap_make_exactly_one() -> R {
    let env = agentplane_tests::sandbox::env_with(|app| {
        app.with_caps(ProjectCaps { sandboxes: 2, ..ProjectCaps::default() })
    })
    .await;
    let first = env.create(json!({"timeout": 120})).await;
    let creates = (0..4).map(|_| env.call(Method::POST, "/sandboxes", Some(json!({"timeout": 120}))));
    let results = futures_util::future::join_all(creates).await;
    let made: Vec<&Value> =
        results.iter().filter(|(s, _)| *s == StatusCode::CREATED).map(|(_, b)| b).collect();
    let refused = results.iter().filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!(made.len(), 1, "{results:?}");
    assert_eq!(refused, 3, "{results:?}");
    env.kill(&first).await;
    env.kill(made[0]["sandboxID"].as_str().unwrap_or_default()).await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The count backfill (items written before 0.2.0, shape 1).

/// Turns a counted item back into what 0.1.0 wrote: no shape, no marker, not in its count.
async fn as_written_by_0_1_0(
    app: &TestApp,
    sk: &str,
    project: &ProjectId,
    marker: &str,
    count: (&str, &str, u64),
) -> R {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    let table = &app.store.names.main_table;
    let pk = A::S(format!("PROJECT#{project}"));
    app.store
        .dynamo
        .update_item()
        .table_name(table)
        .key("PK", pk.clone())
        .key("SK", A::S(sk.to_owned()))
        .update_expression(format!("REMOVE shape, {marker}"))
        .send()
        .await?;
    let (count_sk, attr, by) = count;
    app.store
        .dynamo
        .update_item()
        .table_name(table)
        .key("PK", pk)
        .key("SK", A::S(count_sk.to_owned()))
        .update_expression(format!("ADD {attr} :minus"))
        .expression_attribute_values(":minus", A::N(format!("-{by}")))
        .send()
        .await?;
    Ok(())
}

#[tokio::test]
async fn the_count_backfill_counts_older_items_once_and_then_has_nothing_left() -> R {
    let app = TestApp::spawn_with(|app| {
        app.with_caps(ProjectCaps { environments: 2, stored_bytes: 1000, ..ProjectCaps::default() })
    })
    .await?;
    let a = app.tenant().await?;
    let project: ProjectId = a.project_id.parse()?;
    // Two environments and a file as 0.1.0 left them: stored, but in no count.
    let mut envs = Vec::new();
    for _ in 0..2 {
        let (status, env) = new_environment(&app, &a.key).await?;
        assert_eq!(status, StatusCode::CREATED, "{env}");
        let id = env["data"]["id"].as_str().unwrap_or_default().to_owned();
        as_written_by_0_1_0(
            &app,
            &format!("ENV#{id}"),
            &project,
            "counted",
            ("ENVS#COUNT", "environment_count", 1),
        )
        .await?;
        envs.push(id);
    }
    let session = file_session(&app, &a.key).await?;
    let (status, file) = new_file(&app, &a.key, &session, 700).await?;
    assert_eq!(status, StatusCode::CREATED, "{file}");
    let file_id = file["id"].as_str().unwrap_or_default().to_owned();
    as_written_by_0_1_0(
        &app,
        &format!("SESSION#{session}#FILE#{file_id}"),
        &project,
        "bytes_counted",
        ("FILES#BYTES", "stored_bytes", 700),
    )
    .await?;
    // And a file a build of 0.2.0 counted but wrote without its shape: only marked, not counted
    // again.
    let (status, marked) = new_file(&app, &a.key, &session, 100).await?;
    assert_eq!(status, StatusCode::CREATED, "{marked}");
    let marked_id = marked["id"].as_str().unwrap_or_default().to_owned();
    app.store
        .dynamo
        .update_item()
        .table_name(&app.store.names.main_table)
        .key("PK", aws_sdk_dynamodb::types::AttributeValue::S(format!("PROJECT#{project}")))
        .key("SK", aws_sdk_dynamodb::types::AttributeValue::S(format!("SESSION#{session}#FILE#{marked_id}")))
        .update_expression("REMOVE shape")
        .send()
        .await?;
    // Before the backfill the caps are blind to them: a third environment, another 700 bytes.
    assert_eq!(app.store.environments().count(&project).await?, 0);
    assert_eq!(app.store.files().stored_bytes(&project).await?, 100);

    // A pass with no time left reads nothing and keeps no position.
    let idle = agentplane_api::jobs::count_backfill_once(&app.app, Duration::ZERO).await?;
    assert_eq!((idle.pages, idle.done), (0, false), "{idle:?}");
    let report = agentplane_api::jobs::count_backfill_once(&app.app, Duration::from_secs(60)).await?;
    assert!(report.done, "{report:?}");
    assert_eq!(
        (report.items.environments, report.items.files, report.items.bytes),
        (2, 1, 700),
        "{report:?}"
    );
    assert_eq!(report.items.marked, 1, "{report:?}");
    assert_eq!(app.store.environments().count(&project).await?, 2);
    assert_eq!(app.store.files().stored_bytes(&project).await?, 800);
    // Counted now: the caps hold, 409 as for any create past them.
    let (status, body) = new_environment(&app, &a.key).await?;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = new_file(&app, &a.key, &session, 400).await?;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    // Once through, a pass does nothing: nothing is counted twice.
    let again = agentplane_api::jobs::count_backfill_once(&app.app, Duration::from_secs(60)).await?;
    assert!(again.done && again.pages == 0, "{again:?}");
    assert_eq!(app.store.environments().count(&project).await?, 2);
    // And a delete gives back what the backfill counted.
    let (status, body) = send(app.v1(&a.key, Method::DELETE, &format!("/environments/{}", envs[0]))).await?;
    assert!(status.is_success(), "{status} {body}");
    assert_eq!(app.store.environments().count(&project).await?, 1);
    let (status, body) =
        send(app.client(&a.key, Method::DELETE, &format!("/sessions/{session}/files/{file_id}"))).await?;
    assert!(status.is_success(), "{status} {body}");
    assert_eq!(app.store.files().stored_bytes(&project).await?, 100);
    Ok(())
}
