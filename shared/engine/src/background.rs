//! Background runs: the `run-execution` job's side of an `agent_run`. A run starts once a slot
//! of its tenant is free (the run moves `queued` → `running` and takes the slot in one
//! transaction), runs its turn with the run's own turn id, hands the turn over to a continuation
//! before its invocation ends (so a run may last longer than one Lambda invocation, up to its
//! ceiling), and records how the turn stopped (the status and the slot given back in one
//! transaction). A turn that waits for a person leaves the run `requires_action` without a slot;
//! its continuation takes one again before it carries on.
//!
//! Every step is a conditional write, so a duplicate message finds the run started, waiting or
//! ended and does nothing.

use std::time::Duration;

use agentplane_domain::ProjectId;
use agentplane_domain::action::Continuation;
use agentplane_domain::agent::VersionedConfig;
use agentplane_domain::agent_run::{
    AgentRun, CallbackRecord, DEFAULT_MAX_CONCURRENT_PER_TENANT, RunId, RunStatus, SLOT_LEASE_MS, StartRun,
    ending_of,
};
use agentplane_domain::tenant::TenantKey;
use agentplane_domain::webhook::{Message, MessageStatus, Owner, callback_signer_id};
use tokio::time::Instant;

use crate::admission::{Refused, TurnInput};
use crate::ports::background::{Announce, BackgroundRuns, RunOutcome, SlotRef, StartRefused};
use crate::ports::queues::{Queues, RunsMessage, WebhooksMessage};
use crate::ports::{ChatModel, OutboxEvent, PortError, TurnStore};
use crate::turn::TenantSpend;
use crate::{TurnEngine, TurnError, TurnOutcome, TurnRequest};

/// How background runs are run (from the environment, see [`BackgroundConfig::from_env`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackgroundConfig {
    /// Running runs per tenant (`AGENT_BACKGROUND_MAX_CONCURRENT_RUNS_PER_TENANT`, 10).
    pub max_concurrent_per_tenant: u32,
    /// The deployment's run ceiling (`AGENT_BACKGROUND_MAX_DURATION_MS`, 30 min by default; may
    /// be raised up to a day).
    pub max_duration_ms: u64,
    /// How long one invocation runs a turn before handing it over
    /// (`AGENTPLANE_RUN_INVOCATION_BUDGET_MS`, 13 min: under Lambda's 15 with room to write).
    pub invocation_budget: Duration,
    /// How long a run that found no free slot waits before it tries again
    /// (`AGENTPLANE_RUN_WAIT_S`, 2 s).
    pub wait_s: i32,
    /// How long runs are kept (`AGENT_RUN_RETENTION_DAYS`, 30).
    pub retention_days: i64,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        Self {
            max_concurrent_per_tenant: DEFAULT_MAX_CONCURRENT_PER_TENANT,
            max_duration_ms: agentplane_domain::agent::BACKGROUND_CEILING_MS,
            invocation_budget: Duration::from_secs(13 * 60),
            wait_s: 2,
            retention_days: agentplane_domain::agent_run::DEFAULT_RETENTION_DAYS,
        }
    }
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// A setting as [`agentplane_domain::ceilings`] resolved it, its warning logged.
fn logged(resolved: &agentplane_domain::ceilings::Resolved) -> u64 {
    if let Some(warning) = &resolved.warning {
        tracing::warn!(ms = resolved.ms, "{warning}");
    }
    resolved.ms
}

impl BackgroundConfig {
    /// The settings from the environment. The run ceiling may be raised or lowered (it spans
    /// invocations); one invocation's budget is fitted to this function's timeout
    /// (`AGENTPLANE_FUNCTION_TIMEOUT_S`, the template's) less a margin, so Lambda never ends an
    /// invocation before it handed its turn over.
    pub fn from_env() -> Self {
        use agentplane_domain::ceilings;
        let d = Self::default();
        let var = |name: &str| std::env::var(name).ok();
        let function_timeout_s = env_number::<u64>("AGENTPLANE_FUNCTION_TIMEOUT_S").filter(|s| *s > 0);
        let default_budget_ms = u64::try_from(d.invocation_budget.as_millis()).unwrap_or(u64::MAX);
        Self {
            max_concurrent_per_tenant: env_number("AGENT_BACKGROUND_MAX_CONCURRENT_RUNS_PER_TENANT")
                .filter(|n: &u32| (1..=1000).contains(n))
                .unwrap_or(d.max_concurrent_per_tenant),
            max_duration_ms: logged(&ceilings::background_ceiling(
                var("AGENT_BACKGROUND_MAX_DURATION_MS").as_deref(),
            )),
            invocation_budget: Duration::from_millis(logged(&ceilings::invocation_budget(
                var("AGENTPLANE_RUN_INVOCATION_BUDGET_MS").as_deref(),
                default_budget_ms,
                function_timeout_s,
            ))),
            wait_s: env_number("AGENTPLANE_RUN_WAIT_S")
                .filter(|n: &i32| (0..=900).contains(n))
                .unwrap_or(d.wait_s),
            retention_days: env_number("AGENT_RUN_RETENTION_DAYS")
                .filter(|n: &i64| *n >= 1)
                .unwrap_or(d.retention_days),
        }
    }
}

/// What a delivered message came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Executed {
    /// The run's turn ran to this status (or handed over and goes on).
    Ran(RunStatus),
    /// No slot of the tenant was free: the message is sent again after a pause.
    Waiting,
    /// Nothing to do (started already, canceled, ended, gone).
    Stale,
}

impl<S: TurnStore + BackgroundRuns, M: ChatModel> TurnEngine<S, M> {
    /// The tenant key of a project, and its monthly limit when it belongs to a tenant.
    async fn tenant_of(&self, project: &ProjectId) -> Result<(String, Option<TenantSpend>), PortError> {
        let tenant = self.store.project(project).await?.tenant_id;
        Ok((TenantKey::of(*project, tenant).key(), self.tenant_spend(tenant).await?))
    }

    /// Starts the run `message` names and runs its turn (until it ends, waits, or hands over at
    /// `invocation_end`). A storage failure is an `Err`: the message is retried.
    pub async fn execute_run(
        &self,
        message: &StartRun,
        config: &BackgroundConfig,
        invocation_end: Instant,
    ) -> Result<Executed, PortError> {
        let run = match self.store.agent_run(&message.project_id, &message.run_id).await {
            Ok(run) => run,
            Err(PortError::NotFound) => return Ok(Executed::Stale),
            Err(err) => return Err(err),
        };
        if run.status != RunStatus::Queued {
            return Ok(Executed::Stale);
        }
        let (tenant_key, tenant) = self.tenant_of(&run.project_id).await?;
        let now = crate::now();
        let slot = match self
            .store
            .start_run(
                &run,
                RunStatus::Queued,
                &tenant_key,
                config.max_concurrent_per_tenant,
                now,
                now.plus_millis(SLOT_LEASE_MS),
            )
            .await?
        {
            Ok(slot) => slot,
            Err(StartRefused::NoSlot) => return Ok(Executed::Waiting),
            Err(StartRefused::NotStartable) => return Ok(Executed::Stale),
        };
        let run = AgentRun { status: RunStatus::Running, started_at: run.started_at.or(Some(now)), ..run };
        let request = match self.request_for(&run, tenant).await {
            Ok(request) => request,
            Err(Failure::Storage(err)) => {
                self.requeue(&run, &slot).await;
                return Err(err);
            }
            Err(Failure::Run(code, message)) => {
                let outcome = RunOutcome {
                    status: RunStatus::Failed,
                    stop_reason: None,
                    output_text: None,
                    error: Some(agentplane_domain::agent_run::RunError { code, message }),
                    usage: Default::default(),
                    cost_usd: 0.0,
                    pending_action_ids: Vec::new(),
                    callback: None,
                };
                return self.settle(&run, Some(&slot), outcome).await;
            }
        };
        let request = TurnRequest { handover_at: Some(invocation_end), ..request };
        let result = Box::pin(self.with_lease(&run, &slot, Box::pin(self.run_turn(request)))).await;
        self.after_turn(&run, &slot, result).await
    }

    /// Carries a background run's turn on (after its actions were answered, its budget raised,
    /// or a handover): takes a slot again when the run waited, then the continuation. `None`:
    /// the continuation is not a background run's.
    pub async fn continue_run(
        &self,
        continuation: &Continuation,
        config: &BackgroundConfig,
        invocation_end: Instant,
    ) -> Result<Option<Executed>, PortError> {
        let Some(run_id) = RunId::of_turn(&continuation.turn_id) else { return Ok(None) };
        let run = match self.store.agent_run(&continuation.project_id, &run_id).await {
            Ok(run) if run.session_id == continuation.session_id => run,
            Ok(_) | Err(PortError::NotFound) => return Ok(None),
            Err(err) => return Err(err),
        };
        let (tenant_key, _) = self.tenant_of(&run.project_id).await?;
        let now = crate::now();
        let slot = match run.status {
            RunStatus::RequiresAction | RunStatus::Running => {
                match self
                    .store
                    .start_run(
                        &run,
                        run.status,
                        &tenant_key,
                        config.max_concurrent_per_tenant,
                        now,
                        now.plus_millis(SLOT_LEASE_MS),
                    )
                    .await?
                {
                    Ok(slot) => slot,
                    Err(StartRefused::NoSlot) => return Ok(Some(Executed::Waiting)),
                    Err(StartRefused::NotStartable) => return Ok(Some(Executed::Stale)),
                }
            }
            _ => return Ok(Some(Executed::Stale)),
        };
        let run = AgentRun { status: RunStatus::Running, ..run };
        let result = Box::pin(self.with_lease(
            &run,
            &slot,
            Box::pin(self.continue_paused(continuation, Some(invocation_end))),
        ))
        .await;
        match result {
            Ok(Some(outcome)) => self.after_turn(&run, &slot, Ok(outcome)).await.map(Some),
            // Not this delivery's to run: the run stays as it is (its holder, or its pause).
            Ok(None) => Ok(Some(Executed::Stale)),
            Err(err) => self.after_turn(&run, &slot, Err(err)).await.map(Some),
        }
    }

    /// The turn a run executes: its agent's live execution settings, the config of its channel,
    /// its session as it is now.
    async fn request_for(&self, run: &AgentRun, tenant: Option<TenantSpend>) -> Result<TurnRequest, Failure> {
        let gone = |refused: Refused| match refused {
            Refused::AgentNotFound => {
                Failure::Run("agent_not_found".into(), "the run's agent was deleted".into())
            }
            Refused::AgentNotPublished => {
                Failure::Run("agent_not_published".into(), "the agent has no published version".into())
            }
            Refused::SessionNotFound => {
                Failure::Run("session_not_found".into(), "the run's session was deleted".into())
            }
            Refused::SpendLimitReached { .. } => Failure::Run(
                "spend_limit_reached".into(),
                "the tenant's monthly spend limit is reached".into(),
            ),
            Refused::Storage(err) => Failure::Storage(err),
        };
        let found = self.turn_agent(&run.project_id, &run.agent_id).await.map_err(gone)?;
        let admitted = self.admit(found, run.channel, run.version).await.map_err(gone)?;
        let (session, context) =
            self.session_for_turn(&run.project_id, &run.session_id).await.map_err(gone)?;
        let left = run.remaining_ms(crate::now()).min(admitted.agent.execution.background_max_duration_ms);
        let images = self.images_of(run, &admitted.config).await?;
        let given = TurnInput {
            input: run.input.clone(),
            images,
            tenant,
            supersede: None,
            replay: None,
            turn_id: Some(run.id.turn_id()),
        };
        Ok(admitted.request(&session, context, given, Instant::now() + Duration::from_millis(left)))
    }

    /// URLs of the run's image files, presigned now: the run fails when one cannot be shown
    /// (deleted or expired since it was queued, or the running config shows no images).
    async fn images_of(&self, run: &AgentRun, config: &VersionedConfig) -> Result<Vec<String>, Failure> {
        if run.image_files.is_empty() {
            return Ok(Vec::new());
        }
        let unavailable = |why: String| Failure::Run("image_unavailable".into(), why);
        let source = self
            .images
            .as_deref()
            .filter(|images| config.attachments.enabled && images.reads_images(&config.model))
            .ok_or_else(|| {
                unavailable(format!(
                    "the run's images cannot be shown: its agent takes no attachments now, or `{}` reads no images",
                    config.model
                ))
            })?;
        let mut urls = Vec::with_capacity(run.image_files.len());
        for file in &run.image_files {
            let viewed = source
                .view(&run.project_id, &run.session_id, &file.to_string())
                .await
                .map_err(|why| unavailable(format!("an image of the run's input: {why}")))?;
            urls.push(viewed.url);
        }
        Ok(urls)
    }

    /// Runs `work` while renewing the run's slot lease, so a live run keeps its slot and a
    /// crashed one loses it when the lease runs out.
    /// The run's own lease moves with it: a run whose lease lapsed is settled by the retention
    /// sweep (`background_sweep`), and a late renewal then finds it ended.
    async fn with_lease<F: Future>(&self, run: &AgentRun, slot: &SlotRef, work: F) -> F::Output {
        let every = Duration::from_millis(u64::try_from(SLOT_LEASE_MS / 3).unwrap_or(40_000));
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                () = tokio::time::sleep(every) => {
                    let until = crate::now().plus_millis(SLOT_LEASE_MS);
                    if let Err(err) = self.store.renew_run(slot, run, until).await {
                        tracing::warn!(error = %err, run = %run.id, "could not renew a run's lease");
                    }
                }
            }
        }
    }

    /// What a turn's end makes of the run.
    async fn after_turn(
        &self,
        run: &AgentRun,
        slot: &SlotRef,
        result: Result<TurnOutcome, TurnError>,
    ) -> Result<Executed, PortError> {
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(TurnError::Busy | TurnError::ActionsPending(_) | TurnError::BudgetPaused { .. }) => {
                // Another turn holds the session: the run waits its turn, queued.
                self.requeue(run, slot).await;
                return Ok(Executed::Waiting);
            }
            Err(TurnError::Storage(err)) => {
                self.requeue(run, slot).await;
                return Err(err);
            }
            Err(err) => {
                let (code, message) = match err {
                    TurnError::ModelNotPriced { model } => (
                        "model_not_priced".to_owned(),
                        format!("the model `{model}` has no price, and a budget applies"),
                    ),
                    _ => ("session_not_found".to_owned(), "the run's session was deleted".to_owned()),
                };
                let outcome = RunOutcome {
                    status: RunStatus::Failed,
                    stop_reason: None,
                    output_text: None,
                    error: Some(agentplane_domain::agent_run::RunError { code, message }),
                    usage: Default::default(),
                    cost_usd: 0.0,
                    pending_action_ids: Vec::new(),
                    callback: None,
                };
                return self.settle(run, Some(slot), outcome).await;
            }
        };
        if let Some(version) = outcome.handed_over {
            // The run goes on in the next invocation; its slot stays held (the lease covers the
            // gap), and the continuation renews it.
            let continuation = Continuation {
                project_id: run.project_id,
                session_id: run.session_id,
                turn_id: run.id.turn_id(),
                version,
            };
            self.store.send_run(&RunsMessage::Continuation(continuation), 0).await?;
            return Ok(Executed::Ran(RunStatus::Running));
        }
        let ending =
            ending_of(outcome.stop_reason, outcome.budget.is_some_and(|b| b.paused), outcome.error.clone());
        let record = RunOutcome {
            status: ending.status,
            stop_reason: Some(outcome.stop_reason),
            output_text: outcome.output_text.clone(),
            error: ending.error,
            usage: outcome.usage,
            cost_usd: outcome.cost_usd,
            pending_action_ids: outcome.actions.iter().map(|a| a.id.to_string()).collect(),
            callback: None,
        };
        self.settle(run, Some(slot), record).await
    }

    /// Records the run's status and gives its slot back; a run another writer ended meanwhile
    /// keeps that ending.
    async fn settle(
        &self,
        run: &AgentRun,
        slot: Option<&SlotRef>,
        outcome: RunOutcome,
    ) -> Result<Executed, PortError> {
        let status = outcome.status;
        let ending = Ending::of(run, outcome);
        let now = crate::now();
        match self.store.settle_run(run, slot, &ending.outcome, ending.announce(), now).await {
            Ok(_) => {
                ending.send(&self.store).await;
                Ok(Executed::Ran(status))
            }
            Err(PortError::Conflict) => Ok(Executed::Stale),
            Err(err) => Err(err),
        }
    }

    /// Puts a run that could not go on back to `queued` (its slot given back), to be started
    /// again by the message's next delivery.
    async fn requeue(&self, run: &AgentRun, slot: &SlotRef) {
        let outcome = RunOutcome {
            status: RunStatus::Queued,
            stop_reason: None,
            output_text: None,
            error: None,
            usage: run.usage,
            cost_usd: run.cost_usd,
            pending_action_ids: Vec::new(),
            callback: None,
        };
        if let Err(err) =
            self.store.settle_run(run, Some(slot), &outcome, Announce::default(), crate::now()).await
        {
            tracing::warn!(error = %err, run = %run.id, "could not put a run back in the queue");
        }
    }
}

impl<S: Queues, M> TurnEngine<S, M> {
    /// Tells the webhooks queue that `event` was emitted; a failed send is the retry job's to
    /// repair (the event waits in the outbox).
    pub async fn dispatch(&self, event: Option<OutboxEvent>) {
        dispatch(&self.store, event).await;
    }

    /// Sends the message that starts `run` (after a pause of `delay_s`, for a run that waits).
    pub async fn enqueue_run(&self, run: &StartRun, delay_s: i32) -> Result<(), PortError> {
        self.store.send_run(&RunsMessage::StartRun(run.clone()), delay_s).await
    }
}

/// What ending a run writes besides the run (the outcome with its callback recorded, the
/// `agent_run.*` event, the callback's signed message), and sends once it is written.
pub(crate) struct Ending {
    pub outcome: RunOutcome,
    event: Option<OutboxEvent>,
    callback: Option<Message>,
}

impl Ending {
    /// `run` moving to `outcome`: a terminal status records the callback the run owes.
    pub(crate) fn of(run: &AgentRun, mut outcome: RunOutcome) -> Self {
        let status = outcome.status;
        if status.is_terminal()
            && let (Some(url), Some(event_type)) = (&run.callback_url, status.event_type())
        {
            outcome.callback = Some(CallbackRecord {
                url: url.clone(),
                event_type: event_type.to_owned(),
                recorded_at: crate::now(),
            });
        }
        let after = AgentRun {
            status,
            stop_reason: outcome.stop_reason,
            output_text: outcome.output_text.clone(),
            error: outcome.error.clone(),
            usage: outcome.usage,
            cost_usd: outcome.cost_usd,
            pending_action_ids: outcome.pending_action_ids.clone(),
            ..run.clone()
        };
        let event = run_event(&after);
        let callback =
            outcome.callback.as_ref().zip(event.as_ref()).map(|(c, e)| callback_message(run, c, e));
        Self { outcome, event, callback }
    }

    pub(crate) fn announce(&self) -> Announce<'_> {
        Announce { event: self.event.as_ref(), callback: self.callback.as_ref() }
    }

    /// Once written: the event to the webhooks queue, and the callback's first attempt.
    pub(crate) async fn send<S: Queues>(self, store: &S) {
        // A function not granted the webhooks queue (the retention sweep) leaves both to the
        // retry job: the event waits in the outbox, the callback's first attempt comes due.
        if !store.sends_webhooks() {
            return;
        }
        dispatch(store, self.event).await;
        if let Some(message) = &self.callback {
            send_callback(store, message).await;
        }
    }
}

/// Tells the webhooks queue that `event` was emitted; a failed send is the retry job's to
/// repair (the event waits in the outbox).
async fn dispatch<S: Queues>(store: &S, event: Option<OutboxEvent>) {
    if let Some(event) = event
        && let Err(err) = store
            .send_webhook(&WebhooksMessage::Event { project_id: event.project_id, event_id: event.id })
            .await
    {
        tracing::warn!(error = %err, "could not send a background run's webhook event");
    }
}

/// Sends the callback's first attempt on the webhooks queue; a failed send is made by the
/// retry job once the message is due.
async fn send_callback<S: Queues>(store: &S, message: &Message) {
    let first = WebhooksMessage::Attempt {
        owner: message.owner,
        endpoint_id: message.endpoint_id.clone(),
        event_id: message.id.clone(),
        created_at: message.created_at,
        attempt: 1,
    };
    if let Err(err) = store.send_webhook(&first).await {
        tracing::warn!(error = %err, "could not send a run's callback: the retry job makes it");
    }
}

/// The signed message of a run's callback: the `agent_run.*` event's very body and `evt_` id,
/// to the callback URL, signed by the project's callback signer; its first attempt is due for
/// the retry job after the queue's grace, in case the queue send is lost.
fn callback_message(run: &AgentRun, callback: &CallbackRecord, event: &OutboxEvent) -> Message {
    let grace = i64::try_from(crate::webhooks::DEFAULT_QUEUE_GRACE.as_millis()).unwrap_or(60_000);
    Message {
        id: event.id.clone(),
        owner: Owner::Project(run.project_id),
        endpoint_id: callback_signer_id(&run.project_id),
        event_type: event.event_type.clone(),
        payload: event.payload.clone(),
        url: Some(callback.url.clone()),
        status: MessageStatus::Pending,
        attempts: 0,
        next_attempt_at: Some(event.created_at.plus_millis(grace)),
        created_at: event.created_at,
    }
}

/// The `agent_run.*` event announcing that `run` reached its status (none for `running`).
pub fn run_event(run: &AgentRun) -> Option<OutboxEvent> {
    let kind = run.status.event_type()?;
    let data = agentplane_domain::webhook::events::agent_run(run);
    let id = agentplane_domain::webhook::MessageId::from_random(crate::random::unique::<12>());
    Some(OutboxEvent::new(id, run.project_id, kind, &data, crate::now()))
}

enum Failure {
    Run(String, String),
    Storage(PortError),
}
