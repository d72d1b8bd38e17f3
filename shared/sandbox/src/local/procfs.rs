//! Small readers of /proc for process discovery. Nothing here signals a process: see
//! [`super::host_process`].

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

/// When the process started, in clock ticks since boot (`/proc/<pid>/stat` field 22).
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name start at field 3 (the state).
    stat.rsplit_once(')')?.1.split_whitespace().nth(22 - 3)?.parse().ok()
}
