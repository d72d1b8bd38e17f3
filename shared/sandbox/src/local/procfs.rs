//! Small readers of /proc for process discovery.

pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|t| t.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// The pid in each nested PID namespace, outermost first (`NSpid`).
pub fn ns_pids(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("NSpid:")
                    .map(|r| r.split_whitespace().filter_map(|p| p.parse().ok()).collect())
            })
        })
        .unwrap_or_default()
}

/// The one-letter state of `/proc/<pid>/stat` (`R`, `S`, `T`, `Z`, …).
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: read after the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

pub fn alive(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

pub fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Sends a signal through kill(1): the workspace forbids `unsafe`, so no libc call.
pub async fn signal(pid: u32, signal: &str) -> bool {
    tokio::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}
