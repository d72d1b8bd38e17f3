//! The jobs of paused turns: the `runs` queue (send, receive, delete), the `run-execution` batch
//! handler (partial batch failures, malformed and unknown messages), its in-process consumer,
//! and the retention sweep.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::Duration;

use agentplane_api::jobs::{self, SqsBatchResponse, SqsEvent};
use agentplane_domain::action::{Action, ActionId, ActionStatus, ActionType, Continuation};
use agentplane_domain::session::StopReason;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_engine::TurnOutcome;
use agentplane_engine::continuation::Continued;
use agentplane_store::{ReceivedMessage, Store, StoreError};
use agentplane_tests::{TestApp, endpoint, fresh_store};
use serde_json::{Value, json};

fn continuation(turn: &str) -> Continuation {
    Continuation {
        project_id: ProjectId::from_random(rand16()),
        session_id: SessionId::from_random(rand16()),
        turn_id: turn.into(),
        version: 2,
    }
}

fn rand16() -> [u8; 16] {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("randomness");
    b
}

fn body(c: &Continuation) -> String {
    json!({
        "kind": "continuation",
        "project_id": c.project_id,
        "session_id": c.session_id,
        "turn_id": c.turn_id,
        "version": c.version,
    })
    .to_string()
}

fn record(id: &str, body: String) -> ReceivedMessage {
    ReceivedMessage { id: id.into(), receipt_handle: format!("rh-{id}"), body }
}

fn ran(turn: &str) -> Continued {
    Continued::Ran(Box::new(TurnOutcome {
        turn_id: turn.into(),
        stop_reason: StopReason::EndTurn,
        output_text: Some("done".into()),
        usage: Default::default(),
        cost_usd: 0.0,
        unpriced: Default::default(),
        error: None,
        actions: Vec::new(),
        budget: None,
        handed_over: None,
    }))
}

#[tokio::test]
async fn a_batch_reports_exactly_the_messages_whose_run_failed() {
    let (ok, stale, fails) =
        (continuation("turn-ok"), continuation("turn-stale"), continuation("turn-fails"));
    let records = vec![
        record("m-ok", body(&ok)),
        record("m-stale", body(&stale)),
        record("m-fails", body(&fails)),
        record("m-not-json", "{not json".into()),
        record("m-bad-fields", json!({"kind": "continuation", "turn_id": "x"}).to_string()),
        record("m-bad-id", body(&ok).replace(&ok.project_id.to_string(), "proj_../../x")),
        record("m-no-kind", json!({"turn_id": "x"}).to_string()),
        record("m-future-kind", json!({"kind": "background_run", "run_id": "run_1"}).to_string()),
    ];
    let seen = Mutex::new(Vec::new());
    let response = jobs::handle_runs_batch(&records, |c: Continuation| {
        seen.lock().unwrap().push(c.clone());
        async move {
            match c.turn_id.as_str() {
                "turn-ok" => Ok(ran("turn-ok")),
                "turn-stale" => Ok(Continued::Stale),
                _ => Err(StoreError::unavailable("the table is gone")),
            }
        }
    })
    .await;

    // A storage failure is retried; a message of a kind this build does not know is kept (for
    // the dead-letter queue and a redrive), never dropped; the rest is done with, malformed
    // bodies included (no redelivery could fix them).
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": [{"itemIdentifier": "m-fails"}, {"itemIdentifier": "m-future-kind"}]})
    );
    assert!(response.failed("m-fails") && !response.failed("m-stale") && !response.failed("m-not-json"));
    // Only well-formed continuations reach the engine, each exactly as sent.
    let mut seen = seen.into_inner().unwrap();
    seen.sort_by(|a, b| a.turn_id.cmp(&b.turn_id));
    assert_eq!(seen, vec![fails, ok, stale]);
}

#[tokio::test]
async fn an_empty_batch_has_no_failures() {
    let response = jobs::handle_runs_batch(&[], |_c: Continuation| async { Ok(Continued::Stale) }).await;
    assert_eq!(serde_json::to_value(&response).unwrap(), json!({"batchItemFailures": []}));
}

/// The event exactly as Lambda's SQS event source delivers it, through the deployed handler.
#[tokio::test]
async fn the_lambda_handler_reads_an_sqs_event_and_answers_a_partial_batch_response() -> anyhow::Result<()> {
    let store = fresh_store().await?;
    let app = agentplane_api::App::new(store, None);
    let c = continuation("turn-1");
    let event: SqsEvent = serde_json::from_value(json!({
        "Records": [
            {
                "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
                "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
                "body": body(&c),
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1545082649183",
                    "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                    "ApproximateFirstReceiveTimestamp": "1545082649185"
                },
                "messageAttributes": {},
                "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-2:123456789012:my-queue",
                "awsRegion": "us-east-2"
            },
            {
                "messageId": "2e1424d4-f796-459a-8184-9c92662be6da",
                "receiptHandle": "AQEBzWwaftRI0KuVm4tP+/7q1rGgNqicHq...",
                "body": "not a message",
                "attributes": {},
                "messageAttributes": {},
                "eventSource": "aws:sqs"
            }
        ]
    }))?;
    let response: SqsBatchResponse = jobs::handle_runs_event(&app, event).await;
    // A continuation of a turn that does not exist is stale (done with), as is the garbage.
    assert_eq!(serde_json::to_value(&response)?, json!({"batchItemFailures": []}));
    Ok(())
}

/// `(visible, in flight)` messages of a queue.
async fn depth(queue_name: &str) -> anyhow::Result<(u64, u64)> {
    let sqs = sqs_client().await;
    let url = sqs.get_queue_url().queue_name(queue_name).send().await?.queue_url.unwrap_or_default();
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?
        .attributes
        .unwrap_or_default();
    let get = |name| attrs.get(&name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Ok((
        get(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages),
        get(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    ))
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&agentplane_store::aws::emulator_sdk_config(&endpoint()).await)
}

#[tokio::test]
async fn the_runs_queue_sends_receives_and_deletes_a_continuation() -> anyhow::Result<()> {
    let store = fresh_store().await?;
    let queue = store.runs_queue()?;
    let c = continuation("turn-7");
    queue.send(&c).await?;

    let got = queue.receive(10, 2).await?;
    assert_eq!(got.len(), 1, "{got:?}");
    let sent: Value = serde_json::from_str(&got[0].body)?;
    assert_eq!(sent, serde_json::from_str::<Value>(&body(&c))?, "the body is the tagged continuation");
    assert!(!got[0].id.is_empty() && !got[0].receipt_handle.is_empty());
    // Received and not deleted: hidden, not gone.
    assert_eq!(depth(&store.names.runs_queue).await?, (0, 1));

    queue.delete(&got[0].receipt_handle).await?;
    assert_eq!(depth(&store.names.runs_queue).await?, (0, 0));
    assert!(queue.receive(10, 1).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_released_message_comes_back() -> anyhow::Result<()> {
    let store = fresh_store().await?;
    let queue = store.runs_queue()?;
    queue.send(&continuation("turn-r")).await?;
    let first = queue.receive(1, 2).await?;
    assert_eq!(first.len(), 1);
    queue.release(&first[0].receipt_handle, 0).await?;
    let again = queue.receive(1, 2).await?;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, first[0].id, "the same message, delivered again");
    Ok(())
}

#[tokio::test]
async fn a_store_not_given_the_queue_cannot_send() -> anyhow::Result<()> {
    let sdk = agentplane_store::aws::emulator_sdk_config(&endpoint()).await;
    let store = Store::new(&sdk, agentplane_store::ResourceNames::with_prefix("nope"));
    assert!(matches!(store.runs_queue(), Err(StoreError::Unavailable(_))));
    Ok(())
}

/// Waits until the queue holds nothing, visible or in flight.
async fn drained(queue_name: &str) -> anyhow::Result<bool> {
    for _ in 0..60 {
        if depth(queue_name).await? == (0, 0) {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(false)
}

#[tokio::test]
async fn the_in_process_consumer_takes_continuations_off_the_queue() -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let queue = app.store.runs_queue()?;
    let c = continuation("turn-9");
    // A duplicate delivery ends the same way as the first: done with.
    queue.send(&c).await?;
    queue.send(&c).await?;
    // Garbage is dropped, not retried forever.
    let sqs = sqs_client().await;
    sqs.send_message().queue_url(queue.url().await?).message_body("{garbage").send().await?;

    assert!(drained(&app.store.names.runs_queue).await?, "the consumer left messages behind");
    // Nothing was dead-lettered either: each was deleted, not given up on.
    let dlq = agentplane_store::resources::dlq_name(&app.store.names.runs_queue);
    assert_eq!(depth(&dlq).await?, (0, 0));
    Ok(())
}

/// A run that failed is released and delivered again within seconds (not the queue's 16
/// minutes), and deleted once it succeeds.
#[tokio::test]
async fn a_failed_continuation_comes_back_soon_and_is_deleted_once_it_runs() -> anyhow::Result<()> {
    let store = fresh_store().await?;
    let queue = store.runs_queue()?;
    let c = continuation("turn-flaky");
    queue.send(&c).await?;
    let calls = Mutex::new(0u32);
    let flaky = |got: Continuation| {
        let call = {
            let mut calls = calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        let expected = c.clone();
        async move {
            assert_eq!(got, expected);
            if call == 1 { Err(StoreError::unavailable("throttled")) } else { Ok(Continued::Stale) }
        }
    };

    assert_eq!(jobs::consume_batch(queue, 2, &flaky).await?, 1);
    assert_eq!(depth(&store.names.runs_queue).await?, (0, 1), "released, not deleted");
    let started = std::time::Instant::now();
    let mut received = 0;
    while received == 0 && started.elapsed() < Duration::from_secs(15) {
        received = jobs::consume_batch(queue, 1, &flaky).await?;
    }
    assert_eq!(received, 1, "the failed message did not come back");
    assert!(started.elapsed() < Duration::from_secs(10), "it came back after {:?}", started.elapsed());
    assert_eq!(*calls.lock().unwrap(), 2);
    assert_eq!(depth(&store.names.runs_queue).await?, (0, 0), "deleted once it ran");
    Ok(())
}

/// A newer build's message is retried, then kept in the dead-letter queue for a redrive: never
/// dropped by a consumer that does not know it.
#[tokio::test]
async fn a_message_of_an_unknown_kind_is_dead_lettered_not_lost() -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let queue = app.store.runs_queue()?;
    let body = json!({"kind": "background_run", "run_id": "run_1"}).to_string();
    let sqs = sqs_client().await;
    sqs.send_message().queue_url(queue.url().await?).message_body(&body).send().await?;

    let dlq = agentplane_store::resources::dlq_name(&app.store.names.runs_queue);
    let dlq_url = sqs.get_queue_url().queue_name(&dlq).send().await?.queue_url.unwrap_or_default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut kept = Vec::new();
    while kept.is_empty() && tokio::time::Instant::now() < deadline {
        let out = sqs.receive_message().queue_url(&dlq_url).wait_time_seconds(2).send().await?;
        kept = out.messages.unwrap_or_default();
    }
    assert_eq!(kept.len(), 1, "the message never reached the dead-letter queue");
    assert_eq!(kept[0].body.as_deref(), Some(body.as_str()), "kept exactly as sent");
    assert_eq!(depth(&app.store.names.runs_queue).await?, (0, 0));
    Ok(())
}

#[tokio::test]
async fn a_sweep_with_nothing_due_does_nothing() -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let report = app.sweep().await?;
    assert_eq!(report, jobs::SweepReport::default());
    assert_eq!(depth(&app.store.names.runs_queue).await?, (0, 0));
    Ok(())
}

fn pending_action(project: ProjectId, session: SessionId, turn: &str, expires_at: Timestamp) -> Action {
    let mut id = [0u8; 12];
    getrandom::fill(&mut id).expect("randomness");
    Action {
        id: ActionId::from_random(id),
        project_id: project,
        session_id: session,
        turn_id: turn.into(),
        pause_version: 4,
        call_id: "call_1".into(),
        kind: ActionType::Approval,
        status: ActionStatus::Pending,
        tool: "delete_everything".into(),
        args: json!({}),
        question: None,
        answer: None,
        created_at: expires_at.plus_seconds(-600),
        expires_at: Some(expires_at),
        settled_at: None,
        answer_key_ids: None,
    }
}

async fn put_actions(store: &Store, actions: &[Action]) -> anyhow::Result<()> {
    let mut tx = store.dynamo.transact_write_items();
    for a in actions {
        let put = agentplane_store::dynamo::actions::put_new(store, a)?;
        tx = tx.transact_items(aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build());
    }
    tx.send().await?;
    Ok(())
}

/// An action past its expiry, and one not yet due, of the same paused turn.
///
/// One pass expires exactly the due action, does not carry the turn on while the other is
/// pending, and a second pass finds nothing new.
#[tokio::test]
async fn the_sweep_expires_due_actions_and_only_those() -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let now = agentplane_api::edge::now();
    let (project, session) = (ProjectId::from_random(rand16()), SessionId::from_random(rand16()));
    let due = pending_action(project, session, "turn-1", now.plus_seconds(-5));
    let later = pending_action(project, session, "turn-1", now.plus_seconds(3600));
    put_actions(&app.store, &[due.clone(), later.clone()]).await?;

    let report = app.sweep().await?;
    assert_eq!(report.failed, 0, "{report:?}");
    let expired = app.store.actions().get(&project, &session, &due.id).await?;
    assert_eq!(expired.status, ActionStatus::Expired);
    assert!(expired.settled_at.is_some());
    let still = app.store.actions().get(&project, &session, &later.id).await?;
    assert_eq!(still.status, ActionStatus::Pending);
    assert_eq!((report.due, report.expired, report.continued), (1, 1, 0), "{report:?}");
    assert_eq!(app.sweep().await?, jobs::SweepReport::default());
    Ok(())
}
