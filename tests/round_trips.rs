//! Storage round trips, counted on the wire by the store's op counter: authentication reads one
//! item; a plain turn (one model call, no tools) then takes at most 4 requests, in a new session
//! and in an existing one, reads nothing of the event log, and its 100th turn in a session costs
//! what its 2nd did.

use agentplane_store::metrics::{OpCounter, Ops};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, fresh_store, send, str_field};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The ceiling for a plain turn after authentication.
const MAX_TURN_ROUND_TRIPS: usize = 4;

struct Counted {
    model: ScriptedModel,
    app: TestApp,
    counter: OpCounter,
    tenant: Tenant,
    agent: String,
}

async fn setup() -> anyhow::Result<Counted> {
    setup_with(|app| app).await
}

async fn setup_with(
    configure: impl FnOnce(agentplane_api::App) -> agentplane_api::App,
) -> anyhow::Result<Counted> {
    let model = ScriptedModel::start().await?;
    let counter = OpCounter::new();
    let mut store = fresh_store().await?.with_op_counter(&counter);
    // No webhook consumer, no webhook retry job: their passes would count on this store in the
    // background.
    store.webhooks_queue = None;
    // No rate limit: authentication is the one read these counts assume (tests/quotas.rs counts
    // the counted check).
    let app = TestApp::serve_with_model_and_without_webhook_retry(store, &model, |app| {
        configure(app.with_rate_limit(None))
    })
    .await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "plain", "model": "gpt-4o-mini", "instructions": "Be brief."}),
        )
        .await?;
    Ok(Counted { model, app, counter, tenant, agent })
}

impl Counted {
    /// Sends `request` and returns what it answered and every storage request it caused; checks
    /// that nothing more arrives after the answer (no write left behind in the background).
    async fn counted(&self, request: RequestBuilder) -> anyhow::Result<(StatusCode, Value, Ops)> {
        self.counter.take();
        let (status, body) = send(request).await?;
        let ops = self.counter.take();
        self.app.drained().await?;
        let late = self.counter.take();
        anyhow::ensure!(late.total() == 0, "storage requests after the answer: {late}");
        Ok((status, body, ops))
    }

    /// The requests of one authentication: a route that fails right after it.
    async fn auth(&self) -> anyhow::Result<Ops> {
        let request = self.app.client(&self.tenant.key, Method::GET, "/sessions/not-a-session-id");
        let (status, body, ops) = self.counted(request).await?;
        anyhow::ensure!(status == StatusCode::NOT_FOUND, "{status} {body}");
        Ok(ops)
    }

    /// A plain turn: in a new session (`POST /responses`) or in `session` (`POST
    /// /sessions/{id}/messages`); the session id and the requests after authentication.
    async fn turn(&self, session: Option<&str>) -> anyhow::Result<(String, Ops)> {
        let auth = self.auth().await?;
        self.model.push(Reply::text("ok"));
        let request = match session {
            None => self
                .app
                .client(&self.tenant.key, Method::POST, "/responses")
                .json(&json!({"agent": self.agent, "input": "hi"})),
            Some(id) => self
                .app
                .client(&self.tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
                .json(&json!({"input": "hi"})),
        };
        let (status, body, mut ops) = self.counted(request).await?;
        anyhow::ensure!(status == StatusCode::OK && body["status"] == "completed", "{status} {body}");
        anyhow::ensure!(
            ops.0.starts_with(&auth.0),
            "the turn did not start with the authentication read ({auth}): {ops}"
        );
        ops.0.drain(..auth.total());
        Ok((str_field(&body, "session_id")?, ops))
    }

    fn events_table(&self) -> &str {
        &self.app.store.names.events_table
    }
}

/// What every plain turn must hold to: the ceiling, and no Query or Scan (nothing read in
/// proportion to the session's history, the event log least of all).
#[track_caller]
fn assert_plain(ops: &Ops, events_table: &str) {
    assert!(
        ops.total() <= MAX_TURN_ROUND_TRIPS,
        "a plain turn took {} storage round trips after authentication (at most {MAX_TURN_ROUND_TRIPS}): {ops}",
        ops.total()
    );
    for op in &ops.0 {
        assert!(
            !(op.operation == "Query" && op.table.as_deref() == Some(events_table)),
            "a plain turn queried the event log: {ops}"
        );
        assert!(
            !matches!(op.operation.as_str(), "Query" | "Scan"),
            "a plain turn ran a {}: {ops}",
            op.operation
        );
    }
}

#[tokio::test]
async fn the_counter_counts_each_request_once_by_operation() -> R {
    let counter = OpCounter::new();
    let store = fresh_store().await?.with_op_counter(&counter);
    counter.take();
    let table = store.names.main_table.clone();
    for i in 0..7 {
        let key = aws_sdk_dynamodb::types::AttributeValue::S(format!("COUNT#{i}"));
        store.dynamo.get_item().table_name(&table).key("PK", key.clone()).key("SK", key).send().await?;
    }
    let objects = store.objects.clone().ok_or_else(|| anyhow::anyhow!("no objects client"))?;
    objects.put("transcripts/count-test", b"x".to_vec()).await?;
    objects.get("transcripts/count-test").await?;
    let ops = counter.take();
    assert_eq!(ops.total(), 9, "{ops}");
    assert_eq!(ops.count("GetItem"), 7, "{ops}");
    assert!(
        ops.0.iter().filter(|op| op.operation == "GetItem").all(|op| op.table.as_deref() == Some(&*table))
    );
    assert_eq!(ops.names()[7..], ["S3.PutObject", "S3.GetObject"], "{ops}");
    assert_eq!(counter.total(), 0, "take starts a new count");
    Ok(())
}

#[tokio::test]
async fn a_store_without_a_counter_is_unchanged_and_counts_nothing() -> R {
    let counter = OpCounter::new();
    let store = fresh_store().await?;
    let counted = store.clone().with_op_counter(&counter);
    let table = store.names.main_table.clone();
    let key = aws_sdk_dynamodb::types::AttributeValue::S("UNCOUNTED".into());
    store.dynamo.get_item().table_name(&table).key("PK", key.clone()).key("SK", key.clone()).send().await?;
    assert_eq!(counter.total(), 0);
    counted.dynamo.get_item().table_name(&table).key("PK", key.clone()).key("SK", key).send().await?;
    assert_eq!(counter.total(), 1);
    Ok(())
}

#[tokio::test]
async fn authentication_reads_one_item() -> R {
    let c = setup().await?;
    let ops = c.auth().await?;
    assert_eq!(ops.names(), ["GetItem"], "{ops}");
    assert_eq!(ops.0[0].table.as_deref(), Some(&*c.app.store.names.main_table));
    // A wrong key of the right shape costs the same one read, and is refused.
    let mut wrong = c.tenant.key.clone();
    let last = if wrong.ends_with('a') { "b" } else { "a" };
    wrong.replace_range(wrong.len() - 1.., last);
    c.counter.take();
    let (status, _) = send(c.app.client(&wrong, Method::GET, "/sessions/not-a-session-id")).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(c.counter.take().names(), ["GetItem"]);
    Ok(())
}

#[tokio::test]
async fn a_plain_turn_in_a_new_session_takes_at_most_four_round_trips_after_auth() -> R {
    let c = setup().await?;
    let (_, ops) = c.turn(None).await?;
    eprintln!("POST /responses, new session, after auth: {ops}");
    assert_plain(&ops, c.events_table());
    assert!(ops.count("TransactWriteItems") >= 1, "the turn's writes are transactions: {ops}");
    Ok(())
}

#[tokio::test]
async fn a_plain_turn_in_an_existing_session_takes_at_most_four_round_trips_after_auth() -> R {
    let c = setup().await?;
    let (session, _) = c.turn(None).await?;
    let (again, ops) = c.turn(Some(&session)).await?;
    assert_eq!(again, session);
    eprintln!("POST /sessions/{{id}}/messages, after auth: {ops}");
    assert_plain(&ops, c.events_table());
    Ok(())
}

#[tokio::test]
async fn the_hundredth_turn_of_a_session_costs_what_the_second_did() -> R {
    let c = setup().await?;
    let (session, first) = c.turn(None).await?;
    assert_plain(&first, c.events_table());
    let mut second = None;
    for n in 2..=100 {
        let (_, ops) = c.turn(Some(&session)).await?;
        assert_plain(&ops, c.events_table());
        match n {
            2 => second = Some(ops),
            100 => {
                let second = second.take().ok_or_else(|| anyhow::anyhow!("no second turn"))?;
                eprintln!("turn 2: {second}\nturn 100: {ops}");
                assert_eq!(ops, second, "the 100th turn's requests differ from the 2nd's");
            }
            _ => {}
        }
    }
    // The history grew all along (at least three events a turn) while the cost did not.
    let last_seq = c.app.store.events().last_seq(&session.parse()?).await?;
    assert!(last_seq >= 300, "only {last_seq} events in 100 turns");
    Ok(())
}

#[tokio::test]
async fn a_plain_turn_of_a_project_with_a_webhook_endpoint_still_takes_four_round_trips() -> R {
    // The endpoint is on loopback (nothing listens there), so private addresses are allowed.
    // The store has no webhooks queue here, so the events stay where the turns wrote them.
    let c = setup_with(|app| {
        let mut webhooks = app.webhooks.clone();
        webhooks.targets = agentplane_tests::loopback_receivers();
        app.with_webhooks(webhooks)
    })
    .await?;
    let (status, body) = send(
        c.app
            .client(&c.tenant.key, Method::POST, "/webhooks")
            .json(&json!({"url": "http://127.0.0.1:9/hook"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    for session in [None, Some(c.turn(None).await?.0)] {
        let (_, ops) = c.turn(session.as_deref()).await?;
        eprintln!("a plain turn with an endpoint, after auth: {ops}");
        assert_plain(&ops, c.events_table());
        // Whether to emit is read with the agent, and the event is written in the turn's last
        // transaction: no request of its own (the queue send is SQS, not storage).
        assert_eq!(ops.count("GetItem"), 0, "{ops}");
    }
    let emitted = c.app.store.webhooks().unsent_events(agentplane_api::edge::now(), 10).await?;
    let types: Vec<&str> = emitted.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types, ["session.idled"; 3], "each turn emitted its event with its last write");
    Ok(())
}
