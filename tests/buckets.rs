//! Document Store buckets registered through Core: the rules of registration (the deployment's
//! pattern, its own buckets, a bucket that is not there, one project per bucket, 10 per project
//! under concurrency), agents that name one, and session files kept in it through real
//! presigned S3 URLs — the bytes in that bucket and not in the deployment's.

use agentplane_tests::{Pair, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The object is not there: S3 answers NotFound for it (not an access or connection error).
async fn assert_absent(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, what: &str) {
    match s3.head_object().bucket(bucket).key(key).send().await {
        Ok(head) => panic!("{what}: {bucket}/{key} exists ({head:?})"),
        Err(e) => {
            let e = e.into_service_error();
            assert!(e.is_not_found(), "{what}: {bucket}/{key}: {e:?}");
        }
    }
}

async fn s3() -> aws_sdk_s3::Client {
    let sdk = agentplane_store::aws::emulator_sdk_config(&agentplane_tests::endpoint()).await;
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build())
}

/// A new bucket in LocalStack whose name fits the default `DocumentBuckets` pattern.
async fn new_bucket(s3: &aws_sdk_s3::Client) -> anyhow::Result<String> {
    let name = format!("agentplane-documents-{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    s3.create_bucket().bucket(&name).send().await?;
    Ok(name)
}

async fn register(app: &TestApp, project: &str, name: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(app.core(Method::POST, &format!("/core/v1/projects/{project}/buckets")).json(&json!({"name": name})))
        .await
}

#[tokio::test]
async fn a_bucket_is_registered_once_to_one_project_and_only_if_the_deployment_may_use_it() -> R {
    let app = TestApp::spawn().await?;
    let s3 = s3().await;
    let tenant = app.tenant().await?;
    let other = app.tenant().await?;
    let name = new_bucket(&s3).await?;

    let (status, body) = register(&app, &tenant.project_id, &name).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["object"], "bucket");
    assert_eq!(body["name"], name);
    assert_eq!(body["project_id"], tenant.project_id);
    assert!(body["created_at"].as_i64().is_some_and(|t| t > 1_700_000_000));

    let list_path = format!("/core/v1/projects/{}/buckets", tenant.project_id);
    let (status, list) = send(app.core(Method::GET, &list_path)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(list["data"][0]["name"], name);

    // Twice to the same project, or to another: 409, and the other project has none.
    assert_error(
        register(&app, &tenant.project_id, &name).await?.as_ref_pair(),
        StatusCode::CONFLICT,
        "bucket_already_registered",
    );
    assert_error(
        register(&app, &other.project_id, &name).await?.as_ref_pair(),
        StatusCode::CONFLICT,
        "bucket_taken",
    );
    let (_, other_list) =
        send(app.core(Method::GET, &format!("/core/v1/projects/{}/buckets", other.project_id))).await?;
    assert_eq!(other_list["data"], json!([]));

    // Names: not an S3 name (400 naming `name`), outside the pattern, or not there.
    let (status, bad) = register(&app, &tenant.project_id, "Not_A_Bucket").await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert_eq!(bad["error"]["param"], "name");
    let outside = format!("other-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    s3.create_bucket().bucket(&outside).send().await?;
    assert_error(
        register(&app, &tenant.project_id, &outside).await?.as_ref_pair(),
        StatusCode::BAD_REQUEST,
        "bucket_not_allowed",
    );
    let absent = format!("agentplane-documents-absent-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    assert_error(
        register(&app, &tenant.project_id, &absent).await?.as_ref_pair(),
        StatusCode::BAD_REQUEST,
        "bucket_unreachable",
    );
    let (status, unknown) =
        send(app.core(Method::POST, "/core/v1/projects/proj_unknown/buckets").json(&json!({"name": name})))
            .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{unknown}");
    let (status, extra) = send(
        app.core(Method::POST, &format!("/core/v1/projects/{}/buckets", tenant.project_id))
            .json(&json!({"name": name, "region": "x"})),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "unknown fields are refused: {extra}");

    // A project key is no Core key.
    let (status, _) = send(
        app.request(Method::POST, &format!("/core/v1/projects/{}/buckets", tenant.project_id))
            .bearer_auth(&tenant.key)
            .json(&json!({"name": name})),
    )
    .await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Removed, it can be registered by the other project; removing again is 404.
    let path = format!("/core/v1/projects/{}/buckets/{name}", tenant.project_id);
    let (status, _) = send(app.core(Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_error(
        send(app.core(Method::DELETE, &path)).await?.as_ref_pair(),
        StatusCode::NOT_FOUND,
        "not_found_error",
    );
    let (status, body) = register(&app, &other.project_id, &name).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The other project's registration is not removed through this project's path.
    assert_error(
        send(app.core(Method::DELETE, &path)).await?.as_ref_pair(),
        StatusCode::NOT_FOUND,
        "not_found_error",
    );
    Ok(())
}

#[tokio::test]
async fn the_deployments_own_buckets_are_never_registered_even_under_a_pattern_that_names_them() -> R {
    let app = TestApp::spawn_with(|mut app| {
        app.document_buckets = agentplane_domain::bucket::BucketPattern::new("*");
        app
    })
    .await?;
    let tenant = app.tenant().await?;
    for own in [app.store.names.files_bucket.clone(), app.store.names.workspaces_bucket.clone()] {
        assert_error(
            register(&app, &tenant.project_id, &own).await?.as_ref_pair(),
            StatusCode::BAD_REQUEST,
            "bucket_not_allowed",
        );
    }
    Ok(())
}

#[tokio::test]
async fn eleven_concurrent_registrations_let_exactly_ten_in() -> R {
    let app = TestApp::spawn().await?;
    let s3 = s3().await;
    let tenant = app.tenant().await?;
    let mut names = Vec::new();
    for _ in 0..11 {
        names.push(new_bucket(&s3).await?);
    }
    let attempts = names.iter().map(|name| register(&app, &tenant.project_id, name));
    let results = futures_util::future::join_all(attempts).await;
    let mut created = 0;
    for result in results {
        let (status, body) = result?;
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => assert_eq!(body["error"]["code"], "bucket_limit_reached", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(created, 10);
    let (_, list) =
        send(app.core(Method::GET, &format!("/core/v1/projects/{}/buckets", tenant.project_id))).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(10));
    // A removal frees one place.
    let kept = str_field(&list["data"][0], "name")?;
    send(app.core(Method::DELETE, &format!("/core/v1/projects/{}/buckets/{kept}", tenant.project_id)))
        .await?;
    let last =
        names.iter().find(|n| !list["data"].as_array().into_iter().flatten().any(|b| b["name"] == **n));
    let (status, body) = register(&app, &tenant.project_id, last.map_or("", String::as_str)).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Ok(())
}

async fn put(url: &str, content_type: &str, bytes: Vec<u8>) -> anyhow::Result<StatusCode> {
    Ok(reqwest::Client::new()
        .put(url)
        .header("content-type", content_type)
        .body(bytes)
        .send()
        .await?
        .status())
}

#[tokio::test]
async fn session_files_of_an_agent_naming_a_registered_bucket_live_in_that_bucket() -> R {
    let app = TestApp::spawn().await?;
    let s3 = s3().await;
    let tenant = app.tenant().await?;
    let name = new_bucket(&s3).await?;
    let agent_body = json!({"name": "docs", "model": "gpt-4o-mini", "config": {"attachments": {"enabled": true, "bucket": name}}});

    // Not registered yet: the agent is refused, naming the field.
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/agents").json(&agent_body)).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "config.attachments.bucket");
    // Registered to another project: still refused for this one.
    let other = app.tenant().await?;
    assert_eq!(register(&app, &other.project_id, &name).await?.0, StatusCode::CREATED);
    let (status, _) = send(app.client(&tenant.key, Method::POST, "/agents").json(&agent_body)).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    send(app.core(Method::DELETE, &format!("/core/v1/projects/{}/buckets/{name}", other.project_id))).await?;

    assert_eq!(register(&app, &tenant.project_id, &name).await?.0, StatusCode::CREATED);
    let agent = app.create_agent(&tenant.key, agent_body.clone()).await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i % 241) as u8).collect();
    let (status, file) =
        send(app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/files")).json(&json!({
            "filename": "report.bin", "content_type": "application/octet-stream", "size": bytes.len()
        })))
        .await?;
    assert_eq!(status, StatusCode::CREATED, "{file}");
    let upload_url = str_field(&file, "upload_url")?;
    assert!(upload_url.contains(&name), "the upload goes to the registered bucket: {upload_url}");
    assert!(put(&upload_url, "application/octet-stream", bytes.clone()).await?.is_success());
    let id = str_field(&file, "id")?;
    let path = format!("/sessions/{session}/files/{id}");
    let (status, ready) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!((status, &ready["status"]), (StatusCode::OK, &json!("ready")), "{ready}");
    let download = str_field(&ready, "download_url")?;
    assert_eq!(reqwest::get(&download).await?.bytes().await?.to_vec(), bytes);

    // The object is in the registered bucket, under the project's prefix, and not in the
    // deployment's files bucket.
    let key = format!("files/{}/{session}/{id}", tenant.project_id);
    let head = s3.head_object().bucket(&name).key(&key).send().await?;
    assert_eq!(head.content_length(), Some(bytes.len() as i64));
    assert_absent(&s3, &app.store.names.files_bucket, &key, "in the deployment's files bucket").await;

    // Unregistered: no new files (409), but the file already there stays readable and deletable.
    send(app.core(Method::DELETE, &format!("/core/v1/projects/{}/buckets/{name}", tenant.project_id)))
        .await?;
    assert_error(
        send(
            app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/files"))
                .json(&json!({"filename": "b.txt", "content_type": "text/plain", "size": 3})),
        )
        .await?
        .as_ref_pair(),
        StatusCode::CONFLICT,
        "bucket_not_registered",
    );
    let (status, again) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reqwest::get(str_field(&again, "download_url")?).await?.bytes().await?.to_vec(), bytes);
    let (status, _) = send(app.client(&tenant.key, Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_absent(&s3, &name, &key, "deleted from its own bucket").await;
    Ok(())
}

#[tokio::test]
async fn the_retention_sweep_deletes_an_expired_file_from_its_own_bucket_even_after_removal() -> R {
    let app = TestApp::spawn().await?;
    let s3 = s3().await;
    let tenant = app.tenant().await?;
    let name = new_bucket(&s3).await?;
    assert_eq!(register(&app, &tenant.project_id, &name).await?.0, StatusCode::CREATED);
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "docs", "model": "gpt-4o-mini", "config": {"attachments": {"enabled": true, "bucket": name}}}),
        )
        .await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;
    let (status, file) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/files"))
            .json(&json!({"filename": "a.txt", "content_type": "text/plain", "size": 5})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{file}");
    assert!(put(&str_field(&file, "upload_url")?, "text/plain", b"hello".to_vec()).await?.is_success());
    let key = format!("files/{}/{session}/{}", tenant.project_id, str_field(&file, "id")?);
    assert!(s3.head_object().bucket(&name).key(&key).send().await.is_ok());
    // The registration goes; the file's bytes are still swept from where they are.
    send(app.core(Method::DELETE, &format!("/core/v1/projects/{}/buckets/{name}", tenant.project_id)))
        .await?;
    let at = agentplane_domain::Timestamp::from_unix_seconds(file["expires_at"].as_i64().unwrap_or_default());
    let report = agentplane_api::jobs::sweep_once(&app.store, at).await?;
    assert_eq!(report.files_deleted, 1, "{report:?}");
    assert_absent(&s3, &name, &key, "the object went with it").await;
    Ok(())
}
