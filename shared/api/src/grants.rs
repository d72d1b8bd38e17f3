//! Least privilege in one table: for every route and every job, the stack resources (logical
//! ids in infra/template.yaml) its function reads and those it writes. The template grants
//! exactly this — a read-only route gets a read-only role — through one IAM role per distinct set
//! of grants (written by `cargo xtask template`), and tests/infra.rs checks it function by
//! function.
//!
//! A route's grants are part of its one declaration (`Route::declaration`); a job's are
//! `Job::grants`.
//! Both matches are exhaustive on purpose: a new route or job does not build until it says
//! what it may touch.

#[cfg(test)]
use crate::Route;
#[cfg(test)]
use crate::jobs::Job;

/// How a function may use a resource. `Write` includes reading (DynamoDB CRUD). A queue is
/// sent to (`Send`) or consumed (`Consume`: receive, delete and change visibility, what an SQS
/// event source needs); the two are granted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    Read,
    Write,
    Send,
    Consume,
}

/// One resource and how it may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    pub resource: &'static str,
    pub access: Access,
}

const fn read(resource: &'static str) -> Grant {
    Grant { resource, access: Access::Read }
}

const fn write(resource: &'static str) -> Grant {
    Grant { resource, access: Access::Write }
}

pub const MAIN_R: Grant = read("MainTable");
pub const MAIN_W: Grant = write("MainTable");
pub const EVENTS_R: Grant = read("EventsTable");
pub const EVENTS_W: Grant = write("EventsTable");
pub const TELEMETRY_R: Grant = read("TelemetryTable");
pub const TELEMETRY_W: Grant = write("TelemetryTable");
/// The files bucket, written by the functions that run turns (transcripts past the DynamoDB
/// item limit, `transcripts/…`) and by the session file routes that create (the presigned
/// upload is signed with the function's role) and delete files (`files/…`).
pub const FILES_W: Grant = write("FilesBucket");
/// The files bucket, read: session files' sizes (HEAD) and their presigned downloads.
pub const FILES_R: Grant = read("FilesBucket");
/// Document Store buckets projects register (the template's `DocumentBuckets` parameter, a
/// bucket-name pattern): the session files of agents that name one in
/// `config.attachments.bucket`, written and read as the files bucket's are.
pub const DOCS_W: Grant = write("DocumentBuckets");
pub const DOCS_R: Grant = read("DocumentBuckets");
/// The workspaces bucket: checkpoint blobs and manifests (written by the functions that take
/// checkpoints, read by restores; the node moves the bytes through presigned URLs).
pub const WORKSPACES_W: Grant = write("WorkspacesBucket");
/// The `runs` queue: continuations are sent by whoever settles a paused turn's last action (the
/// answer route, the retention sweep) and consumed by the `run-execution` job.
pub const RUNS_SEND: Grant = Grant { resource: "RunsQueue", access: Access::Send };
pub const RUNS_CONSUME: Grant = Grant { resource: "RunsQueue", access: Access::Consume };
/// The `webhooks` queue: emitted events are sent by whatever commits them (the turn routes and
/// `run-execution`), first attempts by the fan-out; `webhook-delivery` consumes it.
/// The `rollbacks` queue: accepted rollbacks are sent by the rollback route and consumed by the
/// `rollback-restore` job.
pub const ROLLBACKS_SEND: Grant = Grant { resource: "RollbacksQueue", access: Access::Send };
pub const ROLLBACKS_CONSUME: Grant = Grant { resource: "RollbacksQueue", access: Access::Consume };
pub const WEBHOOKS_SEND: Grant = Grant { resource: "WebhooksQueue", access: Access::Send };
pub const WEBHOOKS_CONSUME: Grant = Grant { resource: "WebhooksQueue", access: Access::Consume };
/// What a route that runs a turn touches: sessions and their events, large transcripts, the
/// model, the webhooks queue its state changes' events go to, and the runs queue a
/// `background: true` turn is queued on.
pub const TURN_ROUTE: &[Grant] =
    &[MAIN_W, EVENTS_W, FILES_W, DOCS_R, MODEL_KEY, WEBHOOK_KEY, WEBHOOKS_SEND, RUNS_SEND];
/// Secrets are only ever read.
pub const CORE_KEY: Grant = read("CoreKeySecret");
pub const MODEL_KEY: Grant = read("ModelApiKeySecret");
/// The key sandbox nodes enroll with (`POST /node/v1/enroll`).
pub const NODE_ENROLLMENT_KEY: Grant = read("NodeEnrollmentSecret");
/// The key that seals webhook signing secrets at rest.
pub const WEBHOOK_KEY: Grant = read("WebhookSecretKeySecret");

/// Whether a function of `grants` builds an S3 client (only those granted the files bucket or
/// Document Store buckets).
pub fn uses_objects(grants: &[Grant]) -> bool {
    grants.iter().any(|g| [FILES_W.resource, DOCS_W.resource].contains(&g.resource))
}

/// Whether a function of `grants` builds the S3 client of the workspaces bucket.
pub fn uses_workspaces(grants: &[Grant]) -> bool {
    grants.iter().any(|g| g.resource == WORKSPACES_W.resource)
}

/// Whether a function of `grants` builds the SQS client of the `rollbacks` queue.
pub fn uses_rollbacks_queue(grants: &[Grant]) -> bool {
    grants.iter().any(|g| g.resource == ROLLBACKS_SEND.resource)
}

/// Whether a function of `grants` builds the SQS client of the `runs` queue.
pub fn uses_runs_queue(grants: &[Grant]) -> bool {
    grants.iter().any(|g| g.resource == RUNS_SEND.resource)
}

/// Whether a function of `grants` builds the SQS client of the `webhooks` queue.
pub fn uses_webhooks_queue(grants: &[Grant]) -> bool {
    grants.iter().any(|g| g.resource == WEBHOOKS_SEND.resource)
}

/// The resources of `grants`, without their access, each once.
pub fn resources(grants: &[Grant]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for g in grants {
        if !out.contains(&g.resource) {
            out.push(g.resource);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_read_only_and_every_function_has_a_grant() {
        for r in Route::ALL {
            let grants = r.grants();
            assert!(!grants.is_empty(), "{r:?}");
            if r.method() == http::Method::GET {
                assert!(
                    // Polling claims commands; reading a workspace file queues a node command
                    // (and may start the workspace's sandbox); reading a session file records it
                    // `ready` once its upload is there; an event stream holds places of its key
                    // and project while it is open.
                    grants.iter().all(|g| g.access == Access::Read)
                        || matches!(
                            r,
                            Route::NodeCommandsPoll
                                | Route::PlatformFilesGet
                                | Route::ClientSessionFilesGet
                                | Route::ClientSessionEventsStream
                        ),
                    "{r:?}: a read route writes"
                );
            }
        }
        for j in Job::ALL {
            assert!(!j.grants().is_empty());
        }
    }
}
