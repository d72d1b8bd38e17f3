//! Single entries as a file browser sees them (envd's filesystem service): what one path is,
//! what one directory holds, a new directory, a rename, a removal. Same walk as every other
//! workspace operation: one component at a time, never through a symlink.

use super::*;

/// What one directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    Symlink,
    /// A FIFO, socket or device: shown, never opened.
    Other,
}

/// One entry, relative to `/workspace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// Relative to `/workspace` (empty: the workspace itself).
    pub path: String,
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Unix seconds.
    pub modified: i64,
}

fn info_of(dir: &OwnedFd, name: &str, path: &WorkspacePath) -> Result<Info, Failure> {
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Err(Failure::NotFound),
        Err(err) => return Err(io(err)),
    };
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    };
    Ok(Info {
        path: path.relative(),
        name: path.components().last().cloned().unwrap_or_default(),
        kind,
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mode: stat.st_mode & MODE_BITS,
        modified: stat.st_mtime,
    })
}

/// What `relative` is (the workspace itself for an empty path).
pub fn stat(root: &Path, relative: &str) -> Result<Info, Failure> {
    let path = parse(relative, true)?;
    if path.is_root() {
        let dir = rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()).map_err(io)?;
        return info_of(&dir, ".", &path);
    }
    let dir = parent(root, &path, None)?;
    info_of(&dir, last(&path), &path)
}

/// The entries of the directory `relative`, one level, sorted by name, at most `limit` of them
/// (the flag says whether there were more).
pub fn list_dir(root: &Path, relative: &str, limit: usize) -> Result<(Vec<Info>, bool), Failure> {
    let path = parse(relative, true)?;
    let dir = if path.is_root() {
        rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()).map_err(io)?
    } else {
        step(&parent(root, &path, None)?, last(&path), None)?
    };
    let mut names = Vec::new();
    let mut more = false;
    for entry in Dir::read_from(&dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let Ok(name) = entry.file_name().to_str() else { continue };
        if name == "." || name == ".." || !WorkspacePath::listable(name) {
            continue;
        }
        if names.len() == limit {
            more = true;
            break;
        }
        names.push(name.to_owned());
    }
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let child = parse(&join(&path, &name), false)?;
        match info_of(&dir, &name, &child) {
            Ok(info) => out.push(info),
            // Removed meanwhile by a process of the sandbox.
            Err(Failure::NotFound) => {}
            Err(err) => return Err(err),
        }
    }
    Ok((out, more))
}

fn join(path: &WorkspacePath, name: &str) -> String {
    if path.is_root() { name.to_owned() } else { format!("{}/{name}", path.relative()) }
}

/// Creates the directory `relative` and its missing parents (owned by `uid`); false when it
/// already existed.
pub fn make_dir(root: &Path, uid: u32, relative: &str) -> Result<bool, Failure> {
    let path = parse(relative, false)?;
    let dir = parent(root, &path, Some(uid))?;
    let name = last(&path);
    match kind(&dir, name)? {
        Some(FileType::Directory) => return Ok(false),
        Some(FileType::Symlink) => return Err(Failure::Symlink),
        Some(_) => return Err(Failure::NotADirectory),
        None => {}
    }
    step(&dir, name, Some(uid)).map(|_| true)
}

/// Renames `from` to `to` (a symlink is moved as itself, never followed).
pub fn rename(root: &Path, uid: u32, from: &str, to: &str) -> Result<(), Failure> {
    let (source, target) = (parse(from, false)?, parse(to, false)?);
    let source_dir = parent(root, &source, None)?;
    let target_dir = parent(root, &target, Some(uid))?;
    rustix::fs::renameat(&source_dir, last(&source), &target_dir, last(&target)).map_err(|err| match err {
        Errno::NOENT => Failure::NotFound,
        Errno::NOTDIR => Failure::NotADirectory,
        other => io(other),
    })
}

/// Removes a file, a symlink (itself) or an empty directory.
pub fn remove(root: &Path, relative: &str) -> Result<(), Failure> {
    let path = parse(relative, false)?;
    let dir = parent(root, &path, None)?;
    let name = last(&path);
    let flags = match kind(&dir, name)? {
        None => return Err(Failure::NotFound),
        Some(FileType::Directory) => AtFlags::REMOVEDIR,
        Some(_) => AtFlags::empty(),
    };
    rustix::fs::unlinkat(&dir, name, flags).map_err(|err| match err {
        Errno::NOENT => Failure::NotFound,
        Errno::NOTEMPTY => Failure::Io("the directory is not empty".into()),
        other => io(other),
    })
}
