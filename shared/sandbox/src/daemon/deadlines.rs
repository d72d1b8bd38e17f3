//! Deadlines: a sandbox past its end is killed, once Core has said the end stands.

use super::*;

/// Enforces deadlines. Before killing, it asks Core for the current deadline, so a timeout
/// extension that has not reached the node yet is never undercut.
pub(super) async fn deadline_loop(node: Arc<Node>) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = now();
        let due: Vec<SandboxId> = node
            .sandboxes
            .lock()
            .await
            .iter()
            .filter(|(_, h)| !h.paused && h.end_at <= t)
            .map(|(id, _)| id.clone())
            .collect();
        if due.is_empty() {
            continue;
        }
        let Ok(truth) = node.client.hosted().await else { continue };
        for id in due {
            match truth.iter().find(|h| h.sandbox_id == id) {
                Some(h) if h.state == "running" => {
                    if let Some(local) = node.sandboxes.lock().await.get_mut(&id) {
                        local.end_at = h.end_at;
                    }
                }
                Some(h) if h.state == "paused" => {
                    if let Some(local) = node.sandboxes.lock().await.get_mut(&id) {
                        local.paused = true;
                    }
                }
                Some(_) => {
                    tracing::info!(sandbox = %id, "deadline reached: killing the sandbox");
                    let removed = node.sandboxes.lock().await.remove(&id);
                    if let Some(h) = removed {
                        node.provider.destroy(&h.sandbox).await;
                    }
                    node.emit(NodeEvent::SandboxExpired { sandbox_id: id, at: now() });
                }
                None => {
                    // Core ended it already (killed): make sure nothing is left.
                    let removed = node.sandboxes.lock().await.remove(&id);
                    if let Some(h) = removed {
                        node.provider.destroy(&h.sandbox).await;
                    }
                }
            }
        }
    }
}
