//! Adapters from Agentplane's domain to DynamoDB, plus the one definition of every table, bucket
//! and queue (provisioning and infra/ are checked against it). `Store` holds the DynamoDB client,
//! an S3 client only when asked (`with_objects`: the functions that run turns, for large
//! transcripts, objects.rs), and an SQS client of the `runs` queue only when asked
//! (`with_runs_queue`: the functions that send or run continuations, queue.rs). Provisioning
//! (provision.rs), which no Lambda function calls, builds its own clients.

pub mod aws;
pub mod dynamo;
pub mod error;
pub mod metrics;
pub mod objects;
pub mod ports;
pub mod provision;
pub mod queue;
pub mod resources;

pub use dynamo::actions::Actions;
pub use dynamo::agents::Agents;
pub use dynamo::allocations::{Allocation, Allocations};
pub use dynamo::api_keys::ApiKeys;
pub use dynamo::environments::Environments;
pub use dynamo::events::EventLog;
pub use dynamo::nodes::Nodes;
pub use dynamo::observations::Observations;
pub use dynamo::projects::Projects;
pub use dynamo::runs::Runs;
pub use dynamo::sandboxes::Sandboxes;
pub use dynamo::sessions::{Sessions, TurnHolder};
pub use dynamo::telemetry::Telemetry;
pub use dynamo::transcripts::{StoredTranscript, Transcripts};
pub use dynamo::webhook_events::OutboxEvent;
pub use dynamo::webhooks::{MessageWithAttempts, Webhooks};
pub use dynamo::workspace_sweep::WorkspaceSweep;
pub use error::StoreError;
pub use objects::{Listed, Objects, Reach};
pub use queue::{ReceivedMessage, RunsMessage, RunsQueue, WebhooksMessage, WebhooksQueue};
pub use resources::ResourceNames;

/// The clients and names every adapter shares; cheap to clone. DynamoDB; S3 only for the
/// functions that run turns and SQS only for those that use the `runs` queue: a Lambda function
/// builds no client it never uses.
#[derive(Clone, Debug)]
pub struct Store {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub names: ResourceNames,
    /// The files bucket, for transcripts past the item limit; `None` in functions that run no
    /// turn.
    pub objects: Option<Objects>,
    /// The `runs` queue, for the functions that continue turns; `None` elsewhere.
    pub runs: Option<RunsQueue>,
    /// The `webhooks` queue, for the functions that emit webhook events or deliver them.
    pub webhooks_queue: Option<WebhooksQueue>,
    /// The workspaces bucket (checkpoint blobs and manifests), for the functions that take or
    /// restore checkpoints.
    pub workspaces: Option<Objects>,
    /// The `rollbacks` queue, for the rollback route and the `rollback-restore` job.
    pub rollbacks: Option<RunsQueue>,
}

impl Store {
    pub fn new(sdk: &aws_config::SdkConfig, names: ResourceNames) -> Self {
        Self {
            dynamo: aws_sdk_dynamodb::Client::new(sdk),
            names,
            objects: None,
            runs: None,
            webhooks_queue: None,
            workspaces: None,
            rollbacks: None,
        }
    }

    /// The same store with the SQS client of the `rollbacks` queue; its URL from
    /// `AGENTPLANE_ROLLBACKS_QUEUE_URL` when set.
    pub fn with_rollbacks_queue(mut self, sdk: &aws_config::SdkConfig) -> Self {
        let url = std::env::var("AGENTPLANE_ROLLBACKS_QUEUE_URL").ok().filter(|u| !u.is_empty());
        self.rollbacks = Some(RunsQueue::new(sdk, self.names.rollbacks_queue.clone(), url));
        self
    }

    /// The `rollbacks` queue; `Unavailable` in a function not given it.
    pub fn rollbacks_queue(&self) -> Result<&RunsQueue, StoreError> {
        self.rollbacks
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to the rollbacks queue"))
    }

    /// The same store with the S3 client of the workspaces bucket.
    pub fn with_workspaces(mut self, sdk: &aws_config::SdkConfig) -> Self {
        self.workspaces = Some(Objects::new(sdk, self.names.workspaces_bucket.clone()));
        self
    }

    /// The S3 client of the workspaces bucket; `Unavailable` in a function not granted it.
    pub fn workspaces(&self) -> Result<&Objects, StoreError> {
        self.workspaces
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to the workspaces bucket"))
    }

    /// The same store with the S3 client of the files bucket (the functions that run turns).
    pub fn with_objects(mut self, sdk: &aws_config::SdkConfig) -> Self {
        self.objects = Some(Objects::new(sdk, self.names.files_bucket.clone()));
        self
    }

    /// The same store with the SQS client of the `runs` queue (the functions that send or run
    /// continuations). Its URL comes from `AGENTPLANE_RUNS_QUEUE_URL` when set (the deployed
    /// stack: its functions may not look queues up), else it is looked up by name once.
    pub fn with_runs_queue(mut self, sdk: &aws_config::SdkConfig) -> Self {
        let url = std::env::var("AGENTPLANE_RUNS_QUEUE_URL").ok().filter(|u| !u.is_empty());
        self.runs = Some(RunsQueue::new(sdk, self.names.runs_queue.clone(), url));
        self
    }

    /// The same store with the SQS client of the `webhooks` queue (the functions that emit or
    /// deliver webhook events); its URL from `AGENTPLANE_WEBHOOKS_QUEUE_URL` when set.
    pub fn with_webhooks_queue(mut self, sdk: &aws_config::SdkConfig) -> Self {
        let url = std::env::var("AGENTPLANE_WEBHOOKS_QUEUE_URL").ok().filter(|u| !u.is_empty());
        self.webhooks_queue = Some(WebhooksQueue::new(sdk, self.names.webhooks_queue.clone(), url));
        self
    }

    /// The `webhooks` queue; `Unavailable` in a function that was not given it.
    pub fn webhooks_queue(&self) -> Result<&WebhooksQueue, StoreError> {
        self.webhooks_queue
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to the webhooks queue"))
    }

    /// The same store with every DynamoDB and S3 request it sends recorded in `counter` (the
    /// bench and the round-trip tests; no function attaches one). The `runs` queue is not
    /// counted: its consumer long-polls in the background.
    pub fn with_op_counter(mut self, counter: &metrics::OpCounter) -> Self {
        let config = self.dynamo.config().to_builder().interceptor(counter.interceptor()).build();
        self.dynamo = aws_sdk_dynamodb::Client::from_conf(config);
        if let Some(objects) = self.objects.as_mut() {
            objects.count_ops(counter);
        }
        if let Some(objects) = self.workspaces.as_mut() {
            objects.count_ops(counter);
        }
        self
    }

    /// The `runs` queue; `Unavailable` in a function that was not given it.
    pub fn runs_queue(&self) -> Result<&RunsQueue, StoreError> {
        self.runs
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to the runs queue"))
    }

    /// The S3 client of transcript bodies; `Unavailable` in a function that runs no turn.
    pub(crate) fn transcripts_objects(&self) -> Result<&Objects, StoreError> {
        self.objects
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to transcript objects"))
    }

    /// The S3 client of the files bucket (session files); `Unavailable` in a function that was
    /// not granted the bucket.
    pub fn objects(&self) -> Result<&Objects, StoreError> {
        self.objects
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to the files bucket"))
    }

    /// The S3 client of the bucket a session file is kept in: `bucket` (a Document Store bucket
    /// the project registered), or the deployment's files bucket. `Unavailable` in a function not
    /// granted S3.
    pub fn file_objects(
        &self,
        bucket: Option<&agentplane_domain::bucket::BucketName>,
    ) -> Result<Objects, StoreError> {
        let files = self.objects()?;
        Ok(match bucket {
            Some(name) => files.in_bucket(name.as_str()),
            None => files.clone(),
        })
    }

    pub fn buckets(&self) -> dynamo::buckets::Buckets<'_> {
        dynamo::buckets::Buckets::new(self)
    }

    pub fn feedback(&self) -> dynamo::feedback::FeedbackStore<'_> {
        dynamo::feedback::FeedbackStore::new(self)
    }

    pub fn files(&self) -> dynamo::files::Files<'_> {
        dynamo::files::Files::new(self)
    }

    pub fn turns(&self) -> dynamo::turns::TurnWrites<'_> {
        dynamo::turns::TurnWrites::new(self)
    }

    pub fn session_placement(&self) -> dynamo::session_placement::SessionPlacement<'_> {
        dynamo::session_placement::SessionPlacement::new(self)
    }

    pub fn stream_slots(&self) -> dynamo::stream_slots::StreamSlots<'_> {
        dynamo::stream_slots::StreamSlots::new(self)
    }

    pub fn agent_runs(&self) -> dynamo::agent_runs::AgentRuns<'_> {
        dynamo::agent_runs::AgentRuns::new(self)
    }

    pub fn tenants(&self) -> dynamo::tenants::Tenants<'_> {
        dynamo::tenants::Tenants::new(self)
    }

    pub fn session_purge(&self) -> dynamo::session_purge::SessionPurge<'_> {
        dynamo::session_purge::SessionPurge::new(self)
    }

    pub fn side_calls(&self) -> dynamo::side_calls::SideCalls<'_> {
        dynamo::side_calls::SideCalls::new(self)
    }

    pub fn tenant_pauses(&self) -> dynamo::tenant_pauses::TenantPauses<'_> {
        dynamo::tenant_pauses::TenantPauses::new(self)
    }

    pub fn actions(&self) -> Actions<'_> {
        Actions::new(self)
    }

    pub fn transcripts(&self) -> Transcripts<'_> {
        Transcripts::new(self)
    }

    pub fn projects(&self) -> Projects<'_> {
        Projects::new(self)
    }

    pub fn api_keys(&self) -> ApiKeys<'_> {
        ApiKeys::new(self)
    }

    pub fn sessions(&self) -> Sessions<'_> {
        Sessions::new(self)
    }

    pub fn agents(&self) -> Agents<'_> {
        Agents::new(self)
    }

    pub fn runs(&self) -> Runs<'_> {
        Runs::new(self)
    }

    pub fn run_content(&self) -> dynamo::run_content::RunContent<'_> {
        dynamo::run_content::RunContent::new(self)
    }

    pub fn environments(&self) -> Environments<'_> {
        Environments::new(self)
    }

    pub fn webhooks(&self) -> Webhooks<'_> {
        Webhooks::new(self)
    }

    pub fn events(&self) -> EventLog<'_> {
        EventLog::new(self)
    }

    pub fn nodes(&self) -> Nodes<'_> {
        Nodes::new(self)
    }

    pub fn sandboxes(&self) -> Sandboxes<'_> {
        Sandboxes::new(self)
    }

    pub fn observations(&self) -> Observations<'_> {
        Observations::new(self)
    }

    pub fn allocations(&self) -> Allocations<'_> {
        Allocations::new(self)
    }

    pub fn workspace_sweep(&self) -> WorkspaceSweep<'_> {
        WorkspaceSweep::new(self)
    }

    pub fn telemetry(&self) -> Telemetry<'_> {
        Telemetry::new(self)
    }
}
