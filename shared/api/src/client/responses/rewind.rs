//! Regenerate the last answer and edit a user message: a new turn that replaces earlier ones.
//! Nothing is deleted: the replaced turns stay in the log, a `turn.superseded` event (written
//! with the new turn's start) names them, and the model's conversation leaves them out (the
//! session's `superseded_turns`, then the transcript the new turn saves).

use agentplane_domain::SessionId;
use agentplane_domain::agent::Channel;
use agentplane_domain::event::payload::SupersedeReason;
use agentplane_domain::event::{Event, EventPayload};
use agentplane_domain::session::Session;
use agentplane_engine::admission::TurnInput;
use agentplane_engine::model::{ChatMessage, ContentPart, UserContent};
use agentplane_engine::turn::Supersede;
use agentplane_engine::{TurnContext, transcript};
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Map, Value};

use super::handlers::{Dialect, run};
use super::validation::input_with_files;
use super::wire::ResponseBody;
use crate::App;
use crate::body::JsonObject;
use crate::client::auth::ProjectAuth;
use crate::client::error::ClientError;
use crate::envelope::ErrorEnvelope;

/// The session's live turns (not superseded) in the log's order, each with its user message.
fn live_turns<'a>(events: &'a [Event], session: &Session) -> Vec<(&'a str, &'a Event)> {
    let mut out: Vec<(&str, &Event)> = Vec::new();
    for event in events {
        let Some(turn) = event.turn_id.as_deref() else { continue };
        if session.superseded_turns.iter().any(|t| t == turn) || out.iter().any(|(t, _)| *t == turn) {
            continue;
        }
        if matches!(event.payload(), EventPayload::UserMessage(_)) {
            out.push((turn, event));
        }
    }
    out
}

/// What the user sent in `turn`: the transcript's copy (whole), else the log's (cut at 16 KB:
/// refused rather than sent short).
fn user_text(context: &TurnContext, turn: &str, event: &Event) -> Result<String, ClientError> {
    if let Some(stored) = &context.transcript
        && let Ok((messages, marks)) = transcript::decode_marked(&stored.body)
        && let Some(mark) = marks.iter().find(|m| m.turn_id == turn)
        && let Some(ChatMessage::User { content }) = messages.get(mark.start)
    {
        return Ok(match content {
            UserContent::Text(text) => text.clone(),
            UserContent::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::ImageUrl { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        });
    }
    match event.payload() {
        EventPayload::UserMessage(m) if !m.truncated => Ok(m.text),
        _ => Err(ClientError::NothingToRegenerate),
    }
}

/// Runs the new turn in the session with the agent and channel it last ran.
async fn rerun(
    app: &App,
    auth: &ProjectAuth,
    (session, context): (Session, TurnContext),
    input: String,
    supersede: Supersede,
) -> Result<Response, ClientError> {
    let agent_id = session.agent_id.ok_or(ClientError::NothingToRegenerate)?;
    let engine = app.engine();
    let found = engine.turn_agent(&auth.project_id, &agent_id).await?;
    let channel = session.agent_channel.unwrap_or(Channel::Draft);
    let admitted = engine.admit(found, channel, None).await?;
    let tenant = engine.admit_spend(admitted.tenant, crate::edge::now()).await?;
    let given = TurnInput { input, tenant, supersede: Some(supersede), ..TurnInput::default() };
    let metadata = session.metadata.clone();
    run(app, &admitted, (&session, context), given, &metadata, &Dialect::default()).await
}

fn no_fields(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), ClientError> {
    match body.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(agentplane_domain::ValidationError::new(
            unknown.clone(),
            format!("`{}` is not a field of this request", crate::edge::quote::quote(unknown)),
        )
        .into()),
        None => Ok(()),
    }
}

/// Regenerate the last answer.
///
/// A new turn answers the session's last user message again. The replaced turn stays in the
/// log, named by a `turn.superseded` event (`reason: regenerate`) of the new turn, and marked
/// `superseded: true` when the log is read; the model no longer sees it.
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/regenerate",
    tag = "client",
    operation_id = "client-session-regenerate",
    params(("session_id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "The new turn ran; `status` says how it ended.", body = ResponseBody),
        (status = 400, description = "The body has a field (`param` names it).", body = ErrorEnvelope),
        (status = 402, description = "The tenant's monthly spend limit is reached (`spend_limit_reached`).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "No turn to regenerate (`nothing_to_regenerate`), a turn is running (`session_busy`), waits for actions (`actions_pending`) or its budget (`budget_paused`), or the agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
        (status = 413, description = "The body is too large.", body = ErrorEnvelope),
    ),
)]
pub async fn regenerate(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Response, ClientError> {
    no_fields(&body, &[])?;
    let id: SessionId = id.parse().map_err(|_| ClientError::SessionNotFound)?;
    let (session, context) = app.engine().session_for_turn(&auth.project_id, &id).await?;
    let events = app.store.events().all(&session.id).await?;
    let turns = live_turns(&events, &session);
    let &(turn, event) = turns.last().ok_or(ClientError::NothingToRegenerate)?;
    let input = user_text(&context, turn, event)?;
    let supersede =
        Supersede { turn_ids: vec![turn.to_owned()], reason: SupersedeReason::Regenerate, event_id: None };
    rerun(&app, &auth, (session, context), input, supersede).await
}

/// Edit a user message.
///
/// The conversation continues from the edited message: a new turn runs with `input`, and the
/// message's turn and every later turn stay in the log, named by a `turn.superseded` event
/// (`reason: edit`, `event_id`) and marked `superseded: true` when the log is read; the model
/// sees the conversation up to the edited message, then the new input.
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/events/{event_id}/edit",
    tag = "client",
    operation_id = "client-session-message-edit",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("event_id" = u64, Path, description = "The `message.user` event to edit."),
    ),
    request_body = super::wire::EditMessage,
    responses(
        (status = 200, description = "The new turn ran; `status` says how it ended.", body = ResponseBody),
        (status = 400, description = "`input` is missing or invalid, or `event_id` is not a user message (`param` names it).", body = ErrorEnvelope),
        (status = 402, description = "The tenant's monthly spend limit is reached (`spend_limit_reached`).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`), or no such live message in it (`message_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "A turn is running (`session_busy`), waits for actions (`actions_pending`) or its budget (`budget_paused`), or the agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
    ),
)]
pub async fn edit(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((id, event_id)): Path<(String, String)>,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Response, ClientError> {
    no_fields(&body, &["input"])?;
    let id: SessionId = id.parse().map_err(|_| ClientError::SessionNotFound)?;
    let seq: u64 = event_id.parse().map_err(|_| ClientError::MessageNotFound)?;
    let (session, context) = app.engine().session_for_turn(&auth.project_id, &id).await?;
    let events = app.store.events().all(&session.id).await?;
    let event = events.iter().find(|e| e.seq == seq).ok_or(ClientError::MessageNotFound)?;
    if !matches!(event.payload(), EventPayload::UserMessage(_)) {
        return Err(agentplane_domain::ValidationError::new(
            "event_id",
            "`event_id` must name a `message.user` event",
        )
        .into());
    }
    let turns = live_turns(&events, &session);
    let at = turns.iter().position(|(_, e)| e.seq == seq).ok_or(ClientError::MessageNotFound)?;
    // Text only: file parts are not taken by an edit.
    let (input, files) =
        input_with_files(body.get("input"), &agentplane_domain::agent::Attachments::default())?;
    debug_assert!(files.is_empty());
    let supersede = Supersede {
        turn_ids: turns[at..].iter().map(|(t, _)| (*t).to_owned()).collect(),
        reason: SupersedeReason::Edit,
        event_id: Some(seq),
    };
    rerun(&app, &auth, (session, context), input, supersede).await
}
