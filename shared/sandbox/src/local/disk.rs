//! Each sandbox's disk: a sparse ext4 image of the configured size (`<sandbox>/disk.img`, the
//! node's alone), loop-mounted by the node at `<sandbox>/disk` (`nosuid,nodev`). It holds the
//! sandbox's `workspace/` and `tmp/`, bound over `<sandbox>/workspace` and `<sandbox>/tmp`,
//! so the node and the jail use the same paths with or without a disk. A full disk fails the
//! writer with ENOSPC; the node's own files (`run/`, `init.id`) are outside it, on the host.
//!
//! The image is sparse: it takes host space only as the sandbox writes, so the host's free
//! space must cover what its sandboxes may write (a host can be overcommitted).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The mounts of one sandbox's disk, innermost last (unmounted in reverse).
fn mounts(root: &Path) -> [PathBuf; 3] {
    [root.join("disk"), root.join("workspace"), root.join("tmp")]
}

fn image(root: &Path) -> PathBuf {
    root.join("disk.img")
}

/// Runs `tool` (searched in the host's system directories) and fails with its message.
fn run(tool: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let path = super::tool_path(tool).ok_or_else(|| format!("`{tool}` is not installed"))?;
    let output = Command::new(path)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {tool}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{tool} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// Makes and mounts a disk of `bytes` for the sandbox at `root`, whose `workspace/` and `tmp/`
/// (already made, owned by `uid`) it then replaces. On failure nothing of it stays mounted.
pub fn attach(root: &Path, uid: u32, bytes: u64) -> Result<(), String> {
    let attached = try_attach(root, uid, bytes);
    if attached.is_err() {
        detach(root);
    }
    attached
}

fn try_attach(root: &Path, uid: u32, bytes: u64) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let img = image(root);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&img)
        .map_err(|e| format!("creating the disk image: {e}"))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    file.set_len(bytes).map_err(|e| format!("sizing the disk image: {e}"))?;
    drop(file);
    // No journal (the disk lives and dies with its sandbox), nothing reserved for root, and
    // lazy inode tables: a 10 GiB disk is made in tens of milliseconds.
    run(
        "mkfs.ext4",
        &[
            "-q".as_ref(),
            "-F".as_ref(),
            "-m".as_ref(),
            "0".as_ref(),
            "-O".as_ref(),
            "^has_journal".as_ref(),
            "-E".as_ref(),
            "nodiscard,lazy_itable_init=1".as_ref(),
            img.as_os_str(),
        ],
    )?;
    let [disk, workspace, tmp] = mounts(root);
    std::fs::create_dir_all(&disk).map_err(|e| e.to_string())?;
    run(
        "mount",
        &[
            "-t".as_ref(),
            "ext4".as_ref(),
            "-o".as_ref(),
            "loop,nosuid,nodev,noatime".as_ref(),
            img.as_os_str(),
            disk.as_os_str(),
        ],
    )?;
    std::fs::set_permissions(&disk, std::fs::Permissions::from_mode(0o700)).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir(disk.join("lost+found"));
    for (inside, over) in [("workspace", &workspace), ("tmp", &tmp)] {
        let dir = disk.join(inside);
        std::fs::create_dir(&dir).map_err(|e| format!("making the disk's {inside}: {e}"))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| e.to_string())?;
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).map_err(|e| e.to_string())?;
        run("mount", &["--bind".as_ref(), dir.as_os_str(), over.as_os_str()])?;
    }
    Ok(())
}

/// Whether `path` is a mount point (its device differs from its parent's).
fn mounted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(here), Some(Ok(parent))) = (std::fs::metadata(path), path.parent().map(std::fs::metadata)) else {
        return false;
    };
    here.dev() != parent.dev()
}

/// Unmounts the sandbox's disk (lazily, so a lingering user does not keep it) and removes its
/// image; harmless when it has none. The loop device goes with the last unmount.
pub fn detach(root: &Path) {
    for mount in mounts(root).iter().rev() {
        if mounted(mount)
            && let Err(err) = run("umount", &["-l".as_ref(), mount.as_os_str()])
        {
            tracing::warn!(mount = %mount.display(), error = %err, "could not unmount a sandbox's disk");
        }
    }
    let _ = std::fs::remove_file(image(root));
}
