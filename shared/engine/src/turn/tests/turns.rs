//! Plain turns: answers, tools, a failing model, holds taken over, cancels; the model's view.

use super::*;

#[tokio::test]
async fn a_turn_that_answers_completes_records_its_steps_and_releases_the_session() {
    let h = Harness::new(vec![text("hi there")]);
    let outcome = h.engine.run_turn(h.request(&[])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.output_text.as_deref(), Some("hi there"));
    assert_eq!(outcome.usage, usage(10, 5));
    assert!(outcome.cost_usd > 0.0);
    assert_eq!(outcome.error, None);
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "message.assistant", "turn.ended"]
    );
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "end_turn");
    assert_eq!(ended["usage"]["total_tokens"], 15);
    // Released with its stop reason; its usage is on the session.
    assert_eq!(h.session(|s| s.holder.clone()), None);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::EndTurn));
    assert_eq!(h.session(|s| s.usage), usage(10, 5));
    // The model saw the instructions, then the user's message.
    let requests = h.requests();
    assert_eq!(requests.len(), 1);
    assert!(matches!(&requests[0][0], ChatMessage::System { content } if content == "Be brief."));
    assert!(matches!(&requests[0][1], ChatMessage::User { content } if content == "hello"));
}

#[tokio::test]
async fn a_tool_call_round_runs_the_tool_and_feeds_its_result_back_to_the_model() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 2, "b": 3})), text("it is 5")]);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.output_text.as_deref(), Some("it is 5"));
    assert_eq!(outcome.usage, usage(30, 7));
    assert_eq!(
        h.store.event_types(h.session),
        [
            "turn.started",
            "message.user",
            "usage",
            "tool.call",
            "tool.result",
            "usage",
            "message.assistant",
            "turn.ended"
        ]
    );
    let call = h.store.event(h.session, &EventType::ToolCall).unwrap();
    assert_eq!((call["name"].clone(), call["arguments"].clone()), (json!("add"), json!({"a": 2, "b": 3})));
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["output"], json!({"sum": 5.0}));
    assert_eq!(result["is_error"], false);
    // The second call carries the assistant's call and the tool's answer to it.
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert!(matches!(&second[2], ChatMessage::Assistant { tool_calls, .. } if tool_calls.len() == 1));
    assert!(matches!(
        &second[3],
        ChatMessage::Tool { tool_call_id, content } if tool_call_id == "call_1" && content == r#"{"sum":5.0}"#
    ));
    assert_eq!(h.session(|s| s.usage), usage(30, 7));
}

#[tokio::test]
async fn a_tool_the_agent_was_not_given_is_an_error_result_for_the_model_not_a_failed_turn() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 1})), text("sorry")]);
    let outcome = h.engine.run_turn(h.request(&["echo"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["output"], "unknown tool `add`");
}

#[tokio::test]
async fn a_failing_model_ends_the_turn_in_error_and_releases_the_session() {
    let h = Harness::new(vec![Box::new(|_| Err(ModelError::Provider(500)))]);
    let outcome = h.engine.run_turn(h.request(&[])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(outcome.output_text, None);
    let (code, message) = outcome.error.unwrap();
    assert_eq!(code, "model_provider_error");
    assert_eq!(message, "the model provider answered 500");
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user", "error", "turn.ended"]);
    let error = h.store.event(h.session, &EventType::Error).unwrap();
    assert_eq!(error["code"], "model_provider_error");
    assert_eq!(h.store.event(h.session, &EventType::TurnEnded).unwrap()["stop_reason"], "error");
    assert_eq!(h.session(|s| s.holder.clone()), None);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::Error));
    assert_eq!(h.session(|s| s.usage), Usage::default());
}

#[tokio::test]
async fn a_session_deleted_mid_turn_stops_the_turn_at_its_next_step() {
    let session = SessionId::from_random([7; 16]);
    let delete_then_call: Step = Box::new(move |store: &FakeStore| {
        store.with_session(session, |s| s.deleted = true);
        tool_call("add", &json!({"a": 1, "b": 2}))(store)
    });
    let h = Harness::new(vec![delete_then_call, text("never asked")]);
    assert_eq!(h.session, session);
    let result = h.engine.run_turn(h.request(&["add"])).await;
    assert!(matches!(result, Err(TurnError::SessionNotFound)), "{result:?}");
    // Nothing after the deletion: no usage, no tool call, no end; the model is not asked again.
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user"]);
    assert_eq!(h.requests().len(), 1);
    assert_eq!(h.session(|s| s.usage), Usage::default());
    assert_eq!(h.session(|s| s.stop_reason), None);
}

#[tokio::test]
async fn a_turn_that_lost_its_hold_stops_and_leaves_the_session_to_the_new_holder() {
    let session = SessionId::from_random([7; 16]);
    let taken_over: Step = Box::new(move |store: &FakeStore| {
        store.with_session(session, |s| s.holder = Some("turn_newer".into()));
        tool_call("add", &json!({"a": 1, "b": 2}))(store)
    });
    let h = Harness::new(vec![taken_over, text("never asked")]);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(outcome.error.map(|(code, _)| code).as_deref(), Some("turn_lease_lost"));
    // The call it made is paid for; nothing else is written, and the new holder keeps the session.
    assert_eq!(outcome.usage, usage(20, 2));
    assert_eq!(h.session(|s| s.usage), usage(20, 2));
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user"]);
    assert_eq!(h.requests().len(), 1);
    assert_eq!(h.session(|s| s.holder.clone()).as_deref(), Some("turn_newer"));
    assert_eq!(h.session(|s| s.stop_reason), None);
}

#[tokio::test]
async fn a_session_held_by_a_live_turn_is_busy() {
    let h = Harness::new(vec![text("unused")]);
    h.store.with_session(h.session, |s| {
        s.holder = Some("turn_other".into());
        s.hold_until = Some(Timestamp::from_unix_millis(i64::MAX / 2));
    });
    let result = h.engine.run_turn(h.request(&[])).await;
    assert!(matches!(result, Err(TurnError::Busy)), "{result:?}");
    assert!(h.store.event_types(h.session).is_empty());
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn the_next_turn_reads_the_transcript_not_the_event_log() {
    let h = Harness::new(vec![tool_call("echo", &json!({"text": "hi"})), text("first"), text("second")]);
    let outcome = h.engine.run_turn(h.request(&["echo"])).await;
    assert!(outcome.is_ok());
    // The log is what clients read: emptying it takes nothing from the model's view.
    h.store.state().events.clear();
    let outcome = h.engine.run_turn(h.request(&[])).await;
    assert!(outcome.is_ok());
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let third = &requests[2];
    // instructions, hello, the call, its result, "first", hello again.
    assert_eq!(third.len(), 6, "{third:?}");
    assert!(matches!(&third[2], ChatMessage::Assistant { tool_calls, .. } if tool_calls.len() == 1));
    assert!(matches!(&third[3], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "call_1"));
    assert!(matches!(&third[4], ChatMessage::Assistant { content: Some(c), .. } if c == "first"));
    // Saved at the end of each step: the tool step, then each answer.
    let version = h.store.state().transcripts.get(&h.session).map(|t| t.1);
    assert_eq!(version, Some(3));
}

#[tokio::test]
async fn a_transcript_saved_by_another_writer_mid_turn_stops_this_turn() {
    // Another writer saves while the model thinks (the hold was taken over).
    let step: Step = Box::new(|store: &FakeStore| {
        let session = SessionId::from_random([7; 16]);
        store.state().transcripts.insert(session, ("{\"messages\": []}".into(), 9, None));
        Ok(ModelReply { text: Some("late".into()), tool_calls: Vec::new(), usage: usage(1, 1) })
    });
    let h = Harness::new(vec![step]);
    let outcome = h.engine.run_turn(h.request(&[])).await.map(|o| o.error.map(|e| e.0));
    assert_eq!(outcome.ok().flatten().as_deref(), Some("turn_lease_lost"));
    let version = h.store.state().transcripts.get(&h.session).map(|t| t.1);
    assert_eq!(version, Some(9), "the other writer's transcript stays");
}

#[tokio::test]
async fn a_cancel_between_steps_stops_the_turn_with_no_further_model_call() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 2})), text("never asked")]);
    // The cancel lands after the tool's result, before the next step asks the model again.
    h.store.state().cancel_after = Some(EventType::ToolResult);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(outcome.output_text, None);
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.usage, usage(20, 2));
    assert_eq!(h.requests().len(), 1);
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "tool.call", "tool.result", "turn.ended"]
    );
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "cancelled");
    // Released, cancelled, and the cancel does not outlive the turn.
    assert_eq!(h.session(|s| s.holder.clone()), None);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::Cancelled));
    assert_eq!(h.session(|s| s.cancelled_turn.clone()), None);
    assert_eq!(h.session(|s| s.usage), usage(20, 2));
}

#[tokio::test]
async fn a_cancel_during_a_model_call_records_its_spend_but_not_its_reply() {
    let session = SessionId::from_random([7; 16]);
    let cancel_then_answer: Step = Box::new(move |store: &FakeStore| {
        store.with_session(session, FakeSession::cancel);
        tool_call("add", &json!({"a": 1, "b": 2}))(store)
    });
    let h = Harness::new(vec![cancel_then_answer, text("never asked")]);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(h.requests().len(), 1);
    // The call is paid for; its tool call is neither recorded nor run.
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user", "usage", "turn.ended"]);
    assert_eq!(h.session(|s| s.usage), usage(20, 2));
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::Cancelled));
    assert_eq!(h.session(|s| s.holder.clone()), None);
}

#[tokio::test]
async fn a_cancel_after_the_answer_leaves_one_final_state_the_answer() {
    let h = Harness::new(vec![text("done")]);
    h.store.state().cancel_after = Some(EventType::AssistantMessage);
    let outcome = h.engine.run_turn(h.request(&[])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.output_text.as_deref(), Some("done"));
    assert_eq!(h.store.event(h.session, &EventType::TurnEnded).unwrap()["stop_reason"], "end_turn");
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::EndTurn));
    assert_eq!(h.session(|s| (s.holder.clone(), s.cancelled_turn.clone())), (None, None));
}

#[test]
fn images_travel_as_url_parts_and_become_notes_in_later_requests() {
    use crate::model::{ContentPart, ImageUrl, UserContent, without_images};
    let content = UserContent::with_images("look".into(), &["https://s3/x?sig".into()]);
    let wire = serde_json::to_value(ChatMessage::User { content: content.clone() }).unwrap_or_default();
    assert_eq!(
        wire,
        serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://s3/x?sig"}},
        ]})
    );
    assert_eq!(UserContent::with_images("plain".into(), &[]), UserContent::Text("plain".into()));
    let later = without_images(vec![ChatMessage::User { content }]);
    let ChatMessage::User { content: UserContent::Parts(parts) } = &later[0] else {
        panic!("{later:?}");
    };
    assert!(!parts.iter().any(|p| matches!(p, ContentPart::ImageUrl { image_url: ImageUrl { .. } })));
    assert_eq!(parts.len(), 2);
    // A stored text message reads back as before.
    let old: ChatMessage = serde_json::from_str(r#"{"role":"user","content":"hi"}"#)
        .unwrap_or(ChatMessage::System { content: String::new() });
    assert!(matches!(&old, ChatMessage::User { content } if content == "hi"));
}
