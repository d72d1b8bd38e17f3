//! Workspace files of a Platform environment (`/v1/environments/{id}/files`): a real sandbox on
//! the embedded node daemon holds `/workspace`. Every path attack is refused with 400 and
//! leaves nothing outside the workspace: the domain's rules (`..`, NUL, non-canonical forms,
//! `.git`, protected state), and symlinks planted by a process inside the sandbox, which the
//! node never follows.

use std::time::{Duration, Instant};

use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn environment(app: &TestApp, key: &str) -> anyhow::Result<String> {
    let (status, body) = send(app.v1(key, Method::POST, "/environments").json(&json!({}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{body}");
    Ok(body["data"]["id"].as_str().unwrap_or_default().to_owned())
}

fn files(env: &str, path: &str) -> String {
    format!("/environments/{env}/files?path={}", urlencode(path))
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn put(
    app: &TestApp,
    key: &str,
    env: &str,
    path: &str,
    bytes: &[u8],
) -> anyhow::Result<(StatusCode, Value)> {
    send(app.v1(key, Method::PUT, &files(env, path)).body(bytes.to_vec())).await
}

async fn get_bytes(app: &TestApp, key: &str, env: &str, path: &str) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    let response = app.v1(key, Method::GET, &files(env, path)).send().await?;
    Ok((response.status(), response.bytes().await?.to_vec()))
}

async fn listing(app: &TestApp, key: &str, env: &str) -> anyhow::Result<Vec<String>> {
    let (status, body) = send(app.v1(key, Method::GET, &format!("/environments/{env}/files"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    Ok(body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str().map(str::to_owned))
        .collect())
}

/// The environment's sandbox (the project's only one).
async fn sandbox_of(app: &TestApp, key: &str) -> anyhow::Result<String> {
    let (_, list) = send(app.sandbox(key, Method::GET, "/sandboxes")).await?;
    let id = list.as_array().and_then(|l| l.first()).and_then(|s| s["sandboxID"].as_str());
    Ok(id.unwrap_or_default().to_owned())
}

/// Runs `script` with bash inside the sandbox and waits for it to exit.
async fn inside(app: &TestApp, key: &str, sandbox: &str, script: &str) -> anyhow::Result<()> {
    let path = format!("/sandboxes/{sandbox}/processes");
    let (status, started) =
        send(app.sandbox(key, Method::POST, &path).json(&json!({"cmd": "bash", "args": ["-c", script]})))
            .await?;
    anyhow::ensure!(status.is_success(), "{started}");
    let process = started["processId"].as_str().unwrap_or_default().to_owned();
    for _ in 0..200 {
        let (_, list) = send(app.sandbox(key, Method::GET, &format!("{path}?state=exited"))).await?;
        if list["processes"].as_array().into_iter().flatten().any(|p| p["processId"] == process.as_str()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    anyhow::bail!("the process never exited")
}

fn code(body: &Value) -> &str {
    body.pointer("/error/code").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn files_are_written_read_listed_and_deleted_in_the_environments_sandbox() -> R {
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = environment(&app, &tenant.key).await?;
    let bytes: Vec<u8> = (0..=255u8).chain([0, 0, 10]).collect();
    let (status, body) = put(&app, &tenant.key, &env, "/workspace/src/bin.dat", &bytes).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sha = {
        use sha2::Digest;
        sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_eq!(body, json!({"data": {"path": "/workspace/src/bin.dat", "size": bytes.len(), "sha256": sha}}));
    assert_eq!(
        get_bytes(&app, &tenant.key, &env, "/workspace/src/bin.dat").await?,
        (StatusCode::OK, bytes.clone())
    );
    put(&app, &tenant.key, &env, "/workspace/README.md", b"# hi").await?;
    assert_eq!(listing(&app, &tenant.key, &env).await?, ["/workspace/README.md", "/workspace/src/bin.dat"]);

    // The sandbox's processes see the same files, owned by the sandbox's user.
    let sandbox = sandbox_of(&app, &tenant.key).await?;
    inside(
        &app,
        &tenant.key,
        &sandbox,
        "test -O /workspace/README.md && echo made-inside > /workspace/inside.txt",
    )
    .await?;
    assert_eq!(
        get_bytes(&app, &tenant.key, &env, "/workspace/inside.txt").await?,
        (StatusCode::OK, b"made-inside\n".to_vec())
    );

    let (status, _) =
        send(app.v1(&tenant.key, Method::DELETE, &files(&env, "/workspace/src/bin.dat"))).await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) =
        send(app.v1(&tenant.key, Method::GET, &files(&env, "/workspace/src/bin.dat"))).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "file_not_found"), "{body}");
    let (status, body) = send(app.v1(&tenant.key, Method::DELETE, &files(&env, "/workspace/src"))).await?;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "invalid_path"), "{body}");

    // Too large for the command queue: 413, nothing written.
    let (status, body) = put(&app, &tenant.key, &env, "/workspace/big", &vec![b'x'; 256 * 1024 + 1]).await?;
    assert_eq!((status, code(&body)), (StatusCode::PAYLOAD_TOO_LARGE, "file_too_large"), "{body}");

    // Another project's environment: 404 on every file route.
    let stranger = app.tenant().await?;
    for method in [Method::PUT, Method::GET, Method::DELETE] {
        let (status, body) =
            send(app.v1(&stranger.key, method.clone(), &files(&env, "/workspace/README.md"))).await?;
        assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "environment_not_found"), "{method}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn path_attacks_are_refused_and_write_nothing_outside_the_workspace() -> R {
    let app = TestApp::spawn().await?;
    let node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = environment(&app, &tenant.key).await?;
    put(&app, &tenant.key, &env, "/workspace/ok.txt", b"ok").await?;
    let sandbox = sandbox_of(&app, &tenant.key).await?;
    let root = node.config.state_dir.join("sandboxes").join(&sandbox);

    // Refused by the domain's rules, before any command reaches the node.
    let refused = [
        "/workspace/../escape",
        "/workspace/a/../../escape",
        "/workspace/./ok.txt",
        "/workspace//ok.txt",
        "/workspace/dir/",
        "/workspace/a\0b",
        "/workspace",
        "workspace/ok.txt",
        "/tmp/escape",
        "/etc/passwd",
        "/workspace/.git/config",
        "/workspace/sub/.GIT/hooks/pre-commit",
        "/workspace/.agentplane-tmp-x",
    ];
    for path in refused {
        for method in [Method::PUT, Method::GET, Method::DELETE] {
            let request = app.v1(&tenant.key, method.clone(), &files(&env, path)).body("pwned");
            let (status, body) = send(request).await?;
            assert_eq!(
                (status, code(&body)),
                (StatusCode::BAD_REQUEST, "invalid_path"),
                "{method} {path:?}: {body}"
            );
            assert_eq!(body.pointer("/error/details/param"), Some(&json!("path")));
        }
    }
    // The query itself: a missing, repeated or unknown parameter.
    for query in ["", "?path=/workspace/a&path=/workspace/b", "?path=/workspace/a&mode=x"] {
        let (status, body) =
            send(app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files{query}")).body("x"))
                .await?;
        assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "invalid_request"), "{query}: {body}");
    }

    // Symlinks a process inside the sandbox planted: to the sandbox's /tmp, to /etc, to a
    // missing target, and one level down. None is followed, for any route.
    inside(
        &app,
        &tenant.key,
        &sandbox,
        "cd /workspace && ln -s /tmp tmp-link && ln -s /etc etc-link && ln -s /tmp/new dangling \
         && ln -s /tmp/secret file-link && echo secret > /tmp/secret && mkdir -p real && ln -s .. real/up \
         && mkfifo pipe",
    )
    .await?;
    let attacks = [
        "/workspace/tmp-link/pwned",
        "/workspace/tmp-link/sub/pwned",
        "/workspace/etc-link/passwd",
        "/workspace/dangling",
        "/workspace/file-link",
        "/workspace/real/up/ok.txt",
        "/workspace/pipe",
    ];
    for path in attacks {
        for method in [Method::PUT, Method::GET, Method::DELETE] {
            let request = app.v1(&tenant.key, method.clone(), &files(&env, path)).body("pwned");
            let (status, body) = send(request).await?;
            assert_eq!(
                (status, code(&body)),
                (StatusCode::BAD_REQUEST, "invalid_path"),
                "{method} {path}: {body}"
            );
        }
    }
    // Nothing was written outside /workspace, and what the links point at is untouched.
    assert!(!root.join("tmp/pwned").exists());
    assert!(!root.join("tmp/sub").exists());
    assert!(!root.join("tmp/new").exists());
    assert_eq!(std::fs::read(root.join("tmp/secret"))?, b"secret\n");
    assert!(!root.join("escape").exists() && !root.join("workspace/.git").exists());
    assert_eq!(std::fs::read(root.join("workspace/ok.txt"))?, b"ok");
    // The listing shows regular files only and follows no link.
    assert_eq!(listing(&app, &tenant.key, &env).await?, ["/workspace/ok.txt"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_node_the_workspace_is_unavailable() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let env = environment(&app, &tenant.key).await?;
    let (status, body) = put(&app, &tenant.key, &env, "/workspace/a", b"x").await?;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "platform_runtime_unavailable"),
        "{body}"
    );
    Ok(())
}

/// Not a timed assertion: prints what one file round trip through the node's command queue
/// costs, for the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn file_round_trip_latency_is_printed() -> R {
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = environment(&app, &tenant.key).await?;
    let first = Instant::now();
    put(&app, &tenant.key, &env, "/workspace/warm", b"x").await?;
    let cold = first.elapsed();
    let mut puts = Vec::new();
    let mut gets = Vec::new();
    for n in 0..20u8 {
        // Each file its own bytes, so a read that served another file (or a stale one) shows.
        let content: Vec<u8> = (0..4096u32).map(|i| (i as u8).wrapping_add(n)).collect();
        let started = Instant::now();
        let (status, _) = put(&app, &tenant.key, &env, &format!("/workspace/f{n}"), &content).await?;
        assert_eq!(status, StatusCode::OK);
        puts.push(started.elapsed());
        let started = Instant::now();
        let (status, read) = get_bytes(&app, &tenant.key, &env, &format!("/workspace/f{n}")).await?;
        assert_eq!(status, StatusCode::OK);
        gets.push(started.elapsed());
        assert!(read == content, "f{n} read back {} bytes that differ from the 4096 written", read.len());
    }
    puts.sort();
    gets.sort();
    eprintln!(
        "workspace file latency: first PUT (starts the sandbox) {cold:?}; PUT 4 KiB p50 {:?} max {:?}; GET p50 {:?} max {:?}",
        puts[10], puts[19], gets[10], gets[19]
    );
    Ok(())
}
