//! Platform Runs (`/v1`): environments, the sessions in them and the rules of their fields.
//! An environment is one workspace shared by its sessions; its Runs are ordered across all of
//! them by `environmentSequence` (a counter on the environment item).

pub mod content_retention;
pub mod manifest;
pub mod path;
pub mod public_error;
pub mod run;
pub mod sandbox_price;
pub mod workspace_sweep;

use serde::{Deserialize, Serialize};

use crate::telemetry::EnvironmentId;
use crate::{ProjectId, Timestamp, ValidationError};

pub const MAX_NAME_CHARS: usize = 256;

/// An environment of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    pub id: EnvironmentId,
    pub project_id: ProjectId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The `environmentSequence` of the last Run created in it (0: none yet).
    #[serde(default)]
    pub run_count: u64,
    /// The sandbox holding its workspace (started on first use; replaced if it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_id: Option<crate::sandbox::SandboxId>,
    /// The manifest of the workspace before its first Run (the first Run's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_checkpoint: Option<String>,
    /// The rollback under way, if any: new Runs wait and workspace writes are refused meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<ActiveRollback>,
    /// The Run executing on the workspace now, under a lease (one Run at a time per
    /// environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executing: Option<ExecutionLease>,
    /// The fencing counter: every claim of the execution lease takes the next value, so a writer
    /// holding an older one can tell (and is told) it lost the lease.
    #[serde(default)]
    pub fence: u64,
    /// Every Run up to this `environmentSequence` has ended (completed, failed, stopped or
    /// reverted): the order check reads only the Runs after it.
    #[serde(default)]
    pub settled_through: u64,
    pub created_at: Timestamp,
    /// When `DELETE /v1/environments/{id}` was accepted: from then on the environment and
    /// everything in it read as gone, and the retention sweep purges it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Timestamp>,
    /// The manifests the environment and its Runs referenced, collected by the purge before it
    /// deletes the items that named them (`None`: not collected yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_manifests: Option<Vec<String>>,
    /// The last rollback that failed (its restore never succeeded within the time it is given):
    /// the environment was released and its Runs given back; this says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_failure: Option<RollbackFailure>,
}

/// A rollback that failed: the Run it was asked for, the fixed error and when it was given up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollbackFailure {
    pub run_id: run::RunId,
    pub code: String,
    pub message: String,
    pub at: Timestamp,
}

/// The message of a rollback given up ([`RollbackFailure`]).
pub const ROLLBACK_FAILED_MESSAGE: &str = "the workspace could not be restored; no file was reverted and the Runs read as they did before the rollback";

/// The lease of the Run executing on an environment's workspace: its `token` is the
/// environment's `fence` when it was claimed; it is good until `until` unless renewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionLease {
    pub run_id: run::RunId,
    pub sequence: u64,
    pub token: u64,
    pub until: Timestamp,
}

impl ExecutionLease {
    /// Whether it still holds the workspace at `now`.
    pub fn live(&self, now: Timestamp) -> bool {
        self.until > now
    }
}

/// A rollback accepted and not finished: the Run selected, the affected set (every Run of the
/// environment from its sequence through the last one that existed at acceptance) and the
/// manifest it restores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveRollback {
    pub run_id: run::RunId,
    pub from_sequence: u64,
    pub through_sequence: u64,
    /// `None`: no Run had touched the workspace, so no file is restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    pub accepted_at: Timestamp,
}

impl Environment {
    pub fn new(id: EnvironmentId, project_id: ProjectId, name: Option<String>, now: Timestamp) -> Self {
        Self {
            id,
            project_id,
            name,
            run_count: 0,
            sandbox_id: None,
            initial_checkpoint: None,
            rollback: None,
            executing: None,
            fence: 0,
            settled_through: 0,
            created_at: now,
            deleted_at: None,
            purge_manifests: None,
            rollback_failure: None,
        }
    }
}

/// An environment's optional name: 1 to 256 characters, no control characters.
pub fn environment_name(param: &str, name: Option<&str>) -> Result<Option<String>, ValidationError> {
    let Some(name) = name else { return Ok(None) };
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(ValidationError::new(
            param,
            format!("`{param}` must be 1 to {MAX_NAME_CHARS} characters without control characters"),
        ));
    }
    Ok(Some(name.to_owned()))
}

/// The fields of a request body not in `allowed` (the `/v1` bodies are strict: an unknown field
/// is refused, named).
pub fn unknown_field<'a>(fields: impl IntoIterator<Item = &'a String>, allowed: &[&str]) -> Option<String> {
    fields.into_iter().find(|f| !allowed.contains(&f.as_str())).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_and_printable() {
        assert_eq!(environment_name("name", None), Ok(None));
        assert_eq!(environment_name("name", Some("repo")), Ok(Some("repo".into())));
        assert!(environment_name("name", Some("")).is_err());
        assert!(environment_name("name", Some("a\nb")).is_err());
        assert!(environment_name("name", Some(&"x".repeat(257))).is_err());
        assert!(environment_name("name", Some(&"é".repeat(256))).is_ok());
    }

    #[test]
    fn unknown_fields_are_named() {
        let fields = ["name".to_owned(), "nmae".to_owned()];
        assert_eq!(unknown_field(&fields, &["name"]), Some("nmae".to_owned()));
        assert_eq!(unknown_field(&fields[..1], &["name"]), None);
    }
}
