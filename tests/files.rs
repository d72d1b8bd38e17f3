//! Session files over HTTP and through real presigned S3 URLs (LocalStack checks their
//! signatures): create → upload → ready → download, the size fixed in the upload URL, the
//! per-session limit under concurrency, other projects, and agents that take no files.

use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
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

async fn create_file(
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
async fn upload(url: &str, content_type: &str, bytes: Vec<u8>) -> anyhow::Result<StatusCode> {
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

trait Pair {
    fn as_ref_pair(&self) -> (StatusCode, &Value);
}

impl Pair for (StatusCode, Value) {
    fn as_ref_pair(&self) -> (StatusCode, &Value) {
        (self.0, &self.1)
    }
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
