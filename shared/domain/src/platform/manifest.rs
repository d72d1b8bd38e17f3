//! Workspace manifests: what a checkpoint
//! records of `/workspace` (each regular file's path, size and SHA-256), the file diff between
//! two of them, and which content-addressed blobs (`blobs/sha256/<hash>`, never rewritten) a
//! checkpoint still has to upload.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::run::{ChangeKind, FileChange};

/// One regular file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub sha256: String,
    pub size: u64,
    /// Its permission bits as checkpointed (absent in manifests of earlier releases: restored
    /// as `0o644`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

/// The regular files of a workspace, by canonical absolute path.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub files: BTreeMap<String, ManifestEntry>,
}

/// One regular file as the node's scan lists it (its path relative to `/workspace`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanEntry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Absent from nodes of earlier releases.
    #[serde(default)]
    pub mode: Option<u32>,
}

/// A file to move between the workspace and the bucket: its path relative to `/workspace`,
/// its digest, and the presigned URL (PUT for an upload, GET for a restore).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    pub path: String,
    pub sha256: String,
    pub url: String,
    /// The mode a restore writes (absent: `0o644`); not part of an upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

/// What the node uploads for a checkpoint: the blobs the bucket lacks.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UploadPlan {
    pub files: Vec<PlannedFile>,
}

/// What a restore makes of the workspace: exactly the files of `fetch` (relative paths), each
/// with its content; every other regular file is removed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RestorePlan {
    pub fetch: Vec<PlannedFile>,
}

impl Manifest {
    /// The manifest of a scan (paths made absolute).
    pub fn of_scan(entries: Vec<ScanEntry>) -> Self {
        Self {
            files: entries
                .into_iter()
                .map(|e| {
                    (
                        format!("/workspace/{}", e.path),
                        ManifestEntry { sha256: e.sha256, size: e.size, mode: e.mode },
                    )
                })
                .collect(),
        }
    }

    /// The manifest's object key: content-addressed (the SHA-256 of its JSON, given), so the
    /// same workspace state is one object.
    pub fn key(id: &str) -> String {
        format!("manifests/{id}.json")
    }
}

/// The object key of a blob in the workspaces bucket.
pub fn blob_key(sha256: &str) -> String {
    format!("blobs/sha256/{sha256}")
}

/// What changed from `before` to `after`, by path: added, modified (other content) and deleted
/// files with their digests before and after.
pub fn diff(before: &Manifest, after: &Manifest) -> Vec<FileChange> {
    let paths: BTreeSet<&String> = before.files.keys().chain(after.files.keys()).collect();
    paths
        .into_iter()
        .filter_map(|path| {
            let (old, new) = (before.files.get(path), after.files.get(path));
            let kind = match (old, new) {
                (None, Some(_)) => ChangeKind::Added,
                (Some(_), None) => ChangeKind::Deleted,
                (Some(a), Some(b)) if a.sha256 != b.sha256 => ChangeKind::Modified,
                _ => return None,
            };
            Some(FileChange {
                path: path.clone(),
                kind,
                before_sha256: old.map(|e| e.sha256.clone()),
                after_sha256: new.map(|e| e.sha256.clone()),
            })
        })
        .collect()
}

/// The distinct digests of `manifest` not in `present` (what the node must upload), sorted.
pub fn missing_blobs(manifest: &Manifest, present: &BTreeSet<String>) -> Vec<String> {
    let wanted: BTreeSet<&String> = manifest.files.values().map(|e| &e.sha256).collect();
    wanted.into_iter().filter(|sha| !present.contains(*sha)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(files: &[(&str, char)]) -> Manifest {
        Manifest {
            files: files
                .iter()
                .map(|(path, c)| {
                    (
                        (*path).to_owned(),
                        ManifestEntry { sha256: c.to_string().repeat(64), size: 1, mode: None },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn the_diff_names_added_modified_and_deleted_files_with_their_digests() {
        let before = manifest(&[("/workspace/a", 'a'), ("/workspace/b", 'b'), ("/workspace/c", 'c')]);
        let after = manifest(&[("/workspace/a", 'a'), ("/workspace/b", 'e'), ("/workspace/d", 'd')]);
        let changes = diff(&before, &after);
        let kinds: Vec<_> = changes.iter().map(|c| (c.path.as_str(), c.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("/workspace/b", ChangeKind::Modified),
                ("/workspace/c", ChangeKind::Deleted),
                ("/workspace/d", ChangeKind::Added)
            ]
        );
        assert_eq!(changes[0].before_sha256.as_deref(), Some("b".repeat(64).as_str()));
        assert_eq!(changes[0].after_sha256.as_deref(), Some("e".repeat(64).as_str()));
        assert_eq!(changes[1].after_sha256, None);
        assert_eq!(changes[2].before_sha256, None);
        assert!(diff(&after, &after).is_empty());
    }

    #[test]
    fn a_scan_becomes_a_manifest_by_absolute_path() {
        let m = Manifest::of_scan(vec![ScanEntry {
            path: "src/a".into(),
            size: 3,
            sha256: "a".repeat(64),
            mode: Some(0o755),
        }]);
        assert_eq!(m.files.get("/workspace/src/a").map(|e| (e.size, e.mode)), Some((3, Some(0o755))));
        assert_eq!(Manifest::key("ab"), "manifests/ab.json");
    }

    #[test]
    fn only_blobs_the_bucket_lacks_are_uploaded_once_each() {
        let mut m = manifest(&[("/workspace/x", 'a'), ("/workspace/y", 'a')]);
        for n in 0..1000 {
            m.files.insert(
                format!("/workspace/f{n}"),
                ManifestEntry { sha256: "b".repeat(64), size: 1, mode: None },
            );
        }
        m.files.insert(
            "/workspace/changed".into(),
            ManifestEntry { sha256: "c".repeat(64), size: 1, mode: None },
        );
        let present = BTreeSet::from(["a".repeat(64), "b".repeat(64)]);
        assert_eq!(missing_blobs(&m, &present), ["c".repeat(64)]);
        assert_eq!(missing_blobs(&m, &BTreeSet::new()).len(), 3);
        assert_eq!(blob_key("ab"), "blobs/sha256/ab");
    }
}
