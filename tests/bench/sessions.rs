//! Sessions: create, get and list through the full router over HTTP, next to the raw DynamoDB
//! call each rests on.

use agentplane_store::resources::BY_CREATED;
use agentplane_tests::{TestApp, send, str_field};
use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::stats::{measure, ms};

pub async fn run(n: usize) -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let table = app.store.names.main_table.clone();
    let dynamo = app.store.dynamo.clone();

    let created = std::sync::Mutex::new(Vec::new());
    let create = measure(n, |_| {
        let request = app
            .client(&tenant.key, Method::POST, "/sessions")
            .json(&json!({"title": "bench", "metadata": {"k": "v"}}));
        let created = &created;
        async move {
            let (status, body) = send(request).await?;
            anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
            created.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.push(str_field(&body, "id")?);
            Ok(())
        }
    })
    .await?;
    let ids = created.into_inner().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let get = measure(n, |i| {
        let request = app.client(&tenant.key, Method::GET, &format!("/sessions/{}", ids[i % ids.len()]));
        async move {
            let (status, body) = send(request).await?;
            anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
            Ok(())
        }
    })
    .await?;
    let list = measure(n, |_| {
        let request = app.client(&tenant.key, Method::GET, "/sessions?limit=20");
        async move {
            let (status, body) = send(request).await?;
            anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
            Ok(())
        }
    })
    .await?;

    // Baselines: the bare SDK calls each route rests on, with items of the same shape.
    let pk = format!("BENCH#{}", uuid::Uuid::new_v4());
    let put = measure(n, |i| {
        let request = dynamo
            .put_item()
            .table_name(&table)
            .item("PK", AttributeValue::S(pk.clone()))
            .item("SK", AttributeValue::S(format!("SESSION#{i:08}")))
            .item("GSI1PK", AttributeValue::S(pk.clone()))
            .item("GSI1SK", AttributeValue::S(format!("{i:015}")))
            .item("title", AttributeValue::S("bench".into()))
            .condition_expression("attribute_not_exists(PK) OR attribute_exists(PK)");
        async move {
            request.send().await?;
            Ok(())
        }
    })
    .await?;
    let get_item = measure(n, |i| {
        let request = dynamo
            .get_item()
            .table_name(&table)
            .key("PK", AttributeValue::S(pk.clone()))
            .key("SK", AttributeValue::S(format!("SESSION#{:08}", i % n)))
            .consistent_read(true);
        async move {
            request.send().await?;
            Ok(())
        }
    })
    .await?;
    let query = measure(n, |_| {
        let request = dynamo
            .query()
            .table_name(&table)
            .index_name(BY_CREATED)
            .key_condition_expression("GSI1PK = :p")
            .expression_attribute_values(":p", AttributeValue::S(pk.clone()))
            .scan_index_forward(false)
            .limit(21);
        async move {
            request.send().await?;
            Ok(())
        }
    })
    .await?;

    println!(
        "Agentplane bench: {n} calls per operation, full router over loopback HTTP, LocalStack DynamoDB"
    );
    println!(
        "{:<22} {:>9} {:>9}   {:<20} {:>9} {:>9}   {:>8}",
        "route", "p50 ms", "p99 ms", "baseline", "p50 ms", "p99 ms", "p50 x"
    );
    for (route, r, base, b) in [
        ("POST /sessions", &create, "PutItem", &put),
        ("GET /sessions/{id}", &get, "GetItem", &get_item),
        ("GET /sessions?limit=20", &list, "Query (limit 21)", &query),
    ] {
        println!(
            "{:<22} {:>9.2} {:>9.2}   {:<20} {:>9.2} {:>9.2}   {:>8.2}",
            route,
            ms(r.p50),
            ms(r.p99),
            base,
            ms(b.p50),
            ms(b.p99),
            ms(r.p50) / ms(b.p50)
        );
    }
    println!("(each route also reads the key's hash item to authenticate: one GetItem before its own call)");
    Ok(())
}
