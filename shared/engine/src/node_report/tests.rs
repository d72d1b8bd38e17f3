//! Applying node reports over in-memory sandbox records and observations.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use agentplane_domain::ids::NodeId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::sandbox::command::{NodeEvent, Report, SequencedEvent, Stream};
use agentplane_domain::sandbox::retention::ChunkMeta;
use agentplane_domain::sandbox::{
    Lifecycle, ProcessConfig, ProcessId, ProcessRecord, ProcessState, Sandbox, SandboxId,
};
use agentplane_domain::{ProjectId, Timestamp};

use super::apply;
use crate::ports::{PortError, ProcessObservations, RetentionState, SandboxRecords, StoredChunk};

#[derive(Default)]
struct State {
    sandboxes: HashMap<SandboxId, Sandbox>,
    processes: BTreeMap<ProcessId, ProcessRecord>,
    chunks: Vec<StoredChunk>,
    index: RetentionState,
    version: u64,
}

#[derive(Default)]
struct Fake(Mutex<State>);

impl Fake {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl SandboxRecords for Fake {
    async fn sandbox(&self, id: &SandboxId) -> Result<Sandbox, PortError> {
        self.state().sandboxes.get(id).cloned().ok_or(PortError::NotFound)
    }

    async fn transition_sandbox(
        &self,
        sandbox: &Sandbox,
        from: &Lifecycle,
        to: &Lifecycle,
    ) -> Result<Sandbox, PortError> {
        let mut state = self.state();
        let stored = state.sandboxes.get_mut(&sandbox.id).ok_or(PortError::NotFound)?;
        if stored.lifecycle != *from {
            return Err(PortError::Conflict);
        }
        stored.lifecycle = *to;
        Ok(stored.clone())
    }

    async fn set_isolation(
        &self,
        id: &SandboxId,
        isolation: &BTreeMap<String, String>,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        state.sandboxes.get_mut(id).ok_or(PortError::NotFound)?.isolation = isolation.clone();
        Ok(())
    }
}

impl ProcessObservations for Fake {
    async fn load_index(&self, _sandbox: &SandboxId) -> Result<(RetentionState, u64), PortError> {
        let state = self.state();
        Ok((state.index.clone(), state.version))
    }

    async fn save_index(
        &self,
        _sandbox: &SandboxId,
        index: &RetentionState,
        version: u64,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        if state.version != version {
            return Err(PortError::Conflict);
        }
        state.index = index.clone();
        state.version += 1;
        Ok(())
    }

    async fn processes(&self, _sandbox: &SandboxId) -> Result<Vec<ProcessRecord>, PortError> {
        Ok(self.state().processes.values().cloned().collect())
    }

    async fn put_process(&self, _sandbox: &SandboxId, record: &ProcessRecord) -> Result<(), PortError> {
        let mut state = self.state();
        if state.processes.contains_key(&record.id) {
            return Err(PortError::Conflict);
        }
        state.processes.insert(record.id, record.clone());
        Ok(())
    }

    async fn put_seen_process(
        &self,
        _sandbox: &SandboxId,
        record: &ProcessRecord,
    ) -> Result<Option<ProcessRecord>, PortError> {
        Ok(self.state().processes.insert(record.id, record.clone()))
    }

    async fn record_exit(
        &self,
        _sandbox: &SandboxId,
        id: ProcessId,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at: Timestamp,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        let record = state.processes.get_mut(&id).ok_or(PortError::NotFound)?;
        (record.state, record.exit_code, record.signal, record.exited_at) =
            (ProcessState::Exited, exit_code, signal, Some(at));
        Ok(())
    }

    async fn mark_gap(&self, _sandbox: &SandboxId) -> Result<(), PortError> {
        for record in self.state().processes.values_mut().filter(|p| p.state == ProcessState::Running) {
            (record.state, record.observation_gap) = (ProcessState::Unknown, true);
        }
        Ok(())
    }

    async fn set_truncated(&self, _sandbox: &SandboxId, id: ProcessId) -> Result<(), PortError> {
        if let Some(record) = self.state().processes.get_mut(&id) {
            record.output_truncated = true;
        }
        Ok(())
    }

    async fn delete_process(&self, _sandbox: &SandboxId, id: ProcessId) -> Result<(), PortError> {
        self.state().processes.remove(&id);
        Ok(())
    }

    async fn put_chunks(
        &self,
        _sandbox: &SandboxId,
        chunks: Vec<StoredChunk>,
        _now: Timestamp,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        for chunk in chunks {
            state.chunks.retain(|c| c.seq != chunk.seq);
            state.chunks.push(chunk);
        }
        Ok(())
    }

    async fn delete_chunks(&self, _sandbox: &SandboxId, chunks: &[ChunkMeta]) -> Result<(), PortError> {
        self.state().chunks.retain(|c| chunks.iter().all(|gone| gone.seq != c.seq));
        Ok(())
    }
}

fn at(s: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_000_000 + s)
}

fn node() -> NodeId {
    NodeId::from_random([1; 16])
}

fn with_sandbox() -> (Fake, SandboxId) {
    let id = SandboxId::from_random([2; 16]);
    let sandbox = Sandbox {
        id: id.clone(),
        project_id: ProjectId::from_random([3; 16]),
        node_id: node(),
        started_at: at(0),
        lifecycle: Lifecycle::start(at(0), 300),
        metadata: Metadata::default(),
        env_vars: BTreeMap::new(),
        isolation: BTreeMap::new(),
        session_id: None,
        envd_token_sealed: None,
    };
    let fake = Fake::default();
    fake.state().sandboxes.insert(id.clone(), sandbox);
    (fake, id)
}

fn run_and_print(sandbox: &SandboxId, connection: &str) -> Report {
    let process = ProcessId::Observed(1);
    let events = vec![
        NodeEvent::ProcessStarted {
            sandbox_id: sandbox.clone(),
            process,
            pid: 42,
            config: ProcessConfig::default(),
            tag: None,
            at: at(1),
        },
        NodeEvent::Output {
            sandbox_id: sandbox.clone(),
            process,
            stream: Stream::Stdout,
            at: at(2),
            data: "aGVsbG8=".into(),
        },
        NodeEvent::Output {
            sandbox_id: sandbox.clone(),
            process,
            stream: Stream::Stdout,
            at: at(2),
            data: "not base64!".into(),
        },
        NodeEvent::ProcessExited {
            sandbox_id: sandbox.clone(),
            process,
            exit_code: Some(0),
            signal: None,
            at: at(3),
        },
    ];
    Report {
        connection_id: connection.into(),
        events: events
            .into_iter()
            .enumerate()
            .map(|(i, event)| SequencedEvent { seq: i as u64 + 1, event })
            .collect(),
    }
}

#[tokio::test]
async fn a_report_records_the_process_its_output_and_its_exit_and_a_replay_applies_nothing_twice() {
    let (fake, sandbox) = with_sandbox();
    apply(&fake, &node(), run_and_print(&sandbox, "conn-1"), at(4)).await.unwrap();
    {
        let state = fake.state();
        let record = &state.processes[&ProcessId::Observed(1)];
        assert_eq!((record.pid, record.state, record.exit_code), (42, ProcessState::Exited, Some(0)));
        assert_eq!(state.chunks.len(), 1, "output that is not base64 is dropped: {:?}", state.chunks);
        assert_eq!(state.chunks[0].data, "aGVsbG8=");
        assert_eq!((state.index.applied_connection.as_deref(), state.index.applied_seq), (Some("conn-1"), 4));
        assert_eq!(state.version, 1);
    }
    // The same connection sends the same events again (a retried request): nothing changes.
    apply(&fake, &node(), run_and_print(&sandbox, "conn-1"), at(5)).await.unwrap();
    let state = fake.state();
    assert_eq!((state.chunks.len(), state.version), (1, 1));
}

#[tokio::test]
async fn a_report_about_a_sandbox_of_another_node_is_not_found_and_changes_nothing() {
    let (fake, sandbox) = with_sandbox();
    let stranger = NodeId::from_random([9; 16]);
    let result = apply(&fake, &stranger, run_and_print(&sandbox, "conn-1"), at(4)).await;
    assert!(matches!(result, Err(PortError::NotFound)), "{result:?}");
    let state = fake.state();
    assert!(state.processes.is_empty() && state.chunks.is_empty());
    assert_eq!(state.version, 0);
}

#[tokio::test]
async fn a_new_connection_marks_what_the_old_one_watched_as_a_gap() {
    let (fake, sandbox) = with_sandbox();
    let mut report = run_and_print(&sandbox, "conn-1");
    report.events.truncate(1); // started, never seen to end
    apply(&fake, &node(), report, at(4)).await.unwrap();
    let resumed = Report {
        connection_id: "conn-2".into(),
        events: vec![SequencedEvent {
            seq: 1,
            event: NodeEvent::ObservationResumed { sandbox_id: sandbox.clone(), at: at(10) },
        }],
    };
    apply(&fake, &node(), resumed, at(10)).await.unwrap();
    let state = fake.state();
    let record = &state.processes[&ProcessId::Observed(1)];
    assert_eq!((record.state, record.observation_gap), (ProcessState::Unknown, true));
    assert_eq!(state.index.applied_connection.as_deref(), Some("conn-2"));
}

#[tokio::test]
async fn an_init_that_exited_ends_the_sandbox_killed_and_never_revives_an_ended_one() {
    let (fake, sandbox) = with_sandbox();
    let exited = |seq, connection: &str| Report {
        connection_id: connection.into(),
        events: vec![SequencedEvent {
            seq,
            event: NodeEvent::InitExited { sandbox_id: sandbox.clone(), at: at(7) },
        }],
    };
    apply(&fake, &node(), exited(1, "conn-1"), at(8)).await.unwrap();
    let killed = fake.state().sandboxes[&sandbox].lifecycle;
    assert_eq!(killed.state, agentplane_domain::sandbox::SandboxState::Killed);
    // Told again (a new connection finds it gone): it stays as it was.
    apply(&fake, &node(), exited(1, "conn-2"), at(9)).await.unwrap();
    assert_eq!(fake.state().sandboxes[&sandbox].lifecycle, killed);
}
