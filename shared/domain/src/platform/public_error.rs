//! What a Run's `error`, its `checkpoint.error` and its `fileDiffError` say to a client (the
//! `/v1` answers and the `platform_run.*` webhook payloads): a stable code and a fixed message
//! chosen by that code, never the text the executor recorded. Recorded texts may hold what an
//! error's `Display` carried (a presigned URL with its `X-Amz-` signature, a host path, a
//! provider's answer, a store error); they stay in the item and the log, for operators.

use super::run::{Checkpoint, FILE_INVALID, RUNTIME_UNAVAILABLE, RunError};

/// The code an unknown or malformed recorded code is shown as.
pub const RUN_FAILED: &str = "run_failed";
/// The code of every failed checkpoint (`checkpoint.error` starts with it).
pub const CHECKPOINT_FAILED: &str = "checkpoint_failed";

/// The fixed message of each Run error code; `None`: not a code a Run ends with.
fn run_message(code: &str) -> Option<&'static str> {
    Some(match code {
        RUN_FAILED => "the Run's execution failed",
        RUNTIME_UNAVAILABLE => {
            "the environment's sandbox cannot be reached: while the Run is running it waits for it (reuse this Run, do not submit it again); a failed Run waited longer than the deployment allows"
        }
        "executor_lost" => "the Run's executor stopped while it ran; the Run was not resumed",
        FILE_INVALID => "a file the Run names is not a regular workspace file, or not of the sha256 given",
        "environment_not_found" => "the environment is gone",
        "session_not_found" => "the session is gone",
        "run_limit_reached" => "the Run reached its time or step limit",
        "model_not_priced" => "the model has no price",
        "storage_unavailable" => "storage was unavailable during the Run",
        "turn_lease_lost" => "the Run's execution lost its hold on the session",
        "model_rate_limited" => "the model provider rate-limited every attempt",
        "model_provider_error" => "the model provider answered with an error",
        "model_timeout" => "the model call timed out",
        "model_unreachable" => "the model provider could not be reached",
        "model_invalid_response" => "the model provider's answer could not be read",
        _ => return None,
    })
}

/// The causes a checkpoint failure names after `checkpoint_failed: `.
fn checkpoint_cause(code: &str) -> Option<&'static str> {
    Some(match code {
        "workspace_too_large" => {
            "the workspace is past one of the node's caps (depth, entries, path length, size)"
        }
        RUNTIME_UNAVAILABLE => "the workspace's sandbox could not be reached",
        "service_unavailable" => "storage was unavailable",
        "internal_error" => "the checkpoint could not be taken",
        _ => return None,
    })
}

/// The fixed diff diagnostics (any other recorded text is shown as the first).
const DIFF_UNKNOWN: &str = "the file diff could not be computed";
const DIFF_CHECKPOINT_FAILED: &str = "the checkpoint after the Run failed, so its diff is unknown";

/// A Run's error as a client reads it.
pub fn run_error(recorded: &RunError) -> RunError {
    if recorded.code == CHECKPOINT_FAILED {
        // `<cause>: <message>`, the checkpoint's own rule (a failed start checkpoint).
        let shown = checkpoint_error(&format!("{CHECKPOINT_FAILED}: {}", recorded.message));
        let message = shown.strip_prefix(CHECKPOINT_FAILED).unwrap_or(&shown).trim_start_matches(": ");
        return RunError { code: CHECKPOINT_FAILED.to_owned(), message: message.to_owned() };
    }
    let (code, message) = match run_message(&recorded.code) {
        Some(message) => (recorded.code.as_str(), message),
        None => (RUN_FAILED, run_message(RUN_FAILED).unwrap_or_default()),
    };
    RunError { code: code.to_owned(), message: message.to_owned() }
}

/// A checkpoint's `error` as a client reads it: `checkpoint_failed: <cause>: <fixed message>`,
/// the cause kept when it is one the checkpoint names.
pub fn checkpoint_error(recorded: &str) -> String {
    let rest = recorded.strip_prefix(CHECKPOINT_FAILED).and_then(|r| r.strip_prefix(": ")).unwrap_or("");
    let (cause, detail) = rest.split_once(": ").unwrap_or((rest, ""));
    if cause == "workspace_too_large"
        && let Some(described) = described_cap(detail)
    {
        return format!("{CHECKPOINT_FAILED}: {cause}: {described}");
    }
    let cause = if checkpoint_cause(cause).is_some() { cause } else { "internal_error" };
    format!("{CHECKPOINT_FAILED}: {cause}: {}", checkpoint_cause(cause).unwrap_or_default())
}

/// `detail` when it is exactly a cap's own fixed description (`TooLarge::describe`: the cap
/// and its limit, nothing from the sandbox), rebuilt from the cap and the number.
fn described_cap(detail: &str) -> Option<String> {
    use super::path::refusal::{Cap, TooLarge};
    let digits: String = detail.chars().filter(char::is_ascii_digit).collect();
    let limit = digits.parse::<u64>().ok()?;
    [Cap::Depth, Cap::Entries, Cap::PathBytes, Cap::ListingBytes, Cap::FileBytes]
        .into_iter()
        .map(|cap| TooLarge { cap, limit }.describe())
        .find(|described| described == detail)
}

/// A Run's `fileDiffError` as a client reads it.
pub fn diff_error(recorded: &str) -> &'static str {
    match recorded {
        DIFF_CHECKPOINT_FAILED => DIFF_CHECKPOINT_FAILED,
        super::run::DIFF_UNKNOWN_AFTER_ROLLBACK => super::run::DIFF_UNKNOWN_AFTER_ROLLBACK,
        _ => DIFF_UNKNOWN,
    }
}

/// The checkpoint with its error as a client reads it.
pub fn checkpoint(recorded: &Checkpoint) -> Checkpoint {
    Checkpoint { error: recorded.error.as_deref().map(checkpoint_error), ..recorded.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaks(text: &str) -> bool {
        let lower = text.to_ascii_lowercase();
        ["http", "x-amz-", "/var/", "/tmp/", "/workspace", "10.0.0.7", "secret", "4566"]
            .iter()
            .any(|s| lower.contains(s))
    }

    #[test]
    fn a_recorded_message_never_reaches_the_client() {
        let recorded = RunError {
            code: "storage_unavailable".into(),
            message:
                "storage failed during the Run: dispatch failure: http://127.0.0.1:4566/?X-Amz-Signature=abc"
                    .into(),
        };
        let shown = run_error(&recorded);
        assert_eq!(shown.code, "storage_unavailable");
        assert!(!leaks(&shown.message), "{shown:?}");
        assert_eq!(shown.message, "storage was unavailable during the Run");
    }

    #[test]
    fn an_unknown_or_hostile_code_is_run_failed() {
        for code in ["", "weird", "http://evil/", "model_invalid_response\n", "RUN_FAILED"] {
            let shown = run_error(&RunError { code: code.into(), message: "at /var/lib/x".into() });
            assert_eq!(shown.code, RUN_FAILED, "{code:?}");
            assert!(!leaks(&shown.message));
        }
    }

    #[test]
    fn every_code_the_executor_and_the_turn_record_has_a_fixed_message() {
        for code in [
            RUN_FAILED,
            RUNTIME_UNAVAILABLE,
            FILE_INVALID,
            CHECKPOINT_FAILED,
            "environment_not_found",
            "session_not_found",
            "run_limit_reached",
            "model_not_priced",
            "storage_unavailable",
            "turn_lease_lost",
            "model_rate_limited",
            "model_provider_error",
            "model_timeout",
            "model_unreachable",
            "model_invalid_response",
        ] {
            let shown = run_error(&RunError { code: code.into(), message: "x".into() });
            assert_eq!(shown.code, code);
            assert!(!shown.message.is_empty() && !leaks(&shown.message), "{code}: {shown:?}");
        }
    }

    #[test]
    fn checkpoint_errors_keep_their_cause_and_lose_their_detail() {
        assert_eq!(
            checkpoint_error(
                "checkpoint_failed: workspace_too_large: the workspace holds a path of more than 64 components"
            ),
            "checkpoint_failed: workspace_too_large: the workspace holds a path of more than 64 components",
            "a cap's own description is kept"
        );
        assert_eq!(
            checkpoint_error(
                "checkpoint_failed: workspace_too_large: more than 100000 entries under /var/lib/agentplane-node/w"
            ),
            "checkpoint_failed: workspace_too_large: the workspace is past one of the node's caps (depth, entries, path length, size)"
        );
        assert_eq!(
            checkpoint_error("checkpoint_failed: platform_runtime_unavailable: node n-1 at 10.0.0.7 is gone"),
            "checkpoint_failed: platform_runtime_unavailable: the workspace's sandbox could not be reached"
        );
        for hostile in [
            "upload to https://b.s3.amazonaws.com/blobs/x?X-Amz-Credential=AKIA&X-Amz-Signature=f failed",
            "checkpoint_failed: https://b/?X-Amz-Signature=f: boom",
            "",
        ] {
            let shown = checkpoint_error(hostile);
            assert_eq!(shown, "checkpoint_failed: internal_error: the checkpoint could not be taken");
            assert!(!leaks(&shown));
        }
    }

    #[test]
    fn a_failed_start_checkpoint_names_its_cause_by_the_same_rule() {
        let shown =
            |message: &str| run_error(&RunError { code: CHECKPOINT_FAILED.into(), message: message.into() });
        let kept = "workspace_too_large: the workspace holds a path of more than 64 components";
        assert_eq!(shown(kept), RunError { code: CHECKPOINT_FAILED.into(), message: kept.into() });
        assert_eq!(
            shown("platform_runtime_unavailable: node n-1 at 10.0.0.7 is gone").message,
            "platform_runtime_unavailable: the workspace's sandbox could not be reached"
        );
        assert_eq!(
            shown("https://b/?X-Amz-Signature=f").message,
            "internal_error: the checkpoint could not be taken"
        );
    }

    #[test]
    fn diff_errors_are_fixed() {
        assert_eq!(diff_error(DIFF_CHECKPOINT_FAILED), DIFF_CHECKPOINT_FAILED);
        assert_eq!(diff_error("manifest at s3://bucket/runs/x: 403"), DIFF_UNKNOWN);
    }
}
