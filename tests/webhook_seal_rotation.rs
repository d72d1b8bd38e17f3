//! The webhook sealing key rotates (README "Rotating secrets"): secrets sealed under an older
//! key version stay readable, new ones are sealed under the current version, and the re-seal
//! pass moves every endpoint's secrets to it — idempotent, resumable, and never over a
//! concurrent change. (A value sealed by the format before versions is a checked-in fixture:
//! `shared/engine/src/webhooks/fixtures/`, opened by the engine's unit tests.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentplane_domain::platform::workspace_sweep::ScanPosition;
use agentplane_domain::webhook::{Endpoint, EndpointId, Owner, StoredSecret};
use agentplane_engine::ports::PortError;
use agentplane_engine::ports::webhooks::WebhookReseal;
use agentplane_engine::webhooks::reseal::reseal_pass;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_store::Store;
use agentplane_tests::{TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::json;

const K1: &str = "FirstWebhookSealingKeyText0123456789abcdefXYZ";
const K2: &str = "SecondWebhookSealingKeyText0123456789abcdefXY";

fn versions(current: u32, keys: &[(u32, &str)]) -> anyhow::Result<SealKey> {
    let keys: serde_json::Map<String, serde_json::Value> =
        keys.iter().map(|(v, k)| (v.to_string(), json!(k))).collect();
    Ok(SealKey::from_secret_text(&json!({ "current": current, "keys": keys }).to_string())?)
}

/// An app whose webhook key is versions 1 and 2, 2 current; a project with endpoints `a` and
/// `b`; `a`'s secret re-written as the deployment sealed it before the rotation (version 1).
struct Setup {
    t: TestApp,
    key: Arc<SealKey>,
    a: (Owner, EndpointId, String),
    b: (Owner, EndpointId, String),
}

async fn setup() -> anyhow::Result<Setup> {
    let key = Arc::new(versions(2, &[(1, K1), (2, K2)])?);
    let config = WebhookConfig::new(Some(key.clone()), agentplane_tests::loopback_receivers());
    let t = TestApp::spawn_with(|app| app.with_webhooks(config)).await?;
    let tenant = t.tenant().await?;
    let owner = Owner::Project(tenant.project_id.parse()?);
    let mut made = Vec::new();
    for _ in 0..2 {
        let (status, body) = send(
            t.client(&tenant.key, Method::POST, "/webhooks")
                .json(&json!({"url": "https://example.com/hook"})),
        )
        .await?;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let id: EndpointId = str_field(&body, "id")?.parse()?;
        made.push((owner, id, str_field(&body, "secret")?));
    }
    let b = made.pop().ok_or_else(|| anyhow::anyhow!("two endpoints"))?;
    let a = made.pop().ok_or_else(|| anyhow::anyhow!("two endpoints"))?;
    let stored = t.store.webhooks().get(&a.0, &a.1).await?;
    let old_key = SealKey::from_secret_text(K1)?;
    let legacy =
        StoredSecret { sealed: old_key.seal(a.1.as_str(), a.2.as_bytes())?, ..stored.secrets[0].clone() };
    t.store.webhooks().replace_secrets(&stored, &[legacy]).await?;
    Ok(Setup { t, key, a, b })
}

async fn stored(store: &Store, ep: &(Owner, EndpointId, String)) -> anyhow::Result<Endpoint> {
    Ok(store.webhooks().get(&ep.0, &ep.1).await?)
}

fn versions_of(endpoint: &Endpoint) -> Vec<Option<u32>> {
    endpoint.secrets.iter().map(|s| SealKey::version_of(&s.sealed)).collect()
}

fn opened(key: &SealKey, endpoint: &Endpoint) -> anyhow::Result<Vec<String>> {
    endpoint
        .secrets
        .iter()
        .map(|s| Ok(String::from_utf8(key.open(endpoint.id.as_str(), &s.sealed)?)?))
        .collect()
}

#[tokio::test]
async fn old_secrets_stay_readable_and_the_reseal_job_moves_them_to_the_current_version() -> anyhow::Result<()>
{
    let s = setup().await?;
    let before_a = stored(&s.t.store, &s.a).await?;
    assert_eq!(versions_of(&before_a), vec![Some(1)], "sealed before the rotation");
    assert_eq!(versions_of(&stored(&s.t.store, &s.b).await?), vec![Some(2)], "new secrets: the new version");
    assert_eq!(opened(&s.key, &before_a)?, vec![s.a.2.clone()], "the old version stays readable");

    let report = agentplane_api::jobs::webhook_reseal_once(&s.t.app, Duration::from_secs(60)).await?;
    assert!(report.done && report.version == 2, "{report:?}");
    assert_eq!((report.resealed, report.failed, report.conflicts), (1, 0, 0), "{report:?}");
    let after_a = stored(&s.t.store, &s.a).await?;
    assert_eq!(versions_of(&after_a), vec![Some(2)]);
    assert_eq!(opened(&s.key, &after_a)?, vec![s.a.2.clone()], "the same secret");
    assert_eq!(after_a.updated_at, before_a.updated_at, "a re-seal is not an update");
    assert_eq!(s.t.store.webhooks().reseal_cursor().await?, None, "a finished pass leaves no position");

    // Idempotent; and version 1 may now leave the key material.
    let again = agentplane_api::jobs::webhook_reseal_once(&s.t.app, Duration::from_secs(60)).await?;
    assert_eq!((again.resealed, again.done), (0, true), "{again:?}");
    let only_new = versions(2, &[(2, K2)])?;
    assert_eq!(opened(&only_new, &after_a)?, vec![s.a.2.clone()]);
    assert_eq!(opened(&only_new, &stored(&s.t.store, &s.b).await?)?, vec![s.b.2.clone()]);
    Ok(())
}

#[tokio::test]
async fn a_pass_goes_on_where_the_last_one_stopped() -> anyhow::Result<()> {
    let s = setup().await?;
    // A pass that stopped right after `a` (its position saved): the next one goes on after it.
    let at = ScanPosition { pk: format!("PROJECT#{}", project_of(&s.a.0)), sk: format!("WEBHOOK#{}", s.a.1) };
    s.t.store.webhooks().save_reseal_cursor(Some(&at)).await?;
    let report = reseal_pass(&s.t.store, &s.key, Instant::now() + Duration::from_secs(60)).await?;
    assert!(report.done, "{report:?}");
    assert_eq!(
        versions_of(&stored(&s.t.store, &s.a).await?),
        vec![Some(1)],
        "before the position: not this pass's"
    );
    // The next pass starts over.
    let report = reseal_pass(&s.t.store, &s.key, Instant::now() + Duration::from_secs(60)).await?;
    assert_eq!(report.resealed, 1, "{report:?}");
    assert_eq!(versions_of(&stored(&s.t.store, &s.a).await?), vec![Some(2)]);
    // Out of time before its first page: nothing read, the position kept for the next.
    let none = reseal_pass(&s.t.store, &s.key, Instant::now()).await?;
    assert_eq!((none.scanned, none.done), (0, false));
    Ok(())
}

fn project_of(owner: &Owner) -> String {
    match owner {
        Owner::Project(p) => p.to_string(),
        Owner::Tenant(t) => t.to_string(),
    }
}

/// The store, with an endpoint update (a secret rotation through the API's use of `replace`)
/// landing between the pass's read and its write, once.
struct Interfering {
    store: Store,
    key: Arc<SealKey>,
    done: AtomicBool,
}

impl WebhookReseal for Interfering {
    async fn endpoints_after(
        &self,
        after: Option<&ScanPosition>,
    ) -> Result<(Vec<Endpoint>, Option<ScanPosition>), PortError> {
        self.store.endpoints_after(after).await
    }

    async fn reseal_endpoint(&self, owner: &Owner, id: &EndpointId) -> Result<Endpoint, PortError> {
        WebhookReseal::reseal_endpoint(&self.store, owner, id).await
    }

    async fn replace_secrets(&self, endpoint: &Endpoint, secrets: &[StoredSecret]) -> Result<(), PortError> {
        if !self.done.swap(true, Ordering::SeqCst) {
            let mut fresh = self.store.webhooks().get(&endpoint.owner, &endpoint.id).await?;
            let previous = fresh.updated_at;
            let sealed = self
                .key
                .seal(endpoint.id.as_str(), b"whsec_rotatedConcurrently0000000000000000")
                .map_err(|e| PortError::Unavailable(e.to_string()))?;
            fresh.rotate(sealed, 24, previous.plus_millis(1));
            self.store.webhooks().replace(&fresh, previous).await?;
        }
        self.store.replace_secrets(endpoint, secrets).await
    }

    async fn reseal_cursor(&self) -> Result<Option<ScanPosition>, PortError> {
        self.store.reseal_cursor().await
    }

    async fn save_reseal_cursor(&self, at: Option<&ScanPosition>) -> Result<(), PortError> {
        self.store.save_reseal_cursor(at).await
    }
}

#[tokio::test]
async fn a_reseal_never_overwrites_a_concurrent_secret_rotation() -> anyhow::Result<()> {
    let s = setup().await?;
    let store = Interfering { store: s.t.store.clone(), key: s.key.clone(), done: AtomicBool::new(false) };
    let report = reseal_pass(&store, &s.key, Instant::now() + Duration::from_secs(60)).await?;
    assert_eq!((report.resealed, report.conflicts, report.done), (1, 0, true), "{report:?}");
    let a = stored(&s.t.store, &s.a).await?;
    // The rotation's new secret is kept, and the old one is re-sealed beside it.
    assert_eq!(versions_of(&a), vec![Some(2), Some(2)]);
    assert_eq!(
        opened(&s.key, &a)?,
        vec![s.a.2.clone(), "whsec_rotatedConcurrently0000000000000000".to_owned()]
    );
    assert!(a.secrets[0].expires_at.is_some(), "the rotation's overlap is kept: {a:?}");
    Ok(())
}
