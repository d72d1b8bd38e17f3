//! The Core runtime telemetry routes: the observation list, one Session's observation and its
//! Runtime history. Each row is resolved from Core's records (Session, allocation) and, for a
//! managed allocation that may be running, one read of its provider's observation source.
//! Reads never create, wake or change compute and never add samples.

pub(crate) mod history;
pub(crate) mod list;
pub(crate) mod observation;
pub mod wire;

pub use history::history;
pub use list::list;
pub use observation::retrieve;

use agentplane_domain::session::Session;
use agentplane_domain::telemetry::observation::needs_provider_read;
use agentplane_domain::telemetry::{AdminRuntimeObservation, ObservationRecords, runtime_observation};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_store::Allocation;

use crate::App;
use crate::core::error::CoreError;

/// The stored identity behind a Session's runtime: its allocation, when it has one, belongs to
/// this Session, its Project and its Environment. A mismatch is a 500 `internal_error`; only
/// a fixed text is logged.
fn check_identity(session: &Session, allocation: Option<&Allocation>) -> Result<(), CoreError> {
    if allocation.is_some_and(|a| {
        a.session_id != session.id
            || a.project_id != session.project_id
            || Some(a.environment_id) != session.environment_id
    }) {
        return Err(CoreError::internal("inconsistent runtime identity"));
    }
    Ok(())
}

/// The observation of `session` (with disk) from its allocation and, when needed, its provider.
async fn observe(
    app: &App,
    session: &Session,
    allocation: Option<&Allocation>,
    resolved_at: Timestamp,
) -> Result<AdminRuntimeObservation, CoreError> {
    check_identity(session, allocation)?;
    let records = ObservationRecords {
        session_id: session.id,
        mode: session.environment_mode,
        environment_id: session.environment_id,
        allocation: allocation.map(|a| &a.record),
    };
    let read = match allocation {
        Some(a) if needs_provider_read(&records) => Some(app.runtime.sources.read(a, resolved_at).await.read),
        _ => None,
    };
    Ok(runtime_observation(&records, read.as_ref(), resolved_at)?)
}

/// Path ids: a malformed one names nothing, so it is a 404.
fn ids(project: &str, session: &str) -> Result<(ProjectId, SessionId), CoreError> {
    let project = super::project_id(project)?;
    let session = session.parse().map_err(|_| CoreError::NotFound("session"))?;
    Ok((project, session))
}
