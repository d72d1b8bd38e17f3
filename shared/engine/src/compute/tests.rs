//! Placement and the placer's pass over in-memory ports: fake allocation and sandbox records,
//! fake compute that launches (or refuses) and records what it ended.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use agentplane_domain::ids::NodeId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{Lifecycle, Sandbox, SandboxId};
use agentplane_domain::telemetry::{AllocationId, AllocationRecord, AllocationState, EnvironmentId};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::{PLACE_AFTER, place, reconcile};
use crate::ports::{Allocation, AllocationBinding, Compute, LiveAllocations, PortError, SandboxRecords};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct Records {
    allocations: Mutex<Vec<Allocation>>,
    sandboxes: Mutex<HashMap<SandboxId, Sandbox>>,
    /// `activate_allocation` answers this instead of binding (a lost race, a released Session).
    refuse_binding: Option<fn() -> PortError>,
}

impl LiveAllocations for Records {
    async fn live_allocations(&self) -> Result<Vec<Allocation>, PortError> {
        Ok(lock(&self.allocations).clone())
    }
}

impl AllocationBinding for Records {
    async fn activate_allocation(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        sandbox_id: &SandboxId,
        replacing: Option<&SandboxId>,
        now: Timestamp,
    ) -> Result<Allocation, PortError> {
        if let Some(refusal) = self.refuse_binding {
            return Err(refusal());
        }
        let mut allocations = lock(&self.allocations);
        let allocation =
            allocations.iter_mut().find(|a| a.session_id == *session).ok_or(PortError::NotFound)?;
        if allocation.sandbox_id.as_ref() != replacing {
            return Err(PortError::Conflict);
        }
        allocation.sandbox_id = Some(sandbox_id.clone());
        allocation.record.state = AllocationState::Running;
        allocation.updated_at = now;
        Ok(allocation.clone())
    }
}

impl SandboxRecords for Records {
    async fn sandbox(&self, id: &SandboxId) -> Result<Sandbox, PortError> {
        lock(&self.sandboxes).get(id).cloned().ok_or(PortError::NotFound)
    }

    async fn transition_sandbox(
        &self,
        _sandbox: &Sandbox,
        _from: &Lifecycle,
        _to: &Lifecycle,
    ) -> Result<Sandbox, PortError> {
        Err(PortError::Unavailable("not used by placement".into()))
    }

    async fn set_isolation(
        &self,
        _id: &SandboxId,
        _isolation: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), PortError> {
        Err(PortError::Unavailable("not used by placement".into()))
    }
}

#[derive(Default)]
struct Nodes {
    refuse: bool,
    launched: Mutex<Vec<Sandbox>>,
    ended: Mutex<Vec<SandboxId>>,
}

impl Compute for Nodes {
    type Error = &'static str;

    async fn launch(
        &self,
        project: ProjectId,
        new: CreateSandbox,
        session: Option<SessionId>,
    ) -> Result<Sandbox, &'static str> {
        if self.refuse {
            return Err("no node is online");
        }
        let n = lock(&self.launched).len() as u8;
        let sandbox = Sandbox {
            id: SandboxId::from_random([n + 1; 16]),
            project_id: project,
            node_id: NodeId::from_random([9; 16]),
            started_at: now(),
            lifecycle: Lifecycle::start(now(), new.timeout_s),
            metadata: new.metadata,
            env_vars: new.env_vars,
            isolation: Default::default(),
            session_id: session,
            envd_token_sealed: None,
        };
        lock(&self.launched).push(sandbox.clone());
        Ok(sandbox)
    }

    async fn end(&self, sandbox: &Sandbox) {
        lock(&self.ended).push(sandbox.id.clone());
    }
}

fn now() -> Timestamp {
    Timestamp::from_unix_seconds(1_000_000)
}

fn allocation(n: u8, state: AllocationState, sandbox: Option<&SandboxId>, age_s: i64) -> Allocation {
    Allocation {
        project_id: ProjectId::from_random([1; 16]),
        session_id: SessionId::from_random([n; 16]),
        environment_id: EnvironmentId::from_random([n; 16]),
        record: AllocationRecord {
            allocation_id: AllocationId::from_random([n; 16]),
            device_id: None,
            provider_type: "local".into(),
            state,
            created_at: now().plus_seconds(-age_s),
        },
        sandbox_id: sandbox.cloned(),
        updated_at: now(),
    }
}

fn sandbox(n: u8, killed: bool) -> Sandbox {
    let lifecycle = Lifecycle::start(now().plus_seconds(-60), 3600);
    Sandbox {
        id: SandboxId::from_random([100 + n; 16]),
        project_id: ProjectId::from_random([1; 16]),
        node_id: NodeId::from_random([9; 16]),
        started_at: now().plus_seconds(-60),
        lifecycle: if killed { lifecycle.kill(now().plus_seconds(-1)).unwrap() } else { lifecycle },
        metadata: Metadata::default(),
        env_vars: Default::default(),
        isolation: Default::default(),
        session_id: None,
        envd_token_sealed: None,
    }
}

#[tokio::test]
async fn placing_binds_the_allocation_to_the_compute_it_launched() {
    let pending = allocation(1, AllocationState::Pending, None, 0);
    let records = Records { allocations: Mutex::new(vec![pending.clone()]), ..Records::default() };
    let nodes = Nodes::default();
    let placed = place(&records, &nodes, &pending, now()).await.unwrap();
    let launched = lock(&nodes.launched)[0].clone();
    assert_eq!(placed.sandbox_id, Some(launched.id.clone()));
    assert_eq!(placed.record.state, AllocationState::Running);
    assert_eq!(launched.session_id, Some(pending.session_id), "the sandbox names its Session");
    assert!(lock(&nodes.ended).is_empty());
}

#[tokio::test]
async fn a_launch_no_node_takes_leaves_the_allocation_pending() {
    let pending = allocation(1, AllocationState::Pending, None, 0);
    let records = Records { allocations: Mutex::new(vec![pending.clone()]), ..Records::default() };
    let nodes = Nodes { refuse: true, ..Nodes::default() };
    assert_eq!(place(&records, &nodes, &pending, now()).await, None);
    assert_eq!(lock(&records.allocations)[0], pending);
}

#[tokio::test]
async fn compute_launched_for_an_allocation_released_meanwhile_is_ended() {
    for refusal in [(|| PortError::Conflict) as fn() -> PortError, || PortError::NotFound] {
        let pending = allocation(1, AllocationState::Pending, None, 0);
        let records = Records {
            allocations: Mutex::new(vec![pending.clone()]),
            refuse_binding: Some(refusal),
            ..Records::default()
        };
        let nodes = Nodes::default();
        assert_eq!(place(&records, &nodes, &pending, now()).await, None);
        let launched = lock(&nodes.launched)[0].id.clone();
        assert_eq!(*lock(&nodes.ended), vec![launched], "nothing keeps running for a released Session");
    }
}

#[tokio::test]
async fn the_placer_places_due_pending_allocations_and_replaces_ended_compute_only() {
    let (live, killed) = (sandbox(1, false), sandbox(2, true));
    let gone = SandboxId::from_random([200; 16]);
    let due = PLACE_AFTER.as_secs() as i64 + 1;
    let allocations = vec![
        allocation(1, AllocationState::Pending, None, due),
        allocation(2, AllocationState::Pending, None, 1),
        allocation(3, AllocationState::Running, Some(&live.id), due),
        allocation(4, AllocationState::Running, Some(&killed.id), due),
        allocation(5, AllocationState::Running, Some(&gone), due),
    ];
    let records = Records {
        allocations: Mutex::new(allocations),
        sandboxes: Mutex::new(HashMap::from([(live.id.clone(), live.clone()), (killed.id.clone(), killed)])),
        ..Records::default()
    };
    let nodes = Nodes::default();
    let report = reconcile(&records, &nodes, now()).await.unwrap();
    assert_eq!((report.allocations, report.placed, report.replaced, report.failed), (5, 1, 2, 0));
    let allocations = lock(&records.allocations).clone();
    assert_eq!(allocations[1].sandbox_id, None, "a fresh pending allocation is left to its Session's create");
    assert_eq!(allocations[2].sandbox_id, Some(live.id.clone()), "live compute is kept");
    assert_eq!(lock(&nodes.launched).len(), 3);
}
