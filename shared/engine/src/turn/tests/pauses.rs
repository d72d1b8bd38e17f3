//! Turns that pause for people (approvals, questions, client tools) and carry on.

use super::*;

#[tokio::test]
async fn a_tool_that_needs_approval_pauses_the_turn_and_an_approval_carries_the_same_turn_on() {
    let h = Harness::new(vec![
        calls(vec![
            call("call_a", "add", &json!({"a": 2, "b": 3})),
            call("call_e", "echo", &json!({"x": 1})),
        ]),
        text("it is 5"),
    ]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add", "echo"], approvals(&["add"]))).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::RequiresAction);
    assert_eq!(outcome.actions.len(), 1);
    let action = outcome.actions[0].clone();
    assert_eq!((action.tool.as_str(), action.args.clone()), ("add", json!({"a": 2, "b": 3})));
    assert_eq!(action.status, ActionStatus::Pending);
    assert!(action.expires_at.is_some());
    // Paused: nothing ran, the session waits, the log says why.
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "tool.call", "tool.call", "action.required"]
    );
    assert_eq!(
        h.store.event(h.session, &EventType::ActionRequired).unwrap()["action_id"],
        action.id.to_string()
    );
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::RequiresAction));
    // A new message waits for the actions.
    let busy = h.engine.run_turn(h.request(&[])).await;
    assert!(
        matches!(&busy, Err(TurnError::ActionsPending(ids)) if ids == &vec![action.id.clone()]),
        "{busy:?}"
    );

    h.store.settle(
        &action.id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Approve, reason: None }),
    );
    let continuation = h.continuation(&outcome.turn_id);
    let carried = h.engine.continue_paused(&continuation, None).await.unwrap().unwrap();
    assert_eq!(carried.turn_id, outcome.turn_id);
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    assert_eq!(carried.output_text.as_deref(), Some("it is 5"));
    // The whole turn's spend, both model calls.
    assert_eq!(carried.usage, usage(30, 7));
    assert_eq!(h.session(|s| s.usage), usage(30, 7));
    // Both calls ran, in the model's order, and the model saw both results.
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert!(
        matches!(&second[3], ChatMessage::Tool { tool_call_id, content } if tool_call_id == "call_a" && content == r#"{"sum":5.0}"#)
    );
    assert!(matches!(&second[4], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "call_e"));
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "end_turn");
    assert_eq!(ended["usage"]["total_tokens"], 37);
    assert_eq!(h.session(|s| (s.holder.clone(), s.paused_at)), (None, None));
    // The same continuation again does nothing: no model call, no event.
    let events = h.store.event_types(h.session).len();
    assert!(h.engine.continue_paused(&continuation, None).await.unwrap().is_none());
    assert_eq!((h.requests().len(), h.store.event_types(h.session).len()), (2, events));
}

#[tokio::test]
async fn a_denied_tool_is_not_run_and_the_model_sees_the_denial() {
    let h =
        Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("ok, I won't")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let id = outcome.actions[0].id.clone();
    h.store.settle(
        &id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Deny, reason: Some("too risky".into()) }),
    );
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["output"], json!({"denied": true, "reason": "too risky"}));
    let requests = h.requests();
    assert!(matches!(&requests[1][3], ChatMessage::Tool { content, .. } if content.contains("too risky")));
}

#[tokio::test]
async fn questions_and_client_tools_pause_and_their_answers_reach_the_model_unchanged() {
    let h = Harness::new(vec![
        calls(vec![
            call("call_q", "ask_user", &json!({"question": "Which city?"})),
            call("call_c", "pick_color", &json!({"Palette": ["red"]})),
        ]),
        text("Paris, red"),
    ]);
    let hitl = HumanInTheLoop {
        questions_enabled: true,
        approval_timeout_minutes: 0,
        client_tools: vec![ClientTool {
            name: "pick_color".into(),
            description: "Lets the user pick a color.".into(),
            parameters: json!({"type": "object"}),
        }],
        ..HumanInTheLoop::default()
    };
    let outcome = h.engine.run_turn(h.hitl_request(&[], hitl)).await.unwrap();
    assert_eq!(outcome.actions.len(), 2);
    let question = outcome.actions.iter().find(|a| a.call_id == "call_q").unwrap().clone();
    let client = outcome.actions.iter().find(|a| a.call_id == "call_c").unwrap().clone();
    assert_eq!(question.question.as_deref(), Some("Which city?"));
    assert_eq!(question.expires_at, None, "0 = never expires");
    assert_eq!(client.args, json!({"Palette": ["red"]}));
    // One answered is not enough: the turn waits for both.
    let answers = json!({"City Name": "Paris", "camelCase": true});
    h.store.settle(&question.id, ActionStatus::Resolved, Some(Answer::Question { answers: answers.clone() }));
    h.store.settle(
        &client.id,
        ActionStatus::Resolved,
        Some(Answer::ClientTool { output: json!({"Chosen": "red"}) }),
    );
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.output_text.as_deref(), Some("Paris, red"));
    let second = &h.requests()[1];
    let tool_content = |id: &str| {
        second.iter().find_map(|m| match m {
            ChatMessage::Tool { tool_call_id, content } if tool_call_id == id => Some(content.clone()),
            _ => None,
        })
    };
    assert_eq!(
        tool_content("call_q").map(|c| serde_json::from_str::<Value>(&c).ok()),
        Some(Some(json!({"answers": answers})))
    );
    assert_eq!(tool_content("call_c").as_deref(), Some(r#"{"Chosen":"red"}"#));
}

#[tokio::test]
async fn an_expired_action_carries_the_turn_on_with_that_result() {
    let h = Harness::new(vec![
        calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]),
        text("nobody answered"),
    ]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    h.store.settle(&outcome.actions[0].id, ActionStatus::Expired, None);
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["output"]["expired"], true);
}

#[tokio::test]
async fn cancelling_a_paused_turn_ends_it_and_its_continuation_does_nothing() {
    let h =
        Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("never asked")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let continuation = h.continuation(&outcome.turn_id);
    let cancelled =
        h.engine.cancel_paused(&h.project, &h.session, &outcome.turn_id, 6).await.unwrap().unwrap();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].status, ActionStatus::Cancelled);
    assert_eq!(
        h.session(|s| (s.holder.clone(), s.paused_at, s.stop_reason)),
        (None, None, Some(StopReason::Cancelled))
    );
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "cancelled");
    assert_eq!(ended["usage"]["total_tokens"], 22);
    assert!(h.engine.continue_paused(&continuation, None).await.unwrap().is_none());
    assert_eq!(h.requests().len(), 1);
    // Nothing is paused any more: a second cancel has nothing to do, a new turn runs.
    assert!(h.engine.cancel_paused(&h.project, &h.session, &outcome.turn_id, 7).await.unwrap().is_none());
}

#[tokio::test]
async fn a_tool_not_given_to_the_agent_needs_no_approval_it_is_an_unknown_tool() {
    let h = Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("sorry")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["echo"], approvals(&["add"]))).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert!(outcome.actions.is_empty());
}

#[tokio::test]
async fn a_continuation_while_an_action_is_still_pending_does_nothing() {
    let h = Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("done")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let continuation = h.continuation(&outcome.turn_id);
    assert!(h.engine.continue_paused(&continuation, None).await.unwrap().is_none());
    assert_eq!(h.requests().len(), 1);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::RequiresAction));
    // Once answered, the same continuation carries it on.
    h.store.settle(
        &outcome.actions[0].id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Approve, reason: None }),
    );
    let carried = h.engine.continue_paused(&continuation, None).await.unwrap();
    assert_eq!(carried.map(|o| o.stop_reason), Some(StopReason::EndTurn));
}
