//! `config.experience` (display name, greeting, suggested prompts): validated, edited in the
//! draft field by field, frozen with each published version (like attachments and approvals),
//! and the name the A2A card shows.

use agentplane_tests::{TestApp, assert_error, send};
use reqwest::{Method, StatusCode};
use serde_json::json;

type R = anyhow::Result<()>;

#[tokio::test]
async fn experience_travels_with_the_published_version() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let key = &tenant.key;
    let experience = json!({"display_name": "Ada", "greeting": "Hello! Ask me anything.",
                            "suggested_prompts": ["Plan a trip", "Summarise a file"]});
    let agent = app
        .create_agent(
            key,
            json!({"name": "guide", "model": "gpt-4o-mini", "config": {"experience": experience}}),
        )
        .await?;
    let (_, body) = send(app.client(key, Method::GET, &format!("/agents/{agent}"))).await?;
    assert_eq!(body["config"]["experience"], experience);
    let (status, _) = send(app.client(key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    assert!(status.is_success());

    // The draft changes one field; the published version keeps what it froze.
    let patch = json!({"config": {"experience": {"greeting": "Hi again"}}});
    let (status, draft) =
        send(app.client(key, Method::PATCH, &format!("/agents/{agent}")).json(&patch)).await?;
    assert_eq!(status, StatusCode::OK, "{draft}");
    assert_eq!(draft["config"]["experience"]["greeting"], "Hi again");
    assert_eq!(draft["config"]["experience"]["display_name"], "Ada");
    let (_, versions) = send(app.client(key, Method::GET, &format!("/agents/{agent}/versions"))).await?;
    assert_eq!(versions["data"][0]["config"]["experience"], experience, "{versions}");
    // The A2A card shows the published display name.
    let card_path = format!("/agents/{agent}/a2a/.well-known/agent-card.json");
    let (_, card) = send(app.client(key, Method::GET, &card_path)).await?;
    assert_eq!(card["name"], "Ada");

    // Invalid settings are refused by name, and nothing changes.
    for (bad, param) in [
        (json!({"display_name": ""}), "config.experience.display_name"),
        (json!({"suggested_prompts": ["a", "a"]}), "config.experience.suggested_prompts[1]"),
        (json!({"suggested_prompts": vec!["p"; 9]}), "config.experience.suggested_prompts"),
        (json!({"greeting": "x".repeat(2001)}), "config.experience.greeting"),
        (json!({"theme": "dark"}), "config.experience.theme"),
    ] {
        let body = json!({"config": {"experience": bad}});
        let answer = send(app.client(key, Method::PATCH, &format!("/agents/{agent}")).json(&body)).await?;
        assert_error((answer.0, &answer.1), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer.1["error"]["param"], param, "{}", answer.1);
    }
    let (_, after) = send(app.client(key, Method::GET, &format!("/agents/{agent}"))).await?;
    assert_eq!(after["config"]["experience"]["greeting"], "Hi again");
    Ok(())
}
