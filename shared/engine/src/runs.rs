//! A client's background runs: a turn queued as one (stored `queued`, its start message sent;
//! the `run-execution` job starts it once a slot of the tenant is free), and a run cancelled
//! (at once while it waits, at its turn's next step while it runs). Each move is conditional on
//! the status read, so a run that moved meanwhile is read again.

use agentplane_domain::agent::{Agent, Channel};
use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus, StartRun};
use agentplane_domain::file::FileId;
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, Timestamp};

use crate::background::{BackgroundConfig, run_event};
use crate::ports::runs::RunRequests;
use crate::ports::webhooks::WebhookEndpoints;
use crate::ports::{ChatModel, PortError, TurnStore};
use crate::webhooks::endpoints::{EndpointError, Endpoints};
use crate::{TurnEngine, TurnError};

/// How many times a cancel reads a run that moved meanwhile again.
const ATTEMPTS: usize = 5;

/// Why a run was not queued or cancelled.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    /// The agent's `config.execution.background_enabled` is off.
    #[error("background runs are off for this agent")]
    BackgroundNotEnabled,
    /// The callback URL may not be reached, or no callback signer could be made.
    #[error(transparent)]
    Callback(EndpointError),
    /// The project has no such run.
    #[error("run not found")]
    RunNotFound,
    /// The run ended already (its status).
    #[error("the run has ended")]
    NotActive { run_status: RunStatus },
    /// Ending the paused turn of a waiting run failed.
    #[error(transparent)]
    Turn(TurnError),
    /// The run moved at every attempt.
    #[error("the run kept changing")]
    KeptChanging,
    /// A bug: `what` goes to the log only.
    #[error("internal error: {0}")]
    Internal(&'static str),
    #[error("no randomness for an id")]
    Randomness,
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for RunsError {
    fn from(err: PortError) -> Self {
        Self::Port(err)
    }
}

/// What a turn route hands over to run in the background.
pub struct Queued<'a> {
    pub agent: &'a Agent,
    pub channel: Channel,
    pub version: Option<u32>,
    pub session: &'a Session,
    pub input: String,
    /// The input's image files (URLs are presigned when the run starts).
    pub image_files: Vec<FileId>,
    pub callback_url: Option<String>,
}

/// A run as queued.
#[derive(Debug, Clone)]
pub struct QueuedRun {
    pub run: AgentRun,
    /// The project's callback signing secret, when queueing this run made the signer.
    pub callback_secret: Option<String>,
}

/// Queues `queued` as a background run of `project`, within the deployment's `config`. Its end
/// is a signed delivery to its callback (the request's, else the agent's default): the URL is
/// checked and the project's signer made before anything is stored. A run whose start message
/// could not be sent is recorded `failed` and the call fails (nothing runs unseen).
pub async fn queue<S, M>(
    engine: &TurnEngine<S, M>,
    endpoints: &Endpoints<'_, S>,
    config: &BackgroundConfig,
    project: ProjectId,
    queued: Queued<'_>,
) -> Result<QueuedRun, RunsError>
where
    S: TurnStore + RunRequests + WebhookEndpoints,
    M: ChatModel,
{
    let agent = queued.agent;
    if !agent.execution.background_enabled {
        return Err(RunsError::BackgroundNotEnabled);
    }
    let now = crate::now();
    let ceiling = config.max_duration_ms.min(agent.execution.background_max_duration_ms).max(1000);
    let run = AgentRun {
        id: RunId::from_random(crate::random::secret().map_err(|_| RunsError::Randomness)?),
        project_id: project,
        session_id: queued.session.id,
        agent_id: agent.id,
        channel: queued.channel,
        version: queued.version,
        status: RunStatus::Queued,
        input: queued.input,
        image_files: queued.image_files,
        max_duration_ms: ceiling,
        // The request's callback, else the agent's default (read live, at queue time).
        callback_url: queued.callback_url.or_else(|| agent.execution.default_callback_url.clone()),
        created_at: now,
        started_at: None,
        ended_at: None,
        stop_reason: None,
        output_text: None,
        error: None,
        usage: Default::default(),
        cost_usd: 0.0,
        cancel_requested: false,
        pending_action_ids: Vec::new(),
        callback: None,
        lease_until: None,
        expires_at: now.plus_seconds(config.retention_days * 86_400),
    };
    let callback_secret = match &run.callback_url {
        Some(url) => endpoints.prepare_callback(project, url).await.map_err(RunsError::Callback)?,
        None => None,
    };
    let event = run_event(&run).ok_or(RunsError::Internal("a queued run has an event type"))?;
    engine.store.create_agent_run(&run, &event).await?;
    engine.dispatch(Some(event)).await;
    let start = StartRun { project_id: project, run_id: run.id.clone() };
    if let Err(err) = engine.enqueue_run(&start, 0).await {
        tracing::error!(error = %err, run = %run.id, "could not queue a background run");
        let _ = engine
            .store
            .transition_agent_run(&project, &run.id, RunStatus::Queued, RunStatus::Failed, None, now)
            .await;
        return Err(RunsError::Port(err));
    }
    Ok(QueuedRun { run, callback_secret })
}

/// Cancels the run `id` of `project`; the run as it is now. A queued run is `canceled` at once,
/// and so is a waiting one (its paused turn ended first, its pending actions cancelled with
/// it); a running one records the cancel and stops at its next step, unless it ends on its own
/// first.
pub async fn cancel<S, M>(
    engine: &TurnEngine<S, M>,
    project: ProjectId,
    id: &RunId,
) -> Result<AgentRun, RunsError>
where
    S: TurnStore + RunRequests,
    M: ChatModel,
{
    let store = &engine.store;
    for _ in 0..ATTEMPTS {
        let run = match store.agent_run(&project, id).await {
            Ok(run) => run,
            Err(PortError::NotFound) => return Err(RunsError::RunNotFound),
            Err(err) => return Err(err.into()),
        };
        let now = crate::now();
        let moved = match run.status {
            status if status.is_terminal() => return Err(RunsError::NotActive { run_status: status }),
            RunStatus::Queued => cancel_waiting(engine, &run, RunStatus::Queued, now).await,
            RunStatus::Running => {
                let run = match store.request_run_cancel(&project, id).await {
                    Ok(run) => run,
                    Err(PortError::Conflict) => continue,
                    Err(err) => return Err(err.into()),
                };
                // The turn sees the cancel at its next step (no turn holds the session yet: the
                // executor's start checks `cancel_requested`).
                match store.cancel_turn(&project, &run.session_id, now).await {
                    Ok(_) | Err(PortError::Conflict) | Err(PortError::NotFound) => {}
                    Err(err) => return Err(err.into()),
                }
                return Ok(run);
            }
            RunStatus::RequiresAction => {
                if let Ok(session) = store.session(&project, &run.session_id).await {
                    engine
                        .cancel_paused(&project, &run.session_id, &run.id.turn_id(), session.last_event_seq)
                        .await
                        .map_err(RunsError::Turn)?;
                }
                cancel_waiting(engine, &run, RunStatus::RequiresAction, now).await
            }
            _ => continue,
        };
        match moved {
            Ok(run) => return Ok(run),
            Err(PortError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(RunsError::KeptChanging)
}

/// Cancels a run that is not running (`from`), with its `agent_run.canceled` event.
async fn cancel_waiting<S, M>(
    engine: &TurnEngine<S, M>,
    run: &AgentRun,
    from: RunStatus,
    now: Timestamp,
) -> Result<AgentRun, PortError>
where
    S: TurnStore + RunRequests,
    M: ChatModel,
{
    let event = run_event(&AgentRun { status: RunStatus::Canceled, ..run.clone() });
    let canceled = engine
        .store
        .transition_agent_run(&run.project_id, &run.id, from, RunStatus::Canceled, event.as_ref(), now)
        .await?;
    engine.dispatch(event).await;
    Ok(canceled)
}
