//! Every job (a function run by a schedule or a queue, not by a route), named once, with its
//! least-privilege grant. The local gateway runs the same job code in-process.

use agentplane_engine::runtime::{RuntimeTelemetry, sample_once};
use agentplane_store::{ResourceNames, Store, StoreError};
use lambda_http::lambda_runtime::{self, LambdaEvent, service_fn};

use serde_json::{Value, json};

use crate::edge;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Job {
    /// Samples every live allocation once per sampling interval.
    Sampler,
    /// Places pending managed allocations on sandbox nodes and replaces ended compute.
    Placer,
}

impl Job {
    pub const ALL: &'static [Job] = &[Job::Sampler, Job::Placer];

    pub fn function_name(self) -> &'static str {
        match self {
            Job::Sampler => "sampler",
            Job::Placer => "placer",
        }
    }

    /// The stack resources this job's function may touch; how is in [`crate::grants`].
    pub fn resources(self) -> Vec<&'static str> {
        crate::grants::resources(crate::grants::job(self))
    }

    pub fn by_function_name(name: &str) -> Option<Job> {
        Self::ALL.iter().copied().find(|j| j.function_name() == name)
    }
}

/// Runs one job as a Lambda function (its trigger's event is ignored: a schedule tick).
pub async fn serve(job: Job) -> Result<(), lambda_runtime::Error> {
    crate::lambda::init_tracing();
    let sdk = agentplane_store::aws::sdk_config_from_env().await;
    let store = Store::new(&sdk, ResourceNames::from_env());
    match job {
        Job::Sampler => {
            let runtime = RuntimeTelemetry::from_env(&store);
            Box::pin(every_tick(|| async {
                let report = sample_once(&store, &runtime, edge::now()).await?;
                tracing::info!(?report, "sampler pass");
                Ok(json!({
                    "allocations": report.allocations,
                    "written": report.written,
                    "duplicates": report.duplicates,
                    "failed": report.failed,
                }))
            }))
            .await
        }
        Job::Placer => {
            let app = crate::App::new(store, None);
            Box::pin(every_tick(|| async {
                let report = crate::sandbox::managed::reconcile(&app, edge::now()).await?;
                tracing::info!(?report, "placer pass");
                Ok(json!({
                    "allocations": report.allocations,
                    "placed": report.placed,
                    "replaced": report.replaced,
                    "failed": report.failed,
                }))
            }))
            .await
        }
    }
}

/// Runs `pass` once per invocation and answers with its summary.
async fn every_tick<F, Fut>(pass: F) -> Result<(), lambda_runtime::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Value, StoreError>>,
{
    lambda_runtime::run(service_fn(|_: LambdaEvent<Value>| {
        let run = pass();
        async move { run.await.map_err(lambda_runtime::Error::from) }
    }))
    .await
}
