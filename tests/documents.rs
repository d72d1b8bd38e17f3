//! Documents reach the model: a PDF's and a DOCX's text, from a session file or sent inline
//! as `file_data` (what the OpenAI SDKs send), appended to the message as a text file is; a
//! decompression bomb and a type the model cannot take are 400s naming the part, and no turn
//! runs for them.

use std::io::Write;

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, assert_error, send};
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::files::{agent_session, last_user_message, message, ready_file};

type R = anyhow::Result<()>;

const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/// A one-page PDF showing `text` (Helvetica), its cross-reference table at the right offsets.
fn pdf(text: &str) -> Vec<u8> {
    let content = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
         /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_owned(),
        format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{object}\nendobj\n", i + 1).bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).bytes());
    for offset in offsets {
        out.extend(format!("{offset:010} 00000 n \n").bytes());
    }
    out.extend(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).bytes(),
    );
    out
}

/// A zip of `entries`, deflated.
fn zip_of(entries: &[(&str, &[u8])]) -> anyhow::Result<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        zip.start_file(*name, options)?;
        zip.write_all(bytes)?;
    }
    Ok(zip.finish()?.into_inner())
}

/// A DOCX whose body is `paragraphs`.
fn docx(paragraphs: &[&str]) -> anyhow::Result<Vec<u8>> {
    let body: String = paragraphs.iter().map(|p| format!("<w:p><w:r><w:t>{p}</w:t></w:r></w:p>")).collect();
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><w:document \
         xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}</w:body></w:document>"
    );
    zip_of(&[("[Content_Types].xml", b"<Types/>"), ("word/document.xml", xml.as_bytes())])
}

fn text_of(user: &Value) -> String {
    match &user["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

#[tokio::test]
async fn a_pdf_and_a_docx_of_the_session_reach_the_model_as_their_text() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let (agent, session) = agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let report = pdf("Invoice 2291: 41 EUR due in March");
    let report_size = report.len();
    let pdf_id = ready_file(&app, &tenant.key, &session, ("invoice.pdf", "application/pdf"), report).await?;
    let docx_id =
        ready_file(&app, &tenant.key, &session, ("memo.docx", DOCX), docx(&["Memo", "Ship B2 on Friday"])?)
            .await?;

    model.push(Reply::text("41 EUR, and B2 ships Friday"));
    let parts =
        json!([{"type": "input_file", "file_id": pdf_id}, {"type": "input_file", "file_id": docx_id}]);
    let (status, answer) = send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({
        "agent": agent, "session_id": session, "input": message("what is due?", parts),
    })))
    .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let text = text_of(&last_user_message(&model.requests()));
    assert!(text.starts_with("what is due?"), "{text}");
    let header = format!("[file invoice.pdf (application/pdf, {report_size} bytes): its text]\n");
    assert!(text.contains(&format!("{header}Invoice 2291: 41 EUR due in March")), "{text}");
    assert!(
        text.contains(&format!("[file memo.docx ({DOCX}")) && text.contains("Memo\nShip B2 on Friday"),
        "{text}"
    );
    assert!(!text.contains("%PDF") && !text.contains("<w:t>"), "the model reads text, not the file: {text}");
    Ok(())
}

#[tokio::test]
async fn an_inline_pdf_reaches_the_model_without_a_session() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let (agent, _) = agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let data = base64::engine::general_purpose::STANDARD.encode(pdf("Boarding at gate 14"));
    model.push(Reply::text("gate 14"));
    let part = json!({"type": "input_file", "filename": "ticket.pdf", "file_data": format!("data:application/pdf;base64,{data}")});
    let (status, answer) = send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({
        "model": agent, "input": message("which gate?", json!([part])),
    })))
    .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let text = text_of(&last_user_message(&model.requests()));
    assert!(
        text.contains("[file ticket.pdf (application/pdf,") && text.contains("Boarding at gate 14"),
        "{text}"
    );

    // Without a media type in the URL, the name tells it; attachments off refuse it.
    model.push(Reply::text("gate 14"));
    let part = json!({"type": "input_file", "filename": "ticket.pdf", "file_data": data});
    let (status, answer) = send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({
        "model": agent, "input": message("which gate?", json!([part])),
    })))
    .await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(text_of(&last_user_message(&model.requests())).contains("Boarding at gate 14"));
    let (off, _) = agent_session(&app, &tenant, "gpt-4o-mini", json!({})).await?;
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(&json!({
        "model": off, "input": message("which gate?", json!([part])),
    })))
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "input[0].content[1]");
    Ok(())
}

#[tokio::test]
async fn a_bomb_an_unreadable_pdf_and_an_unsupported_type_are_refused_naming_the_part() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let (agent, session) = agent_session(&app, &tenant, "gpt-4o-mini", json!({"enabled": true})).await?;
    let ask = |parts: Value| {
        let request = app.client(&tenant.key, Method::POST, "/responses").json(&json!({
            "agent": agent, "session_id": session, "input": message("read this", parts),
        }));
        send(request)
    };

    // 64 MiB of zeros in word/document.xml deflate to about 64 KiB.
    let bomb = zip_of(&[("word/document.xml", &vec![0u8; 64 << 20])])?;
    let bomb = ready_file(&app, &tenant.key, &session, ("bomb.docx", DOCX), bomb).await?;
    let notes = ready_file(&app, &tenant.key, &session, ("a.txt", "text/plain"), b"fine".to_vec()).await?;
    let (status, body) =
        ask(json!([{"type": "input_file", "file_id": notes}, {"type": "input_file", "file_id": bomb}]))
            .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "document_too_large", "{body}");
    assert_eq!(body["error"]["param"], "input[0].content[2]");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("inflates past"), "{body}");

    // Not a PDF at all, though it says it is.
    let fake =
        ready_file(&app, &tenant.key, &session, ("a.pdf", "application/pdf"), b"hello".to_vec()).await?;
    let (status, body) = ask(json!([{"type": "input_file", "file_id": fake}])).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "document_unreadable", "{body}");
    assert_eq!(body["error"]["param"], "input[0].content[1]");

    // A zip is no document the model can take, from the session or inline.
    let zip = zip_of(&[("a.txt", b"hi")])?;
    let archive = ready_file(&app, &tenant.key, &session, ("a.zip", "application/zip"), zip.clone()).await?;
    let (status, body) = ask(json!([{"type": "input_file", "file_id": archive}])).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "input[0].content[1]");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("application/zip"), "{body}");
    let data = base64::engine::general_purpose::STANDARD.encode(&zip);
    let inline = json!({"type": "input_file", "filename": "a.zip", "file_data": format!("data:application/zip;base64,{data}")});
    let (status, body) = ask(json!([inline])).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "input[0].content[1]");
    assert!(model.requests().is_empty(), "no turn ran");
    Ok(())
}
