//! A Session's managed allocation: Core's record of the compute an openai_hosted Session runs on.

use serde::{Deserialize, Serialize};

use crate::sandbox::SandboxId;
use crate::telemetry::{AllocationRecord, EnvironmentId};
use crate::{ProjectId, SessionId, Timestamp};

/// Core's record of one Session's managed allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub environment_id: EnvironmentId,
    #[serde(flatten)]
    pub record: AllocationRecord,
    /// The sandbox running the allocation's compute, once bound.
    #[serde(default)]
    pub sandbox_id: Option<SandboxId>,
    pub updated_at: Timestamp,
}

impl Allocation {
    /// The bound sandbox's id as stored (`None` until bound).
    pub fn sandbox(&self) -> Option<&str> {
        self.sandbox_id.as_ref().map(SandboxId::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{AllocationId, AllocationState};
    use serde_json::json;

    #[test]
    fn the_bound_sandbox_is_a_typed_id_stored_as_its_string() {
        let sandbox = SandboxId::from_random([7; 16]);
        let allocation = Allocation {
            project_id: ProjectId::from_random([1; 16]),
            session_id: SessionId::from_random([2; 16]),
            environment_id: EnvironmentId::from_random([3; 16]),
            record: AllocationRecord {
                allocation_id: AllocationId::from_random([4; 16]),
                device_id: None,
                provider_type: "local".into(),
                state: AllocationState::Running,
                created_at: Timestamp::from_unix_millis(5),
            },
            sandbox_id: Some(sandbox.clone()),
            updated_at: Timestamp::from_unix_millis(6),
        };
        let stored = serde_json::to_value(&allocation).unwrap();
        assert_eq!(stored["sandbox_id"], json!(sandbox.as_str()));
        assert_eq!(serde_json::from_value::<Allocation>(stored.clone()).unwrap(), allocation);
        let mut unbound = stored;
        unbound["sandbox_id"] = json!(null);
        assert_eq!(serde_json::from_value::<Allocation>(unbound).unwrap().sandbox_id, None);
    }

    #[test]
    fn a_stored_sandbox_id_that_is_not_one_is_refused() {
        let mut stored = json!({
            "project_id": ProjectId::from_random([1; 16]), "session_id": SessionId::from_random([2; 16]),
            "environment_id": EnvironmentId::from_random([3; 16]),
            "allocation_id": AllocationId::from_random([4; 16]), "device_id": null, "provider_type": "local",
            "state": "running", "created_at": 5, "updated_at": 6,
        });
        assert!(serde_json::from_value::<Allocation>(stored.clone()).is_ok());
        stored["sandbox_id"] = json!("../../etc");
        assert!(serde_json::from_value::<Allocation>(stored).is_err());
    }
}
