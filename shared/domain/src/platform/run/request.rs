//! What a client asks a Run to do, checked before anything is stored.

use super::*;

/// What a client asks for: `{model, input, files?, steeringEnabled?}`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub model: String,
    pub input: String,
    pub files: Vec<RunFile>,
    pub steering_enabled: bool,
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl NewRun {
    pub fn new(
        model: &str,
        input: &str,
        files: Vec<(String, Option<String>)>,
        steering_enabled: bool,
    ) -> Result<Self, ValidationError> {
        let chars = model.chars().count();
        if chars == 0 || chars > MAX_MODEL_CHARS || model.chars().any(char::is_control) {
            return Err(ValidationError::new(
                "model",
                format!("`model` must be 1 to {MAX_MODEL_CHARS} characters without control characters"),
            ));
        }
        if input.trim().is_empty() || input.chars().count() > MAX_INPUT_CHARS {
            return Err(ValidationError::new(
                "input",
                format!("`input` must be non-blank text of at most {MAX_INPUT_CHARS} characters"),
            ));
        }
        if files.len() > MAX_FILES {
            return Err(ValidationError::new("files", format!("`files` may name at most {MAX_FILES} files")));
        }
        let mut checked = Vec::with_capacity(files.len());
        for (n, (path, sha256)) in files.into_iter().enumerate() {
            let parsed = WorkspacePath::parse(&path).map_err(|err| {
                ValidationError::new(format!("files[{n}].path"), format!("`files[{n}].path`: {err}"))
            })?;
            if let Some(sha) = &sha256
                && !is_sha256(sha)
            {
                return Err(ValidationError::new(
                    format!("files[{n}].sha256"),
                    format!("`files[{n}].sha256` must be 64 lowercase hexadecimal digits"),
                ));
            }
            checked.push(RunFile { path: parsed.absolute(), sha256 });
        }
        Ok(Self { model: model.to_owned(), input: input.to_owned(), files: checked, steering_enabled })
    }

    pub fn into_run(
        self,
        id: RunId,
        project_id: ProjectId,
        environment_id: EnvironmentId,
        session_id: SessionId,
        environment_sequence: u64,
        now: Timestamp,
    ) -> Run {
        Run {
            id,
            project_id,
            environment_id,
            session_id,
            environment_sequence,
            model: self.model,
            input: self.input,
            files: self.files,
            status: RunStatus::Queued,
            stop_requested: false,
            steering_enabled: self.steering_enabled,
            output: None,
            error: None,
            file_diff: Vec::new(),
            file_diff_status: DiffStatus::Pending,
            file_diff_error: None,
            checkpoint: Checkpoint { status: CheckpointStatus::Pending, snapshot_id: None, error: None },
            created_at: now,
            started_at: None,
            finished_at: None,
            content_deleted_at: None,
            start_manifest: None,
            sandbox_runtime_ms: 0,
            sandbox_usd_per_second: None,
            reverted_from: None,
            version: 0,
        }
    }
}
