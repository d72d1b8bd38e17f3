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

/// The largest file a checkpoint uploads or a restore writes (they stream to and from S3, not
/// through the command queue).
pub const MAX_BLOB_BYTES: usize = 256 * 1024 * 1024;

/// Writes `bytes` to `relative` (owned by `uid`).
pub fn write(root: &Path, uid: u32, relative: &str, bytes: &[u8]) -> Result<(), Failure> {
    write_within(root, uid, relative, bytes, MAX_FILE_BYTES, DEFAULT_MODE)
}

/// [`write`] of a file of up to `limit` bytes (a restore's).
pub fn write_within(
    root: &Path,
    uid: u32,
    relative: &str,
    bytes: &[u8],
    limit: usize,
    mode: u32,
) -> Result<(), Failure> {
    let path = parse(relative, false)?;
    if bytes.len() > limit {
        return Err(Failure::Io(format!("the file exceeds {limit} bytes")));
    }
    let dir = parent(root, &path, Some(uid))?;
    let name = last(&path);
    match kind(&dir, name)? {
        None | Some(FileType::RegularFile) => {}
        Some(FileType::Symlink) => return Err(Failure::Symlink),
        Some(_) => return Err(Failure::NotRegular),
    }
    let temporary = format!(
        "{}-tmp-{}",
        agentplane_domain::platform::path::PROTECTED_PREFIX,
        uuid::Uuid::new_v4().simple()
    );
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, temporary.as_str(), flags, Mode::from_raw_mode(0o600)).map_err(io)?;
    let written = (|| {
        rustix::fs::fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(uid))).map_err(io)?;
        // Set explicitly: the node's umask must not decide a restored file's mode.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & MODE_BITS)).map_err(io)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes).map_err(io)?;
        file.sync_data().map_err(io)?;
        rustix::fs::renameat(&dir, temporary.as_str(), &dir, name).map_err(|err| match err {
            Errno::ISDIR | Errno::NOTEMPTY => Failure::NotRegular,
            other => io(other),
        })
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, temporary.as_str(), AtFlags::empty());
    }
    written
}

/// Opens the regular file `name` in `dir` for reading, never through a symlink, never
/// blocking on a FIFO.
fn open_regular(dir: &OwnedFd, name: &str) -> Result<(std::fs::File, u64), Failure> {
    open_regular_with_mode(dir, name).map(|(file, size, _)| (file, size))
}

/// [`open_regular`] with the file's permission bits.
fn open_regular_with_mode(dir: &OwnedFd, name: &str) -> Result<(std::fs::File, u64, u32), Failure> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(Failure::NotFound),
        Err(Errno::LOOP) => return Err(Failure::Symlink),
        Err(_) => {
            return Err(match kind(dir, name)? {
                None => Failure::NotFound,
                Some(FileType::Symlink) => Failure::Symlink,
                Some(_) => Failure::NotRegular,
            });
        }
    };
    let stat = rustix::fs::fstat(&fd).map_err(io)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(Failure::NotRegular);
    }
    Ok((std::fs::File::from(fd), u64::try_from(stat.st_size).unwrap_or(0), stat.st_mode & MODE_BITS))
}

/// Sets the permission bits of the regular file `relative` (never through a symlink).
pub fn set_mode(root: &Path, relative: &str, mode: u32) -> Result<(), Failure> {
    let path = parse(relative, false)?;
    let dir = parent(root, &path, None)?;
    let (file, _, _) = open_regular_with_mode(&dir, last(&path))?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & MODE_BITS)).map_err(io)
}

/// The bytes of `relative`.
pub fn read(root: &Path, relative: &str) -> Result<Vec<u8>, Failure> {
    read_within(root, relative, MAX_FILE_BYTES)
}

/// [`read`] of a file of up to `limit` bytes (a checkpoint's upload).
pub fn read_within(root: &Path, relative: &str, limit: usize) -> Result<Vec<u8>, Failure> {
    let path = parse(relative, false)?;
    let dir = parent(root, &path, None)?;
    let (file, size) = open_regular(&dir, last(&path))?;
    if size > limit as u64 {
        return Err(Failure::Io(format!("the file exceeds {limit} bytes")));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit as u64 + 1).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// The SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Removes the regular file `relative` (a symlink or directory is refused).
pub fn delete(root: &Path, relative: &str) -> Result<(), Failure> {
    let path = parse(relative, false)?;
    let dir = parent(root, &path, None)?;
    let name = last(&path);
    match kind(&dir, name)? {
        None => Err(Failure::NotFound),
        Some(FileType::Symlink) => Err(Failure::Symlink),
        Some(FileType::RegularFile) => {
            rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|err| match err {
                Errno::NOENT => Failure::NotFound,
                other => io(other),
            })
        }
        Some(_) => Err(Failure::NotRegular),
    }
}

/// The caps of a walk over a workspace. The tree is built by sandbox processes, so it is hostile
/// input: the walk is iterative (its memory grows with the caps, never with the tree), holds
/// at most `max_depth` directories open, and stops with [`Failure::TooLarge`] at the first cap
/// a tree goes past, before it has read more than `max_entries` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Components of a path (the domain's `MAX_DEPTH` at most: deeper paths cannot be named).
    pub max_depth: usize,
    /// Directory entries of any kind read in one walk (non-UTF-8, special and hidden ones too).
    pub max_entries: usize,
    /// Bytes of a path relative to `/workspace` (at most what the domain's paths allow).
    pub max_path_bytes: usize,
    /// Bytes of the listed paths together (what a scan sends Core).
    pub max_listing_bytes: usize,
    /// Bytes of one regular file hashed (a checkpoint uploads no larger file).
    pub max_file_bytes: u64,
}

/// The longest path relative to `/workspace` an absolute workspace path can carry.
pub const MAX_RELATIVE_PATH_BYTES: usize =
    agentplane_domain::platform::path::MAX_PATH_BYTES - agentplane_domain::platform::path::ROOT.len() - 1;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_depth: agentplane_domain::platform::path::MAX_DEPTH,
            max_entries: 100_000,
            max_path_bytes: MAX_RELATIVE_PATH_BYTES,
            max_listing_bytes: 32 * 1024 * 1024,
            max_file_bytes: MAX_BLOB_BYTES as u64,
        }
    }
}

impl Limits {
    /// The defaults, changed by `AGENTPLANE_NODE_WORKSPACE_MAX_{DEPTH,ENTRIES,PATH_BYTES,
    /// LISTING_BYTES}` where set (depth and path length only lowered: the API names no deeper
    /// or longer path).
    pub fn from_env() -> Self {
        fn var(name: &str) -> Option<usize> {
            std::env::var(name).ok()?.trim().parse().ok().filter(|n| *n > 0)
        }
        let default = Self::default();
        Self {
            max_depth: var("AGENTPLANE_NODE_WORKSPACE_MAX_DEPTH")
                .map_or(default.max_depth, |n| n.min(default.max_depth)),
            max_entries: var("AGENTPLANE_NODE_WORKSPACE_MAX_ENTRIES").unwrap_or(default.max_entries),
            max_path_bytes: var("AGENTPLANE_NODE_WORKSPACE_MAX_PATH_BYTES")
                .map_or(default.max_path_bytes, |n| n.min(default.max_path_bytes)),
            max_listing_bytes: var("AGENTPLANE_NODE_WORKSPACE_MAX_LISTING_BYTES")
                .unwrap_or(default.max_listing_bytes),
            max_file_bytes: default.max_file_bytes,
        }
    }

    fn past(cap: Cap, limit: impl TryInto<u64>) -> Failure {
        Failure::TooLarge(TooLarge { cap, limit: limit.try_into().unwrap_or(u64::MAX) })
    }
}

/// The regular files under `relative` (the workspace itself when empty), sorted by path, at most
/// `limit` (and whether there were more). Symlinks are never followed; FIFOs, sockets and
/// devices are left out (never opened blocking); so are names that are not UTF-8 (no workspace
/// path can name them), `.git` and protected state. Something vanishing or changing kind
/// while walked is skipped or refused, never trusted.
pub fn list(
    root: &Path,
    relative: &str,
    limit: usize,
    limits: &Limits,
) -> Result<(Vec<Entry>, bool), Failure> {
    let path = parse(relative, true)?;
    let dir = if path.is_root() {
        rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()).map_err(io)?
    } else {
        let parent = parent(root, &path, None)?;
        step(&parent, last(&path), None)?
    };
    let (mut entries, more) = walk(dir, path.relative(), path.components().len(), limit, limits)?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((entries, more))
}

/// A directory being walked: its descriptor, path, depth and the names still to visit.
struct Level {
    dir: OwnedFd,
    prefix: String,
    depth: usize,
    names: std::vec::IntoIter<String>,
}

/// What one walk has used of its caps.
struct Used {
    entries: usize,
    listing_bytes: usize,
}

fn walk(
    dir: OwnedFd,
    prefix: String,
    depth: usize,
    limit: usize,
    limits: &Limits,
) -> Result<(Vec<Entry>, bool), Failure> {
    let mut used = Used { entries: 0, listing_bytes: 0 };
    let names = names_of(&dir, &mut used, limits)?;
    let mut stack = vec![Level { dir, prefix, depth, names: names.into_iter() }];
    let mut out = Vec::new();
    while let Some(level) = stack.last_mut() {
        let Some(name) = level.names.next() else {
            stack.pop();
            continue;
        };
        let depth = level.depth + 1;
        if depth > limits.max_depth {
            return Err(Limits::past(Cap::Depth, limits.max_depth));
        }
        let path = if level.prefix.is_empty() { name.clone() } else { format!("{}/{name}", level.prefix) };
        if path.len() > limits.max_path_bytes {
            return Err(Limits::past(Cap::PathBytes, limits.max_path_bytes));
        }
        match kind(&level.dir, &name)? {
            Some(FileType::Directory) => match step(&level.dir, &name, None) {
                Ok(sub) => {
                    let names = names_of(&sub, &mut used, limits)?;
                    stack.push(Level { dir: sub, prefix: path, depth, names: names.into_iter() });
                }
                // Gone, or swapped for a symlink or file since it was looked at.
                Err(Failure::Symlink | Failure::NotFound | Failure::NotADirectory) => {}
                Err(err) => return Err(err),
            },
            Some(FileType::RegularFile) => {
                if out.len() >= limit {
                    return Ok((out, true));
                }
                let (file, _, mode) = match open_regular_with_mode(&level.dir, &name) {
                    Ok(found) => found,
                    Err(Failure::NotFound | Failure::Symlink | Failure::NotRegular) => continue,
                    Err(err) => return Err(err),
                };
                used.listing_bytes += path.len();
                if used.listing_bytes > limits.max_listing_bytes {
                    return Err(Limits::past(Cap::ListingBytes, limits.max_listing_bytes));
                }
                let (size, sha256) = sha256_of(file, limits.max_file_bytes)?;
                out.push(Entry { path, size, sha256, mode });
            }
            // Symlinks, FIFOs, sockets, devices: not regular workspace files, not followed.
            _ => {}
        }
    }
    Ok((out, false))
}

/// Removes every file, symlink, special file and directory of the workspace a walk would visit
/// (`.git`, protected state and names that are not UTF-8 stay, with the directories holding
/// them), however deep or wide: what a restore does first when the tree is past the walk's caps,
/// so a rollback still makes the workspace its manifest. Iterative and never following a
/// symlink (`unlinkat` removes a link itself); at most ten times `max_entries` names are read.
/// The entries removed.
pub fn clear(root: &Path, limits: &Limits) -> Result<usize, Failure> {
    /// A directory being emptied, and its name in the one above.
    struct Emptying {
        dir: OwnedFd,
        name: String,
        names: std::vec::IntoIter<String>,
    }
    let reading = Limits { max_entries: limits.max_entries.saturating_mul(10), ..*limits };
    let mut used = Used { entries: 0, listing_bytes: 0 };
    let dir = rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()).map_err(io)?;
    let names = names_of(&dir, &mut used, &reading)?.into_iter();
    let mut stack = vec![Emptying { dir, name: String::new(), names }];
    let mut removed = 0;
    while let Some(level) = stack.last_mut() {
        let Some(name) = level.names.next() else {
            let done = stack.pop();
            if let (Some(done), Some(parent)) = (done, stack.last()) {
                match rustix::fs::unlinkat(&parent.dir, done.name.as_str(), AtFlags::REMOVEDIR) {
                    Ok(()) => removed += 1,
                    // Still holding what stays, or gone already.
                    Err(Errno::NOTEMPTY | Errno::EXIST | Errno::NOENT) => {}
                    Err(err) => return Err(io(err)),
                }
            }
            continue;
        };
        let is_dir = kind(&level.dir, &name)? == Some(FileType::Directory);
        if is_dir {
            match step(&level.dir, &name, None) {
                Ok(sub) => {
                    let names = names_of(&sub, &mut used, &reading)?.into_iter();
                    stack.push(Emptying { dir: sub, name, names });
                    continue;
                }
                Err(Failure::Symlink | Failure::NotFound | Failure::NotADirectory) => {}
                Err(err) => return Err(err),
            }
        }
        match rustix::fs::unlinkat(&level.dir, name.as_str(), AtFlags::empty()) {
            Ok(()) => removed += 1,
            Err(Errno::NOENT | Errno::ISDIR) => {}
            Err(err) => return Err(io(err)),
        }
    }
    Ok(removed)
}

/// The names in `dir` a walk visits, sorted; every entry read counts against `max_entries`.
fn names_of(dir: &OwnedFd, used: &mut Used, limits: &Limits) -> Result<Vec<String>, Failure> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        used.entries += 1;
        if used.entries > limits.max_entries {
            return Err(Limits::past(Cap::Entries, limits.max_entries));
        }
        let Ok(name) = std::str::from_utf8(bytes) else { continue };
        if WorkspacePath::listable(name) {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The size and SHA-256 of what `file` holds, read once (a file that keeps growing stops the
/// read at `max` bytes and is refused, never read forever).
fn sha256_of(file: std::fs::File, max: u64) -> Result<(u64, String), Failure> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut file = file.take(max.saturating_add(1));
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(io)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        if size > max {
            return Err(Limits::past(Cap::FileBytes, max));
        }
        hasher.update(&buffer[..n]);
    }
    Ok((size, hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]
    use std::os::unix::fs::symlink;

    use super::*;

    fn workspace() -> (tempdir::Dir, std::path::PathBuf) {
        let dir = tempdir::Dir::new();
        let ws = dir.0.join("workspace");
        std::fs::create_dir(&ws).unwrap();
        (dir, ws)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let p = std::env::temp_dir().join(format!("ws-test-{}", uuid::Uuid::new_v4().simple()));
                std::fs::create_dir_all(&p).unwrap();
                Self(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn uid() -> u32 {
        rustix::process::getuid().as_raw()
    }

    #[test]
    fn files_are_written_read_listed_and_deleted() {
        let (_d, ws) = workspace();
        write(&ws, uid(), "src/a.txt", b"hello").unwrap();
        write(&ws, uid(), "src/a.txt", b"hello again").unwrap();
        write(&ws, uid(), "b", b"").unwrap();
        assert_eq!(read(&ws, "src/a.txt").unwrap(), b"hello again");
        let (entries, more) = list(&ws, "", 10, &Limits::default()).unwrap();
        assert!(!more);
        let paths: Vec<_> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["b", "src/a.txt"]);
        assert_eq!(entries[0].sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        delete(&ws, "src/a.txt").unwrap();
        assert_eq!(read(&ws, "src/a.txt"), Err(Failure::NotFound));
        assert_eq!(delete(&ws, "src/a.txt"), Err(Failure::NotFound));
        assert_eq!(delete(&ws, "src"), Err(Failure::NotRegular));
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 2);
    }

    #[test]
    fn symlinks_anywhere_on_the_way_are_refused_and_never_followed() {
        let (d, ws) = workspace();
        let outside = d.0.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"host secret").unwrap();
        symlink(&outside, ws.join("link")).unwrap();
        symlink(outside.join("secret"), ws.join("file-link")).unwrap();
        symlink(outside.join("new"), ws.join("dangling")).unwrap();
        std::fs::create_dir(ws.join("real")).unwrap();
        symlink("../link", ws.join("real/up")).unwrap();

        assert_eq!(read(&ws, "link/secret"), Err(Failure::Symlink));
        assert_eq!(read(&ws, "file-link"), Err(Failure::Symlink));
        assert_eq!(read(&ws, "real/up/secret"), Err(Failure::Symlink));
        assert_eq!(write(&ws, uid(), "link/secret", b"pwned"), Err(Failure::Symlink));
        assert_eq!(write(&ws, uid(), "link/new/deep", b"pwned"), Err(Failure::Symlink));
        assert_eq!(write(&ws, uid(), "file-link", b"pwned"), Err(Failure::Symlink));
        assert_eq!(write(&ws, uid(), "dangling", b"pwned"), Err(Failure::Symlink));
        assert_eq!(delete(&ws, "file-link"), Err(Failure::Symlink));
        assert_eq!(delete(&ws, "link/secret"), Err(Failure::Symlink));
        assert_eq!(list(&ws, "link", 10, &Limits::default()), Err(Failure::Symlink));
        // Nothing outside changed; the listing does not follow links either.
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"host secret");
        assert!(!outside.join("new").exists());
        assert_eq!(list(&ws, "", 10, &Limits::default()).unwrap().0, Vec::<Entry>::new());
    }

    #[test]
    fn fifos_and_paths_the_domain_refuses_never_reach_the_filesystem() {
        let (_d, ws) = workspace();
        let status = std::process::Command::new("mkfifo").arg(ws.join("pipe")).status().unwrap();
        assert!(status.success());
        // Opened non-blocking: refused at once instead of hanging the node.
        assert_eq!(read(&ws, "pipe"), Err(Failure::NotRegular));
        assert_eq!(write(&ws, uid(), "pipe", b"x"), Err(Failure::NotRegular));
        for bad in ["../escape", "a/../../escape", ".git/config", "a//b", ".agentplane-tmp-x"] {
            assert!(matches!(write(&ws, uid(), bad, b"x"), Err(Failure::InvalidPath(_))), "{bad}");
        }
        assert!(!ws.parent().unwrap().join("escape").exists());
        assert!(!ws.join(".git").exists());
    }

    #[test]
    fn a_file_in_the_way_of_a_directory_is_refused() {
        let (_d, ws) = workspace();
        write(&ws, uid(), "f", b"x").unwrap();
        assert_eq!(write(&ws, uid(), "f/g", b"x"), Err(Failure::NotADirectory));
        assert_eq!(read(&ws, "f/g"), Err(Failure::NotADirectory));
    }
}
