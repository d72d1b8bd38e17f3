//! The re-seal pass: every endpoint's signing secrets sealed under the current key version, so
//! an older version can leave the key material. Idempotent (a value already current is left
//! alone), resumable (the scan position is saved after each page; the next pass goes on from
//! there), and never overwrites a concurrent change (each write is conditional on the endpoint
//! being unchanged since it was read; on a conflict the endpoint is read again and re-sealed).

use std::time::Instant;

use agentplane_domain::webhook::{Endpoint, StoredSecret};

use super::SealKey;
use crate::ports::PortError;
use crate::ports::webhooks::WebhookReseal;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ResealReport {
    /// Endpoints read.
    pub scanned: usize,
    /// Endpoints whose secrets were written under the current version.
    pub resealed: usize,
    /// Endpoints whose every secret was current already.
    pub current: usize,
    /// Endpoints changed by somebody else on every try (left for the next pass).
    pub conflicts: usize,
    /// Endpoints with a secret that does not open (a version the key material lacks): logged.
    pub failed: usize,
    /// Whether the scan reached the end (else the next pass goes on where this one stopped).
    pub done: bool,
    /// The key version the pass sealed under.
    pub version: u32,
}

/// Re-seals endpoints page by page until the scan ends or `deadline` passes.
pub async fn reseal_pass<S: WebhookReseal>(
    store: &S,
    key: &SealKey,
    deadline: Instant,
) -> Result<ResealReport, PortError> {
    let mut report = ResealReport { version: key.current_version(), ..ResealReport::default() };
    let mut after = store.reseal_cursor().await?;
    loop {
        if Instant::now() >= deadline {
            return Ok(report);
        }
        let (endpoints, next) = store.endpoints_after(after.as_ref()).await?;
        for endpoint in endpoints {
            report.scanned += 1;
            reseal_endpoint(store, key, endpoint, &mut report).await?;
        }
        store.save_reseal_cursor(next.as_ref()).await?;
        match next {
            Some(next) => after = Some(next),
            None => {
                report.done = true;
                return Ok(report);
            }
        }
    }
}

async fn reseal_endpoint<S: WebhookReseal>(
    store: &S,
    key: &SealKey,
    mut endpoint: Endpoint,
    report: &mut ResealReport,
) -> Result<(), PortError> {
    for _ in 0..3 {
        if endpoint.secrets.iter().all(|s| key.is_current(&s.sealed)) {
            report.current += 1;
            return Ok(());
        }
        let resealed: Result<Vec<StoredSecret>, _> = endpoint
            .secrets
            .iter()
            .map(|s| Ok(StoredSecret { sealed: key.reseal(endpoint.id.as_str(), &s.sealed)?, ..s.clone() }))
            .collect();
        let resealed = match resealed {
            Ok(resealed) => resealed,
            Err(err @ super::SealError::UnknownVersion(_)) | Err(err @ super::SealError::Open) => {
                tracing::error!(endpoint = %endpoint.id, error = %err, "a webhook secret does not open: not re-sealed");
                report.failed += 1;
                return Ok(());
            }
            Err(err) => return Err(PortError::Unavailable(err.to_string())),
        };
        match store.replace_secrets(&endpoint, &resealed).await {
            Ok(()) => {
                report.resealed += 1;
                return Ok(());
            }
            Err(PortError::Conflict) => match store.reseal_endpoint(&endpoint.owner, &endpoint.id).await {
                Ok(fresh) => endpoint = fresh,
                // Deleted meanwhile: nothing to re-seal.
                Err(PortError::NotFound) => return Ok(()),
                Err(err) => return Err(err),
            },
            Err(err) => return Err(err),
        }
    }
    report.conflicts += 1;
    Ok(())
}
