//! Every write of a running Run: a change applied to the Run as it is stored now, on its
//! version, read again on a conflict.

use agentplane_domain::platform::run::{Run, RunStatus};

use crate::ports::platform::PlatformRuns;
use crate::ports::{OutboxEvent, PortError};

/// Writes `change` to the Run as it is stored now (read again on a conflict), while it is
/// still `running`; the Run as written, or `None` when it is no longer running.
pub(crate) async fn update_running<S: PlatformRuns>(
    store: &S,
    run: &Run,
    change: impl Fn(&mut Run),
    events: impl Fn(&Run) -> Vec<OutboxEvent>,
) -> Result<Option<(Run, Vec<OutboxEvent>)>, PortError> {
    let mut current = run.clone();
    for _ in 0..8 {
        if current.status != RunStatus::Running {
            return Ok(None);
        }
        let expected = current.version;
        let mut next = current.clone();
        change(&mut next);
        next.version = expected + 1;
        let emitted = events(&next);
        match store.replace_run_emitting(&next, expected, &emitted).await {
            Ok(()) => return Ok(Some((next, emitted))),
            Err(PortError::Conflict) => current = store.run(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Err(PortError::Conflict)
}
