//! Sandbox ids (`sbx_…`), process ids (`obs-<n>` / `live-<pid>`) and node tokens.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::InvalidId;

const SANDBOX_PREFIX: &str = "sbx_";
const SANDBOX_HEX: usize = 32;

/// A sandbox: `sbx_` and 32 lowercase hex digits (16 random bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SandboxId(String);

impl SandboxId {
    pub fn from_random(bytes: [u8; 16]) -> Self {
        Self(format!("{SANDBOX_PREFIX}{}", hex::encode(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for SandboxId {
    type Err = InvalidId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = s.strip_prefix(SANDBOX_PREFIX).is_some_and(|rest| {
            rest.len() == SANDBOX_HEX
                && rest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok { Ok(Self(s.to_owned())) } else { Err(InvalidId { kind: "sandbox" }) }
    }
}

impl TryFrom<String> for SandboxId {
    type Error = InvalidId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<SandboxId> for String {
    fn from(id: SandboxId) -> String {
        id.0
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A process of a sandbox: `obs-<n>` when its start was observed (n counts from 1 per
/// sandbox), `live-<pid>` when it was only seen running (after a gap in observation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ProcessId {
    Observed(u32),
    Live(u32),
}

impl ProcessId {
    pub fn observed(self) -> bool {
        matches!(self, Self::Observed(_))
    }
}

impl FromStr for ProcessId {
    type Err = InvalidId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |digits: &str| -> Option<u32> {
            // One spelling per id: no sign, no leading zeros, not zero.
            if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()
        };
        let parsed = if let Some(rest) = s.strip_prefix("obs-") {
            number(rest).map(Self::Observed)
        } else if let Some(rest) = s.strip_prefix("live-") {
            number(rest).map(Self::Live)
        } else {
            None
        };
        parsed.ok_or(InvalidId { kind: "process" })
    }
}

impl TryFrom<String> for ProcessId {
    type Error = InvalidId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ProcessId> for String {
    fn from(id: ProcessId) -> String {
        id.to_string()
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Observed(n) => write!(f, "obs-{n}"),
            Self::Live(pid) => write!(f, "live-{pid}"),
        }
    }
}

pub const NODE_TOKEN_PREFIX: &str = "apnode_";

/// The plaintext token of a node: shown once at registration, stored only as SHA-256
/// (`crate::api_key::KeyHash`).
pub struct NodeTokenSecret(String);

impl NodeTokenSecret {
    pub fn from_random(bytes: [u8; 32]) -> Self {
        Self(format!("{NODE_TOKEN_PREFIX}{}", hex::encode(bytes)))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> crate::api_key::KeyHash {
        crate::api_key::KeyHash::of(&self.0)
    }
}

impl fmt::Debug for NodeTokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeTokenSecret(…)")
    }
}

/// Cheap shape check before any storage read.
pub fn looks_like_node_token(token: &str) -> bool {
    token
        .strip_prefix(NODE_TOKEN_PREFIX)
        .is_some_and(|rest| rest.len() == 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sandbox_ids_have_one_spelling() {
        let id = SandboxId::from_random([0xab; 16]);
        assert_eq!(id.as_str().parse::<SandboxId>(), Ok(id.clone()));
        assert!(id.as_str().to_uppercase().parse::<SandboxId>().is_err());
        assert!("sbx_".parse::<SandboxId>().is_err());
        assert!("sbx_123".parse::<SandboxId>().is_err());
        assert!(format!("{id}x").parse::<SandboxId>().is_err());
    }

    #[test]
    fn process_ids_reject_other_spellings() {
        for bad in
            ["obs-0", "obs-01", "obs-", "obs--1", "obs-+1", "live-x", "proc-1", "OBS-1", "obs-99999999999"]
        {
            assert!(bad.parse::<ProcessId>().is_err(), "{bad}");
        }
        assert_eq!("obs-12".parse::<ProcessId>(), Ok(ProcessId::Observed(12)));
        assert_eq!("live-7".parse::<ProcessId>(), Ok(ProcessId::Live(7)));
    }

    proptest! {
        #[test]
        fn process_ids_round_trip(n in 1u32.., live in any::<bool>()) {
            let id = if live { ProcessId::Live(n) } else { ProcessId::Observed(n) };
            prop_assert_eq!(id.to_string().parse::<ProcessId>(), Ok(id));
        }
    }

    #[test]
    fn node_tokens_have_one_shape() {
        let token = NodeTokenSecret::from_random([3; 32]);
        assert!(looks_like_node_token(token.expose()));
        assert!(!looks_like_node_token("apnode_short"));
        assert_eq!(token.hash().as_str().len(), 64);
    }
}
