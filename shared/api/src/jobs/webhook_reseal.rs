//! `webhook-reseal`: every endpoint's signing secrets sealed under the current version of the
//! webhook key (README "Rotating secrets"). Invoked by hand after a key rotation
//! (`aws lambda invoke`), and daily so nothing stays behind; each invocation goes on where the
//! last one stopped. The local gateway runs one pass at start.

use std::time::{Duration, Instant};

use agentplane_engine::ports::PortError;
use agentplane_engine::webhooks::reseal::{ResealReport, reseal_pass};

use crate::App;

/// One invocation's budget: the job's timeout (300 s) less a margin to save its position.
pub const RESEAL_BUDGET: Duration = Duration::from_secs(240);

/// Re-seals until the scan ends or `budget` passes; webhooks without a key: nothing to do.
pub async fn webhook_reseal_once(app: &App, budget: Duration) -> Result<ResealReport, PortError> {
    let Some(key) = app.webhooks.key.as_deref() else {
        tracing::warn!("webhook re-seal: no webhook secret key is configured");
        return Ok(ResealReport { done: true, ..ResealReport::default() });
    };
    let report = reseal_pass(&app.store, key, Instant::now() + budget).await?;
    tracing::info!(?report, "webhook re-seal pass");
    Ok(report)
}
