//! Host processes the node may signal, held through a pidfd: a signal reaches the process the
//! node opened, never whatever later reuses its pid, and its exit can be awaited. Nothing in
//! the node signals a process by pid number.

use std::os::fd::OwnedFd;

use std::time::Duration;

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

use super::procfs;

/// How soon [`HostProcess::exited`] notices an exit.
pub const EXIT_SEEN_WITHIN: Duration = Duration::from_millis(50);

/// One host process, and when it started (clock ticks since boot, `/proc/<pid>/stat` field
/// 22): with the pid, it names the process uniquely for the host's uptime.
#[derive(Debug)]
pub struct HostProcess {
    pid: u32,
    start: u64,
    fd: OwnedFd,
}

impl HostProcess {
    /// Opens `pid` only if it is still the process that started at `start`. Checked after the
    /// pidfd is open: if the pid names our process then, the pidfd is our process's.
    pub fn open(pid: u32, start: u64) -> Option<Self> {
        let raw = i32::try_from(pid).ok().and_then(Pid::from_raw)?;
        let fd = pidfd_open(raw, PidfdFlags::empty()).ok()?;
        (procfs::start_ticks(pid) == Some(start)).then_some(Self { pid, start, fd })
    }

    /// Opens whatever process has `pid` now.
    pub fn open_now(pid: u32) -> Option<Self> {
        Self::open(pid, procfs::start_ticks(pid)?)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    /// `pid@start`, as the node records it.
    pub fn record(&self) -> String {
        format!("{}@{}", self.pid, self.start)
    }

    /// Reads a [`record`](Self::record) back and opens it (`None`: that process is gone).
    pub fn open_record(text: &str) -> Option<Self> {
        let (pid, start) = text.split_once('@')?;
        Self::open(pid.parse().ok()?, start.parse().ok()?)
    }

    /// Sends SIGKILL; false when the process had already ended.
    pub fn kill(&self) -> bool {
        pidfd_send_signal(&self.fd, Signal::KILL).is_ok()
    }

    /// A second handle on the same process (the pidfd duplicated): it names this process even
    /// after it has exited, never whatever reuses its pid.
    pub fn try_clone(&self) -> Option<Self> {
        Some(Self { pid: self.pid, start: self.start, fd: self.fd.try_clone().ok()? })
    }

    /// Sends `signal`; false when the process had already ended.
    pub fn signal(&self, signal: Signal) -> bool {
        pidfd_send_signal(&self.fd, signal).is_ok()
    }

    /// Sends SIGCONT; false when the process had already ended.
    pub fn resume(&self) -> bool {
        pidfd_send_signal(&self.fd, Signal::CONT).is_ok()
    }

    /// Resolves once the process has exited (at once if it already has), within
    /// [`EXIT_SEEN_WITHIN`]. Polled: tokio's safe way to await a descriptor (`AsyncFd::new`) is
    /// deprecated, and its replacement needs `unsafe`, which this workspace forbids.
    pub async fn exited(&self) {
        while !self.has_exited() {
            tokio::time::sleep(EXIT_SEEN_WITHIN).await;
        }
    }

    /// Whether the process has exited (or is a zombie), without waiting: `/proc/<pid>` read
    /// with its start time, so a reused pid reads as exited.
    pub fn has_exited(&self) -> bool {
        procfs::start_ticks(self.pid) != Some(self.start) || !procfs::alive(self.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_process_is_held_only_with_its_own_start_time_and_signalled_through_its_pidfd() {
        let mut child = std::process::Command::new("sleep").arg("600").spawn().expect("sleep");
        let held = HostProcess::open_now(child.id()).expect("open");
        assert_eq!(HostProcess::open_record(&held.record()).map(|p| p.pid()), Some(child.id()));
        // Another start time is another process: never opened.
        assert!(HostProcess::open(child.id(), held.start() + 1).is_none());
        assert!(!held.has_exited());
        assert!(held.kill());
        child.wait().expect("reaped");
        tokio::time::timeout(Duration::from_secs(10), held.exited()).await.expect("exit seen");
        // Reaped: its pid may name another process by now, and the pidfd signals nothing.
        assert!(!held.kill());
        assert!(HostProcess::open_record(&held.record()).is_none());
    }
}
