//! Applying a node's observation report: process records, output chunks under the retention
//! rules, gaps, expiry. Per sandbox: read the retention index, apply the events it has not seen,
//! write what they imply, and save the index last, conditionally on its version.
//!
//! Runs over two ports, [`SandboxRecords`] and [`ProcessObservations`]; the node surface maps
//! HTTP to [`apply`] and its errors to responses.

use std::collections::BTreeSet;

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::{NodeEvent, Report, SequencedEvent};
use agentplane_domain::sandbox::process::exit_code_for;
use agentplane_domain::sandbox::retention::{Eviction, MAX_CHUNK_BYTES};
use agentplane_domain::sandbox::{ProcessConfig, ProcessId, ProcessRecord, ProcessState, SandboxId};
use base64::Engine as _;

use crate::ports::{PortError, ProcessObservations, SandboxRecords, StoredChunk};

/// Applies `report` from `node`. A sandbox of another node is `NotFound`.
pub async fn apply<S: SandboxRecords + ProcessObservations>(
    store: &S,
    node: &NodeId,
    report: Report,
    now: Timestamp,
) -> Result<(), PortError> {
    // Group by sandbox, keeping each sandbox's events in order.
    let mut groups: Vec<(SandboxId, Vec<SequencedEvent>)> = Vec::new();
    for event in report.events {
        let id = event.event.sandbox_id().clone();
        match groups.iter_mut().find(|(s, _)| *s == id) {
            Some((_, events)) => events.push(event),
            None => groups.push((id, vec![event])),
        }
    }
    for (sandbox, events) in groups {
        apply_sandbox(store, node, &report.connection_id, &sandbox, events, now).await?;
    }
    Ok(())
}

async fn apply_sandbox<S: SandboxRecords + ProcessObservations>(
    store: &S,
    node: &NodeId,
    connection: &str,
    sandbox_id: &SandboxId,
    events: Vec<SequencedEvent>,
    now: Timestamp,
) -> Result<(), PortError> {
    let sandbox = store.sandbox(sandbox_id).await?;
    if sandbox.node_id != *node {
        return Err(PortError::NotFound);
    }
    let (mut state, version) = store.load_index(sandbox_id).await?;
    let same_connection = state.applied_connection.as_deref() == Some(connection);
    let last_applied = if same_connection { state.applied_seq } else { 0 };
    let events: Vec<SequencedEvent> =
        events.into_iter().filter(|e| !same_connection || e.seq > last_applied).collect();
    if events.is_empty() {
        return Ok(());
    }
    // Which observations are finished (for choosing what to drop past 256).
    let mut finished: BTreeSet<ProcessId> = BTreeSet::new();
    if events.iter().any(|e| matches!(e.event, NodeEvent::ProcessStarted { .. } | NodeEvent::LiveSeen { .. }))
    {
        finished = store
            .processes(sandbox_id)
            .await?
            .into_iter()
            .filter(|p| p.state != ProcessState::Running)
            .map(|p| p.id)
            .collect();
    }
    let mut chunks: Vec<StoredChunk> = Vec::new();
    let mut eviction = Eviction::default();
    for SequencedEvent { seq, event } in events {
        tracing::debug!(%sandbox_id, seq, ?event, "applying");
        state.applied_connection = Some(connection.to_owned());
        state.applied_seq = seq;
        match event {
            NodeEvent::ProcessStarted { process, pid, config, tag, at, .. } => {
                eviction.merge(state.index.admit_observation(process, |p| finished.contains(&p)));
                let record = ProcessRecord {
                    id: process,
                    pid,
                    tag,
                    config,
                    pty: false,
                    started_at: at,
                    exited_at: None,
                    exit_code: None,
                    signal: None,
                    state: ProcessState::Running,
                    observed: true,
                    observation_gap: false,
                    output_truncated: false,
                };
                ignore_conflict(store.put_process(sandbox_id, &record).await)?;
            }
            NodeEvent::LiveSeen { pid, cmd, args, at, .. } => {
                let process = ProcessId::Live(pid);
                eviction.merge(state.index.admit_observation(process, |p| finished.contains(&p)));
                let record = ProcessRecord {
                    id: process,
                    pid,
                    tag: None,
                    config: ProcessConfig { cmd, args, ..ProcessConfig::default() },
                    pty: false,
                    started_at: at,
                    exited_at: None,
                    exit_code: None,
                    signal: None,
                    state: ProcessState::Running,
                    observed: false,
                    observation_gap: true,
                    output_truncated: false,
                };
                // A record of this pid that no longer runs is an older process: after a gap the
                // pid names the one seen now, and the old one's output is not its output.
                match store.put_seen_process(sandbox_id, &record).await {
                    Ok(Some(_older)) => eviction.chunks.extend(state.index.forget_output(process)),
                    Ok(None) | Err(PortError::Conflict) => {}
                    Err(err) => return Err(err),
                }
            }
            NodeEvent::Output { process, stream, at, data, .. } => {
                let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&data) else {
                    tracing::warn!(%sandbox_id, %process, "node sent output that is not base64; dropped");
                    continue;
                };
                if bytes.is_empty()
                    || bytes.len() > MAX_CHUNK_BYTES
                    || !state.index.observations.contains(&process)
                {
                    continue;
                }
                let (seq, pushed) =
                    state.index.admit_chunk(process, u32::try_from(bytes.len()).unwrap_or(u32::MAX));
                eviction.merge(pushed);
                chunks.push(StoredChunk { seq, process, stream, at, data });
            }
            NodeEvent::OutputDropped { process, .. } => {
                eviction.truncated.insert(process);
            }
            NodeEvent::ProcessExited { process, exit_code, signal, at, .. } => {
                store.record_exit(sandbox_id, process, exit_code_for(exit_code, signal), signal, at).await?;
                finished.insert(process);
            }
            NodeEvent::ObservationResumed { .. } => store.mark_gap(sandbox_id).await?,
            NodeEvent::SandboxExpired { at, .. } => {
                let current = store.sandbox(sandbox_id).await?;
                if let Ok(expired) = current.lifecycle.expire(at.max(now)) {
                    ignore_conflict(
                        store.transition_sandbox(&current, &current.lifecycle, &expired).await.map(|_| ()),
                    )?;
                }
            }
            NodeEvent::InitExited { at, .. } => {
                // Its processes are gone with its init: it can never run anything again.
                let current = store.sandbox(sandbox_id).await?;
                if let Ok(killed) = current.lifecycle.kill(at.max(now)) {
                    ignore_conflict(
                        store.transition_sandbox(&current, &current.lifecycle, &killed).await.map(|_| ()),
                    )?;
                }
            }
            NodeEvent::Isolation { isolation, .. } => store.set_isolation(sandbox_id, &isolation).await?,
        }
    }
    let dropped: BTreeSet<u64> = eviction.chunks.iter().map(|c| c.seq).collect();
    chunks.retain(|c| !dropped.contains(&c.seq));
    store.put_chunks(sandbox_id, chunks, now).await?;
    store.delete_chunks(sandbox_id, &eviction.chunks).await?;
    for gone in &eviction.observations {
        store.delete_process(sandbox_id, *gone).await?;
    }
    for process in eviction.truncated.iter().filter(|p| !eviction.observations.contains(p)) {
        store.set_truncated(sandbox_id, *process).await?;
    }
    store.save_index(sandbox_id, &state, version).await
}

fn ignore_conflict(result: Result<(), PortError>) -> Result<(), PortError> {
    match result {
        Err(PortError::Conflict) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests;
