//! Processes started inside a sandbox: joined to its namespaces, released once they stand
//! stopped at their first instruction, and listed.

use super::*;

impl LocalProvider {
    pub async fn start(&self, sandbox: &LocalSandbox, config: &ProcessConfig) -> Result<Started, String> {
        self.start_with(sandbox, config, false).await
    }

    /// [`start`](Self::start), with its stdin a pipe the caller writes (`stdin`) or
    /// `/dev/null`.
    pub async fn start_with(
        &self,
        sandbox: &LocalSandbox,
        config: &ProcessConfig,
        stdin: bool,
    ) -> Result<Started, String> {
        let files = self.files()?;
        let mut env = sandbox.env_vars.clone();
        env.extend(config.envs.iter().map(|(k, v)| (k.clone(), v.clone())));
        let spec = ProcessSpec {
            cwd: config.cwd.as_deref().unwrap_or("/workspace"),
            cmd: &config.cmd,
            args: &config.args,
            env: &env,
        };
        let (mut command, args_file) = jail::process_command(
            files,
            &sandbox.dirs,
            &sandbox.cgroup.join_script(),
            sandbox.init.pid(),
            &spec,
        )
        .map_err(|e| format!("writing the process's arguments: {e}"))?;
        let spawned = command
            .stdin(if stdin { std::process::Stdio::piped() } else { std::process::Stdio::null() })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(false)
            .spawn();
        let result = match spawned {
            Ok(child) => self.release(child, sandbox).await,
            Err(e) => Err(format!("starting the process: {e}")),
        };
        let _ = std::fs::remove_file(&args_file);
        result
    }

    /// Waits until the process has stopped itself at its first instruction inside the sandbox,
    /// reads its pid there, and lets it run.
    async fn release(&self, mut child: Child, sandbox: &LocalSandbox) -> Result<Started, String> {
        let helper = child.id().ok_or("the process exited at once")?;
        let deadline = Instant::now() + START_WITHIN;
        loop {
            if let Some(inner) = stopped_in_sandbox(helper).and_then(HostProcess::open_now) {
                let pid = procfs::ns_pids(inner.pid()).last().copied().unwrap_or(0);
                // It entered namespaces through the init's pid: were they still the init's? If
                // the init had ended and its pid been reused, they are another process's.
                if Namespaces::of(inner.pid()).as_ref() != Some(&sandbox.namespaces)
                    || sandbox.init.has_exited()
                {
                    inner.kill();
                    let _ = child.start_kill();
                    return Err(INIT_ENDED.into());
                }
                if inner.resume() {
                    return Ok(Started { child, pid, inner, ended_by_node: sandbox.ended_by_node.clone() });
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                if sandbox.init.has_exited() {
                    return Err(INIT_ENDED.into());
                }
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = stderr.read_to_string(&mut err).await;
                }
                // The node's own steps name host paths and pids: logged, not answered.
                tracing::warn!(sandbox = %sandbox.id, %status, stderr = %err.trim(), "a process could not enter its sandbox");
                return Err(format!("the process could not enter the sandbox ({status})"));
            }
            if Instant::now() > deadline {
                let _ = child.start_kill();
                return Err("the process did not start in time".into());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Processes running in the sandbox other than its init: (pid in the sandbox, argv).
    pub fn live_processes(&self, sandbox: &LocalSandbox) -> Vec<(u32, Vec<String>)> {
        let sleeper: Vec<u32> = procfs::children(sandbox.init.pid());
        let mut out = Vec::new();
        for host in sandbox.cgroup.pids() {
            if host == sandbox.outer.pid() || host == sandbox.init.pid() || sleeper.contains(&host) {
                continue;
            }
            let ns = procfs::ns_pids(host);
            // One level: a host-side helper (the shell, bwrap's monitor), not a sandbox process;
            // bwrap's own steps into the namespace are not processes of the sandbox either.
            if ns.len() < 2 || is_bwrap(host) {
                continue;
            }
            if let Some(&pid) = ns.last() {
                out.push((pid, procfs::cmdline(host)));
            }
        }
        out
    }
}

/// Why a process could not start: the sandbox's init has ended (and every process with it).
pub const INIT_ENDED: &str = "the sandbox has ended: its init process exited";

/// The deepest process under `helper` that has stopped itself inside the sandbox's PID
/// namespace (the jail's script, just before it becomes the command).
fn stopped_in_sandbox(helper: u32) -> Option<u32> {
    let mut level = vec![helper];
    for _ in 0..6 {
        let next: Vec<u32> = level.iter().flat_map(|p| procfs::children(*p)).collect();
        if let Some(&pid) = next
            .iter()
            .find(|p| procfs::state(**p) == Some('T') && procfs::ns_pids(**p).len() >= 2 && !is_bwrap(**p))
        {
            return Some(pid);
        }
        if next.is_empty() {
            return None;
        }
        level = next;
    }
    None
}

fn is_bwrap(pid: u32) -> bool {
    procfs::cmdline(pid).first().is_some_and(|arg0| arg0 == "bwrap" || arg0.ends_with("/bwrap"))
}
