//! Workspace paths: canonical absolute paths under `/workspace`. Refused before anything touches
//! a filesystem: a relative or non-canonical form (`//`, a trailing `/`, `.`, `..`), NUL, Git
//! metadata (`.git`, any case) and protected state (`.agentplane…`, the node's own temporary
//! names). Symlinks are refused by the node, which never follows one (see the sandbox crate).

use thiserror::Error;

pub const ROOT: &str = "/workspace";
/// Longest path (bytes, as Linux's PATH_MAX less its NUL) and component.
pub const MAX_PATH_BYTES: usize = 4095;
pub const MAX_COMPONENT_BYTES: usize = 255;
pub const MAX_DEPTH: usize = 64;
/// Names starting with this (any case) are the node's own.
pub const PROTECTED_PREFIX: &str = ".agentplane";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    #[error("`path` must be an absolute path under /workspace")]
    OutsideWorkspace,
    #[error("`path` must name a file under /workspace, not /workspace itself")]
    WorkspaceRoot,
    #[error("`path` contains a NUL byte")]
    Nul,
    #[error("`path` is not canonical (no empty, `.` or `..` components, no trailing `/`)")]
    NotCanonical,
    #[error(
        "`path` is longer than {MAX_PATH_BYTES} bytes, a component longer than {MAX_COMPONENT_BYTES}, or deeper than {MAX_DEPTH}"
    )]
    TooLong,
    #[error("`path` names Git metadata (`.git`)")]
    GitMetadata,
    #[error("`path` names protected state (`.agentplane…`)")]
    Protected,
    /// Found by the node: a component on the way is a symlink (never followed).
    #[error("`path` goes through a symlink")]
    Symlink,
    /// Found by the node: the target or a component on the way is not what the route needs.
    #[error("`path` names something that is not a regular file")]
    NotRegularFile,
    #[error("`path` goes through something that is not a directory")]
    NotADirectory,
}

/// A valid workspace path: its components below `/workspace` (none: the workspace itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkspacePath {
    components: Vec<String>,
}

impl WorkspacePath {
    /// A path naming a file (or directory) below `/workspace`.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let path = Self::parse_any(text)?;
        if path.components.is_empty() {
            return Err(PathError::WorkspaceRoot);
        }
        Ok(path)
    }

    /// `/workspace` itself or a path below it (a directory to list).
    pub fn parse_any(text: &str) -> Result<Self, PathError> {
        if text.as_bytes().contains(&0) {
            return Err(PathError::Nul);
        }
        if text.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        let rest = match text.strip_prefix(ROOT) {
            Some("") => return Ok(Self { components: Vec::new() }),
            Some(rest) if rest.starts_with('/') => &rest[1..],
            _ => return Err(PathError::OutsideWorkspace),
        };
        let mut components = Vec::new();
        for component in rest.split('/') {
            match component {
                "" | "." | ".." => return Err(PathError::NotCanonical),
                c if c.len() > MAX_COMPONENT_BYTES => return Err(PathError::TooLong),
                c if c.eq_ignore_ascii_case(".git") => return Err(PathError::GitMetadata),
                c if c.len() >= PROTECTED_PREFIX.len()
                    && c.as_bytes()[..PROTECTED_PREFIX.len()]
                        .eq_ignore_ascii_case(PROTECTED_PREFIX.as_bytes()) =>
                {
                    return Err(PathError::Protected);
                }
                c => components.push(c.to_owned()),
            }
        }
        if components.len() > MAX_DEPTH {
            return Err(PathError::TooLong);
        }
        Ok(Self { components })
    }

    /// A path relative to the workspace (`a/b.txt`), as the node receives it.
    pub fn parse_relative(text: &str) -> Result<Self, PathError> {
        if text.is_empty() { Self::parse_any(ROOT) } else { Self::parse_any(&format!("{ROOT}/{text}")) }
    }

    pub fn components(&self) -> &[String] {
        &self.components
    }

    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// `a/b.txt` (empty for the workspace itself).
    pub fn relative(&self) -> String {
        self.components.join("/")
    }

    /// `/workspace/a/b.txt`.
    pub fn absolute(&self) -> String {
        if self.components.is_empty() { ROOT.to_owned() } else { format!("{ROOT}/{}", self.relative()) }
    }

    /// Whether a directory entry named `name` may be shown or followed (not `.git`, not
    /// protected state).
    pub fn listable(name: &str) -> bool {
        Self::parse_relative(name).is_ok_and(|p| p.components.len() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths_under_the_workspace_are_accepted() {
        let p = WorkspacePath::parse("/workspace/src/main.rs").expect("valid");
        assert_eq!(p.components(), ["src", "main.rs"]);
        assert_eq!(p.relative(), "src/main.rs");
        assert_eq!(p.absolute(), "/workspace/src/main.rs");
        assert!(WorkspacePath::parse("/workspace/.gitignore").is_ok());
        assert!(WorkspacePath::parse("/workspace/a b/ü.txt").is_ok());
        assert!(WorkspacePath::parse_any("/workspace").is_ok_and(|p| p.is_root()));
        assert_eq!(WorkspacePath::parse_relative("src/x"), WorkspacePath::parse("/workspace/src/x"));
    }

    #[test]
    fn every_attack_form_is_refused() {
        use PathError::*;
        let cases = [
            ("workspace/a", OutsideWorkspace),
            ("/etc/passwd", OutsideWorkspace),
            ("/workspacex/a", OutsideWorkspace),
            ("/Workspace/a", OutsideWorkspace),
            ("", OutsideWorkspace),
            ("/workspace", WorkspaceRoot),
            ("/workspace/", NotCanonical),
            ("/workspace/../etc/passwd", NotCanonical),
            ("/workspace/a/../../etc", NotCanonical),
            ("/workspace/./a", NotCanonical),
            ("/workspace//a", NotCanonical),
            ("/workspace/a/", NotCanonical),
            ("/workspace/a/..", NotCanonical),
            ("/workspace/a\0b", Nul),
            ("/workspace/.git/config", GitMetadata),
            ("/workspace/sub/.GIT/HEAD", GitMetadata),
            ("/workspace/.git", GitMetadata),
            ("/workspace/.agentplane-tmp-1", Protected),
            ("/workspace/x/.AgentPlane/state", Protected),
        ];
        for (text, want) in cases {
            assert_eq!(WorkspacePath::parse(text), Err(want.clone()), "{text:?}");
        }
        assert_eq!(WorkspacePath::parse(&format!("/workspace/{}", "a".repeat(256))), Err(TooLong));
        assert_eq!(WorkspacePath::parse(&format!("/workspace/{}", "a/".repeat(70) + "b")), Err(TooLong));
        assert_eq!(WorkspacePath::parse(&format!("/workspace/{}", "ab/".repeat(1400))), Err(TooLong));
    }

    #[test]
    fn listing_skips_metadata_and_protected_names() {
        assert!(WorkspacePath::listable("src"));
        assert!(!WorkspacePath::listable(".git"));
        assert!(!WorkspacePath::listable(".agentplane-tmp"));
        assert!(!WorkspacePath::listable(".."));
        assert!(!WorkspacePath::listable("a/b"));
    }
}

/// How a node's refusal of a workspace operation travels in a failed command's message, so
/// Core answers it as the 400 or 404 it is (anything else is the node failing).
pub mod refusal {
    use super::PathError;

    pub const NOT_FOUND: &str = "workspace:not_found";
    pub const SYMLINK: &str = "workspace:symlink";
    pub const NOT_REGULAR: &str = "workspace:not_regular_file";
    pub const NOT_DIRECTORY: &str = "workspace:not_a_directory";
    /// `workspace:too_large:<what>:<limit>`: the tree is past one of the node's caps.
    pub const TOO_LARGE_PREFIX: &str = "workspace:too_large:";

    /// Which cap of the node's walk a workspace went past (`workspace::Limits` in the
    /// sandbox crate). A tree a sandbox process built is hostile input: the walk stops at the
    /// first cap it meets instead of following it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Cap {
        /// A path of more components than the limit.
        Depth,
        /// More directory entries (of any kind) than the limit.
        Entries,
        /// A path (relative to `/workspace`) longer than the limit in bytes.
        PathBytes,
        /// The paths of the listing together longer than the limit in bytes.
        ListingBytes,
        /// A regular file larger than the limit in bytes.
        FileBytes,
    }

    impl Cap {
        pub fn as_str(self) -> &'static str {
            match self {
                Self::Depth => "depth",
                Self::Entries => "entries",
                Self::PathBytes => "path_bytes",
                Self::ListingBytes => "listing_bytes",
                Self::FileBytes => "file_bytes",
            }
        }

        fn parse(text: &str) -> Option<Self> {
            [Self::Depth, Self::Entries, Self::PathBytes, Self::ListingBytes, Self::FileBytes]
                .into_iter()
                .find(|c| c.as_str() == text)
        }
    }

    /// A workspace past a cap: which, and the limit it went past.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct TooLarge {
        pub cap: Cap,
        pub limit: u64,
    }

    impl TooLarge {
        /// As the node sends it.
        pub fn message(self) -> String {
            format!("{TOO_LARGE_PREFIX}{}:{}", self.cap.as_str(), self.limit)
        }

        /// For people: fixed for a cap and limit (no path, nothing from inside the sandbox).
        pub fn describe(self) -> String {
            let limit = self.limit;
            match self.cap {
                Cap::Depth => format!("the workspace holds a path of more than {limit} components"),
                Cap::Entries => format!("the workspace holds more than {limit} directory entries"),
                Cap::PathBytes => format!("the workspace holds a path longer than {limit} bytes"),
                Cap::ListingBytes => format!("the workspace's paths together exceed {limit} bytes"),
                Cap::FileBytes => format!("the workspace holds a file larger than {limit} bytes"),
            }
        }

        fn parse(rest: &str) -> Option<Self> {
            let (cap, limit) = rest.split_once(':')?;
            Some(Self { cap: Cap::parse(cap)?, limit: limit.parse().ok()? })
        }
    }

    /// What Core makes of a failed workspace command.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Refusal {
        NotFound,
        Path(PathError),
        /// The workspace is past one of the node's caps.
        TooLarge(TooLarge),
        /// The node could not do it (the message is for the log).
        Failed(String),
    }

    pub fn parse(message: &str) -> Refusal {
        match message {
            NOT_FOUND => Refusal::NotFound,
            SYMLINK => Refusal::Path(PathError::Symlink),
            NOT_REGULAR => Refusal::Path(PathError::NotRegularFile),
            NOT_DIRECTORY => Refusal::Path(PathError::NotADirectory),
            other => {
                if other.starts_with("workspace:invalid_path:") {
                    return Refusal::Path(PathError::NotCanonical);
                }
                match other.strip_prefix(TOO_LARGE_PREFIX).and_then(TooLarge::parse) {
                    Some(too_large) => Refusal::TooLarge(too_large),
                    None => Refusal::Failed(other.to_owned()),
                }
            }
        }
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::refusal::{Cap, Refusal, TooLarge, parse};

    #[test]
    fn a_cap_travels_from_the_node_and_back_and_anything_else_is_a_failure() {
        for cap in [Cap::Depth, Cap::Entries, Cap::PathBytes, Cap::ListingBytes, Cap::FileBytes] {
            let too_large = TooLarge { cap, limit: 64 };
            assert_eq!(parse(&too_large.message()), Refusal::TooLarge(too_large));
            assert!(!too_large.describe().contains('/'), "{}", too_large.describe());
        }
        for other in [
            "workspace:too_large:",
            "workspace:too_large:depth",
            "workspace:too_large:x:1",
            "workspace:too_large:depth:-1",
        ] {
            assert_eq!(parse(other), Refusal::Failed(other.to_owned()));
        }
    }
}
