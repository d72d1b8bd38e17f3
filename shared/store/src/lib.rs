//! Adapters from Agentplane's domain to DynamoDB, plus the one definition of every table, bucket
//! and queue (provisioning and infra/ are checked against it). `Store` holds only the DynamoDB
//! client: the S3 and SQS clients are built only by provisioning (provision.rs), which no Lambda
//! function calls.

pub mod aws;
pub mod dynamo;
pub mod error;
pub mod provision;
pub mod resources;

pub use dynamo::agents::Agents;
pub use dynamo::allocations::{Allocation, Allocations};
pub use dynamo::api_keys::ApiKeys;
pub use dynamo::events::EventLog;
pub use dynamo::nodes::Nodes;
pub use dynamo::observations::Observations;
pub use dynamo::projects::Projects;
pub use dynamo::sandboxes::Sandboxes;
pub use dynamo::sessions::{Sessions, TurnHolder};
pub use dynamo::telemetry::Telemetry;
pub use error::StoreError;
pub use resources::ResourceNames;

/// The client and names every adapter shares; cheap to clone. Only DynamoDB: a Lambda function
/// builds no client it never uses (S3 and SQS are provisioning's).
#[derive(Clone, Debug)]
pub struct Store {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub names: ResourceNames,
}

impl Store {
    pub fn new(sdk: &aws_config::SdkConfig, names: ResourceNames) -> Self {
        Self { dynamo: aws_sdk_dynamodb::Client::new(sdk), names }
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

    pub fn telemetry(&self) -> Telemetry<'_> {
        Telemetry::new(self)
    }
}
