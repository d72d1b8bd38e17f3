//! envd on the node (the E2B SDK's data plane) over real HTTP: a small Connect client (JSON
//! codec, as the SDK speaks it) drives the embedded node's envd. Processes run in the sandbox's
//! containment and appear in its observations; files are its `/workspace`; a request without
//! the sandbox's own token, a path outside the workspace and a symlink planted by the sandbox
//! all fail, and the host is unchanged.
// The helpers below are test code too: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use std::time::Duration;

use agentplane_tests::sandbox::{Env, env};
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A client of one sandbox's envd.
struct Envd {
    http: reqwest::Client,
    base: String,
    sandbox: String,
    token: Option<String>,
}

impl Envd {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request =
            self.http.request(method, format!("{}{path}", self.base)).header("E2b-Sandbox-Id", &self.sandbox);
        if let Some(token) = &self.token {
            request = request.header("X-Access-Token", token);
        }
        request
    }

    fn as_other(&self, sandbox: &str, token: Option<&str>) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            sandbox: sandbox.to_owned(),
            token: token.map(str::to_owned),
        }
    }

    async fn unary(&self, method: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .request(reqwest::Method::POST, &format!("/{method}"))
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("envd answers");
        let status = response.status();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Opens a server stream: its status and a reader of its messages.
    async fn stream(&self, method: &str, body: &Value) -> (StatusCode, Frames) {
        let json = body.to_string().into_bytes();
        let mut framed = vec![0u8];
        framed.extend_from_slice(&u32::try_from(json.len()).expect("small").to_be_bytes());
        framed.extend_from_slice(&json);
        let response = self
            .request(reqwest::Method::POST, &format!("/{method}"))
            .header("Content-Type", "application/connect+json")
            .body(framed)
            .send()
            .await
            .expect("envd answers");
        (response.status(), Frames { response, buffer: Vec::new() })
    }

    /// Starts `cmd args` and reads its stream to the end: (stdout, stderr, exit code, pid).
    async fn run(&self, cmd: &str, args: &[&str]) -> (String, String, i64, u64) {
        let (status, mut frames) = self.start(cmd, args, false).await;
        if status != StatusCode::OK {
            let body = frames.response.text().await.unwrap_or_default();
            panic!("Start answered {status}: {body}");
        }
        let pid = frames.pid().await;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        loop {
            let event = frames.event().await;
            if let Some(data) = event.pointer("/data/stdout") {
                out.extend(b64(data));
            } else if let Some(data) = event.pointer("/data/stderr") {
                err.extend(b64(data));
            } else if let Some(end) = event.get("end") {
                let code = end["exitCode"].as_i64().unwrap_or(0);
                assert!(frames.next().await.is_none(), "the end of stream follows the end event");
                return (
                    String::from_utf8_lossy(&out).into(),
                    String::from_utf8_lossy(&err).into(),
                    code,
                    pid,
                );
            }
        }
    }

    async fn start(&self, cmd: &str, args: &[&str], stdin: bool) -> (StatusCode, Frames) {
        self.stream(
            "process.Process/Start",
            &json!({"process": {"cmd": cmd, "args": args, "envs": {}}, "stdin": stdin}),
        )
        .await
    }
}

fn b64(data: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(data.as_str().expect("base64")).expect("base64")
}

/// The messages of a Connect server stream, as they arrive.
struct Frames {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Frames {
    /// The next message (`None`: the end-of-stream envelope, which must carry no error).
    async fn next(&mut self) -> Option<Value> {
        loop {
            if self.buffer.len() >= 5 {
                let length = u32::from_be_bytes(self.buffer[1..5].try_into().expect("4 bytes")) as usize;
                if self.buffer.len() >= 5 + length {
                    let flags = self.buffer[0];
                    let message: Value = serde_json::from_slice(&self.buffer[5..5 + length]).expect("json");
                    self.buffer.drain(..5 + length);
                    if flags & 0x02 != 0 {
                        assert!(message.get("error").is_none(), "the stream ended in error: {message}");
                        return None;
                    }
                    return Some(message);
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("a frame within 30 s")
                .expect("the stream reads");
            self.buffer
                .extend_from_slice(&chunk.expect("the stream ended before its end-of-stream envelope"));
        }
    }

    async fn event(&mut self) -> Value {
        self.next().await.expect("an event")["event"].clone()
    }

    async fn pid(&mut self) -> u64 {
        let event = self.event().await;
        event.pointer("/start/pid").and_then(Value::as_u64).expect("the start event comes first")
    }

    /// Reads to the process's end event; its exit code.
    async fn exit_code(&mut self) -> i64 {
        loop {
            if let Some(end) = self.event().await.get("end") {
                return end["exitCode"].as_i64().unwrap_or(0);
            }
        }
    }
}

/// A sandbox of `env`, made through Core's sandbox API (which issues its envd token and hands
/// it to the node), and its envd client.
async fn sandbox(env: &Env) -> Envd {
    let (status, created) = env.call(Method::POST, "/sandboxes", Some(json!({"timeout": 300}))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["sandboxID"].as_str().expect("sandboxID").to_owned();
    let token = created["envdAccessToken"].as_str().expect("envdAccessToken").to_owned();
    Envd { http: reqwest::Client::new(), base: env.node.envd_url.clone(), sandbox: id, token: Some(token) }
}

#[tokio::test]
async fn a_process_started_through_envd_streams_its_output_and_is_observed() {
    let env = env().await;
    let envd = sandbox(&env).await;
    let (out, err, code, pid) = envd.run("sh", &["-c", "echo hi; echo oops >&2"]).await;
    assert_eq!((out.as_str(), err.as_str(), code), ("hi\n", "oops\n", 0));
    let observed = env.wait_exit(&envd.sandbox, "obs-1").await;
    assert_eq!(observed["exitCode"], 0);
    assert_eq!(observed["observed"], true);
    assert_eq!(observed["pid"], pid);
    let (stdout, stderr, _) = env.output(&envd.sandbox, "obs-1").await;
    assert_eq!((stdout.as_slice(), stderr.as_slice()), (b"hi\n".as_slice(), b"oops\n".as_slice()));
    // A failing command's exit code, and its number the next one (Core's counter: no duplicates).
    let (_, _, code, _) = envd.run("sh", &["-c", "exit 7"]).await;
    assert_eq!(code, 7);
    assert_eq!(env.wait_exit(&envd.sandbox, "obs-2").await["exitCode"], 7);
    // Started by Core after it: the next number.
    let (id, _) = env.start(&envd.sandbox, json!({"cmd": "true"})).await;
    assert_eq!(id, "obs-3");
    env.kill(&envd.sandbox).await;
}

#[tokio::test]
async fn input_reaches_cat_and_a_kill_signal_ends_a_sleeper() {
    let env = env().await;
    let envd = sandbox(&env).await;
    let (status, mut cat) = envd.start("cat", &[], true).await;
    assert_eq!(status, StatusCode::OK);
    let pid = cat.pid().await;
    let listed = envd.unary("process.Process/List", json!({})).await;
    assert_eq!(listed.0, StatusCode::OK, "{}", listed.1);
    assert_eq!(listed.1["processes"][0]["pid"], pid);
    let input = json!({"process": {"pid": pid}, "input": {"stdin": "aGVsbG8K"}});
    let sent = envd.unary("process.Process/SendInput", input).await;
    assert_eq!(sent.0, StatusCode::OK, "{}", sent.1);
    let echoed = cat.event().await;
    assert_eq!(b64(&echoed["data"]["stdout"]), b"hello\n");
    let closed = envd.unary("process.Process/CloseStdin", json!({"process": {"pid": pid}})).await;
    assert_eq!(closed.0, StatusCode::OK, "{}", closed.1);
    assert_eq!(cat.exit_code().await, 0);

    let (_, mut sleeper) = envd.start("sleep", &["300"], false).await;
    let pid = sleeper.pid().await;
    let signal = json!({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"});
    let killed = envd.unary("process.Process/SendSignal", signal).await;
    assert_eq!(killed.0, StatusCode::OK, "{}", killed.1);
    assert_eq!(sleeper.exit_code().await, 128 + 9);
    assert_eq!(env.wait_exit(&envd.sandbox, "obs-2").await["exitCode"], 128 + 9);
    env.kill(&envd.sandbox).await;
}

#[tokio::test]
async fn files_are_written_read_listed_and_removed_in_the_workspace() {
    let env = env().await;
    let envd = sandbox(&env).await;
    let upload = envd
        .request(reqwest::Method::POST, "/files?path=/home/user/notes/a.txt")
        .header("Content-Type", "application/octet-stream")
        .body("alpha")
        .send()
        .await
        .expect("upload");
    assert_eq!(upload.status(), StatusCode::OK);
    let written: Value = upload.json().await.expect("json");
    assert_eq!(written[0]["path"], "/workspace/notes/a.txt");
    let multipart = "--b0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/workspace/b.txt\"\r\n\r\nbravo\r\n--b0--\r\n";
    let upload = envd
        .request(reqwest::Method::POST, "/files")
        .header("Content-Type", "multipart/form-data; boundary=b0")
        .body(multipart)
        .send()
        .await
        .expect("upload");
    assert_eq!(upload.status(), StatusCode::OK);
    let read =
        envd.request(reqwest::Method::GET, "/files?path=/workspace/notes/a.txt").send().await.expect("get");
    assert_eq!(read.status(), StatusCode::OK);
    assert_eq!(read.bytes().await.expect("bytes").as_ref(), b"alpha");
    // The sandbox's processes see what was written.
    assert_eq!(envd.run("cat", &["/workspace/b.txt"]).await.0, "bravo");
    let (status, listed) =
        envd.unary("filesystem.Filesystem/ListDir", json!({"path": "/workspace", "depth": 1})).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let names: Vec<&str> =
        listed["entries"].as_array().expect("entries").iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(names, vec!["b.txt", "notes"]);
    assert_eq!(listed["entries"][1]["type"], "FILE_TYPE_DIRECTORY");
    let (status, made) = envd.unary("filesystem.Filesystem/MakeDir", json!({"path": "/workspace/d"})).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let (status, moved) = envd
        .unary(
            "filesystem.Filesystem/Move",
            json!({"source": "/workspace/b.txt", "destination": "/workspace/d/c.txt"}),
        )
        .await;
    assert_eq!((status, &moved["entry"]["path"]), (StatusCode::OK, &json!("/workspace/d/c.txt")), "{moved}");
    let (status, _) = envd.unary("filesystem.Filesystem/Remove", json!({"path": "/workspace/d/c.txt"})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, gone) =
        envd.unary("filesystem.Filesystem/Stat", json!({"path": "/workspace/d/c.txt"})).await;
    assert_eq!((status, &gone["code"]), (StatusCode::NOT_FOUND, &json!("not_found")), "{gone}");
    let health = envd.request(reqwest::Method::GET, "/health").send().await.expect("health");
    assert_eq!(health.status(), StatusCode::NO_CONTENT);
    env.kill(&envd.sandbox).await;
}

#[tokio::test]
async fn attack_envd_without_the_sandboxs_own_token_is_unauthenticated() {
    let env = env().await;
    let (a, b) = (sandbox(&env).await, sandbox(&env).await);
    let no_token = a.as_other(&a.sandbox, None);
    let others_token = a.as_other(&a.sandbox, b.token.as_deref());
    let tokenless_sandbox = a.as_other(&env.create(json!({"timeout": 300})).await, a.token.as_deref());
    for client in [&no_token, &others_token, &tokenless_sandbox] {
        let (status, body) = client.unary("process.Process/List", json!({})).await;
        assert_eq!((status, &body["code"]), (StatusCode::UNAUTHORIZED, &json!("unauthenticated")), "{body}");
        let (status, _) = client.start("sh", &["-c", "touch /workspace/pwned"], false).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let files =
            client.request(reqwest::Method::GET, "/files?path=/workspace/x").send().await.expect("files");
        assert_eq!(files.status(), StatusCode::UNAUTHORIZED);
        let body: Value = files.json().await.expect("json");
        assert_eq!(body["code"], 401);
    }
    // Nothing ran: the sandbox has no observed process.
    assert!(env.processes(&a.sandbox, "all").await.is_empty());
    env.kill(&a.sandbox).await;
    env.kill(&b.sandbox).await;
}

#[tokio::test]
async fn attack_envd_paths_outside_the_workspace_and_planted_symlinks_are_refused() {
    let env = env().await;
    let envd = sandbox(&env).await;
    for path in ["/etc/passwd", "/workspace/../etc/passwd", "/tmp/x", "../x"] {
        let read =
            envd.request(reqwest::Method::GET, &format!("/files?path={path}")).send().await.expect("get");
        assert_eq!(read.status(), StatusCode::BAD_REQUEST, "{path}");
        let (status, body) = envd.unary("filesystem.Filesystem/Stat", json!({"path": path})).await;
        assert!(
            status == StatusCode::FORBIDDEN || status == StatusCode::BAD_REQUEST,
            "{path}: {status} {body}"
        );
    }
    // The sandbox plants symlinks to host paths (the node, root on the host, must not follow).
    let marker = format!("agentplane-envd-{}", uuid::Uuid::new_v4().simple());
    let (_, _, code, _) =
        envd.run("sh", &["-c", "ln -s /tmp /workspace/out && ln -s /etc/hostname /workspace/name"]).await;
    assert_eq!(code, 0);
    let through_dir = envd
        .request(reqwest::Method::POST, &format!("/files?path=/workspace/out/{marker}"))
        .header("Content-Type", "application/octet-stream")
        .body("pwned")
        .send()
        .await
        .expect("upload");
    assert_eq!(through_dir.status(), StatusCode::BAD_REQUEST);
    assert!(!std::path::Path::new("/tmp").join(&marker).exists(), "written through the symlink");
    let before = std::fs::read("/etc/hostname").ok();
    let onto_link = envd
        .request(reqwest::Method::POST, "/files?path=/workspace/name")
        .header("Content-Type", "application/octet-stream")
        .body("pwned")
        .send()
        .await
        .expect("upload");
    assert_eq!(onto_link.status(), StatusCode::BAD_REQUEST);
    assert_eq!(std::fs::read("/etc/hostname").ok(), before, "the host file changed");
    let read = envd.request(reqwest::Method::GET, "/files?path=/workspace/name").send().await.expect("get");
    assert_eq!(read.status(), StatusCode::BAD_REQUEST);
    let (status, _) = envd.unary("filesystem.Filesystem/ListDir", json!({"path": "/workspace/out"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    env.kill(&envd.sandbox).await;
}

#[tokio::test]
async fn the_local_gateway_forwards_requests_naming_a_sandbox_to_the_nodes_envd() {
    let env = env().await;
    let direct = sandbox(&env).await;
    // The gateway's own layer, in front of a stand-in for its routes.
    let envd_addr = direct.base.trim_start_matches("http://").parse().expect("envd address");
    let routes = axum::Router::new().route("/health", axum::routing::get(|| async { "the gateway's own" }));
    let router = agentplane_local::envd_proxy::layer(routes, Some(envd_addr));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let through = Envd { base: base.clone(), ..direct.as_other(&direct.sandbox, direct.token.as_deref()) };
    // Streams pass through as they come: the start, then the output, then the end.
    let (out, _, code, _) = through.run("sh", &["-c", "echo through the gateway"]).await;
    assert_eq!((out.as_str(), code), ("through the gateway\n", 0));
    let (status, body) =
        through.as_other(&direct.sandbox, None).unary("process.Process/List", json!({})).await;
    assert_eq!((status, &body["code"]), (StatusCode::UNAUTHORIZED, &json!("unauthenticated")));
    // Without the header the gateway answers itself.
    let own = reqwest::get(format!("{base}/health")).await.expect("health");
    assert_eq!(own.text().await.expect("text"), "the gateway's own");
    server.abort();
    env.kill(&direct.sandbox).await;
}

fn python() -> String {
    std::env::var("AGENTPLANE_TOOLS_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.localstack/tools/bin/python", env!("CARGO_MANIFEST_DIR")))
}

/// The real client, as its users drive it: the e2b SDK (tests/sdk/e2b_envd.py) creates a
/// sandbox through Core's API and runs commands and files through the node's envd; every
/// command it ran is then an observed process of the sandbox, with its output and exit code.
#[tokio::test]
async fn the_e2b_sdk_runs_commands_and_files_through_envd() {
    let env = env().await;
    let script = format!("{}/sdk/e2b_envd.py", env!("CARGO_MANIFEST_DIR"));
    let vars = [
        ("E2B_API_URL", format!("{}/sandbox/v1", env.app.base)),
        ("E2B_API_KEY", env.tenant.key.clone()),
        ("E2B_SANDBOX_URL", env.node.envd_url.clone()),
    ];
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python())
            .arg(script)
            .envs(vars)
            .env_remove("E2B_DOMAIN")
            .env_remove("E2B_DEBUG")
            .output()
    })
    .await
    .expect("joined")
    .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the SDK script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or_default()).expect("json");
    assert_eq!(seen["stdout"], "hi\n");
    assert_eq!(seen["stderr"], "oops\n");
    assert_eq!(seen["exit"], 0);
    assert_eq!(seen["failed"], 3);
    assert_eq!(seen["cat"], "piped\n");
    assert_eq!(seen["killed"], true);
    assert_eq!(seen["read"], "alpha");
    assert_eq!(seen["list"], json!(["a.txt", "d"]));
    assert_eq!(seen["exists"], false);
    assert_eq!(seen["outside"], "refused", "{seen}");
    // Every command the SDK ran is an observed process of the sandbox, read back through the
    // process API: `echo hi` with its output and exit code, the failing one's 3.
    let sandbox = seen["sandbox"].as_str().expect("sandbox id").to_owned();
    let all = env.processes(&sandbox, "all").await;
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(all.iter().all(|p| p["processId"].as_str().is_some_and(|id| id.starts_with("obs-"))), "{all:?}");
    let echo = all.iter().find(|p| p["exitCode"] == 0 && p["config"]["args"].to_string().contains("echo hi"));
    let echo = echo.unwrap_or_else(|| panic!("the echo: {all:?}"));
    let id = echo["processId"].as_str().expect("processId").to_owned();
    let (out, err, _) = env.output(&sandbox, &id).await;
    assert_eq!(String::from_utf8_lossy(&out), "hi\n");
    assert_eq!(String::from_utf8_lossy(&err), "oops\n");
    assert!(all.iter().any(|p| p["exitCode"] == 3), "{all:?}");
    env.kill(&sandbox).await;
}
