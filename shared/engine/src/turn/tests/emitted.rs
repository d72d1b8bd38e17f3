//! The webhook events a turn emits with its writes.

use super::*;

#[tokio::test]
async fn a_project_without_endpoints_emits_no_webhook_events() {
    let h = Harness::new(vec![text("hi")]);
    h.engine.run_turn(h.request(&[])).await.unwrap();
    assert!(h.store.state().emitted.is_empty());
    assert_eq!(h.store.state().dispatched, 0);
}

#[tokio::test]
async fn a_turn_emits_session_idled_with_its_end_and_action_required_with_its_pause() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 2, "b": 3})), text("it is 5")]);
    h.store.state().webhooks = true;
    let paused = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    assert_eq!(paused.stop_reason, StopReason::RequiresAction);
    {
        let state = h.store.state();
        // Only the pause's commit emitted (not the begin, not the call's own step).
        assert_eq!(state.emitted.len(), 1, "{:?}", state.emitted);
        let (kind, data) = &state.emitted[0];
        assert_eq!(kind, "action.required");
        assert_eq!(data["actions"][0]["id"], paused.actions[0].id.to_string());
        assert_eq!(data["turnId"], paused.turn_id);
        assert_eq!(data["sessionId"], h.session.to_string());
        assert_eq!(state.dispatched, 1);
    }
    h.store.settle(
        &paused.actions[0].id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Approve, reason: None }),
    );
    let carried = h.engine.continue_paused(&h.continuation(&paused.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    let state = h.store.state();
    let kinds: Vec<&str> = state.emitted.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["action.required", "session.idled"]);
    assert_eq!(state.emitted[1].1["stopReason"], "end_turn");
    assert_eq!(state.emitted[1].1["runtimeStatus"], "idle");
    assert_eq!(state.dispatched, 2);
}

#[tokio::test]
async fn cancelling_a_paused_turn_emits_session_idled_cancelled() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 2, "b": 3}))]);
    h.store.state().webhooks = true;
    let paused = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let cancelled = h.engine.cancel_paused(&h.project, &h.session, &paused.turn_id, 0).await.unwrap();
    assert!(cancelled.is_some());
    // A second cancel finds nothing paused and emits nothing.
    assert!(h.engine.cancel_paused(&h.project, &h.session, &paused.turn_id, 0).await.unwrap().is_none());
    let state = h.store.state();
    let kinds: Vec<&str> = state.emitted.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["action.required", "session.idled"]);
    assert_eq!(state.emitted[1].1["stopReason"], "cancelled");
}
