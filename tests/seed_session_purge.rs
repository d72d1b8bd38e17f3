//! Seed 002: deleting a session removes its data, not only hides it. The retention sweep's purge
//! step deletes its transcript (item and S3 object), its files (items, count and bytes), its
//! actions, its events and its title and metadata; a second purge changes nothing; another
//! session of the project is untouched.

use agentplane_domain::{ProjectId, SessionId};
use agentplane_store::dynamo::keys::{project_pk, session_sk};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, send, str_field};
use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::{Method, StatusCode};
use serde_json::json;

type R = anyhow::Result<()>;

/// What is stored of a session, read straight from the tables and the bucket.
#[derive(Debug, PartialEq, Eq)]
struct Stored {
    /// Main-table items under the session's prefix (transcript, files, count, actions).
    items: Vec<String>,
    /// Items of its event log.
    events: usize,
    /// Objects under its transcript and file prefixes.
    objects: Vec<String>,
}

async fn stored(app: &TestApp, project: &str, session: &str) -> anyhow::Result<Stored> {
    let (p, s): (ProjectId, SessionId) = (project.parse()?, session.parse()?);
    let dynamo = &app.store.dynamo;
    let out = dynamo
        .query()
        .table_name(&app.store.names.main_table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :sk)")
        .expression_attribute_values(":pk", AttributeValue::S(project_pk(&p)))
        .expression_attribute_values(":sk", AttributeValue::S(format!("{}#", session_sk(&s))))
        .consistent_read(true)
        .send()
        .await?;
    let mut items: Vec<String> =
        out.items().iter().filter_map(|i| i.get("SK").and_then(|v| v.as_s().ok()).cloned()).collect();
    items.sort();
    let events = dynamo
        .query()
        .table_name(&app.store.names.events_table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("SESSION#{s}")))
        .consistent_read(true)
        .send()
        .await?
        .count() as usize;
    let bucket = app.store.objects()?;
    let mut objects = bucket.keys(&format!("transcripts/{project}/{session}/")).await?;
    objects.extend(bucket.keys(&format!("files/{project}/{session}/")).await?);
    Ok(Stored { items, events, objects })
}

/// The session item itself, raw.
async fn session_item(
    app: &TestApp,
    project: &str,
    session: &str,
) -> anyhow::Result<std::collections::HashMap<String, AttributeValue>> {
    let (p, s): (ProjectId, SessionId) = (project.parse()?, session.parse()?);
    Ok(app
        .store
        .dynamo
        .get_item()
        .table_name(&app.store.names.main_table)
        .key("PK", AttributeValue::S(project_pk(&p)))
        .key("SK", AttributeValue::S(session_sk(&s)))
        .consistent_read(true)
        .send()
        .await?
        .item
        .unwrap_or_default())
}

/// A titled session with an uploaded file and turns whose transcript went past the item limit
/// (to S3) when `big`.
async fn full_session(
    app: &TestApp,
    model: &ScriptedModel,
    tenant: &Tenant,
    agent: &str,
    big: bool,
) -> anyhow::Result<String> {
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/sessions")
            .json(&json!({"agent_id": agent, "title": "Quarterly numbers", "metadata": {"customer": "42"}})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    let session = str_field(&body, "id")?;
    let (status, file) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/files"))
            .json(&json!({"filename": "notes.txt", "content_type": "text/plain", "size": 5})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {file}");
    let url = str_field(&file, "upload_url")?;
    let put =
        reqwest::Client::new().put(&url).header("content-type", "text/plain").body("hello").send().await?;
    anyhow::ensure!(put.status().is_success(), "{}", put.status());
    let turns = if big { 4 } else { 1 };
    for i in 0..turns {
        model.push(Reply::text(&format!("reply {i}")));
        let input: String = format!("{i}-0123456789 ").chars().cycle().take(100_000).collect();
        let (status, body) = send(
            app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
                .json(&json!({"input": input})),
        )
        .await?;
        anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    }
    Ok(session)
}

#[tokio::test]
async fn a_deleted_session_is_purged_once_and_another_is_untouched() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "purge", "model": "gpt-4o-mini", "config": {"attachments": {"enabled": true}}}),
        )
        .await?;
    let doomed = full_session(&app, &model, &tenant, &agent, true).await?;
    let kept = full_session(&app, &model, &tenant, &agent, false).await?;
    let p = &tenant.project_id;

    let before = stored(&app, p, &doomed).await?;
    assert!(before.objects.iter().any(|k| k.starts_with("transcripts/")), "{before:?}");
    assert!(before.objects.iter().any(|k| k.starts_with("files/")), "{before:?}");
    assert!(before.items.iter().any(|k| k.ends_with("#TRANSCRIPT")), "{before:?}");
    assert!(before.items.iter().any(|k| k.contains("#FILE#")), "{before:?}");
    assert!(before.events > 0);
    let kept_before = stored(&app, p, &kept).await?;
    assert!(!kept_before.objects.is_empty() && !kept_before.items.is_empty() && kept_before.events > 0);

    let (status, body) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{doomed}"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let report = app.sweep().await?;
    assert_eq!(report.sessions_purged, 1, "{report:?}");

    let after = stored(&app, p, &doomed).await?;
    assert_eq!(after, Stored { items: Vec::new(), events: 0, objects: Vec::new() });
    // The session item stays as a tombstone (deleted, purged), without what the user wrote.
    let item = session_item(&app, p, &doomed).await?;
    assert!(item.contains_key("deleted_at") && item.contains_key("purged_at"), "{item:?}");
    assert!(!item.contains_key("title"), "{item:?}");
    assert_eq!(item.get("metadata"), Some(&AttributeValue::M(Default::default())), "{item:?}");
    let (status, _) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{doomed}"))).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A second pass, and a purge of the same session again, change nothing.
    assert_eq!(app.sweep().await?.sessions_purged, 0);
    let p_id: ProjectId = p.parse()?;
    let again = agentplane_engine::session_purge::purge(&app.store, &p_id, &doomed.parse()?).await?;
    assert_eq!(again, agentplane_engine::session_purge::Purged::default());
    assert_eq!(stored(&app, p, &doomed).await?, after);

    // The other session keeps everything, and still works.
    assert_eq!(stored(&app, p, &kept).await?, kept_before);
    let (status, s) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{kept}"))).await?;
    assert_eq!((status, &s["title"]), (StatusCode::OK, &json!("Quarterly numbers")));
    Ok(())
}
