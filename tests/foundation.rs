//! The foundation end to end: provisioning, the Core admin key, projects and project keys.

use agentplane_domain::api_key::KeyHash;
use agentplane_store::ResourceNames;
use agentplane_store::aws::emulator_sdk_config;
use agentplane_store::provision::Provisioner;
use agentplane_store::resources::{BY_CREATED, BY_DUE, QUEUES, TABLES, TTL_ATTRIBUTE, dlq_name};
use agentplane_tests::{TestApp, assert_error, endpoint, fresh_store, send, send_with_cache, str_field};
use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

#[tokio::test]
async fn provisioning_creates_indexes_ttl_and_dead_letter_queues_and_is_idempotent() -> R {
    let store = fresh_store().await?;
    let provisioner = Provisioner::new(&emulator_sdk_config(&endpoint()).await);
    // A second run over existing resources changes nothing and does not fail.
    provisioner.provision(&store.names).await?;
    for spec in &TABLES {
        let name = store.names.table(spec);
        let table = store.dynamo.describe_table().table_name(name).send().await?.table.expect("table");
        let indexes: Vec<String> = table
            .global_secondary_indexes()
            .iter()
            .filter_map(|i| i.index_name().map(str::to_owned))
            .collect();
        let expected: Vec<String> = spec.indexes.iter().map(|i| i.name.to_owned()).collect();
        assert_eq!(indexes.len(), expected.len(), "{name}");
        for index in &expected {
            assert!(indexes.contains(index), "{name} lacks {index}");
        }
        let ttl = store.dynamo.describe_time_to_live().table_name(name).send().await?;
        assert_eq!(ttl.time_to_live_description().and_then(|d| d.attribute_name()), Some(TTL_ATTRIBUTE));
    }
    assert!(TABLES[0].indexes.iter().any(|i| i.name == BY_CREATED));
    assert!(TABLES[0].indexes.iter().any(|i| i.name == BY_DUE));
    for spec in &QUEUES {
        let url = provisioner.queue_url(store.names.queue(spec)).await?;
        let attrs = provisioner
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .await?;
        let attrs = attrs.attributes().expect("attributes");
        let redrive =
            attrs.get(&aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy).expect("redrive policy");
        let redrive: Value = serde_json::from_str(redrive)?;
        assert!(
            redrive["deadLetterTargetArn"]
                .as_str()
                .is_some_and(|arn| arn.ends_with(&dlq_name(store.names.queue(spec))))
        );
        assert_eq!(
            redrive["maxReceiveCount"].to_string().trim_matches('"'),
            spec.max_receive_count.to_string()
        );
    }
    for bucket in [&store.names.files_bucket, &store.names.workspaces_bucket] {
        provisioner.s3.head_bucket().bucket(bucket).send().await?;
        let block = provisioner.s3.get_public_access_block().bucket(bucket).send().await?;
        let block = block.public_access_block_configuration().expect("block");
        assert_eq!(block.block_public_acls(), Some(true));
        assert_eq!(block.restrict_public_buckets(), Some(true));
    }
    Ok(())
}

#[tokio::test]
async fn core_routes_refuse_a_missing_wrong_or_project_key() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let project_path = format!("/core/v1/projects/{}/api_keys", tenant.project_id);
    let revoke_path = format!("{project_path}/{}", tenant.key_id);
    let routes = [
        (Method::POST, "/core/v1/projects".to_owned()),
        (Method::GET, "/core/v1/projects".to_owned()),
        (Method::POST, project_path.clone()),
        (Method::DELETE, revoke_path.clone()),
    ];
    let wrong = format!("{}x", app.core_key);
    for (method, path) in &routes {
        for auth in [None, Some(wrong.as_str()), Some(tenant.key.as_str()), Some("")] {
            let mut request = app.request(method.clone(), path).json(&json!({"name": "n"}));
            if let Some(token) = auth {
                request = request.bearer_auth(token);
            }
            let (status, cache, body) = send_with_cache(request).await?;
            assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_admin_key");
            assert_eq!(cache.as_deref(), Some("no-store"));
        }
        // Another scheme with the right key is not a bearer credential.
        let request =
            app.request(method.clone(), path).header("Authorization", format!("Basic {}", app.core_key));
        let (status, body) = send(request).await?;
        assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_admin_key");
    }
    // Nothing was changed by the refused calls: the key still works, one project exists.
    let (status, _) = send(app.client(&tenant.key, Method::GET, "/sessions")).await?;
    assert_eq!(status, StatusCode::OK);
    let (_, list) = send(app.core(Method::GET, "/core/v1/projects")).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    Ok(())
}

#[tokio::test]
async fn creating_a_project_validates_its_name() -> R {
    let app = TestApp::spawn().await?;
    let (status, cache, body) =
        send_with_cache(app.core(Method::POST, "/core/v1/projects").json(&json!({"name": "  Acme  "})))
            .await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(cache.as_deref(), Some("no-store"));
    assert_eq!(body["object"], "project");
    assert_eq!(body["name"], "Acme");
    assert!(body["created_at"].is_i64());
    let id: agentplane_domain::ProjectId = str_field(&body, "id")?.parse()?;
    let stored = app.store.projects().get(&id).await?;
    assert_eq!(stored.name.as_str(), "Acme");

    for bad in [
        json!({}),
        json!({"name": 5}),
        json!({"name": ""}),
        json!({"name": "   "}),
        json!({"name": "x".repeat(129)}),
        json!({"name": null}),
    ] {
        let (status, body) = send(app.core(Method::POST, "/core/v1/projects").json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], "name", "{bad}");
    }
    for raw in ["{", "[1]", "\"name\"", "nul"] {
        let (status, body) = send(app.core(Method::POST, "/core/v1/projects").body(raw)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_json");
    }
    let huge = format!("{{\"name\":\"{}\"}}", "x".repeat(1024 * 1024 + 1));
    let (status, body) = send(app.core(Method::POST, "/core/v1/projects").body(huge)).await?;
    assert_error((status, &body), StatusCode::PAYLOAD_TOO_LARGE, "request_too_large");
    // Only the one valid project was stored.
    let (_, list) = send(app.core(Method::GET, "/core/v1/projects")).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    Ok(())
}

#[tokio::test]
async fn projects_list_pages_by_creation_time() -> R {
    let app = TestApp::spawn().await?;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.create_project(&format!("p{i}")).await?);
    }
    let (status, page) = send(app.core(Method::GET, "/core/v1/projects?limit=2")).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["object"], "list");
    assert_eq!(page["has_more"], true);
    let first: Vec<&str> =
        page["data"].as_array().expect("data").iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(first, vec![ids[4].as_str(), ids[3].as_str()]);
    assert_eq!(page["first_id"], ids[4].as_str());
    assert_eq!(page["last_id"], ids[3].as_str());

    let (_, rest) =
        send(app.core(Method::GET, &format!("/core/v1/projects?limit=100&after={}", ids[3]))).await?;
    let rest: Vec<&str> =
        rest["data"].as_array().expect("data").iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(rest, vec![ids[2].as_str(), ids[1].as_str(), ids[0].as_str()]);

    let (_, asc) = send(app.core(Method::GET, "/core/v1/projects?order=asc&limit=5")).await?;
    assert_eq!(asc["has_more"], false);
    assert_eq!(asc["first_id"], ids[0].as_str());

    for bad in ["limit=0", "limit=101", "limit=x", "order=sideways", "limit=1&limit=2"] {
        let (status, body) = send(app.core(Method::GET, &format!("/core/v1/projects?{bad}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let unknown = uuid::Uuid::new_v4();
    for cursor in [unknown.to_string(), "nope".to_owned()] {
        let (status, body) =
            send(app.core(Method::GET, &format!("/core/v1/projects?after={cursor}"))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    }
    Ok(())
}

#[tokio::test]
async fn a_project_key_is_shown_once_and_only_its_hash_is_stored() -> R {
    let app = TestApp::spawn().await?;
    let project = app.create_project("keys").await?;
    let path = format!("/core/v1/projects/{project}/api_keys");
    let (status, body) = send(app.core(Method::POST, &path).json(&json!({"name": "ci"}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let key = str_field(&body, "key")?;
    assert!(key.starts_with("cpeer_") && key.len() == 49, "{key}");
    assert_eq!(body["project_id"], project.as_str());
    assert_eq!(body["revoked_at"], Value::Null);
    assert_eq!(body["hint"], &key[key.len() - 4..]);

    // Scan the whole table: the plaintext is nowhere, its SHA-256 is.
    let scan = app.store.dynamo.scan().table_name(&app.store.names.main_table).send().await?;
    let dump = format!("{:?}", scan.items());
    assert!(!dump.contains(&key), "the plaintext key was stored");
    assert!(dump.contains(KeyHash::of(&key).as_str()), "the key hash was not stored");

    // It works at once for the client API.
    let (status, _) = send(app.client(&key, Method::GET, "/sessions")).await?;
    assert_eq!(status, StatusCode::OK);

    for bad in [json!({}), json!({"name": 1}), json!({"name": ""})] {
        let (status, body) = send(app.core(Method::POST, &path).json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let missing = format!("/core/v1/projects/{}/api_keys", uuid::Uuid::new_v4());
    let (status, body) = send(app.core(Method::POST, &missing).json(&json!({"name": "x"}))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    let (status, body) =
        send(app.core(Method::POST, "/core/v1/projects/not-a-uuid/api_keys").json(&json!({"name": "x"})))
            .await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    Ok(())
}

#[tokio::test]
async fn revoking_a_key_takes_effect_at_once_and_twice_is_one_effect() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let other = app.tenant().await?;
    let path = format!("/core/v1/projects/{}/api_keys/{}", tenant.project_id, tenant.key_id);

    // Revoking through another project's path finds nothing and changes nothing.
    let foreign = format!("/core/v1/projects/{}/api_keys/{}", other.project_id, tenant.key_id);
    let (status, body) = send(app.core(Method::DELETE, &foreign)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    let (status, _) = send(app.client(&tenant.key, Method::GET, "/sessions")).await?;
    assert_eq!(status, StatusCode::OK);

    let (status, first) = send(app.core(Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert!(first["revoked_at"].is_i64());
    let (status, body) = send(app.client(&tenant.key, Method::GET, "/sessions")).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_api_key");

    let (status, second) = send(app.core(Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["revoked_at"], first["revoked_at"]);

    // The other project's key is untouched.
    let (status, _) = send(app.client(&other.key, Method::GET, "/sessions")).await?;
    assert_eq!(status, StatusCode::OK);

    for bad in [
        format!("/core/v1/projects/{}/api_keys/{}", tenant.project_id, uuid::Uuid::new_v4()),
        format!("/core/v1/projects/{}/api_keys/zzz", tenant.project_id),
    ] {
        let (status, body) = send(app.core(Method::DELETE, &bad)).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    }
    Ok(())
}

#[tokio::test]
async fn concurrent_revokes_produce_one_revocation() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let path = format!("/core/v1/projects/{}/api_keys/{}", tenant.project_id, tenant.key_id);
    let calls = (0..8).map(|_| send(app.core(Method::DELETE, &path)));
    let results = join_all(calls).await;
    let mut stamps = Vec::new();
    for result in results {
        let (status, body) = result?;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body["revoked_at"].is_i64(), "{body}");
        stamps.push(body["revoked_at"].clone());
    }
    stamps.dedup();
    assert_eq!(stamps.len(), 1, "every caller sees the one revocation");
    Ok(())
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_the_envelope() -> R {
    let app = TestApp::spawn().await?;
    let (status, cache, body) = send_with_cache(app.request(Method::GET, "/nope")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "route_not_found");
    assert_eq!(cache.as_deref(), Some("no-store"));
    let (status, body) = send(app.core(Method::PUT, "/core/v1/projects")).await?;
    assert_error((status, &body), StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    Ok(())
}

#[tokio::test]
async fn resource_names_from_one_prefix_are_distinct() -> R {
    let names = ResourceNames::with_prefix("x");
    let all = [
        &names.main_table,
        &names.events_table,
        &names.telemetry_table,
        &names.files_bucket,
        &names.workspaces_bucket,
        &names.runs_queue,
        &names.webhooks_queue,
        &names.rollbacks_queue,
    ];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
    Ok(())
}
