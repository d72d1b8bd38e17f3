//! What the node tells Core: heartbeats with its host's sample, and the events it observed.

use super::*;

pub(super) async fn heartbeat_once(node: &Arc<Node>, config: &NodeConfig) {
    let sample = host::sample(&config.state_dir).await;
    let sandboxes: Vec<SandboxUsage> = node
        .sandboxes
        .lock()
        .await
        .values()
        .map(|h| SandboxUsage {
            sandbox_id: h.sandbox.id.clone(),
            cpu_seconds: h.sandbox.cgroup.cpu_seconds(),
            memory_bytes: h.sandbox.cgroup.memory_bytes(),
            memory_limit_bytes: h.sandbox.cgroup.memory_limit_bytes(),
            cpu_limit_cores: h.sandbox.cgroup.cpu_limit_cores(),
        })
        .collect();
    let heartbeat = Heartbeat {
        connection_id: node.connection.clone(),
        observed_at: now(),
        cpu: sample.cpu,
        total_memory_bytes: sample.total_memory_bytes,
        available_memory_bytes: sample.available_memory_bytes,
        available_disk_bytes: sample.available_disk_bytes,
        effective_cpu_cores: sample.effective_cpu_cores,
        sandboxes,
    };
    if let Err(err) = node.client.heartbeat(&heartbeat).await {
        tracing::warn!(error = %err, "heartbeat failed");
    }
}

pub(super) async fn heartbeat_loop(node: Arc<Node>, config: NodeConfig) {
    loop {
        tokio::time::sleep(config.heartbeat_every).await;
        heartbeat_once(&node, &config).await;
    }
}

/// Largest report body (Core accepts 1 MiB); output is base64, so this leaves room.
const REPORT_DATA_BYTES: usize = 640 * 1024;
/// Most output gathered into one round before trimming (bounds memory and latency).
const ROUND_DATA_BYTES: usize = 16 * 1024 * 1024;

/// Sends events in order, in batches; a failed batch is sent again as it was (Core applies each
/// event once per connection), so nothing is skipped or reordered. Each round takes what is
/// queued and drops up front the output Core would drop anyway (saying so), which keeps a
/// fast printer from outrunning the node.
pub(super) async fn report_loop(node: Arc<Node>, mut inbox: mpsc::UnboundedReceiver<NodeEvent>) {
    let mut seq = 0u64;
    while let Some(first) = inbox.recv().await {
        let mut round = vec![first];
        let mut size = 0usize;
        while size < ROUND_DATA_BYTES {
            match inbox.try_recv() {
                Ok(event) => {
                    if let NodeEvent::Output { data, .. } = &event {
                        size += data.len();
                    }
                    round.push(event);
                }
                Err(_) => break,
            }
        }
        let mut pending = trim_batch(round).into_iter().peekable();
        while pending.peek().is_some() {
            let mut events = Vec::new();
            let mut bytes = 0usize;
            while let Some(event) = pending.next_if(|_| bytes < REPORT_DATA_BYTES && events.len() < 500) {
                if let NodeEvent::Output { data, .. } = &event {
                    bytes += data.len();
                }
                seq += 1;
                events.push(SequencedEvent { seq, event });
            }
            let report = Report { connection_id: node.connection.clone(), events };
            let mut backoff = Duration::from_millis(50);
            while let Err(err) = node.client.report(&report).await {
                tracing::warn!(error = %err, "report failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
