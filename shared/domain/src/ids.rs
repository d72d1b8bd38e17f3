//! Typed ids. Parsing happens at the edge; a malformed id never reaches storage.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed {kind} id")]
pub struct InvalidId {
    pub kind: &'static str,
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(Uuid);

        impl $name {
            /// Wraps fresh random bytes (the caller owns the randomness, the domain stays pure).
            pub fn from_random(bytes: [u8; 16]) -> Self {
                Self(uuid::Builder::from_random_bytes(bytes).into_uuid())
            }

            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            /// Accepts only the canonical lowercase hyphenated form that we hand out, so one id
            /// has one spelling (and one storage key).
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

/// For ids defined elsewhere in the crate (telemetry), with the same rules.
pub(crate) use uuid_id;

uuid_id!(
    /// A project: the unit of isolation. Every object belongs to exactly one.
    ProjectId,
    "project"
);
uuid_id!(
    /// A project API key (the id, never the secret).
    ApiKeyId,
    "api key"
);
uuid_id!(
    /// A session: one conversation. Its id is bare (no prefix) on every surface.
    SessionId,
    "session"
);
uuid_id!(
    /// An agent.
    AgentId,
    "agent"
);
uuid_id!(
    /// A sandbox node: a host running the node daemon.
    NodeId,
    "node"
);
uuid_id!(
    /// A command queued for a node daemon.
    CommandId,
    "command"
);

uuid_id!(
    /// A tenant: a group of projects that share limits.
    TenantId,
    "tenant"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_their_text_form() {
        let id = SessionId::from_random([7; 16]);
        let text = id.to_string();
        assert_eq!(text.parse::<SessionId>(), Ok(id));
    }

    #[test]
    fn non_canonical_spellings_are_rejected() {
        let id = SessionId::from_random([0xab; 16]).to_string();
        assert!(id.to_uppercase().parse::<SessionId>().is_err());
        assert!(id.replace('-', "").parse::<SessionId>().is_err());
        assert!(format!("{{{id}}}").parse::<SessionId>().is_err());
        assert!("not-an-id".parse::<SessionId>().is_err());
        assert!("".parse::<SessionId>().is_err());
    }
}
