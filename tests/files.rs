//! Session files over HTTP and through real presigned S3 URLs (LocalStack checks their
//! signatures): create → upload → ready → download, the size fixed in the upload URL, the
//! per-session limit under concurrency, other projects, and agents that take no files.

use agentplane_tests::{Pair, Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// A session of a new agent whose draft has `attachments` as its `config.attachments`.
async fn session_with(app: &TestApp, tenant: &Tenant, attachments: Value) -> anyhow::Result<String> {
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "files", "model": "gpt-4o-mini", "config": {"attachments": attachments}}),
        )
        .await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    str_field(&body, "id")
}

pub(crate) async fn create_file(
    app: &TestApp,
    key: &str,
    session: &str,
    body: Value,
) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(key, Method::POST, &format!("/sessions/{session}/files")).json(&body)).await
}

fn text_file(size: usize) -> Value {
    json!({"filename": "notes.txt", "content_type": "text/plain", "size": size})
}

/// PUTs `bytes` to a presigned upload URL as a client would (the URL's signed headers set).
pub(crate) async fn upload(url: &str, content_type: &str, bytes: Vec<u8>) -> anyhow::Result<StatusCode> {
    let response =
        reqwest::Client::new().put(url).header("content-type", content_type).body(bytes).send().await?;
    let status = response.status();
    if !status.is_success() {
        eprintln!("PUT {url} → {status}: {}", response.text().await.unwrap_or_default());
    }
    Ok(status)
}

#[tokio::test]
async fn an_upload_through_the_presigned_url_reads_back_byte_for_byte() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = session_with(&app, &tenant, json!({"enabled": true})).await?;
    let bytes: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let (status, file) = create_file(
        &app,
        &tenant.key,
        &session,
        json!({"filename": "data.bin", "content_type": "application/octet-stream", "size": bytes.len()}),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{file}");
    let id = str_field(&file, "id")?;
    assert!(id.starts_with("file_") && id.len() == 29, "{id}");
    assert_eq!(file["object"], "session_file");
    assert_eq!(file["status"], "pending");
    assert_eq!(file["session_id"], session);
    assert_eq!(file["filename"], "data.bin");
    assert_eq!(file["content_type"], "application/octet-stream");
    assert_eq!(file["size"], bytes.len());
    let created = file["created_at"].as_i64().unwrap_or_default();
    assert_eq!(file["expires_at"].as_i64(), Some(created + 30 * 86_400));
    assert!(file.get("download_url").is_none());
    let upload_url = str_field(&file, "upload_url")?;
    let signed = upload_url.split("X-Amz-SignedHeaders=").nth(1).unwrap_or_default();
    let signed = signed.split('&').next().unwrap_or_default();
    assert!(signed.contains("content-length") && signed.contains("content-type"), "{upload_url}");

    // Before the upload the file stays pending and has no download URL.
    let path = format!("/sessions/{session}/files/{id}");
    let (status, before) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!((status, &before["status"]), (StatusCode::OK, &json!("pending")));
    assert!(before.get("download_url").is_none() && before.get("upload_url").is_none());

    assert!(upload(&upload_url, "application/octet-stream", bytes.clone()).await?.is_success());
    let (status, ready) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!((status, &ready["status"]), (StatusCode::OK, &json!("ready")), "{ready}");
    let download = str_field(&ready, "download_url")?;
    let got = reqwest::get(&download).await?;
    assert!(got.status().is_success());
    assert_eq!(got.bytes().await?.to_vec(), bytes);
    // A tampered download URL is refused by S3 (signatures are checked).
    let tampered = download.replace("X-Amz-Signature=", "X-Amz-Signature=0");
    assert!(!reqwest::get(&tampered).await?.status().is_success());

    // The ready state was recorded: the list shows it too.
    let (status, list) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/files"))).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["data"][0]["id"], id);
    assert_eq!(list["data"][0]["status"], "ready");
    assert!(list["data"][0].get("download_url").is_none());

    // Delete takes the bytes with it.
    let (status, deleted) = send(app.client(&tenant.key, Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted, json!({"id": id, "object": "session_file.deleted", "deleted": true}));
    assert_error(
        send(app.client(&tenant.key, Method::GET, &path)).await?.as_ref_pair(),
        StatusCode::NOT_FOUND,
        "file_not_found",
    );
    assert!(!reqwest::get(&download).await?.status().is_success(), "the object is gone");
    assert_error(
        send(app.client(&tenant.key, Method::DELETE, &path)).await?.as_ref_pair(),
        StatusCode::NOT_FOUND,
        "file_not_found",
    );
    Ok(())
}

#[tokio::test]
async fn an_upload_of_another_size_or_type_is_refused_and_the_file_stays_pending() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = session_with(&app, &tenant, json!({"enabled": true})).await?;
    let (status, file) = create_file(&app, &tenant.key, &session, text_file(10)).await?;
    assert_eq!(status, StatusCode::CREATED, "{file}");
    let url = str_field(&file, "upload_url")?;
    let path = format!("/sessions/{session}/files/{}", str_field(&file, "id")?);

    let longer = upload(&url, "text/plain", vec![b'a'; 11]).await?;
    let shorter = upload(&url, "text/plain", vec![b'a'; 9]).await?;
    let other_type = upload(&url, "image/png", vec![b'a'; 10]).await?;
    eprintln!("size lie: 11 bytes → {longer}, 9 bytes → {shorter}, other type → {other_type}");
    assert_eq!(longer, StatusCode::FORBIDDEN);
    assert_eq!(shorter, StatusCode::FORBIDDEN);
    assert_eq!(other_type, StatusCode::FORBIDDEN);
    let (status, still) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!((status, &still["status"]), (StatusCode::OK, &json!("pending")), "{still}");
    assert!(still.get("download_url").is_none());

    // An object of the wrong size put by other means (not through the URL) does not make the
    // file ready either: the size is asked of the bucket and compared.
    let objects = app.store.objects()?;
    let key = format!("files/{}/{session}/{}", tenant.project_id, str_field(&file, "id")?);
    objects.put(&key, vec![b'b'; 12]).await?;
    let (_, still) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!(still["status"], "pending");

    // The declared size through the URL is accepted and makes it ready.
    assert!(upload(&url, "text/plain", vec![b'c'; 10]).await?.is_success());
    let (_, ready) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!(ready["status"], "ready");
    Ok(())
}

#[tokio::test]
async fn a_session_takes_ten_files_even_when_eleven_come_at_once() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = session_with(&app, &tenant, json!({"enabled": true})).await?;
    let creates = (0..11).map(|_| create_file(&app, &tenant.key, &session, text_file(5)));
    let answers = futures_util::future::join_all(creates).await;
    let mut created = Vec::new();
    let mut refused = 0;
    for answer in answers {
        let (status, body) = answer?;
        match status {
            StatusCode::CREATED => created.push(str_field(&body, "id")?),
            StatusCode::CONFLICT => {
                assert_eq!(body["error"]["code"], "file_limit_reached", "{body}");
                assert_eq!(body["error"]["max_files"], 10, "{body}");
                refused += 1;
            }
            other => anyhow::bail!("unexpected {other} {body}"),
        }
    }
    assert_eq!((created.len(), refused), (10, 1));
    let project = tenant.project_id.parse()?;
    let session_id = session.parse()?;
    assert_eq!(app.store.files().count(&project, &session_id).await?, 10);
    let (_, list) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/files?limit=100"))).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(10));

    // The eleventh, one at a time, is refused too; after a delete there is room for one.
    assert_error(
        create_file(&app, &tenant.key, &session, text_file(5)).await?.as_ref_pair(),
        StatusCode::CONFLICT,
        "file_limit_reached",
    );
    let (status, _) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}/files/{}", created[0])))
            .await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(app.store.files().count(&project, &session_id).await?, 9);
    assert_eq!(create_file(&app, &tenant.key, &session, text_file(5)).await?.0, StatusCode::CREATED);
    assert_error(
        create_file(&app, &tenant.key, &session, text_file(5)).await?.as_ref_pair(),
        StatusCode::CONFLICT,
        "file_limit_reached",
    );

    // Another session has its own ten.
    let other = session_with(&app, &tenant, json!({"enabled": true, "max_files": 1})).await?;
    assert_eq!(create_file(&app, &tenant.key, &other, text_file(5)).await?.0, StatusCode::CREATED);
    let (status, body) = create_file(&app, &tenant.key, &other, text_file(5)).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "file_limit_reached");
    assert_eq!(body["error"]["max_files"], 1);
    Ok(())
}

#[tokio::test]
async fn another_projects_session_or_file_is_not_found() -> R {
    let app = TestApp::spawn().await?;
    let owner = app.tenant().await?;
    let stranger = app.tenant().await?;
    let session = session_with(&app, &owner, json!({"enabled": true})).await?;
    let (_, file) = create_file(&app, &owner.key, &session, text_file(3)).await?;
    let id = str_field(&file, "id")?;
    let path = format!("/sessions/{session}/files/{id}");
    for method in [Method::GET, Method::DELETE] {
        assert_error(
            send(app.client(&stranger.key, method, &path)).await?.as_ref_pair(),
            StatusCode::NOT_FOUND,
            "session_not_found",
        );
    }
    assert_error(
        send(app.client(&stranger.key, Method::GET, &format!("/sessions/{session}/files")))
            .await?
            .as_ref_pair(),
        StatusCode::NOT_FOUND,
        "session_not_found",
    );
    assert_error(
        create_file(&app, &stranger.key, &session, text_file(3)).await?.as_ref_pair(),
        StatusCode::NOT_FOUND,
        "session_not_found",
    );
    // The stranger's own session does not reach the owner's file by its id.
    let theirs = session_with(&app, &stranger, json!({"enabled": true})).await?;
    let foreign = format!("/sessions/{theirs}/files/{id}");
    for method in [Method::GET, Method::DELETE] {
        assert_error(
            send(app.client(&stranger.key, method, &foreign)).await?.as_ref_pair(),
            StatusCode::NOT_FOUND,
            "file_not_found",
        );
    }
    // Nor does a cursor.
    assert_error(
        send(app.client(&stranger.key, Method::GET, &format!("/sessions/{theirs}/files?after={id}")))
            .await?
            .as_ref_pair(),
        StatusCode::NOT_FOUND,
        "cursor_not_found",
    );
    // The owner's file is untouched.
    let (status, still) = send(app.client(&owner.key, Method::GET, &path)).await?;
    assert_eq!((status, &still["id"]), (StatusCode::OK, &json!(id)));
    Ok(())
}

#[tokio::test]
async fn sessions_whose_agent_takes_no_files_refuse_them() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let off = session_with(&app, &tenant, json!({})).await?;
    let (status, body) = create_file(&app, &tenant.key, &off, text_file(3)).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "attachments_not_enabled");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("draft's `config.attachments.enabled` is false"), "{message}");

    let (_, bare) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({}))).await?;
    let bare = str_field(&bare, "id")?;
    let (status, body) = create_file(&app, &tenant.key, &bare, text_file(3)).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "attachments_not_enabled");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("no agent"), "{body}");
    let (_, list) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{off}/files"))).await?;
    assert_eq!(list["data"], json!([]));
    Ok(())
}

#[tokio::test]
async fn bad_create_bodies_and_ids_are_refused() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = session_with(&app, &tenant, json!({"enabled": true, "max_file_bytes": 100})).await?;
    for (body, param) in [
        (json!({"content_type": "text/plain", "size": 1}), "filename"),
        (json!({"filename": "a\u{0}b", "content_type": "text/plain", "size": 1}), "filename"),
        (json!({"filename": "a", "content_type": "nonsense", "size": 1}), "content_type"),
        (json!({"filename": "a", "content_type": "text/plain", "size": -1}), "size"),
        (json!({"filename": "a", "content_type": "text/plain", "size": 101}), "size"),
        (json!({"filename": "a", "content_type": "text/plain", "size": 1, "bucket": "x"}), "bucket"),
    ] {
        let (status, answer) = create_file(&app, &tenant.key, &session, body.clone()).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer["error"]["param"], param, "{body} → {answer}");
    }
    let (status, answer) =
        send(app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/files")).body("[1]"))
            .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, _) = create_file(&app, &tenant.key, &session, text_file(100)).await?;
    assert_eq!(status, StatusCode::CREATED);
    for bad in ["file_1", "act_abababababababababababab", "FILE_ABABABABABABABABABABABAB"] {
        assert_error(
            send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/files/{bad}")))
                .await?
                .as_ref_pair(),
            StatusCode::NOT_FOUND,
            "file_not_found",
        );
    }
    assert_error(
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/files?limit=0")))
            .await?
            .as_ref_pair(),
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
    );
    assert_error(
        send(app.client(&tenant.key, Method::GET, "/sessions/not-a-session/files")).await?.as_ref_pair(),
        StatusCode::NOT_FOUND,
        "session_not_found",
    );
    Ok(())
}

/// A ready file of `session`: created, uploaded through its URL, read once (ready).
pub(crate) async fn ready_file(
    app: &TestApp,
    key: &str,
    session: &str,
    (filename, content_type): (&str, &str),
    bytes: Vec<u8>,
) -> anyhow::Result<String> {
    let (status, file) = create_file(
        app,
        key,
        session,
        json!({"filename": filename, "content_type": content_type, "size": bytes.len()}),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {file}");
    anyhow::ensure!(upload(&str_field(&file, "upload_url")?, content_type, bytes).await?.is_success());
    let id = str_field(&file, "id")?;
    let (_, read) = send(app.client(key, Method::GET, &format!("/sessions/{session}/files/{id}"))).await?;
    anyhow::ensure!(read["status"] == "ready", "{read}");
    Ok(id)
}

/// A session of an agent (model `model`, `attachments` as given) and the agent's id.
pub(crate) async fn agent_session(
    app: &TestApp,
    tenant: &Tenant,
    model: &str,
    attachments: Value,
) -> anyhow::Result<(String, String)> {
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "eyes", "model": model, "config": {"attachments": attachments}}),
        )
        .await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    Ok((agent, str_field(&session, "id")?))
}

/// The last user message of the last model request.
pub(crate) fn last_user_message(requests: &[Value]) -> Value {
    requests
        .last()
        .and_then(|r| r["messages"].as_array())
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_default()
}

pub(crate) fn message(text: &str, parts: Value) -> Value {
    let mut content = vec![json!({"type": "input_text", "text": text})];
    if let Value::Array(parts) = parts {
        content.extend(parts);
    }
    json!([{"role": "user", "content": content}])
}

#[tokio::test]
async fn an_image_part_reaches_the_model_as_a_presigned_url_and_a_text_file_inline() -> R {
    use agentplane_tests::model::{Reply, ScriptedModel};
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let (agent, session) = agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\nnot really".to_vec();
    let image = ready_file(&app, &tenant.key, &session, ("cat.png", "image/png"), png.clone()).await?;
    let notes =
        ready_file(&app, &tenant.key, &session, ("notes.txt", "text/plain"), b"the cat is grey".to_vec())
            .await?;
    let big =
        ready_file(&app, &tenant.key, &session, ("big.json", "application/json"), vec![b'7'; 70 * 1024])
            .await?;

    model.push(Reply::text("a grey cat"));
    let input = message(
        "what is this?",
        json!([{"type": "input_image", "file_id": image}, {"type": "input_file", "file_id": notes}, {"type": "input_file", "file_id": big}]),
    );
    let (status, answer) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "session_id": session, "input": input})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let requests = model.requests();
    let user = last_user_message(&requests);
    let parts = user["content"].as_array().cloned().unwrap_or_default();
    assert_eq!(parts.len(), 2, "{user}");
    assert_eq!(parts[0]["type"], "text");
    let text = parts[0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("what is this?"), "{text}");
    assert!(text.contains("[file notes.txt (text/plain, 15 bytes)]\nthe cat is grey"), "{text}");
    // The budget (64 KiB across text files) cuts the big one, and says so.
    assert!(text.contains("[the file is cut here: 65521 of its 71680 bytes are shown]"), "{text}");
    assert_eq!(parts[1]["type"], "image_url");
    let url = parts[1]["image_url"]["url"].as_str().unwrap_or_default();
    assert!(url.contains("X-Amz-Signature=") && url.contains(&image), "{url}");
    assert_eq!(reqwest::get(url).await?.bytes().await?.to_vec(), png, "the reference is to the file's bytes");

    // The next turn carries a note where the (by then expired) URL was.
    model.push(Reply::text("still grey"));
    let (status, _) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "and now?"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    let requests = model.requests();
    let history = requests.last().map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(!history.contains("image_url") && history.contains("shown earlier"), "{history}");
    Ok(())
}

#[tokio::test]
async fn file_parts_are_refused_when_attachments_are_off_or_the_file_is_not_usable() -> R {
    use agentplane_tests::model::ScriptedModel;
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    // Attachments off: refused before anything runs, naming the setting.
    let (off, off_session) = agent_session(&app, &tenant, "gpt-4o-mini", json!({})).await?;
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({
        "agent": off, "session_id": off_session,
        "input": message("see", json!([{"type": "input_image", "file_id": "file_000000000000000000000000"}])),
    })))
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "input[0].content[1]");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`config.attachments.enabled` is false")
    );

    let (on, session) = agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let send_parts = |session: String, agent: String, parts: Value| {
        let app = &app;
        let key = tenant.key.clone();
        async move {
            send(app.client(&key, Method::POST, "/responses").json(&json!({
                "agent": agent, "session_id": session, "input": message("see", parts),
            })))
            .await
        }
    };
    // A file that was never uploaded is not ready.
    let (_, pending) = create_file(&app, &tenant.key, &session, text_file(4)).await?;
    let pending = str_field(&pending, "id")?;
    let (status, body) =
        send_parts(session.clone(), on.clone(), json!([{"type": "input_file", "file_id": pending}])).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("not ready"), "{body}");
    // An unknown file, and one of another session, are missing.
    let (other_agent, other_session) =
        agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let elsewhere =
        ready_file(&app, &tenant.key, &other_session, ("a.txt", "text/plain"), b"x".to_vec()).await?;
    for id in ["file_000000000000000000000000", elsewhere.as_str(), "nonsense"] {
        let (status, body) =
            send_parts(session.clone(), on.clone(), json!([{"type": "input_file", "file_id": id}])).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert!(body["error"]["message"].as_str().unwrap_or_default().contains("no file"), "{body}");
    }
    // An image for a model that reads none; a binary file; a missing file_id.
    let (blind, blind_session) =
        agent_session(&app, &tenant, "gpt-3.5-turbo", json!({"enabled": true})).await?;
    let image =
        ready_file(&app, &tenant.key, &blind_session, ("a.png", "image/png"), b"png".to_vec()).await?;
    let (status, body) =
        send_parts(blind_session.clone(), blind, json!([{"type": "input_image", "file_id": image}])).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("does not read images"), "{body}");
    let binary =
        ready_file(&app, &tenant.key, &other_session, ("a.bin", "application/octet-stream"), b"b".to_vec())
            .await?;
    let (status, body) = send_parts(
        other_session.clone(),
        other_agent.clone(),
        json!([{"type": "input_file", "file_id": binary}]),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    let (status, body) =
        send_parts(other_session.clone(), other_agent.clone(), json!([{"type": "input_file"}])).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    // File parts without a session.
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({
        "agent": on, "input": message("see", json!([{"type": "input_file", "file_id": elsewhere}])),
    })))
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "session_id");
    // No turn ran for any of these.
    assert!(model.requests().is_empty());
    Ok(())
}

/// Files follow the version the session runs: its agent's draft, or the published version
/// once the session ran that.
#[tokio::test]
async fn the_version_the_session_runs_decides_whether_it_takes_files() -> R {
    use agentplane_tests::model::{Reply, ScriptedModel};
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "v", "model": "gpt-4o-mini", "config": {"attachments": {"enabled": true}}}),
        )
        .await?;
    let (status, _) =
        send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/agents/{agent}"))
            .json(&json!({"config": {"attachments": {"enabled": false}}})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A session that ran the published version (attachments on) takes files…
    model.push(Reply::text("hi"));
    let (status, published) = send(
        app.client(&tenant.key, Method::POST, "/agents/responses")
            .json(&json!({"agent": agent, "input": "hi"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{published}");
    let on_published = str_field(&published, "session_id")?;
    assert_eq!(create_file(&app, &tenant.key, &on_published, text_file(3)).await?.0, StatusCode::CREATED);
    // …one on the draft (attachments off now) does not.
    let (_, draft) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let on_draft = str_field(&draft, "id")?;
    assert_error(
        create_file(&app, &tenant.key, &on_draft, text_file(3)).await?.as_ref_pair(),
        StatusCode::BAD_REQUEST,
        "attachments_not_enabled",
    );
    Ok(())
}

#[tokio::test]
async fn the_retention_sweep_deletes_an_expired_file_and_keeps_a_fresh_one() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = session_with(&app, &tenant, json!({"enabled": true})).await?;
    let mut made = Vec::new();
    for name in ["old.txt", "new.txt"] {
        let body = json!({"filename": name, "content_type": "text/plain", "size": 5});
        let (status, file) = create_file(&app, &tenant.key, &session, body).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "{file}");
        assert!(
            upload(&str_field(&file, "upload_url")?, "text/plain", b"hello".to_vec()).await?.is_success()
        );
        made.push(file);
        // The second file expires at least a second after the first.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    let old_expiry = made[0]["expires_at"].as_i64().unwrap_or_default();
    assert!(made[1]["expires_at"].as_i64().unwrap_or_default() > old_expiry);
    let key = |f: &Value| -> anyhow::Result<String> {
        Ok(format!("files/{}/{session}/{}", tenant.project_id, str_field(f, "id")?))
    };
    let objects = app.store.objects()?;
    assert_eq!(objects.size(&key(&made[0])?).await?, Some(5));

    // A pass now deletes nothing; a pass at the first file's expiry deletes it alone.
    let report = agentplane_api::jobs::sweep_once(&app.store, agentplane_engine::now()).await?;
    assert_eq!(report.files_deleted, 0);
    let at = agentplane_domain::Timestamp::from_unix_seconds(old_expiry);
    let report = agentplane_api::jobs::sweep_once(&app.store, at).await?;
    assert_eq!(report.files_deleted, 1, "{report:?}");
    let get = |f: &Value| {
        let path = format!("/sessions/{session}/files/{}", f["id"].as_str().unwrap_or_default());
        send(app.client(&tenant.key, Method::GET, &path))
    };
    let answer = get(&made[0]).await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "file_not_found");
    assert_eq!(objects.size(&key(&made[0])?).await?, None, "the object went with it");
    let (status, fresh) = get(&made[1]).await?;
    assert_eq!((status, &fresh["status"]), (StatusCode::OK, &json!("ready")), "{fresh}");
    assert_eq!(objects.size(&key(&made[1])?).await?, Some(5));
    // The count went down with it: a new file fits where the old one was.
    let (_, list) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/files"))).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    // Again at the same time: nothing more.
    assert_eq!(agentplane_api::jobs::sweep_once(&app.store, at).await?.files_deleted, 0);
    Ok(())
}

#[tokio::test]
async fn view_image_shows_an_image_of_the_session_in_the_next_model_call_on_demand() -> R {
    use agentplane_tests::model::{Reply, ScriptedModel};
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let (agent, session) = agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\na dog, really".to_vec();
    let image = ready_file(&app, &tenant.key, &session, ("dog.png", "image/png"), png.clone()).await?;
    let notes = ready_file(&app, &tenant.key, &session, ("notes.txt", "text/plain"), b"hi".to_vec()).await?;
    // An image of another session of the same project is not this session's.
    let (_, other_session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let other_session = str_field(&other_session, "id")?;
    let elsewhere =
        ready_file(&app, &tenant.key, &other_session, ("cat.png", "image/png"), png.clone()).await?;

    model.push(Reply::tool("call_1", "view_image", &json!({"file_id": image})));
    model.push(Reply::tool("call_2", "view_image", &json!({"file_id": notes})));
    model.push(Reply::tool("call_3", "view_image", &json!({"file_id": elsewhere})));
    model.push(Reply::text("a dog"));
    let (status, answer) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "session_id": session, "input": "what did I upload?"})),
    )
    .await?;
    assert_eq!((status, &answer["output_text"]), (StatusCode::OK, &json!("a dog")), "{answer}");
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"view_image"), "offered with attachments on and an image model: {offered:?}");
    // The second call sees the image, after the tool result, by a URL to its bytes.
    let messages = requests[1]["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "user", "{last}");
    let url = last["content"][1]["image_url"]["url"].as_str().unwrap_or_default();
    assert_eq!(reqwest::get(url).await?.bytes().await?.to_vec(), png, "the image's bytes");
    let tool = &messages[messages.len() - 2];
    assert_eq!(tool["role"], "tool");
    assert!(
        tool["content"].as_str().is_some_and(|c| c.contains("dog.png") && !c.contains("X-Amz")),
        "{tool}"
    );
    // A text file, and another session's image, are refused to the model, nothing shown.
    let refusal = |n: usize| {
        let messages = requests[n]["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        (last["role"].as_str().map(str::to_owned), last["content"].as_str().unwrap_or_default().to_owned())
    };
    let (role, text) = refusal(2);
    assert!(role.as_deref() == Some("tool") && text.contains("is not an image (text/plain)"), "{text}");
    let (role, text) = refusal(3);
    assert!(role.as_deref() == Some("tool") && text.contains("no file"), "{text}");
    // The log's tool.result names the file and carries no URL.
    let (_, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    let results: Vec<&Value> =
        page["data"].as_array().into_iter().flatten().filter(|e| e["type"] == "tool.result").collect();
    assert_eq!(results.len(), 3, "{page}");
    assert_eq!(results[0]["data"]["output"]["filename"], "dog.png", "{}", results[0]);
    assert!(!page.to_string().contains("X-Amz-Signature"), "no presigned URL in the log");

    // A model that reads no images is not offered the tool.
    let (_, blind) = agent_session(&app, &tenant, "gpt-3.5-turbo", json!({"enabled": true})).await?;
    model.push(Reply::text("ok"));
    let (status, _) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{blind}/messages"))
            .json(&json!({"input": "hi"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    let last = model.requests().last().cloned().unwrap_or_default();
    assert!(!last.to_string().contains("view_image"), "{last}");
    Ok(())
}

#[tokio::test]
async fn a_background_run_shows_its_image_by_a_url_presigned_when_it_starts() -> R {
    use agentplane_tests::model::{Reply, ScriptedModel};
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "eyes", "model": "gpt-4o-mini", "config": {
                "attachments": {"enabled": true}, "execution": {"background_enabled": true}}}),
        )
        .await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\na late cat".to_vec();
    let image = ready_file(&app, &tenant.key, &session, ("cat.png", "image/png"), png.clone()).await?;

    model.push(Reply::text("a cat, later"));
    let input = message("what is this?", json!([{"type": "input_image", "file_id": image}]));
    let (status, run) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "session_id": session, "input": input, "background": true})),
    )
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    let id = str_field(&run, "id")?;
    let mut done = Value::Null;
    for _ in 0..300 {
        let (_, got) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{id}"))).await?;
        if got["status"] != "queued" && got["status"] != "running" {
            done = got;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(done["status"], "succeeded", "{done}");
    let requests = model.requests();
    let user = last_user_message(&requests);
    assert_eq!(user["content"][0]["text"], "what is this?", "{user}");
    let url = user["content"][1]["image_url"]["url"].as_str().unwrap_or_default();
    assert_eq!(reqwest::get(url).await?.bytes().await?.to_vec(), png, "the image's bytes, by reference");
    Ok(())
}
