//! Found when tried as an attacker would: streams that outlive their key or session, a list
//! that ignores paging, a gateway that can be held open, answers outside the envelope, turns
//! that finish on deleted sessions, and error messages that echo whole inputs.

use std::time::Duration;

use agentplane_api::routes;
use agentplane_local::server::{HttpTimeouts, serve};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, assert_error, send, send_with_cache, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

type R = anyhow::Result<()>;

// ---- 1. An open event stream ends when its key is revoked or its session deleted ----------

async fn open_stream(app: &TestApp, key: &str, session: &str) -> anyhow::Result<reqwest::Response> {
    let response = reqwest::Client::new()
        .get(format!("{}/api/client/v1/sessions/{session}/events/stream", app.base))
        .bearer_auth(key)
        .send()
        .await?;
    anyhow::ensure!(response.status() == StatusCode::OK, "stream: {}", response.status());
    Ok(response)
}

/// Reads the stream until it ends; `false` when it is still open after `within`.
async fn ends_within(response: &mut reqwest::Response, within: Duration) -> anyhow::Result<bool> {
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => return Ok(false),
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None)) => return Ok(true),
            // A connection cut at the end is an end too.
            Ok(Err(_)) => return Ok(true),
        }
    }
}

async fn new_session(app: &TestApp, key: &str) -> anyhow::Result<String> {
    let (status, body) = send(app.client(key, Method::POST, "/sessions").json(&json!({}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "create session: {status} {body}");
    str_field(&body, "id")
}

#[tokio::test]
async fn an_open_stream_ends_once_its_key_is_revoked() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = new_session(&app, &tenant.key).await?;
    let mut stream = open_stream(&app, &tenant.key, &session).await?;
    // Still open while the key stands (the first frame is the retry hint).
    assert!(stream.chunk().await?.is_some());
    assert!(!ends_within(&mut stream, Duration::from_secs(4)).await?, "the stream ended with a valid key");
    let revoke = format!("/core/v1/projects/{}/api_keys/{}", tenant.project_id, tenant.key_id);
    let (status, body) = send(app.core(Method::DELETE, &revoke)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(ends_within(&mut stream, Duration::from_secs(20)).await?, "the stream outlived its key");
    Ok(())
}

#[tokio::test]
async fn an_open_stream_ends_once_its_session_is_deleted() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = new_session(&app, &tenant.key).await?;
    let mut stream = open_stream(&app, &tenant.key, &session).await?;
    assert!(stream.chunk().await?.is_some());
    let (status, body) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(ends_within(&mut stream, Duration::from_secs(20)).await?, "the stream outlived its session");
    Ok(())
}

// ---- 2. Agent versions are a keyset list ----------------------------------------------------

#[tokio::test]
async fn agent_versions_page_by_limit_and_after_without_gaps_or_repeats() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "paged", "model": "m"})).await?;
    for n in 1..=7 {
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
        assert_eq!(status, StatusCode::CREATED, "publish {n}: {body}");
    }
    let base = format!("/agents/{agent}/versions");
    for (order, expected) in [("desc", (1..=7).rev().collect::<Vec<u64>>()), ("asc", (1..=7).collect())] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut path = format!("{base}?limit=3&order={order}");
            if let Some(cursor) = &after {
                path.push_str(&format!("&after={cursor}"));
            }
            let (status, body) = send(app.client(&tenant.key, Method::GET, &path)).await?;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["object"], "list");
            let data = body["data"].as_array().cloned().unwrap_or_default();
            assert!(data.len() <= 3, "{body}");
            seen.extend(data.iter().filter_map(|v| v["version"].as_u64()));
            pages += 1;
            if body["has_more"] != true {
                break;
            }
            after = body["last_id"].as_str().map(str::to_owned);
            assert!(after.is_some(), "a page with more has a last_id: {body}");
            assert!(pages < 10, "paging does not end");
        }
        assert_eq!(seen, expected, "order {order}");
        assert_eq!(pages, 3);
    }
    // The default page is newest first, 20 at most, and carries the list shape.
    let (_, body) = send(app.client(&tenant.key, Method::GET, &base)).await?;
    assert_eq!(body["first_id"], "7");
    assert_eq!(body["last_id"], "1");
    assert_eq!(body["has_more"], false);
    for bad in ["limit=0", "limit=101", "limit=x", "order=up", "limit=2&limit=3"] {
        let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("{base}?{bad}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    for cursor in ["99", "0", "abc", "-1"] {
        let (status, body) =
            send(app.client(&tenant.key, Method::GET, &format!("{base}?after={cursor}"))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "cursor_not_found");
    }
    Ok(())
}

// ---- 3. The gateway cannot be held open -----------------------------------------------------

const SMALL: HttpTimeouts = HttpTimeouts {
    header: Duration::from_secs(1),
    body: Duration::from_secs(1),
    idle: Duration::from_secs(2),
};

/// The full router behind the gateway's own server, with small timeouts.
async fn gateway(app: &TestApp) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    tokio::spawn(serve(listener, routes::full_router(app.app.clone()), SMALL, std::future::pending()));
    Ok(address)
}

/// Reads until the peer closes; `None` when it is still open after `within`.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match tokio::time::timeout(within, stream.read_to_end(&mut out)).await {
        Ok(_) => Some(out),
        Err(_) => None,
    }
}

/// One response read off a raw connection: status, head (lowercased) and body.
async fn read_response(stream: &mut TcpStream, within: Duration) -> anyhow::Result<(u16, String, Value)> {
    let deadline = Instant::now() + within;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if raw.len() >= end + 4 + length {
                let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
                let body = serde_json::from_slice(&raw[end + 4..end + 4 + length]).unwrap_or(Value::Null);
                return Ok((status, head, body));
            }
        }
        let n = tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await??;
        anyhow::ensure!(n > 0, "closed before a whole response: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn a_connection_that_sends_nothing_or_half_a_head_is_closed() -> R {
    let app = TestApp::spawn().await?;
    let address = gateway(&app).await?;
    let mut silent = TcpStream::connect(&address).await?;
    let mut partial = TcpStream::connect(&address).await?;
    partial.write_all(b"GET /api/client/v1/sessions HTTP/1.1\r\nHost: x\r\nX-Slow: ").await?;
    let started = Instant::now();
    let closed = read_until_closed(&mut partial, Duration::from_secs(20)).await;
    assert!(closed.is_some(), "a connection with half a head was held for 20 s");
    assert!(started.elapsed() >= Duration::from_millis(500), "closed before its header timeout");
    let answer = closed.unwrap_or_default();
    assert!(
        answer.is_empty() || String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert!(
        read_until_closed(&mut silent, Duration::from_secs(20)).await.is_some(),
        "a connection that sent nothing was held for 20 s"
    );
    Ok(())
}

#[tokio::test]
async fn a_body_shorter_than_announced_answers_408_in_the_envelope() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let address = gateway(&app).await?;
    for (path, sandbox) in [("/api/client/v1/sessions", false), ("/sandbox/v1/sandboxes", true)] {
        let mut stream = TcpStream::connect(&address).await?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"ti",
            tenant.key
        );
        stream.write_all(head.as_bytes()).await?;
        let (status, head, body) = read_response(&mut stream, Duration::from_secs(20)).await?;
        assert_eq!(status, 408, "{head} {body}");
        assert!(head.contains("cache-control: no-store"), "{head}");
        if sandbox {
            assert_eq!(body["code"], 408, "{body}");
            assert!(body["message"].is_string(), "{body}");
        } else {
            assert_eq!(body["error"]["code"], "request_timeout", "{body}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_but_a_quiet_request_in_flight_is_not() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let address = gateway(&app).await?;
    let mut stream = TcpStream::connect(&address).await?;
    stream.write_all(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    let (status, _, body) = read_response(&mut stream, Duration::from_secs(20)).await?;
    assert_eq!(status, 404, "{body}");
    assert!(
        read_until_closed(&mut stream, Duration::from_secs(20)).await.is_some(),
        "an idle keep-alive connection was held for 20 s"
    );
    // An event stream with nothing to say (keep-alive comments every 15 s) runs past every
    // timeout: a request in flight is not idle.
    let session = new_session(&app, &tenant.key).await?;
    let mut events = reqwest::Client::new()
        .get(format!("http://{address}/api/client/v1/sessions/{session}/events/stream"))
        .bearer_auth(&tenant.key)
        .send()
        .await?;
    assert_eq!(events.status(), StatusCode::OK);
    assert!(events.chunk().await?.is_some());
    assert!(!ends_within(&mut events, Duration::from_secs(5)).await?, "a quiet stream was cut");
    Ok(())
}

// ---- 4. Every answer is the surface's envelope ----------------------------------------------

fn assert_e2b(status: StatusCode, body: &Value, expected: StatusCode) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["code"], expected.as_u16(), "{body}");
    assert!(body["message"].is_string(), "{body}");
}

#[tokio::test]
async fn a_path_id_that_is_not_utf8_answers_404_in_the_envelope() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let response = app.client(&tenant.key, Method::GET, "/sessions/%FF%FE").send().await?;
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let (status, cache, body) =
        send_with_cache(app.client(&tenant.key, Method::GET, "/sessions/%FF%FE")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found");
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, cache, body) = send_with_cache(
        app.request(Method::GET, "/sandbox/v1/sandboxes/%C3").header("X-API-Key", &tenant.key),
    )
    .await?;
    assert_e2b(status, &body, StatusCode::NOT_FOUND);
    assert_eq!(cache.as_deref(), Some("no-store"));
    Ok(())
}

#[tokio::test]
async fn oversized_heads_answer_431_and_414_in_the_envelope() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let big = "h".repeat(20 * 1024);
    let (status, cache, body) =
        send_with_cache(app.client(&tenant.key, Method::GET, "/sessions").header("X-Big", &big)).await?;
    assert_error((status, &body), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large");
    assert_eq!(cache.as_deref(), Some("no-store"));
    let long = format!("/sessions/{}", "s".repeat(10 * 1024));
    let (status, cache, body) = send_with_cache(app.client(&tenant.key, Method::GET, &long)).await?;
    assert_error((status, &body), StatusCode::URI_TOO_LONG, "uri_too_long");
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, body) = send(
        app.request(Method::GET, "/sandbox/v1/sandboxes")
            .header("X-API-Key", &tenant.key)
            .header("X-Big", &big),
    )
    .await?;
    assert_e2b(status, &body, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    Ok(())
}

#[tokio::test]
async fn heads_too_large_for_the_gateway_parser_answer_in_the_envelope_too() -> R {
    let app = TestApp::spawn().await?;
    let address = gateway(&app).await?;
    // Each case's status is the one its excess calls for: headers 431, a target too long 414.
    let cases = [
        (
            format!(
                "GET /api/client/v1/sessions HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                "h".repeat(400 * 1024)
            ),
            false,
            431,
            "headers_too_large",
        ),
        (
            format!("GET /api/client/v1/sessions/{} HTTP/1.1\r\nHost: x\r\n\r\n", "s".repeat(70 * 1024)),
            false,
            414,
            "uri_too_long",
        ),
        (
            format!("GET /sandbox/v1/sandboxes/{} HTTP/1.1\r\nHost: x\r\n\r\n", "s".repeat(70 * 1024)),
            true,
            414,
            "uri_too_long",
        ),
    ];
    for (request, sandbox, expected, code) in cases {
        let mut stream = TcpStream::connect(&address).await?;
        // The server may answer and close before it has read everything: a failed write is fine.
        let _ = stream.write_all(request.as_bytes()).await;
        let (status, head, body) = read_response(&mut stream, Duration::from_secs(20)).await?;
        assert_eq!(status, expected, "{head}");
        assert!(head.contains("cache-control: no-store"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        if sandbox {
            assert_eq!(body["code"], expected, "{body}");
        } else {
            assert_eq!(body["error"]["code"], code, "{body}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn routes_that_take_no_body_refuse_ten_megabytes_of_garbage() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "a", "model": "m"})).await?;
    let garbage = vec![b'g'; 10 * 1024 * 1024];
    let (status, cache, body) =
        send_with_cache(app.client(&tenant.key, Method::GET, "/sessions").body(garbage.clone())).await?;
    assert_error((status, &body), StatusCode::PAYLOAD_TOO_LARGE, "request_too_large");
    assert_eq!(cache.as_deref(), Some("no-store"));
    let publish = format!("/agents/{agent}/publish");
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &publish).body(vec![b'g'; 8 * 1024])).await?;
    assert_error((status, &body), StatusCode::PAYLOAD_TOO_LARGE, "request_too_large");
    // Nothing was published by the refused call.
    let (_, versions) =
        send(app.client(&tenant.key, Method::GET, &format!("/agents/{agent}/versions"))).await?;
    assert_eq!(versions["data"], json!([]), "{versions}");
    let (status, body) = send(
        app.request(Method::GET, "/sandbox/v1/sandboxes").header("X-API-Key", &tenant.key).body(garbage),
    )
    .await?;
    assert_e2b(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
    // A small body on a body-less route is still read and dropped.
    let (status, body) = send(app.client(&tenant.key, Method::GET, "/sessions").body("{}")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_each_surface_envelope() -> R {
    let app = TestApp::spawn().await?;
    let (status, cache, body) = send_with_cache(app.request(Method::GET, "/sandbox/v1/nope")).await?;
    assert_e2b(status, &body, StatusCode::NOT_FOUND);
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, cache, body) = send_with_cache(app.request(Method::PUT, "/sandbox/v1/sandboxes")).await?;
    assert_e2b(status, &body, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, cache, body) = send_with_cache(app.request(Method::GET, "/api/client/v1/nope")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "route_not_found");
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, body) = send(app.request(Method::PUT, "/api/client/v1/sessions")).await?;
    assert_error((status, &body), StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    Ok(())
}

// ---- 5. A session deleted during its turn stops the turn ------------------------------------

#[tokio::test]
async fn deleting_a_session_during_its_turn_stops_the_turn() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "slow", "model": "m"})).await?;
    let session = new_session(&app, &tenant.key).await?;
    model.push(Reply::Hang(Duration::from_millis(2500)));
    model.push(Reply::text("never asked for"));
    let turn = {
        let request = app
            .client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"agent": agent, "input": "take your time"}));
        tokio::spawn(send(request))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.requests().is_empty() {
        anyhow::ensure!(Instant::now() < deadline, "the model was never called");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = turn.await??;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    assert_ne!(body["status"], "completed", "{body}");
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    // Nothing after the model call was recorded: no answer, no end, one model call.
    let id: agentplane_domain::SessionId = session.parse().map_err(|_| anyhow::anyhow!("session id"))?;
    let events = app.store.events().all(&id).await?;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert!(!kinds.contains(&"message.assistant"), "{kinds:?}");
    assert!(!kinds.contains(&"turn.ended"), "{kinds:?}");
    assert!(!kinds.contains(&"usage"), "{kinds:?}");
    assert_eq!(model.requests().len(), 1);
    Ok(())
}

// ---- 6. Error messages quote at most a bounded part of the input ----------------------------

fn bounded(body: &Value) {
    let text = body.to_string();
    assert!(text.len() < 1024, "an error echoed {} bytes: {}…", text.len(), &text[..200.min(text.len())]);
}

#[tokio::test]
async fn error_messages_never_echo_a_whole_ten_kilobyte_value() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let huge = "v".repeat(10 * 1024);
    // A metadata key is named in `param`.
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"metadata": {huge.clone(): "x"}})),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    bounded(&body);
    // An unknown agent is named in the older `{"error": "…"}` shape.
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": huge, "input": "x"})))
            .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"].as_str().is_some_and(|m| m.contains('…')), "{body}");
    bounded(&body);
    // An unknown query parameter is named in the message (as long as the target limit allows).
    let name = "q".repeat(7 * 1024);
    let path = format!("/core/v1/projects/{}/sessions/x/runtime-observation?{name}=1", tenant.project_id);
    let (status, body) = send(app.core(Method::GET, &path)).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains('…')), "{body}");
    bounded(&body);
    Ok(())
}
