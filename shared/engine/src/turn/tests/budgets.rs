//! Session budgets: a turn stopped or paused at its budget, carried on when it is raised.

use super::*;

#[tokio::test]
async fn a_budget_already_spent_with_stop_ends_the_turn_before_any_model_call() {
    let h = Harness::new(vec![text("never asked")]);
    let mut request = h.request(&[]);
    request.budget = budget(0.0, agentplane_domain::agent::BudgetAction::Stop);
    let outcome = h.engine.run_turn(request).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::BudgetReached);
    assert_eq!(outcome.budget.map(|b| (b.paused, b.max_cost_usd)), Some((false, 0.0)));
    assert!(h.requests().is_empty());
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "budget.reached", "turn.ended"]
    );
    assert_eq!(h.store.event(h.session, &EventType::TurnEnded).unwrap()["stop_reason"], "budget_reached");
    assert_eq!(h.session(|s| (s.holder.clone(), s.stop_reason)), (None, Some(StopReason::BudgetReached)));
}

#[tokio::test]
async fn a_budget_reached_mid_turn_pauses_it_and_raising_the_budget_carries_the_same_turn_on() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 2})), text("it is 3")]);
    let mut request = h.request(&["add"]);
    // The first call costs more than this: the second waits.
    request.budget = budget(0.000_001, agentplane_domain::agent::BudgetAction::Pause);
    let outcome = h.engine.run_turn(request).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::BudgetReached);
    let hit = outcome.budget.unwrap();
    assert!(hit.paused && hit.spent_usd > hit.max_cost_usd, "{hit:?}");
    assert_eq!(h.requests().len(), 1);
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "tool.call", "tool.result", "budget.reached"]
    );
    assert!(h.session(|s| s.budget_paused));
    // A new message waits for the budget, and says what was spent of what.
    let refused = h.engine.run_turn(h.request(&[])).await;
    assert!(matches!(refused, Err(TurnError::BudgetPaused { .. })), "{refused:?}");
    // Raised: the same turn carries on from the model call it did not make.
    h.store.state().budgets.insert(
        h.session,
        SessionBudget { max_cost_usd: 1.0, on_exceed: agentplane_domain::agent::BudgetAction::Pause },
    );
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(
        (carried.turn_id.clone(), carried.stop_reason),
        (outcome.turn_id.clone(), StopReason::EndTurn)
    );
    assert_eq!(carried.output_text.as_deref(), Some("it is 3"));
    assert_eq!(carried.usage, usage(30, 7));
    assert_eq!(h.requests().len(), 2);
    assert!(!h.session(|s| s.budget_paused));
}

#[tokio::test]
async fn a_budget_that_stays_reached_pauses_the_carried_on_turn_again_without_a_model_call() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 2})), text("never asked")]);
    let mut request = h.request(&["add"]);
    request.budget = budget(0.000_001, agentplane_domain::agent::BudgetAction::Pause);
    let outcome = h.engine.run_turn(request).await.unwrap();
    // Carried on without a raise (a duplicate, a race): it pauses again at once.
    let again = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(again.stop_reason, StopReason::BudgetReached);
    assert_eq!(h.requests().len(), 1);
    assert!(h.session(|s| s.budget_paused));
}

#[tokio::test]
async fn a_model_without_a_price_is_refused_where_a_budget_applies() {
    let h = Harness::new(vec![text("never asked")]);
    let mut request = h.request(&[]);
    request.config.model = "no-such-priced-model".into();
    request.budget = budget(5.0, agentplane_domain::agent::BudgetAction::Pause);
    let refused = h.engine.run_turn(request).await;
    assert!(
        matches!(&refused, Err(TurnError::ModelNotPriced { model }) if model == "no-such-priced-model"),
        "{refused:?}"
    );
    assert!(h.store.event_types(h.session).is_empty());
    // Without a budget it runs, its usage recorded as unpriced.
    let mut request = h.request(&[]);
    request.config.model = "no-such-priced-model".into();
    let outcome = h.engine.run_turn(request).await.unwrap();
    assert_eq!(outcome.unpriced, usage(10, 5));
}
