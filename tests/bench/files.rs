//! Session files: a 20 MiB file (the default limit) created, uploaded through its presigned URL
//! to LocalStack, made ready (the size check) and downloaded back through its presigned GET;
//! each step's time, repeated `BENCH_N / 30` times (3 to 10).

use std::time::{Duration, Instant};

use agentplane_tests::{TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::stats::{ms, stats};

const SIZE: usize = 20 * 1024 * 1024;

pub async fn run(n: usize) -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "bench", "model": "gpt-4o-mini", "config": {"attachments": {"enabled": true}}}),
        )
        .await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;
    let bytes: Vec<u8> = (0..SIZE).map(|i| (i % 253) as u8).collect();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let rounds = (n / 30).clamp(3, 10);
    let (mut creates, mut uploads, mut readies, mut downloads) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let start = Instant::now();
        let (status, file) =
            send(app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/files")).json(
                &json!({"filename": "big.bin", "content_type": "application/octet-stream", "size": SIZE}),
            ))
            .await?;
        anyhow::ensure!(status == StatusCode::CREATED, "{status} {file}");
        creates.push(start.elapsed());
        let path = format!("/sessions/{session}/files/{}", str_field(&file, "id")?);

        let start = Instant::now();
        let put = http
            .put(str_field(&file, "upload_url")?)
            .header("content-type", "application/octet-stream")
            .body(bytes.clone())
            .send()
            .await?;
        anyhow::ensure!(put.status().is_success(), "upload: {}", put.status());
        uploads.push(start.elapsed());

        let start = Instant::now();
        let (_, ready) = send(app.client(&tenant.key, Method::GET, &path)).await?;
        anyhow::ensure!(ready["status"] == "ready", "{ready}");
        readies.push(start.elapsed());

        let start = Instant::now();
        let got = http.get(str_field(&ready, "download_url")?).send().await?.bytes().await?;
        anyhow::ensure!(got.len() == SIZE, "downloaded {} bytes", got.len());
        downloads.push(start.elapsed());

        let (status, _) = send(app.client(&tenant.key, Method::DELETE, &path)).await?;
        anyhow::ensure!(status == StatusCode::OK);
    }
    let mib = SIZE as f64 / (1024.0 * 1024.0);
    println!("session files ({rounds} files of {mib:.0} MiB through LocalStack, presigned URLs)");
    for (name, samples) in [
        ("create (upload URL)", creates),
        ("upload PUT", uploads),
        ("get → ready (HEAD)", readies),
        ("download GET", downloads),
    ] {
        let s = stats(samples);
        println!("  {name:<20} p50 {:>7.1} ms, p99 {:>7.1} ms", ms(s.p50), ms(s.p99));
        if name.contains("PUT") || name.contains("GET") {
            println!("  {:<20} {:.0} MiB/s at p50", "", mib / s.p50.as_secs_f64());
        }
    }
    Ok(())
}
