//! One file at a time: written through a temporary name, read within a limit, re-moded, deleted.

use super::*;

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
pub(super) fn open_regular_with_mode(
    dir: &OwnedFd,
    name: &str,
) -> Result<(std::fs::File, u64, u32), Failure> {
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
