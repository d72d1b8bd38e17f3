//! Node tokens rotate without dropping commands (README "Rotating secrets"): a node rotates its
//! own token (the old one accepted for a grace, then refused), a command queued around the
//! rotation reaches the node exactly once, Core reissues a leaked token, and the daemon rotates,
//! keeping the new token in its state dir before it uses it.

use std::collections::HashMap;
use std::time::Duration;

use agentplane_domain::ids::{CommandId, NodeId};
use agentplane_domain::sandbox::SandboxId;
use agentplane_domain::sandbox::command::{Command, CommandEnvelope};
use agentplane_tests::{TestApp, TestNode, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const GRACE: Duration = Duration::from_secs(2);

async fn app() -> anyhow::Result<TestApp> {
    TestApp::spawn_with(|app| app.with_node_token_grace(GRACE)).await
}

async fn register(app: &TestApp) -> anyhow::Result<(NodeId, String)> {
    let (status, body) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "n"}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Ok((str_field(&body, "id")?.parse()?, str_field(&body, "token")?))
}

async fn rotate(app: &TestApp, token: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(app.request(Method::POST, "/node/v1/token").bearer_auth(token)).await
}

async fn poll(app: &TestApp, token: &str, wait: u64) -> anyhow::Result<(StatusCode, Value)> {
    send(app.request(Method::GET, &format!("/node/v1/commands?connection=c1&wait={wait}")).bearer_auth(token))
        .await
}

fn ids(body: &Value) -> Vec<String> {
    body["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect()
}

async fn enqueue(app: &TestApp, node: &NodeId) -> anyhow::Result<String> {
    let now = agentplane_api::edge::now();
    let envelope = CommandEnvelope {
        id: CommandId::from_random(agentplane_api::edge::random()?),
        issued_at: now,
        expires_at: now.plus_seconds(300),
        command: Command::Pause { sandbox_id: SandboxId::from_random(agentplane_api::edge::random()?) },
    };
    app.store.nodes().enqueue(node, &envelope).await?;
    Ok(envelope.id.to_string())
}

async fn authenticates(app: &TestApp, token: &str) -> anyhow::Result<StatusCode> {
    let (status, body) = send(app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(token)).await?;
    if status == StatusCode::UNAUTHORIZED {
        assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_node_token");
    }
    Ok(status)
}

#[tokio::test]
async fn a_command_queued_around_a_rotation_is_delivered_exactly_once() -> anyhow::Result<()> {
    let app = app().await?;
    let (node, old) = register(&app).await?;
    // A long poll with the old token is in flight while the node rotates.
    let in_flight = {
        let request = app.request(Method::GET, "/node/v1/commands?connection=c1&wait=6").bearer_auth(&old);
        tokio::spawn(send(request))
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, rotated) = rotate(&app, &old).await?;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new = str_field(&rotated, "token")?;
    assert_ne!(new, old);
    assert_eq!(rotated["node_id"], node.to_string());
    let expires = rotated["previous_token_expires_at"].as_i64().unwrap_or_default();
    let now = agentplane_api::edge::now().unix_seconds();
    assert!((now..=now + 3).contains(&expires), "{rotated}");
    let first = enqueue(&app, &node).await?;

    let mut delivered: HashMap<String, usize> = HashMap::new();
    let (status, body) = in_flight.await??;
    assert_eq!(status, StatusCode::OK, "{body}");
    for id in ids(&body) {
        *delivered.entry(id).or_default() += 1;
    }
    // The old token within its grace, then the new one: nothing comes twice.
    let second = enqueue(&app, &node).await?;
    for token in [&old, &new, &new] {
        let (status, body) = poll(&app, token, 1).await?;
        assert_eq!(status, StatusCode::OK, "{body}");
        for id in ids(&body) {
            *delivered.entry(id).or_default() += 1;
        }
    }
    assert_eq!(delivered, HashMap::from([(first, 1), (second, 1)]));

    tokio::time::sleep(GRACE + Duration::from_millis(1100)).await;
    let (status, body) = poll(&app, &old, 0).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_node_token");
    let third = enqueue(&app, &node).await?;
    let (status, body) = poll(&app, &new, 1).await?;
    assert_eq!((status, ids(&body)), (StatusCode::OK, vec![third]), "{body}");
    Ok(())
}

#[tokio::test]
async fn rotating_again_with_the_old_token_retires_the_token_it_lost() -> anyhow::Result<()> {
    // A daemon that died before keeping its new token comes back with the old one (in grace).
    let app = app().await?;
    let (_, t0) = register(&app).await?;
    let lost = str_field(&rotate(&app, &t0).await?.1, "token")?;
    let (status, body) = rotate(&app, &t0).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let kept = str_field(&body, "token")?;
    for token in [&t0, &lost, &kept] {
        assert_eq!(authenticates(&app, token).await?, StatusCode::OK);
    }
    tokio::time::sleep(GRACE + Duration::from_millis(1100)).await;
    assert_eq!(authenticates(&app, &t0).await?, StatusCode::UNAUTHORIZED);
    assert_eq!(
        authenticates(&app, &lost).await?,
        StatusCode::UNAUTHORIZED,
        "the lost token is not current forever"
    );
    assert_eq!(authenticates(&app, &kept).await?, StatusCode::OK);
    // An expired token cannot rotate.
    let (status, body) = rotate(&app, &t0).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_node_token");
    Ok(())
}

#[tokio::test]
async fn core_reissues_a_leaked_token_and_every_earlier_one_is_refused_at_once() -> anyhow::Result<()> {
    let app = app().await?;
    let (node, t0) = register(&app).await?;
    let t1 = str_field(&rotate(&app, &t0).await?.1, "token")?;
    let path = format!("/core/v1/sandbox/nodes/{node}/token");
    let (status, body) = send(app.request(Method::POST, &path).bearer_auth(&t1)).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_admin_key");
    let (status, body) = send(app.core(Method::POST, &path)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], node.to_string());
    let t2 = str_field(&body, "token")?;
    assert_eq!(authenticates(&app, &t0).await?, StatusCode::UNAUTHORIZED, "in grace, but leaked");
    assert_eq!(authenticates(&app, &t1).await?, StatusCode::UNAUTHORIZED);
    assert_eq!(authenticates(&app, &t2).await?, StatusCode::OK);

    let (status, body) = send(app.core(Method::POST, "/core/v1/sandbox/nodes/not-a-node/token")).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request");
    let unknown = NodeId::from_random(agentplane_api::edge::random()?);
    let (status, body) =
        send(app.core(Method::POST, &format!("/core/v1/sandbox/nodes/{unknown}/token"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    assert_eq!(authenticates(&app, &t2).await?, StatusCode::OK);
    Ok(())
}

#[tokio::test]
async fn a_node_registered_before_tokens_rotated_is_still_reissued_and_rotates() -> anyhow::Result<()> {
    let app = app().await?;
    let (node, t0) = register(&app).await?;
    // The node item as earlier releases wrote it: no recorded token.
    app.store
        .dynamo
        .update_item()
        .table_name(&app.store.names.main_table)
        .key("PK", aws_sdk_dynamodb::types::AttributeValue::S(format!("NODE#{node}")))
        .key("SK", aws_sdk_dynamodb::types::AttributeValue::S("NODE".into()))
        .update_expression("REMOVE token_hash")
        .send()
        .await?;
    let (status, body) =
        send(app.core(Method::POST, &format!("/core/v1/sandbox/nodes/{node}/token"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let t1 = str_field(&body, "token")?;
    assert_eq!(authenticates(&app, &t0).await?, StatusCode::UNAUTHORIZED, "found by the scan and deleted");
    assert_eq!(authenticates(&app, &t1).await?, StatusCode::OK);
    let (status, body) = rotate(&app, &t1).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

#[tokio::test]
async fn the_daemon_keeps_its_rotated_token_before_using_it_and_restarts_with_it() -> anyhow::Result<()> {
    let app = app().await?;
    let mut node = TestNode::start(&app).await?;
    let configured = node.config.token.clone();
    node.config.rotation.now.notify_one();
    let mut kept = None;
    for _ in 0..100 {
        kept = node.kept_token()?.filter(|t| *t != configured);
        if kept.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kept = kept.ok_or_else(|| anyhow::anyhow!("the daemon kept no rotated token"))?;
    assert_eq!(authenticates(&app, &kept).await?, StatusCode::OK);
    tokio::time::sleep(GRACE + Duration::from_millis(1100)).await;
    assert_eq!(authenticates(&app, &configured).await?, StatusCode::UNAUTHORIZED);
    // Still heartbeating with the new token; and after a restart (the configured token is
    // refused by now) it starts with the kept one.
    let id: NodeId = node.node_id.parse()?;
    let seen = app.store.nodes().get(&id).await?.last_seen_at;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_ne!(app.store.nodes().get(&id).await?.last_seen_at, seen);
    node.restart(&app).await?;
    assert_eq!(node.kept_token()?, Some(kept));
    Ok(())
}
