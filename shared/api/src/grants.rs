//! Least privilege in one table: for every route and every job, the stack resources (logical
//! ids in infra/template.yaml) its function reads and those it writes. The template grants
//! exactly this — a read-only route gets read-only policies — and tests/infra.rs checks it
//! function by function.
//!
//! The match is exhaustive on purpose: a new route or job does not build until it says what it
//! may touch.

use crate::Route;
use crate::jobs::Job;

/// How a function may use a resource. `Write` includes reading (DynamoDB CRUD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    Read,
    Write,
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

const MAIN_R: Grant = read("MainTable");
const MAIN_W: Grant = write("MainTable");
const EVENTS_R: Grant = read("EventsTable");
const EVENTS_W: Grant = write("EventsTable");
const TELEMETRY_R: Grant = read("TelemetryTable");
const TELEMETRY_W: Grant = write("TelemetryTable");
/// Secrets are only ever read.
const CORE_KEY: Grant = read("CoreKeySecret");
const MODEL_KEY: Grant = read("ModelApiKeySecret");

/// What a route's function may touch.
pub fn route(route: Route) -> &'static [Grant] {
    use Route::*;
    match route {
        // Core admin: the Core key, plus what each route stores or reads.
        CoreProjectsCreate | CoreApiKeysCreate | CoreApiKeysRevoke | CoreSandboxNodesRegister => {
            &[MAIN_W, CORE_KEY]
        }
        CoreProjectsList | CoreSandboxNodesList => &[MAIN_R, CORE_KEY],
        // Telemetry reads: sessions, allocations and nodes; samples, heartbeats and counters.
        CoreSandboxNodeGet
        | CoreRuntimeObservationsList
        | CoreRuntimeObservationGet
        | CoreRuntimeHistoryGet => &[MAIN_R, TELEMETRY_R, CORE_KEY],
        // Session create places managed compute (sandbox, node command, allocation); delete
        // releases it.
        ClientSessionsCreate | ClientSessionsUpdate | ClientSessionsDelete => &[MAIN_W],
        ClientSessionsList | ClientSessionsGet => &[MAIN_R],
        ClientAgentsCreate | ClientAgentsUpdate | ClientAgentsPublish => &[MAIN_W],
        ClientAgentsList | ClientAgentsGet | ClientAgentsVersions => &[MAIN_R],
        // Turns: the session's state, its event log, and the model provider's key.
        ClientResponsesCreate | ClientAgentResponsesCreate | ClientSessionMessagesCreate => {
            &[MAIN_W, EVENTS_W, MODEL_KEY]
        }
        ClientSessionEventsList | ClientSessionEventsStream => &[MAIN_R, EVENTS_R],
        // Node API: claiming and answering commands writes the queue; heartbeats and reports
        // write telemetry (history, counters, output) and the node's records.
        NodeCommandsPoll | NodeCommandsComplete => &[MAIN_W],
        NodeHeartbeat | NodeReports => &[MAIN_W, TELEMETRY_W],
        NodeSandboxesList => &[MAIN_R],
        // Sandbox API: changes go through the node's command queue and the sandbox's record.
        SandboxCreate | SandboxKill | SandboxPause | SandboxResume | SandboxTimeout | SandboxProcessStart => {
            &[MAIN_W]
        }
        SandboxList | SandboxGet | SandboxProcessList => &[MAIN_R],
        SandboxProcessOutput => &[MAIN_R, TELEMETRY_R],
    }
}

/// What a job's function may touch.
pub fn job(job: Job) -> &'static [Grant] {
    match job {
        // Reads allocations and sessions, and sandbox counters; writes samples.
        Job::Sampler => &[MAIN_R, TELEMETRY_W],
        // Reads allocations and nodes; writes sandboxes, node commands and allocations.
        Job::Placer => &[MAIN_W],
    }
}

/// The resources of `grants`, without their access.
pub fn resources(grants: &[Grant]) -> Vec<&'static str> {
    grants.iter().map(|g| g.resource).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_read_only_and_every_function_has_a_grant() {
        for r in Route::ALL {
            let grants = route(*r);
            assert!(!grants.is_empty(), "{r:?}");
            if r.method() == http::Method::GET {
                assert!(
                    grants.iter().all(|g| g.access == Access::Read) || matches!(r, Route::NodeCommandsPoll),
                    "{r:?}: a read route writes"
                );
            }
        }
        for j in Job::ALL {
            assert!(!job(*j).is_empty());
        }
    }
}
