//! An environment's workspace: a sandbox on a node, started on first use and bound to the
//! environment by a conditional write (of two concurrent first uses one binding wins; the other
//! ends its sandbox and uses the winner's). File operations go to that node through the durable
//! command queue (`sandbox::dispatch`) and come back as the node's answer.

use agentplane_domain::metadata::Metadata;
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::path::refusal::{self, Refusal};
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{MANAGED_COMPUTE_LIFETIME_S, Sandbox, SandboxId};
use agentplane_store::StoreError;
use serde_json::json;
use std::collections::BTreeMap;

use super::error::PlatformError;
use crate::sandbox::dispatch;
use crate::sandbox::error::SandboxError;
use crate::sandbox::sandboxes::{self, Launch};
use crate::{App, edge};

/// The sandbox's metadata key naming its environment.
pub const ENVIRONMENT_METADATA_KEY: &str = "agentplane.environment_id";

impl From<SandboxError> for PlatformError {
    fn from(err: SandboxError) -> Self {
        match err {
            SandboxError::NoNodeOnline | SandboxError::NodeTimeout => {
                Self::RuntimeUnavailable(err.to_string())
            }
            SandboxError::Storage(err) => Self::Storage(err),
            other => Self::internal(other.to_string()),
        }
    }
}

/// The environment's live sandbox, started (and bound) when it has none or its one ended.
pub async fn sandbox(app: &App, environment: &Environment) -> Result<Sandbox, PlatformError> {
    let mut environment = environment.clone();
    for _ in 0..3 {
        let previous = environment.sandbox_id.clone();
        if let Some(id) = &previous {
            match app.store.sandboxes().get_any(id).await {
                Ok(sandbox) if !sandbox.lifecycle.effective(edge::now()).is_final() => return Ok(sandbox),
                Ok(_) | Err(StoreError::NotFound) => {}
                Err(err) => return Err(err.into()),
            }
        }
        let metadata = Metadata::from_json(
            "metadata",
            &json!({ ENVIRONMENT_METADATA_KEY: environment.id.to_string() }),
        )?;
        let new =
            CreateSandbox { timeout_s: MANAGED_COMPUTE_LIFETIME_S, metadata, env_vars: BTreeMap::new() };
        let sandbox =
            sandboxes::launch(app, Launch { project_id: environment.project_id, new, session_id: None })
                .await?;
        let bound = app
            .store
            .environments()
            .bind_sandbox(&environment.project_id, &environment.id, &sandbox.id, previous.as_ref())
            .await;
        match bound {
            Ok(()) => return Ok(sandbox),
            Err(StoreError::Conflict) => {
                sandboxes::end(app, &sandbox).await;
                environment = app.store.environments().get(&environment.project_id, &environment.id).await?;
            }
            Err(err) => {
                sandboxes::end(app, &sandbox).await;
                return Err(err.into());
            }
        }
    }
    Err(PlatformError::RuntimeUnavailable("the environment's sandbox kept changing; try again".into()))
}

/// Runs a workspace command on the sandbox's node: its details, or the refusal as the error it
/// is (a symlink or non-regular file → 400, a missing file → 404, a tree past the node's caps →
/// 409).
pub async fn run(
    app: &App,
    sandbox: &Sandbox,
    command: Command,
) -> Result<BTreeMap<String, String>, PlatformError> {
    match dispatch::run(app, &sandbox.node_id, command).await? {
        CommandOutcome::Done { details, .. } => Ok(details),
        CommandOutcome::Failed { message } => Err(match refusal::parse(&message) {
            Refusal::NotFound => PlatformError::FileNotFound,
            Refusal::Path(err) => PlatformError::InvalidPath(err),
            Refusal::TooLarge(too_large) => PlatformError::WorkspaceTooLarge(too_large),
            Refusal::Failed(message) if message.contains("does not host") => {
                PlatformError::RuntimeUnavailable("the environment's sandbox is not reachable".into())
            }
            Refusal::Failed(message) => PlatformError::internal(message),
        }),
    }
}

pub fn id_of(sandbox: &Sandbox) -> SandboxId {
    sandbox.id.clone()
}
