//! The sandbox node: the `agentplane-node` daemon that runs on a sandbox host, and the local
//! provider it drives (bubblewrap namespaces, cgroups). It talks to Core only over HTTP.

pub mod client;
pub mod daemon;
pub mod host;
pub mod local;

pub use daemon::token::{Enrollment, TokenRotation};
pub use daemon::{NodeConfig, disk_size_mb_from_env, run};
