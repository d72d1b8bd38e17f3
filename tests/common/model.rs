//! A scripted OpenAI-compatible model server on loopback: each call to
//! `POST /v1/chat/completions` takes the next scripted reply (text, tool calls, a failure
//! status, or a hang) and records the request it got.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub enum Reply {
    Text {
        text: String,
        input: u64,
        output: u64,
    },
    /// `(call id, tool name, arguments as JSON text)`.
    Tools {
        calls: Vec<(String, String, String)>,
        text: Option<String>,
        input: u64,
        output: u64,
    },
    Status(u16),
    /// Sleeps, then answers with a text.
    Hang(Duration),
    /// Waits until the gate is opened ([`Gate::open`]), then answers with a text.
    Gated(Gate),
    /// Streamed (to a `stream: true` call): these pieces of text, then the connection ends
    /// without a finish (a provider that broke off mid-answer).
    Broken(Vec<String>),
}

/// Holds [`Reply::Gated`] calls until it is opened; open, it lets every call through.
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    /// A closed gate.
    fn default() -> Self {
        Self(Arc::new(tokio::sync::Semaphore::new(0)))
    }
}

impl Gate {
    pub fn open(&self) {
        self.0.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    async fn pass(&self) {
        if let Ok(permit) = self.0.acquire().await {
            permit.forget();
        }
    }
}

impl Reply {
    pub fn text(text: &str) -> Self {
        Reply::Text { text: text.into(), input: 10, output: 5 }
    }

    pub fn tool(id: &str, name: &str, arguments: &Value) -> Self {
        Reply::Tools {
            calls: vec![(id.into(), name.into(), arguments.to_string())],
            text: None,
            input: 12,
            output: 7,
        }
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
    authorizations: Vec<Option<String>>,
    /// When each request arrived, in order.
    arrivals: Vec<Instant>,
    /// Calls being answered now, and the most there ever were at once.
    in_flight: usize,
    max_in_flight: usize,
    /// How long each call took to answer here, from its arrival, in order of answer.
    call_times: Vec<Duration>,
    /// When the first piece of each streamed answer went out.
    first_pieces: Vec<Instant>,
}

/// Counts one call in flight until it is answered (or its connection is dropped).
struct InFlight(Arc<Mutex<Script>>, Instant);

impl InFlight {
    fn enter(script: &Arc<Mutex<Script>>) -> Self {
        if let Ok(mut s) = script.lock() {
            s.in_flight += 1;
            s.max_in_flight = s.max_in_flight.max(s.in_flight);
        }
        Self(script.clone(), Instant::now())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut s) = self.0.lock() {
            s.in_flight -= 1;
            s.call_times.push(self.1.elapsed());
        }
    }
}

#[derive(Clone)]
pub struct ScriptedModel {
    pub base_url: String,
    script: Arc<Mutex<Script>>,
}

impl ScriptedModel {
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_on("127.0.0.1:0").await
    }

    /// On a given address: the deployed stack's functions were told the model's URL at deploy
    /// time (tests/deployed.rs).
    pub async fn start_on(addr: &str) -> anyhow::Result<Self> {
        let script = Arc::new(Mutex::new(Script::default()));
        let router =
            axum::Router::new().route("/v1/chat/completions", post(complete)).with_state(script.clone());
        let listener = crate::bind_fixed(addr).await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(Self { base_url, script })
    }

    /// When the first piece of each streamed answer went out, in order.
    pub fn first_pieces(&self) -> Vec<Instant> {
        self.script.lock().map(|s| s.first_pieces.clone()).unwrap_or_default()
    }

    pub fn push(&self, reply: Reply) {
        if let Ok(mut script) = self.script.lock() {
            script.replies.push_back(reply);
        }
    }

    pub fn requests(&self) -> Vec<Value> {
        self.script.lock().map(|s| s.requests.clone()).unwrap_or_default()
    }

    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.script.lock().map(|s| s.authorizations.clone()).unwrap_or_default()
    }

    /// When each request arrived, in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.script.lock().map(|s| s.arrivals.clone()).unwrap_or_default()
    }

    /// How long each call took to answer, timed here (its own time, without the caller's), in
    /// the order they were answered.
    pub fn call_times(&self) -> Vec<Duration> {
        self.script.lock().map(|s| s.call_times.clone()).unwrap_or_default()
    }

    /// Calls being answered now.
    pub fn in_flight(&self) -> usize {
        self.script.lock().map(|s| s.in_flight).unwrap_or_default()
    }

    /// The most calls that were ever being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.script.lock().map(|s| s.max_in_flight).unwrap_or_default()
    }
}

fn completion(text: Option<&str>, tool_calls: Option<Value>, input: u64, output: u64) -> Value {
    let mut message = json!({ "role": "assistant", "content": text });
    if let Some(calls) = tool_calls {
        message["tool_calls"] = calls;
    }
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "model": "scripted",
        "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output },
    })
}

/// A text in the pieces a provider streams it in (a word and its following space each).
fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

/// A `text/event-stream` answer: each piece of text a chunk (10 ms apart), then the calls, the
/// usage and `[DONE]`; `usage: None` ends it after the text without a finish.
fn streamed_answer(
    script: Arc<Mutex<Script>>,
    pieces: Vec<String>,
    calls: Option<Vec<(String, String, String)>>,
    usage: Option<(u64, u64)>,
) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(16);
    tokio::spawn(async move {
        let chunk = |delta: Value, finish: Option<&str>| {
            let data = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {data}\n\n")
        };
        for (i, piece) in pieces.iter().enumerate() {
            if i == 0 {
                if let Ok(mut s) = script.lock() {
                    s.first_pieces.push(Instant::now());
                }
            } else {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if tx.send(chunk(json!({"content": piece}), None)).await.is_err() {
                return;
            }
        }
        let Some((input, output)) = usage else { return };
        if let Some(calls) = calls {
            let calls: Vec<Value> = calls
                .into_iter()
                .enumerate()
                .map(|(i, (id, name, args))| json!({"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            let _ = tx.send(chunk(json!({"tool_calls": calls}), Some("tool_calls"))).await;
        } else {
            let _ = tx.send(chunk(json!({}), Some("stop"))).await;
        }
        let usage = json!({"id": "chatcmpl-test", "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}});
        let _ = tx.send(format!("data: {usage}\n\n")).await;
        let _ = tx.send("data: [DONE]\n\n".to_owned()).await;
    });
    let body = axum::body::Body::from_stream(futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|piece| piece.map(Ok::<_, std::convert::Infallible>))
    }));
    ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

async fn complete(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let _in_flight = InFlight::enter(&script);
    let streamed = body["stream"] == json!(true);
    let reply = {
        let Ok(mut script) = script.lock() else { return StatusCode::INTERNAL_SERVER_ERROR.into_response() };
        script.arrivals.push(Instant::now());
        script.requests.push(body);
        script
            .authorizations
            .push(headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned));
        script.replies.pop_front()
    };
    match reply {
        Some(Reply::Text { text, input, output }) if streamed => {
            streamed_answer(script.clone(), words(&text), None, Some((input, output)))
        }
        Some(Reply::Tools { calls, text, input, output }) if streamed => {
            let pieces = text.as_deref().map(words).unwrap_or_default();
            streamed_answer(script.clone(), pieces, Some(calls), Some((input, output)))
        }
        Some(Reply::Broken(pieces)) => streamed_answer(script.clone(), pieces, None, None),
        None => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "script exhausted"}})))
            .into_response(),
        Some(Reply::Text { text, input, output }) => {
            Json(completion(Some(&text), None, input, output)).into_response()
        }
        Some(Reply::Tools { calls, text, input, output }) => {
            let calls: Vec<Value> = calls
                .into_iter()
                .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            Json(completion(text.as_deref(), Some(Value::Array(calls)), input, output)).into_response()
        }
        Some(Reply::Status(status)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, Json(json!({"error": {"message": "scripted failure"}}))).into_response()
        }
        Some(Reply::Hang(duration)) => {
            tokio::time::sleep(duration).await;
            Json(completion(Some("late"), None, 1, 1)).into_response()
        }
        Some(Reply::Gated(gate)) => {
            gate.pass().await;
            Json(completion(Some("let through"), None, 1, 1)).into_response()
        }
    }
}
