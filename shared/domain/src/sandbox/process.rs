//! What is known about one process of a sandbox. Nothing here is invented: an exit code exists
//! only when the exit was witnessed, and a gap in observation is said out loud.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ProcessId;
use crate::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    Running,
    Exited,
    /// Observation was interrupted and the end (if any) was not witnessed.
    Unknown,
}

impl ProcessState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Exited => "exited",
            Self::Unknown => "unknown",
        }
    }
}

/// The command a process was started with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessConfig {
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub envs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub id: ProcessId,
    /// The process id inside the sandbox's PID namespace.
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    pub config: ProcessConfig,
    pub pty: bool,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when the witnessed exit was by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub state: ProcessState,
    pub observed: bool,
    pub observation_gap: bool,
    pub output_truncated: bool,
}

/// How a witnessed exit is recorded: a signal exit keeps the shell convention 128+n as its code.
pub fn exit_code_for(code: Option<i32>, signal: Option<i32>) -> Option<i32> {
    code.or_else(|| signal.map(|s| 128 + s))
}

/// Whether a process belongs in a `state=` listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    Live,
    Exited,
    All,
}

impl StateFilter {
    pub fn parse(text: Option<&str>) -> Option<Self> {
        match text {
            None | Some("live") => Some(Self::Live),
            Some("exited") => Some(Self::Exited),
            Some("all") => Some(Self::All),
            Some(_) => None,
        }
    }

    pub fn admits(self, state: ProcessState) -> bool {
        match self {
            Self::Live => state == ProcessState::Running,
            Self::Exited => state == ProcessState::Exited,
            Self::All => true,
        }
    }
}

/// Newest first: by start time, observed ids by number, then live ones by pid.
pub fn newest_first(records: &mut [ProcessRecord]) {
    records.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.id.cmp(&a.id)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_running_processes_are_live_and_unknown_ones_only_appear_in_all() {
        assert!(StateFilter::Live.admits(ProcessState::Running));
        assert!(!StateFilter::Live.admits(ProcessState::Unknown));
        assert!(!StateFilter::Exited.admits(ProcessState::Unknown));
        assert!(StateFilter::All.admits(ProcessState::Unknown));
        assert_eq!(StateFilter::parse(None), Some(StateFilter::Live));
        assert_eq!(StateFilter::parse(Some("bogus")), None);
    }

    #[test]
    fn a_signal_exit_uses_128_plus_the_signal() {
        assert_eq!(exit_code_for(None, Some(9)), Some(137));
        assert_eq!(exit_code_for(Some(3), None), Some(3));
        assert_eq!(exit_code_for(None, None), None);
    }
}
