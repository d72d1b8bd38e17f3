//! An environment's workspace: a sandbox on a node, started on first use and bound to the
//! environment by a conditional write (of two concurrent first uses one binding wins; the other
//! ends its sandbox and uses the winner's). File operations go to that node through the durable
//! command queue ([`crate::dispatch`]) and come back as the node's answer.

use agentplane_domain::metadata::Metadata;
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::path::refusal::{self, Refusal};
use agentplane_domain::platform::run;
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{MANAGED_COMPUTE_LIFETIME_S, Sandbox, SandboxId};
use serde_json::json;
use std::collections::BTreeMap;

use super::{Platform, WorkspaceError};
use crate::dispatch;
use crate::ports::commands::NodeCommands;
use crate::ports::platform::PlatformStore;
use crate::ports::{Compute, PortError};

/// How many Runs one read of the environment's order takes when a replacement is restored.
const PAGE: u64 = 20;

/// The sandbox's metadata key naming its environment.
pub const ENVIRONMENT_METADATA_KEY: &str = "agentplane.environment_id";

/// The environment's live sandbox, started (and bound) when it has none or its one ended.
pub async fn sandbox<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    environment: &Environment,
) -> Result<Sandbox, WorkspaceError> {
    let store = platform.store;
    let mut environment = environment.clone();
    for _ in 0..3 {
        let previous = environment.sandbox_id.clone();
        if let Some(id) = &previous {
            match store.sandbox_record(id).await {
                Ok(sandbox) if !sandbox.lifecycle.effective(crate::now()).is_final() => return Ok(sandbox),
                Ok(_) | Err(PortError::NotFound) => {}
                Err(err) => return Err(err.into()),
            }
        }
        let metadata =
            Metadata::from_json("metadata", &json!({ ENVIRONMENT_METADATA_KEY: environment.id.to_string() }))
                .map_err(|e| WorkspaceError::internal(e.to_string()))?;
        let new =
            CreateSandbox { timeout_s: MANAGED_COMPUTE_LIFETIME_S, metadata, env_vars: BTreeMap::new() };
        let sandbox = platform.compute.launch(environment.project_id, new, None).await.map_err(|e| {
            tracing::warn!(error = %e, environment = %environment.id, "could not start a workspace's sandbox");
            WorkspaceError::RuntimeUnavailable("no sandbox node could start the workspace's sandbox".into())
        })?;
        if previous.is_some() {
            // The sandbox before it ended (expired, its node lost, killed): the replacement
            // gets the workspace's latest checkpoint before anything can touch it, and is bound
            // only then (a failed restore leaves the environment as it was, to try again).
            if let Err(err) = restore_latest(store, &environment, &sandbox).await {
                platform.compute.end(&sandbox).await;
                return Err(err);
            }
        }
        let bound = store
            .bind_sandbox(&environment.project_id, &environment.id, &sandbox.id, previous.as_ref())
            .await;
        match bound {
            Ok(()) => return Ok(sandbox),
            Err(PortError::Conflict) => {
                platform.compute.end(&sandbox).await;
                environment = store.environment(&environment.project_id, &environment.id).await?;
            }
            Err(err) => {
                platform.compute.end(&sandbox).await;
                return Err(err.into());
            }
        }
    }
    Err(WorkspaceError::RuntimeUnavailable("the environment's sandbox kept changing; try again".into()))
}

/// Restores into `sandbox` the manifest `environment`'s workspace last had
/// ([`run::latest_manifest`] over its Runs, newest first, a page at a time; else its initial
/// checkpoint; else nothing: it never had a file).
async fn restore_latest<S: PlatformStore>(
    store: &S,
    environment: &Environment,
    sandbox: &Sandbox,
) -> Result<(), WorkspaceError> {
    let mut newest_first = Vec::new();
    let mut through = environment.run_count;
    let mut latest = None;
    while through > 0 {
        let from = through.saturating_sub(PAGE - 1).max(1);
        let mut page = store.runs_in_order(&environment.id, from, through).await?;
        page.reverse();
        newest_first.extend(page);
        latest = run::latest_manifest(newest_first.iter());
        if latest.is_some() {
            break;
        }
        through = from - 1;
    }
    let Some(manifest) = latest.or_else(|| environment.initial_checkpoint.clone()) else { return Ok(()) };
    tracing::info!(environment = %environment.id, sandbox = %sandbox.id, manifest, "restoring a replacement sandbox");
    super::checkpoint::restore(store, sandbox, &manifest).await?;
    Ok(())
}

/// Runs a workspace command on the sandbox's node: its details, or the refusal as the error it
/// is (a symlink or non-regular file → 400, a missing file → 404, a tree past the node's caps →
/// 409).
pub async fn run<S: NodeCommands>(
    store: &S,
    sandbox: &Sandbox,
    command: Command,
) -> Result<BTreeMap<String, String>, WorkspaceError> {
    match dispatch::run(store, &sandbox.node_id, command).await? {
        CommandOutcome::Done { details, .. } => Ok(details),
        CommandOutcome::Failed { message } => Err(match refusal::parse(&message) {
            Refusal::NotFound => WorkspaceError::FileNotFound,
            Refusal::Path(err) => WorkspaceError::InvalidPath(err),
            Refusal::TooLarge(too_large) => WorkspaceError::TooLarge(too_large),
            Refusal::Failed(message) if message.contains("does not host") => {
                WorkspaceError::RuntimeUnavailable("the environment's sandbox is not reachable".into())
            }
            Refusal::Failed(message) => WorkspaceError::internal(message),
        }),
    }
}

pub fn id_of(sandbox: &Sandbox) -> SandboxId {
    sandbox.id.clone()
}
