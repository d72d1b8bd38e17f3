//! A sandbox's life on this host: created, adopted after a daemon restart, destroyed, and what
//! is left of one removed.

use super::*;

impl LocalProvider {
    pub async fn create(
        &self,
        id: &SandboxId,
        env_vars: BTreeMap<String, String>,
    ) -> Result<LocalSandbox, String> {
        let files = self.files()?;
        if let Some(problem) = self.host_problem() {
            return Err(problem.to_string());
        }
        let created = self.try_create(files, id, env_vars).await;
        if created.is_err() {
            // Nothing of a sandbox that did not come up may stay: processes, cgroup, disk.
            self.remove_leftovers(id).await;
        }
        created
    }

    async fn try_create(
        &self,
        files: &NodeFiles,
        id: &SandboxId,
        env_vars: BTreeMap<String, String>,
    ) -> Result<LocalSandbox, String> {
        let dirs = self.sandbox_dirs(id);
        dirs.prepare().map_err(|e| format!("preparing the sandbox's directories: {e}"))?;
        if let Some(bytes) = self.disk_bytes {
            let (root, uid) = (dirs.root.clone(), dirs.uid);
            tokio::task::spawn_blocking(move || disk::attach(&root, uid, bytes))
                .await
                .unwrap_or_else(|e| Err(e.to_string()))
                .map_err(|err| format!("making the sandbox's disk: {err}"))?;
        }
        let cgroup = Cgroup::create(id.as_str(), self.limits);
        let (mut command, _) = jail::init_command(files, &dirs, &cgroup.join_script())
            .map_err(|e| format!("writing the sandbox's arguments: {e}"))?;
        let mut child = command.spawn().map_err(|e| format!("starting bubblewrap: {e}"))?;
        let outer = child.id().ok_or("bubblewrap exited at once")?;
        let deadline = Instant::now() + START_WITHIN;
        let init = loop {
            if let Some(pid) = procfs::children(outer).first()
                && procfs::ns_pids(*pid).len() >= 2
                && !procfs::children(*pid).is_empty()
            {
                break Some(*pid);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = stderr.read_to_string(&mut err).await;
                }
                cgroup.remove();
                return Err(format!("bubblewrap failed ({status}): {}", err.trim()));
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let held = init.and_then(|init| Some((HostProcess::open_now(outer)?, HostProcess::open_now(init)?)));
        let Some((outer, init)) = held else {
            let _ = child.start_kill();
            cgroup.remove_when_empty().await;
            return Err("the sandbox's namespaces did not come up".into());
        };
        // Reaped in the background by tokio once it exits; the sandbox outlives this handle.
        drop(child);
        let record = format!("{} {}", outer.record(), init.record());
        let sandbox = LocalSandbox::new(id, dirs.clone(), cgroup, (outer, init), env_vars);
        let written = std::fs::write(dirs.root.join(INIT_RECORD), record);
        match (sandbox, written) {
            (Some(sandbox), Ok(())) => Ok(sandbox),
            (sandbox, written) => {
                if let Some(sandbox) = sandbox {
                    self.destroy(&sandbox).await;
                }
                Err(match written {
                    Err(e) => format!("recording the sandbox's init: {e}"),
                    Ok(()) => "the sandbox's init ended as it started".into(),
                })
            }
        }
    }

    /// Finds a sandbox a previous daemon created, if its init still runs: the recorded pids
    /// are taken only while they still name the processes that started at the recorded times,
    /// so a pid reused by another host process is never adopted (nor later signalled).
    pub fn adopt(&self, id: &SandboxId, env_vars: BTreeMap<String, String>) -> Option<LocalSandbox> {
        let dirs = self.sandbox_dirs(id);
        let text = std::fs::read_to_string(dirs.root.join(INIT_RECORD)).ok()?;
        let mut records = text.split_whitespace();
        let (outer, init) = (records.next()?, records.next()?);
        let init = HostProcess::open_record(init)?;
        if init.has_exited() {
            return None;
        }
        // The outer bwrap may be gone while the init runs (it is only its parent).
        let outer = HostProcess::open_record(outer).or_else(|| HostProcess::open_record(&init.record()))?;
        let mode = cgroup::Mode::detect();
        let group = Cgroup::named(id.as_str(), mode);
        let cgroup = if group.pids().contains(&init.pid()) {
            group
        } else {
            Cgroup::named(id.as_str(), cgroup::Mode::None)
        };
        LocalSandbox::new(id, dirs, cgroup, (outer, init), env_vars)
    }

    /// Kills every process (the PID namespace dies with its init; the node's helpers in the
    /// cgroup are killed too), removes the cgroup and the workspace. Every signal goes through
    /// a pidfd: a process that already ended is never mistaken for whatever reused its pid.
    pub async fn destroy(&self, sandbox: &LocalSandbox) {
        sandbox.ended_by_node.store(true, Ordering::SeqCst);
        if sandbox.cgroup.can_freeze() {
            let _ = sandbox.cgroup.thaw().await;
        }
        sandbox.init.kill();
        sandbox.outer.kill();
        let deadline = Instant::now() + START_WITHIN;
        while Instant::now() < deadline {
            let members = sandbox.cgroup.pids();
            if members.is_empty() && sandbox.init.has_exited() {
                break;
            }
            sandbox.cgroup.kill_members(&members);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sandbox.cgroup.remove_when_empty().await;
        remove_dirs(&sandbox.dirs.root).await;
    }

    /// Removes what is left of a sandbox whose init is gone (none of it is adopted): any
    /// process still in its cgroup (through pidfds, see [`Cgroup::kill_members`]), the cgroup,
    /// its directories.
    pub async fn remove_leftovers(&self, id: &SandboxId) {
        let dirs = self.sandbox_dirs(id);
        let group = Cgroup::named(id.as_str(), cgroup::Mode::detect());
        for _ in 0..500 {
            let members = group.pids();
            if members.is_empty() {
                break;
            }
            group.kill_members(&members);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        group.remove_when_empty().await;
        remove_dirs(&dirs.root).await;
    }
}

/// Ends what is left of sandbox `id` under `state_dir` without a daemon (a test's cleanup):
/// its recorded init and outer bwrap, through pidfds and only while the records still name
/// them; then every process left in its cgroup. Returns once nothing of it runs (or after 5 s).
pub fn end_leftover(state_dir: &Path, id: &str) {
    let root = state_dir.join("sandboxes").join(id);
    let text = std::fs::read_to_string(root.join(INIT_RECORD)).unwrap_or_default();
    for held in text.split_whitespace().filter_map(HostProcess::open_record) {
        held.kill();
    }
    let group = Cgroup::named(id, cgroup::Mode::detect());
    for _ in 0..500 {
        let members = group.pids();
        if members.is_empty() {
            break;
        }
        group.kill_members(&members);
        std::thread::sleep(Duration::from_millis(10));
    }
    group.remove();
    disk::detach(&root);
}

/// Removes a sandbox's directories, its disk unmounted first.
async fn remove_dirs(root: &Path) {
    let root = root.to_owned();
    let _ = tokio::task::spawn_blocking(move || {
        disk::detach(&root);
        let _ = std::fs::remove_dir_all(&root);
    })
    .await;
}
