//! Ids that only telemetry needs so far. Same rules as `crate::ids`: canonical lowercase
//! hyphenated UUIDs, parsed at the edge.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ids::{InvalidId, uuid_id};

/// Nodes are shared with the sandbox module: one id type.
pub use crate::ids::NodeId;

uuid_id!(
    /// The environment a Session runs in.
    EnvironmentId,
    "environment"
);
uuid_id!(
    /// A managed allocation: the compute identity of a managed Session.
    AllocationId,
    "allocation"
);
uuid_id!(
    /// A Runtime device bound to a managed allocation.
    DeviceId,
    "device"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_ids_accept_only_the_canonical_spelling() {
        let id = AllocationId::from_random([0xab; 16]);
        assert_eq!(id.to_string().parse::<AllocationId>(), Ok(id));
        assert!(id.to_string().to_uppercase().parse::<AllocationId>().is_err());
        assert!("node-1".parse::<NodeId>().is_err());
    }
}
