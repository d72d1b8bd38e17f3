//! Running what a message comes to, and the task calls (`tasks/get`, `tasks/cancel`).

use std::time::Duration;

use agentplane_domain::ValidationError;
use agentplane_domain::a2a::{TaskId, TaskState};
use agentplane_engine::actions;
use agentplane_engine::continuation::Continued;
use agentplane_engine::sessions::{self, SessionsError};
use agentplane_engine::titles::FirstTurn;
use serde_json::{Map, Value, json};

use super::ctx::Ctx;
use super::message::{Prepared, history_length, task_param};
use super::rpc::{self, RpcError};
use super::task::{self, Task};
use crate::client::error::ClientError;

/// Runs what the message comes to and answers the task as it is then.
pub(super) async fn execute(ctx: &Ctx, prepared: Prepared) -> Result<Task, RpcError> {
    match prepared {
        Prepared::Turn { id, request, session, after } => {
            let engine = ctx.app.engine();
            // Its own task: the turn ends (and releases the session) even if the caller goes.
            let input = request.input.clone();
            let outcome = engine
                .run_held(*request)
                .await
                .ok_or_else(|| ClientError::internal("the turn task failed"))?
                .map_err(|err| ClientError::turn(err, session.id.to_string()))?;
            let answer = outcome.output_text.as_deref();
            let turn =
                FirstTurn { model: ctx.app.title_model.as_deref(), first: after == 0, input: &input, answer };
            engine.title_after(&session, turn).await;
            let session = ctx.app.store.sessions().get(&ctx.auth.project_id, &session.id).await?;
            let events = task::turn_events(&ctx.app, &id, after).await?;
            task::render(&ctx.app, &session, &id, &events, None).await
        }
        Prepared::Answer { id, answers } => {
            let continued = actions::answer_turn(
                ctx.app.engine(),
                ctx.auth.project_id,
                &ctx.auth.key_id,
                id.session,
                &id.turn_id,
                answers,
            )
            .await?;
            if matches!(continued, Some(Continued::Stale)) {
                return until_settled(ctx, &id).await;
            }
            task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, None).await
        }
    }
}

/// Another delivery carries the turn on: the task once it stops working (or at the call's
/// ceiling, as it is then).
pub(super) async fn until_settled(ctx: &Ctx, id: &TaskId) -> Result<Task, RpcError> {
    let deadline = tokio::time::Instant::now()
        + ctx.app.sync_ceiling.min(Duration::from_millis(ctx.admitted.agent.execution.sync_timeout_ms));
    loop {
        let task = task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, id, None).await?;
        if task.state != TaskState::Working || tokio::time::Instant::now() >= deadline {
            return Ok(task);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(super) async fn get(ctx: &Ctx, params: &Map<String, Value>) -> Result<Task, RpcError> {
    let id = task_param(params, "id")?
        .ok_or_else(|| RpcError::from(ValidationError::new("id", "`id` is required")))?;
    let history = history_length(params, "historyLength")?;
    task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, history).await
}

/// Cancels a task that has not ended: a waiting one ends at once, a working one at its next
/// step (the task answered is then still `working`).
pub(super) async fn cancel(ctx: &Ctx, params: &Map<String, Value>) -> Result<Task, RpcError> {
    let id = task_param(params, "id")?
        .ok_or_else(|| RpcError::from(ValidationError::new("id", "`id` is required")))?;
    let found = task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, Some(0)).await?;
    let not_cancelable = |state: TaskState| {
        let mut error = RpcError::new(rpc::TASK_NOT_CANCELABLE, format!("the task is {}", state.as_str()));
        error.data = Some(json!({"state": state.as_str()}));
        error
    };
    if found.state.is_terminal() || found.state == TaskState::Unknown {
        return Err(not_cancelable(found.state));
    }
    match sessions::cancel(ctx.app.engine(), ctx.auth.project_id, id.session).await {
        Ok(_) => {}
        // It ended meanwhile.
        Err(SessionsError::NothingToCancel { .. }) => {
            let now =
                task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, Some(0)).await?;
            return Err(not_cancelable(now.state));
        }
        Err(err) => return Err(ClientError::from(err).into()),
    }
    task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, None).await
}
