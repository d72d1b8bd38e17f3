//! A client's sessions outside their turns: one is created (for an agent of its project, with
//! an environment when it runs in one, and managed compute placed at once for an openai_hosted
//! one), changed (a budget change may carry a turn its budget paused on), deleted (its compute
//! released and its pending actions cancelled first), and its turn cancelled (a running one at
//! its next step, a paused one at once). Each write that finds a turn whose holder died records
//! what reads already show: that turn ended in error.

use agentplane_domain::allocation::Allocation;
use agentplane_domain::ids::AgentId;
use agentplane_domain::session::{EnvironmentMode, NewSession, RuntimeStatus, Session, SessionPatch};
use agentplane_domain::telemetry::{AllocationId, AllocationRecord, AllocationState, EnvironmentId};
use agentplane_domain::tenant::TenantKey;
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use crate::ports::background::TenantPause;
use crate::ports::client_sessions::SessionStore;
use crate::ports::{ChatModel, Compute, PortError, TurnStore};
use crate::runtime::LOCAL_PROVIDER;
use crate::{TurnEngine, TurnError, compute};

/// Why a session was not created, changed, deleted or cancelled.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The project has no such live session.
    #[error("session not found")]
    NotFound,
    /// The agent the new session names is not one of its project's.
    #[error("agent not found")]
    AgentNotFound,
    /// No turn is running in the session (`runtime_status`: what it is instead).
    #[error("no turn is running in the session")]
    NothingToCancel { runtime_status: RuntimeStatus },
    /// Ending a paused turn failed.
    #[error(transparent)]
    Turn(TurnError),
    #[error("no randomness for an id")]
    Randomness,
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for SessionsError {
    fn from(err: PortError) -> Self {
        Self::Port(err)
    }
}

impl From<getrandom::Error> for SessionsError {
    fn from(_: getrandom::Error) -> Self {
        Self::Randomness
    }
}

/// A read or write where a missing session is the caller's `NotFound`.
fn or_not_found<T>(result: Result<T, PortError>) -> Result<T, SessionsError> {
    result.map_err(|err| match err {
        PortError::NotFound => SessionsError::NotFound,
        other => SessionsError::Port(other),
    })
}

/// Creates the session `new` describes in `project`: its agent must be one of the project's
/// (another project's is as missing); a session in an environment mode gets its environment,
/// an openai_hosted one its managed allocation, placed on `compute` at once (`pending` while
/// no node can take it).
pub async fn create<S: SessionStore, C: Compute>(
    store: &S,
    compute: &C,
    project: ProjectId,
    new: NewSession,
) -> Result<Session, SessionsError> {
    if let Some(agent_id) = &new.agent_id {
        agent_of(store, &project, agent_id).await?;
    }
    let id = SessionId::from_random(crate::random::secret()?);
    let mut session = new.into_session(id, project, crate::now());
    if session.environment_mode != EnvironmentMode::None {
        session.environment_id = Some(EnvironmentId::from_random(crate::random::secret()?));
    }
    store.create_session(&session).await?;
    allocate(store, compute, &session).await?;
    Ok(session)
}

async fn agent_of<S: SessionStore>(
    store: &S,
    project: &ProjectId,
    id: &AgentId,
) -> Result<(), SessionsError> {
    match store.agent(project, id).await {
        Ok(_) => Ok(()),
        Err(PortError::NotFound) => Err(SessionsError::AgentNotFound),
        Err(err) => Err(SessionsError::Port(err)),
    }
}

/// Creates the allocation of a stored openai_hosted session and places its compute.
async fn allocate<S: SessionStore, C: Compute>(
    store: &S,
    compute: &C,
    session: &Session,
) -> Result<(), SessionsError> {
    let (EnvironmentMode::OpenaiHosted, Some(environment_id)) =
        (session.environment_mode, session.environment_id)
    else {
        return Ok(());
    };
    let allocation = Allocation {
        project_id: session.project_id,
        session_id: session.id,
        environment_id,
        record: AllocationRecord {
            allocation_id: AllocationId::from_random(crate::random::secret()?),
            device_id: None,
            provider_type: LOCAL_PROVIDER.to_owned(),
            state: AllocationState::Pending,
            created_at: session.created_at,
        },
        sandbox_id: None,
        updated_at: session.created_at,
    };
    store.create_allocation(&allocation).await?;
    compute::place(store, compute, &allocation, crate::now()).await;
    Ok(())
}

/// Lays `patch` over the session; the session as changed, as it is now (settled). A budget
/// change is noted for the sweep before it is written; when the session is paused by its
/// budget and the new one allows a model call, its turn is carried on (a continuation that
/// cannot be sent is only logged: the sweep finds the note and sends it).
pub async fn update<S: SessionStore>(
    store: &S,
    project: ProjectId,
    id: SessionId,
    patch: SessionPatch,
) -> Result<Session, SessionsError> {
    let budget_changed = patch.budget.is_some();
    let now = crate::now();
    if budget_changed {
        // The outbox of a budget raise, written before it: should the continuation below not be
        // sent, the retention sweep finds the note and carries a paused turn on (the note of a
        // session that did not pause, or is running, is dropped or kept harmlessly).
        let note = TenantPause {
            tenant_key: TenantKey::Project(project).key(),
            project_id: project,
            session_id: id,
        };
        store.note_pause(&note).await?;
    }
    let session = or_not_found(store.update_session(&project, &id, patch, now).await)?;
    record_dead_turn(store, &project, &session, now).await?;
    if budget_changed && session.runtime_status == RuntimeStatus::BudgetPaused {
        // The agent's budget applies when the session's own was removed.
        let agent_budget = crate::tenant_resume::agent_budget_of(store, &session).await?;
        if let Err(err) = crate::continuation::carry_on_after_budget(store, &session, agent_budget).await {
            tracing::warn!(error = %err, session = %id, "a budget raise's continuation was not sent; the sweep sends it");
        }
    }
    Ok(session.settled(now))
}

/// Deletes the session: its managed allocation released and its sandbox ended first (a failure
/// there leaves a live session to retry on, never an orphaned running allocation), then its
/// pending actions cancelled (a retried delete cancels the rest, and none is left for the sweep
/// to expire and carry on), then the session itself.
pub async fn delete<S: SessionStore, C: Compute>(
    store: &S,
    compute: &C,
    project: ProjectId,
    id: SessionId,
) -> Result<(), SessionsError> {
    match store.release_allocation(&project, &id, crate::now()).await {
        Ok(released) => compute::end(store, compute, &released).await,
        Err(PortError::NotFound) => {}
        Err(err) => return Err(SessionsError::Port(err)),
    }
    let now = crate::now();
    store.cancel_all_pending(&project, &id, now).await?;
    or_not_found(store.delete_session(&project, &id, now).await)
}

/// Cancels the turn of the session: a running one is asked to stop at its next step (the
/// session answered as it is now, settled); a paused one (for actions or by its budget) ends
/// at once (the session read again). `NothingToCancel` when no turn runs, after recording a
/// dead holder's turn as ended.
pub async fn cancel<S, M>(
    engine: &TurnEngine<S, M>,
    project: ProjectId,
    id: SessionId,
) -> Result<Session, SessionsError>
where
    S: TurnStore + SessionStore,
    M: ChatModel,
{
    let store = &engine.store;
    let now = crate::now();
    match store.cancel_turn(&project, &id, now).await {
        Ok(session) => Ok(session.settled(now)),
        Err(PortError::Conflict) => {
            // No live turn to cancel, or no session at all: the session tells which.
            let session = or_not_found(store.session(&project, &id).await)?;
            let paused =
                matches!(session.runtime_status, RuntimeStatus::RequiresAction | RuntimeStatus::BudgetPaused);
            if paused
                && let Some(turn_id) = &session.current_turn_id
                && engine
                    .cancel_paused(&project, &id, turn_id, session.last_event_seq)
                    .await
                    .map_err(SessionsError::Turn)?
                    .is_some()
            {
                return or_not_found(store.session(&project, &id).await);
            }
            record_dead_turn(store, &project, &session, now).await?;
            Err(SessionsError::NothingToCancel { runtime_status: session.settled(now).runtime_status })
        }
        Err(PortError::NotFound) => Err(SessionsError::NotFound),
        Err(err) => Err(SessionsError::Port(err)),
    }
}

/// A write records what reads already show: a turn whose holder died past its hold ended in
/// error.
async fn record_dead_turn<S: SessionStore>(
    store: &S,
    project: &ProjectId,
    session: &Session,
    now: Timestamp,
) -> Result<(), PortError> {
    if session.holder_died(now) {
        store.settle_dead_turn(project, &session.id, now).await?;
    }
    Ok(())
}
