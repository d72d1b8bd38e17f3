//! Walks over the whole tree (listing, clearing, checkpoint scans) under caps that a tree a
//! sandbox process built cannot exceed.

use super::files::open_regular_with_mode;
use super::*;

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
