//! The session event log: gapless under concurrent writers, the poll route, and the SSE stream
//! (live delivery, keep-alive, resume with Last-Event-ID exactly once).

use std::collections::BTreeSet;
use std::time::Duration;

use agentplane_domain::SessionId;
use agentplane_domain::event::{EventType, NewEvent};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

#[tokio::test]
async fn fifty_concurrent_appends_stay_gapless() -> R {
    let app = TestApp::spawn().await?;
    let session = SessionId::from_random(*uuid::Uuid::new_v4().as_bytes());
    let bus = agentplane_engine::EventBus::new(30);
    let writes = (0..50).map(|i| {
        let store = app.store.clone();
        let bus = bus.clone();
        tokio::spawn(async move {
            let event = NewEvent::new(EventType::UserMessage, None, json!({ "text": format!("m{i}") }));
            bus.append(&store, &session, vec![event], agentplane_domain::Timestamp::from_unix_millis(0)).await
        })
    });
    let mut seqs = BTreeSet::new();
    for write in writes.collect::<Vec<_>>() {
        for event in write.await?? {
            assert!(seqs.insert(event.seq), "sequence {} handed out twice", event.seq);
        }
    }
    assert_eq!(seqs, (1..=50).collect::<BTreeSet<u64>>());
    let all = app.store.events().all(&session).await?;
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=50).collect::<Vec<_>>());
    let texts: BTreeSet<String> =
        all.iter().filter_map(|e| e.data["text"].as_str().map(str::to_owned)).collect();
    assert_eq!(texts.len(), 50, "an event was lost");
    Ok(())
}

#[tokio::test]
async fn events_keep_30_days_and_big_data_is_truncated() -> R {
    let app = TestApp::spawn().await?;
    let session = SessionId::from_random(*uuid::Uuid::new_v4().as_bytes());
    let now = agentplane_domain::Timestamp::from_unix_seconds(1_000_000);
    let big = NewEvent::new(EventType::AssistantMessage, None, json!({ "text": "y".repeat(50_000) }));
    app.store.events().append(&session, vec![big], now, 30, None).await?;
    let stored = app
        .store
        .dynamo
        .get_item()
        .table_name(&app.store.names.events_table)
        .key("PK", aws_sdk_dynamodb::types::AttributeValue::S(format!("SESSION#{session}")))
        .key("SK", aws_sdk_dynamodb::types::AttributeValue::N("1".into()))
        .send()
        .await?
        .item
        .unwrap_or_default();
    let ttl: i64 =
        stored.get("expires_at").and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert_eq!(ttl, 1_000_000 + 30 * 86_400);
    let event = &app.store.events().all(&session).await?[0];
    assert_eq!(event.data["_truncated"], true);
    assert!(event.data.to_string().len() <= 16 * 1024);
    Ok(())
}

#[tokio::test]
async fn polling_validates_its_cursor_and_pages() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let other = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "a", "model": "m"})).await?;
    model.push(Reply::text("hi"));
    let (_, body) = send(
        app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "x"})),
    )
    .await?;
    let session = str_field(&body, "session_id")?;
    let path = format!("/sessions/{session}/events");

    let (status, page) = send(app.client(&tenant.key, Method::GET, &format!("{path}?limit=2"))).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["has_more"], true);
    assert_eq!(page["first_id"], 1);
    assert_eq!(page["last_id"], 2);
    let (_, rest) = send(app.client(&tenant.key, Method::GET, &format!("{path}?after=2&limit=100"))).await?;
    let ids: Vec<u64> = rest["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|e| e["id"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(ids, [3, 4, 5]);
    assert_eq!(rest["has_more"], false);
    assert_eq!(rest["data"][0]["object"], "session.event");
    assert_eq!(rest["data"][0]["session_id"], session.as_str());

    for bad in ["after=-1", "after=x", "after=1.5", "limit=0", "limit=101", "after=1&after=2"] {
        let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("{path}?{bad}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let (status, body) = send(app.client(&other.key, Method::GET, &path)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(app.client(&other.key, Method::GET, &format!("{path}/stream"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(app.client(&tenant.key, Method::GET, "/sessions/nope/events")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    Ok(())
}

/// A minimal SSE reader over reqwest chunks.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

#[derive(Debug, Default)]
struct Frame {
    id: Option<u64>,
    event: Option<String>,
    data: Option<Value>,
    comment: bool,
    retry: Option<u64>,
}

impl Sse {
    async fn open(
        app: &TestApp,
        key: &str,
        session: &str,
        last_event_id: Option<u64>,
    ) -> anyhow::Result<Self> {
        let mut request = app.client(key, Method::GET, &format!("/sessions/{session}/events/stream"));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await?;
        anyhow::ensure!(response.status() == StatusCode::OK, "stream: {}", response.status());
        anyhow::ensure!(
            response.headers().get("content-type").and_then(|v| v.to_str().ok()) == Some("text/event-stream"),
            "content type"
        );
        Ok(Self { response, buffer: String::new() })
    }

    async fn next(&mut self, within: Duration) -> anyhow::Result<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame::default();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        frame.id = v.parse().ok();
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        frame.event = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        frame.data = serde_json::from_str(v).ok();
                    } else if let Some(v) = line.strip_prefix("retry: ") {
                        frame.retry = v.parse().ok();
                    } else if line.starts_with(':') {
                        frame.comment = true;
                    }
                }
                return Ok(frame);
            }
            let chunk = tokio::time::timeout(within, self.response.chunk()).await??;
            let chunk = chunk.ok_or_else(|| anyhow::anyhow!("stream ended"))?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event frame, skipping comments and hints.
    async fn event(&mut self, within: Duration) -> anyhow::Result<Frame> {
        loop {
            let frame = self.next(within).await?;
            if frame.id.is_some() {
                return Ok(frame);
            }
        }
    }
}

#[tokio::test]
async fn the_stream_delivers_live_keeps_alive_and_resumes_exactly_once() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "a", "model": "m", "tools": ["echo"]})).await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;

    let mut stream = Sse::open(&app, &tenant.key, &session, None).await?;
    let hint = stream.next(Duration::from_secs(5)).await?;
    assert_eq!(hint.retry, Some(1000));
    // Nothing happens yet: a keep-alive comment arrives (the test app sends one every second).
    let idle = stream.next(Duration::from_secs(5)).await?;
    assert!(idle.comment, "{idle:?}");

    // A turn with two tool steps; the model hangs a little so the stream sees events live.
    model.push(Reply::tool("c1", "echo", &json!({"text": "a"})));
    model.push(Reply::Hang(Duration::from_millis(800)));
    let turn = {
        let request = app
            .client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "go"}));
        tokio::spawn(send(request))
    };
    let mut seen = Vec::new();
    // Read the first four events, then drop the connection mid-turn.
    for _ in 0..4 {
        let frame = stream.event(Duration::from_secs(5)).await?;
        seen.push((frame.id.unwrap_or(0), frame.event.clone().unwrap_or_default()));
        assert_eq!(frame.data.as_ref().map(|d| d["id"].clone()), Some(json!(frame.id)));
    }
    let last_seen = seen.last().map(|(id, _)| *id).unwrap_or(0);
    drop(stream);

    let (status, answer) = turn.await??;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let mut resumed = Sse::open(&app, &tenant.key, &session, Some(last_seen)).await?;
    loop {
        let frame = resumed.event(Duration::from_secs(5)).await?;
        let kind = frame.event.clone().unwrap_or_default();
        seen.push((frame.id.unwrap_or(0), kind.clone()));
        if kind == "turn.ended" {
            break;
        }
    }
    let ids: Vec<u64> = seen.iter().map(|(id, _)| *id).collect();
    let expected: Vec<u64> = (1..=ids.len() as u64).collect();
    assert_eq!(ids, expected, "every event exactly once, in order");
    let log = app.store.events().all(&session.parse()?).await?;
    assert_eq!(log.len(), seen.len());
    let kinds: Vec<&str> = seen.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"turn.started"));
    assert!(kinds.contains(&"tool.result"));

    // `?after=` resumes too, and a bad cursor is refused.
    let mut from_query = {
        let response = app
            .client(
                &tenant.key,
                Method::GET,
                &format!("/sessions/{session}/events/stream?after={}", ids.len() - 1),
            )
            .send()
            .await?;
        Sse { response, buffer: String::new() }
    };
    let frame = from_query.event(Duration::from_secs(5)).await?;
    assert_eq!(frame.id, Some(ids.len() as u64));
    let (status, body) = send(
        app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events/stream"))
            .header("Last-Event-ID", "abc"),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    Ok(())
}
