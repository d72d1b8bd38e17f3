//! Ids that only telemetry needs so far. Same rules as `crate::ids`: canonical lowercase
//! hyphenated UUIDs, parsed at the edge.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ids::InvalidId;

macro_rules! telemetry_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(Uuid);

        impl $name {
            pub fn from_random(bytes: [u8; 16]) -> Self {
                Self(uuid::Builder::from_random_bytes(bytes).into_uuid())
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let parsed = Uuid::try_parse(s).map_err(|_| InvalidId { kind: $kind })?;
                if parsed.hyphenated().to_string() != s {
                    return Err(InvalidId { kind: $kind });
                }
                Ok(Self(parsed))
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.to_string()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }
    };
}

telemetry_id!(
    /// The environment a Session runs in.
    EnvironmentId,
    "environment"
);
telemetry_id!(
    /// A managed allocation: the compute identity of a managed Session.
    AllocationId,
    "allocation"
);
telemetry_id!(
    /// A Runtime device bound to a managed allocation.
    DeviceId,
    "device"
);
telemetry_id!(
    /// A sandbox node (a host running the node daemon).
    NodeId,
    "node"
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
