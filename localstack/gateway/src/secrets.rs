//! The gateway's secrets on disk, in its state folder (`.agentplane/`): the generated Core key
//! (`core-key`), the key sealing webhook secrets (`webhook-key`) and the embedded node's token
//! (`node-token`).
//!
//! - A secret file is created `0600` (the owner only) from its first byte: written to a new
//!   file opened with that mode, then renamed into place.
//! - A secret file that others may read (group or world bits, as files written before this
//!   rule were: `0644`) is made `0600` before it is read, and the gateway says so: its content
//!   may have been read, so rotate it. A secret that is not a regular file (a symbolic link,
//!   say) is refused.
//! - The folder is `0711`: its owner's alone to list and change; others may only pass through
//!   it, to the embedded node's sandbox workspaces under `node/`, which a sandbox's
//!   unprivileged uid must reach. Passing through opens nothing else: the secrets are `0600`.
//!   A folder that others could list or write is tightened the same way.

use std::fs::{self, OpenOptions, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The mode of a secret file.
pub const SECRET_MODE: u32 = 0o600;
/// The mode of the state folder.
pub const FOLDER_MODE: u32 = 0o711;

/// The state folder holding the gateway's secrets.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

/// What reading a secret found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub text: String,
    /// The mode the file had when others could read it (it is `0600` now).
    pub was_readable_by_others: Option<u32>,
}

impl StateDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the folder `0711`, or takes group and world read and write off it.
    pub fn prepare(&self) -> anyhow::Result<()> {
        match fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.is_dir() => {
                let mode = meta.permissions().mode() & 0o7777;
                if mode & 0o066 != 0 {
                    let tightened = mode & !0o066;
                    fs::set_permissions(&self.path, Permissions::from_mode(tightened))
                        .with_context(|| format!("tightening {}", self.path.display()))?;
                    tracing::warn!(
                        folder = %self.path.display(),
                        "the state folder was {mode:04o} (others could list or change it); it is {tightened:04o} now"
                    );
                }
                Ok(())
            }
            Ok(_) => bail!("{} is not a folder", self.path.display()),
            Err(_) => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(FOLDER_MODE)
                    .create(&self.path)
                    .with_context(|| format!("creating {}", self.path.display()))?;
                // The umask may have taken bits off; the mode is this one whatever it is.
                fs::set_permissions(&self.path, Permissions::from_mode(FOLDER_MODE))
                    .with_context(|| format!("setting the mode of {}", self.path.display()))
            }
        }
    }

    /// The secret `name` (trimmed), `None` when there is none. One that others could read is
    /// made `0600` first, and the gateway warns: its content may have been read.
    pub fn read(&self, name: &str) -> anyhow::Result<Option<Secret>> {
        let path = self.path.join(name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        };
        if !meta.file_type().is_file() {
            bail!(
                "{} is not a regular file; a secret must be one (delete it to get a new one)",
                path.display()
            );
        }
        let mode = meta.permissions().mode() & 0o7777;
        let was_readable_by_others = (mode & 0o077 != 0).then_some(mode);
        if was_readable_by_others.is_some() {
            fs::set_permissions(&path, Permissions::from_mode(SECRET_MODE))
                .with_context(|| format!("making {} readable by its owner only", path.display()))?;
            tracing::warn!(
                file = %path.display(),
                "the secret was {mode:04o}, readable by other users; it is 0600 now. Rotate it if other users share this machine"
            );
        }
        let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Some(Secret { text: text.trim().to_owned(), was_readable_by_others }))
    }

    /// Writes the secret `name`, replacing any: `0600` from its creation.
    pub fn write(&self, name: &str, text: &str) -> anyhow::Result<()> {
        self.prepare()?;
        let path = self.path.join(name);
        let fresh = self.path.join(format!(".{name}.new"));
        let _ = fs::remove_file(&fresh);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(SECRET_MODE)
            .open(&fresh)
            .with_context(|| format!("creating {}", fresh.display()))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("writing {}", fresh.display()))?;
        fs::rename(&fresh, &path).with_context(|| format!("writing {}", path.display()))
    }

    /// The secret `name`, made with `generate` and written when there is none.
    pub fn read_or_create(
        &self,
        name: &str,
        generate: impl FnOnce() -> anyhow::Result<String>,
    ) -> anyhow::Result<String> {
        self.prepare()?;
        if let Some(secret) = self.read(name)? {
            return Ok(secret.text);
        }
        let text = generate()?;
        self.write(name, &text)?;
        Ok(text)
    }
}
