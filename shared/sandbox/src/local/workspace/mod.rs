//! A sandbox's `/workspace` as the node (root, on the host) touches it for Core: every path is
//! walked one component at a time from the workspace directory with `openat(…, O_NOFOLLOW)`, so
//! a symlink anywhere on the way (one a sandbox process planted, or swapped in meanwhile) is
//! never followed and is refused. Writes go to a fresh temporary name beside the target and
//! are renamed over it (a rename replaces a symlink itself, never its target); new files and
//! directories belong to the sandbox's uid. FIFOs and devices are opened non-blocking and
//! refused as not regular files. Paths are parsed again here with the domain's rules.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use agentplane_domain::platform::path::refusal::{Cap, TooLarge};
use agentplane_domain::platform::path::{PathError, WorkspacePath, refusal};
use rustix::fs::{AtFlags, CWD, Dir, FileType, Gid, Mode, OFlags, Uid};
use rustix::io::Errno;
use serde::Serialize;
use sha2::{Digest, Sha256};

pub mod entries;
mod files;
#[cfg(test)]
mod tests;
mod walk;

pub use files::{MAX_BLOB_BYTES, delete, read, read_within, set_mode, sha256_hex, write, write_within};
pub use walk::{Limits, MAX_RELATIVE_PATH_BYTES, clear, list};

/// The largest file read or written through the command queue.
pub const MAX_FILE_BYTES: usize = 256 * 1024;
/// The most entries one listing answers.
pub const MAX_LIST_ENTRIES: usize = 1000;

/// Why an operation was not done, as Core reads it back ([`refusal::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    NotFound,
    Symlink,
    NotRegular,
    NotADirectory,
    InvalidPath(PathError),
    /// The tree is past one of the walk's [`Limits`].
    TooLarge(TooLarge),
    Io(String),
}

impl Failure {
    pub fn message(&self) -> String {
        match self {
            Self::NotFound => refusal::NOT_FOUND.to_owned(),
            Self::Symlink => refusal::SYMLINK.to_owned(),
            Self::NotRegular => refusal::NOT_REGULAR.to_owned(),
            Self::NotADirectory => refusal::NOT_DIRECTORY.to_owned(),
            Self::InvalidPath(err) => format!("workspace:invalid_path:{err}"),
            Self::TooLarge(too_large) => too_large.message(),
            Self::Io(message) => format!("workspace operation failed: {message}"),
        }
    }
}

fn io(err: impl std::fmt::Display) -> Failure {
    Failure::Io(err.to_string())
}

/// One regular file of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Entry {
    /// Relative to `/workspace`.
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Its permission bits (`0o777` at most): what a checkpoint records and a restore writes
    /// back (an executable script stays executable).
    pub mode: u32,
}

/// The permission bits a workspace file may have (no set-id or sticky bits).
pub const MODE_BITS: u32 = 0o777;
/// The mode of a file written through the API or a Run's `write_file`.
pub const DEFAULT_MODE: u32 = 0o644;

fn parse(relative: &str, any: bool) -> Result<WorkspacePath, Failure> {
    let path = WorkspacePath::parse_relative(relative).map_err(Failure::InvalidPath)?;
    if !any && path.is_root() {
        return Err(Failure::InvalidPath(PathError::WorkspaceRoot));
    }
    Ok(path)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// What `name` in `dir` is, without following it.
fn kind(dir: &OwnedFd, name: &str) -> Result<Option<FileType>, Failure> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(err) => Err(io(err)),
    }
}

/// Opens the directory `name` in `dir` without following a symlink; creates it (owned by
/// `owner`) when missing and `owner` is given.
fn step(dir: &OwnedFd, name: &str, owner: Option<u32>) -> Result<OwnedFd, Failure> {
    match rustix::fs::openat(dir, name, dir_flags(), Mode::empty()) {
        Ok(fd) => return Ok(fd),
        Err(Errno::NOENT) if owner.is_some() => {}
        Err(_) => {
            return Err(match kind(dir, name)? {
                None => Failure::NotFound,
                Some(FileType::Symlink) => Failure::Symlink,
                Some(FileType::Directory) => Failure::Io(format!("cannot open directory {name}")),
                Some(_) => Failure::NotADirectory,
            });
        }
    }
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(err) => return Err(io(err)),
    }
    let fd = step(dir, name, None)?;
    if let Some(uid) = owner {
        rustix::fs::fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(uid))).map_err(io)?;
    }
    Ok(fd)
}

/// The directory holding `path`'s last component (the workspace itself for a top-level name).
fn parent(root: &Path, path: &WorkspacePath, owner: Option<u32>) -> Result<OwnedFd, Failure> {
    let mut dir = rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()).map_err(io)?;
    let components = path.components();
    for name in &components[..components.len().saturating_sub(1)] {
        dir = step(&dir, name, owner)?;
    }
    Ok(dir)
}

fn last(path: &WorkspacePath) -> &str {
    path.components().last().map_or("", String::as_str)
}
