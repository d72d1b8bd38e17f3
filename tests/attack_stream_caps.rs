//! Attack: one key opens event streams without end (issue 24, item 4). 200 streams from one key
//! all answered 200 and slowed an unrelated tenant's reads tenfold. Open streams are capped per
//! key and per project: past a cap the answer is 429 `too_many_streams` in the client envelope
//! with `Retry-After`; a stream holds its places while open and gives them back when it ends; a
//! stream whose process died frees them when its lease runs out; each open stream's re-check of
//! its key and session is one read.

use std::time::Duration;

use agentplane_api::app::StreamLimits;
use agentplane_domain::{ApiKeyId, ProjectId};
use agentplane_store::dynamo::stream_slots::StreamCaps;
use agentplane_store::metrics::OpCounter;
use agentplane_tests::{Tenant, TestApp, assert_error, fresh_store, send, str_field};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

fn limits(per_key: u32, per_project: u32, lease_s: u64) -> StreamLimits {
    StreamLimits { per_key, per_project, lease: Duration::from_secs(lease_s) }
}

async fn new_session(app: &TestApp, key: &str) -> anyhow::Result<String> {
    let (status, body) = send(app.client(key, Method::POST, "/sessions").json(&json!({}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "create session: {status} {body}");
    str_field(&body, "id")
}

/// Opens a stream and keeps it open (the answer's body unread) while the `Response` lives.
async fn open(app: &TestApp, key: &str, session: &str) -> anyhow::Result<Response> {
    Ok(app.client(key, Method::GET, &format!("/sessions/{session}/events/stream")).send().await?)
}

/// Asserts the stream was refused by `limit`'s cap of `max`, in the client envelope.
async fn assert_refused(response: Response, limit: &str, max: u32) -> R {
    let status = response.status();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body: Value = serde_json::from_str(&response.text().await?).unwrap_or(Value::Null);
    assert_error((status, &body), StatusCode::TOO_MANY_REQUESTS, "too_many_streams");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(body["error"]["limit"], limit, "{body}");
    assert_eq!(body["error"]["max_streams"], max, "{body}");
    let seconds: u64 = retry_after.as_deref().unwrap_or("").parse().unwrap_or(0);
    assert!(seconds >= 1, "Retry-After: {retry_after:?}");
    Ok(())
}

/// Tries to open a stream every 100 ms, up to `tries` times, until one is 200.
async fn open_eventually(app: &TestApp, key: &str, session: &str, tries: usize) -> anyhow::Result<Response> {
    for _ in 0..tries {
        let response = open(app, key, session).await?;
        if response.status() == StatusCode::OK {
            return Ok(response);
        }
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no stream opened after {tries} tries")
}

async fn second_key(app: &TestApp, tenant: &Tenant) -> anyhow::Result<String> {
    Ok(app.create_key(&tenant.project_id).await?.1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_past_a_cap_are_429_and_a_closed_one_gives_its_place_back() -> R {
    let app = TestApp::spawn_with(|app| app.with_stream_limits(limits(2, 3, 60))).await?;
    let tenant = app.tenant().await?;
    let other_key = second_key(&app, &tenant).await?;
    let session = new_session(&app, &tenant.key).await?;

    let first = open(&app, &tenant.key, &session).await?;
    let second = open(&app, &tenant.key, &session).await?;
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    // The key's cap.
    assert_refused(open(&app, &tenant.key, &session).await?, "key", 2).await?;
    // Another key of the project has places of its own, up to the project's cap.
    let third = open(&app, &other_key, &session).await?;
    assert_eq!(third.status(), StatusCode::OK);
    assert_refused(open(&app, &other_key, &session).await?, "project", 3).await?;

    // Another project is not affected by this one being full.
    let stranger = app.tenant().await?;
    let theirs = open(&app, &stranger.key, &new_session(&app, &stranger.key).await?).await?;
    assert_eq!(theirs.status(), StatusCode::OK);
    let (status, body) = send(app.client(&stranger.key, Method::GET, "/sessions")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A client that goes away gives its place back: a new stream of the key opens.
    drop(first);
    let again = open_eventually(&app, &tenant.key, &session, 100).await?;
    assert_refused(open(&app, &tenant.key, &session).await?, "key", 2).await?;
    drop((second, third, again, theirs));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_whose_process_died_frees_its_places_within_its_lease() -> R {
    let lease = Duration::from_secs(2);
    let app = TestApp::spawn_with(|app| app.with_stream_limits(limits(1, 10, lease.as_secs()))).await?;
    let tenant = app.tenant().await?;
    let session = new_session(&app, &tenant.key).await?;
    let key: ApiKeyId = tenant.key_id.parse()?;
    let project: ProjectId = tenant.project_id.parse()?;

    // A stream's invocation took the key's one place and was killed: it never renews, never
    // gives back.
    let now = agentplane_api::edge::now();
    let caps = StreamCaps { per_key: 1, per_project: 10 };
    let until = now.plus_millis(i64::try_from(lease.as_millis())?);
    let slots = app.store.stream_slots();
    let held = Box::pin(slots.open(&key, &project, "vanished", caps, now, until)).await?;
    assert!(held.is_ok(), "{held:?}");
    assert_refused(open(&app, &tenant.key, &session).await?, "key", 1).await?;

    // Within its lease (bounded poll), the place is free again.
    let live = open_eventually(&app, &tenant.key, &session, 200).await?;

    // A live stream renews its lease, so it keeps its place past the first lease.
    let first = app.store.stream_slots().open_for_key(&key, agentplane_api::edge::now()).await?;
    assert_eq!(first, 1);
    let slot_lease = || async {
        let held = app.store.stream_slots().leases_of_key(&key).await?;
        anyhow::Ok(held.into_iter().max())
    };
    let opened_until = slot_lease().await?.ok_or_else(|| anyhow::anyhow!("no place held"))?;
    let mut renewed = false;
    for _ in 0..100 {
        if slot_lease().await?.is_some_and(|until| until > opened_until) {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(renewed, "the open stream never renewed its lease");
    assert_refused(open(&app, &tenant.key, &session).await?, "key", 1).await?;
    drop(live);
    Ok(())
}

/// A stream that ends by itself (its session deleted) gives its places back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_that_ends_on_its_own_gives_its_places_back() -> R {
    let app = TestApp::spawn_with(|app| app.with_stream_limits(limits(1, 1, 60))).await?;
    let tenant = app.tenant().await?;
    let other_key = second_key(&app, &tenant).await?;
    let session = new_session(&app, &tenant.key).await?;
    let stream = open(&app, &tenant.key, &session).await?;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_refused(open(&app, &other_key, &session).await?, "project", 1).await?;
    // Deleting the session ends the stream (at its next re-check); its places come back.
    let (status, body) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}"))).await?;
    assert!(status.is_success(), "{status} {body}");
    let body = tokio::time::timeout(Duration::from_secs(20), stream.text()).await??;
    assert!(body.starts_with("retry:"), "{body}");
    let other = new_session(&app, &other_key).await?;
    let opened = open(&app, &other_key, &other).await?;
    assert_eq!(opened.status(), StatusCode::OK, "the ended stream kept the project's place");
    Ok(())
}

/// Opening a stream costs two reads of places (sent together) and one transaction besides the
/// authentication (the key's counted update, tests/quotas.rs) and session reads; each re-check of an open stream is one BatchGetItem, no
/// GetItem.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opening_a_stream_and_re_checking_it_are_a_few_round_trips() -> R {
    let counter = OpCounter::new();
    let mut store = fresh_store().await?.with_op_counter(&counter);
    store.webhooks_queue = None;
    let events_table = store.names.events_table.clone();
    let app = TestApp::serve(store).await?;
    let tenant = app.tenant().await?;
    let session = new_session(&app, &tenant.key).await?;

    counter.take();
    let mut stream = open(&app, &tenant.key, &session).await?;
    assert_eq!(stream.status(), StatusCode::OK);
    let first = stream.chunk().await?.unwrap_or_default();
    assert!(first.starts_with(b"retry:"));
    let opening = counter.take();
    let main: Vec<String> = opening
        .0
        .iter()
        .filter(|op| op.service == "DynamoDB" && op.table.as_deref() != Some(events_table.as_str()))
        .map(agentplane_store::metrics::Op::name)
        .collect();
    assert_eq!(
        main,
        ["UpdateItem", "GetItem", "Query", "Query", "TransactWriteItems"].map(str::to_owned),
        "opening: {opening}"
    );

    // The first re-check (3 s after opening): wait until it happened (bounded), then look at
    // what the stream sent meanwhile: event reads and one BatchGetItem.
    let mut seen = agentplane_store::metrics::Ops::default();
    for _ in 0..100 {
        seen.0.extend(counter.take().0);
        if seen.count("BatchGetItem") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.count("BatchGetItem"), 1, "{seen}");
    let others: Vec<_> = seen
        .0
        .iter()
        .filter(|op| {
            op.service == "DynamoDB"
                && op.name() != "BatchGetItem"
                && op.table.as_deref() != Some(events_table.as_str())
        })
        .collect();
    assert!(others.is_empty(), "a re-check sent more than one read: {seen}");
    drop(stream);
    Ok(())
}
