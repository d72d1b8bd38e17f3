//! Storage round trips of plain turns (one model call, no tools), counted on the wire: an app
//! whose store carries an op counter (an SDK interceptor on its DynamoDB and S3 clients), kept
//! apart from the timed app so that the timings pay nothing for the counting.

use agentplane_store::metrics::{OpCounter, Ops};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, fresh_store, send, str_field};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::json;

/// What one request sent, whole and after its authentication read (for authentication alone,
/// `after_auth` holds its own requests).
pub struct Row {
    pub label: &'static str,
    pub total: usize,
    pub auth: usize,
    pub after_auth: Ops,
}

struct Counted {
    app: TestApp,
    counter: OpCounter,
    key: String,
}

impl Counted {
    async fn ops(&self, request: RequestBuilder) -> anyhow::Result<(serde_json::Value, Ops)> {
        self.counter.take();
        let (status, body) = send(request).await?;
        anyhow::ensure!(status.is_success() || status == StatusCode::NOT_FOUND, "{status} {body}");
        Ok((body, self.counter.take()))
    }

    /// The requests of a turn, split into its authentication read (`auth`) and the rest.
    async fn turn(
        &self,
        label: &'static str,
        auth: &Ops,
        request: RequestBuilder,
    ) -> anyhow::Result<(serde_json::Value, Row)> {
        let (body, ops) = self.ops(request).await?;
        anyhow::ensure!(body["status"] == "completed", "{label}: {body}");
        anyhow::ensure!(ops.0.starts_with(&auth.0), "{label} did not start with the auth read: {ops}");
        let total = ops.total();
        let after_auth = Ops(ops.0[auth.total()..].to_vec());
        Ok((body, Row { label, total, auth: auth.total(), after_auth }))
    }
}

/// Counts authentication alone, a turn in a new session, a turn in an existing one, and the
/// 1st and 100th turns of one session.
pub async fn count(model: &ScriptedModel) -> anyhow::Result<Vec<Row>> {
    let counter = OpCounter::new();
    let app = TestApp::serve_with_model(fresh_store().await?.with_op_counter(&counter), model).await?;
    let key = app.tenant().await?.key;
    let agent = app
        .create_agent(&key, json!({"name": "bench", "model": "gpt-4o-mini", "instructions": "hi"}))
        .await?;
    let c = Counted { app, counter, key };
    let client = |method, path: &str| c.app.client(&c.key, method, path);

    // Authentication alone: a route that fails right after it.
    let (_, auth) = c.ops(client(Method::GET, "/sessions/not-a-session-id")).await?;
    let mut rows = vec![Row {
        label: "authentication alone (GET /sessions/{bad id})",
        total: auth.total(),
        auth: auth.total(),
        after_auth: auth.clone(),
    }];

    model.push(Reply::text("ok"));
    let new = client(Method::POST, "/responses").json(&json!({"agent": agent, "input": "hi"}));
    let (body, row) = c.turn("POST /responses, new session", &auth, new).await?;
    rows.push(row);
    let session = str_field(&body, "session_id")?;
    model.push(Reply::text("ok"));
    let again = client(Method::POST, &format!("/sessions/{session}/messages")).json(&json!({"input": "hi"}));
    rows.push(c.turn("POST /sessions/{id}/messages", &auth, again).await?.1);

    // One session, 100 turns through the same route.
    let (_, created) = send(client(Method::POST, "/sessions")).await?;
    let session = str_field(&created, "id")?;
    for n in 1..=100 {
        model.push(Reply::text("ok"));
        let request = client(Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"agent": agent, "input": "hi"}));
        let label = match n {
            1 => "one session, turn 1 (/sessions/{id}/messages)",
            100 => "one session, turn 100",
            _ => "",
        };
        let (_, row) = c.turn(label, &auth, request).await?;
        if !label.is_empty() {
            rows.push(row);
        }
    }
    Ok(rows)
}

pub fn print(rows: &[Row]) {
    println!("Storage round trips per plain turn (DynamoDB + S3 requests on the wire, SDK interceptor)");
    println!(
        "{:<48} {:>5} {:>5} {:>10}   operations after auth, in order",
        "request", "total", "auth", "after auth"
    );
    for row in rows {
        let after = if row.label.starts_with("authentication") {
            "-".to_owned()
        } else {
            row.after_auth.total().to_string()
        };
        println!("{:<48} {:>5} {:>5} {:>10}   {}", row.label, row.total, row.auth, after, row.after_auth);
    }
}
