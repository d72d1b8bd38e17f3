//! The main table's key design in one place. Single table; partition keys carry a type prefix.
//!
//! | item            | PK                    | SK                  | GSI1PK (by_created)          | GSI1SK            |
//! |-----------------|-----------------------|---------------------|------------------------------|-------------------|
//! | project         | `PROJECT#{id}`        | `PROJECT`           | `PROJECTS`                   | created#id        |
//! | api key         | `PROJECT#{pid}`       | `APIKEY#{id}`       | —                            | —                 |
//! | key hash lookup | `KEYHASH#{sha256}`    | `KEYHASH`           | —                            | —                 |
//! | session         | `PROJECT#{pid}`       | `SESSION#{id}`      | `PROJECT#{pid}#SESSIONS`     | created#id        |
//! | session locator | `SESSION#{id}`        | `LOCATOR`           | —                            | —                 |
//! | allocation      | `PROJECT#{pid}`       | `ALLOCATION#{sid}`  | `ALLOCATIONS` (while live)   | created#alloc id  |
//!
//! Sessions also carry GSI2 (`by_due`) keys `SESSIONS` / created#id: the list of every live
//! session of every project (Core's runtime-observation list). The locator turns a bare session
//! id (that list's cursor) into its project. An allocation leaves GSI1 when it stops, so the
//! sampler's listing holds only allocations it must sample.
//!
//! The key hash lookup also carries the key's request count of the current rate window (`rl_w`,
//! `rl_n`; `api_keys.rs`). Quota counts: environments `PROJECT#{pid}` / `ENVS#COUNT`
//! (`environments/`), stored file bytes `PROJECT#{pid}` / `FILES#BYTES` (`files.rs`).
//!
//! Webhook endpoints, their count, messages and attempts: `webhooks.rs`.
//!
//! Sandbox items, nodes, node commands and process records keep their key design beside their
//! adapters: `nodes.rs`, `sandboxes.rs`, `observations.rs`.
//!
//! A deleted session keeps its item (later telemetry and retention read it) but loses its GSI1
//! attributes, so it leaves every list at once.

use agentplane_domain::tenant::TenantId;
use agentplane_domain::{ApiKeyId, ProjectId, SessionId};

pub fn project_pk(id: &ProjectId) -> String {
    format!("PROJECT#{id}")
}
pub const PROJECT_SK: &str = "PROJECT";
pub const PROJECTS_LIST: &str = "PROJECTS";

pub fn tenant_pk(id: &TenantId) -> String {
    format!("TENANT#{id}")
}
pub const TENANT_SK: &str = "TENANT";

pub fn api_key_sk(id: &ApiKeyId) -> String {
    format!("APIKEY#{id}")
}

pub fn key_hash_pk(hash: &str) -> String {
    format!("KEYHASH#{hash}")
}
pub const KEY_HASH_SK: &str = "KEYHASH";

pub fn session_sk(id: &SessionId) -> String {
    format!("SESSION#{id}")
}
pub fn sessions_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#SESSIONS")
}

pub fn session_locator_pk(id: &SessionId) -> String {
    format!("SESSION#{id}")
}
pub const SESSION_LOCATOR_SK: &str = "LOCATOR";
/// GSI2 partition of every live session of every project.
pub const ALL_SESSIONS_LIST: &str = "SESSIONS";

pub fn allocation_sk(session: &SessionId) -> String {
    format!("ALLOCATION#{session}")
}
/// GSI1 partition of every allocation that is not stopped.
pub const LIVE_ALLOCATIONS_LIST: &str = "ALLOCATIONS";
