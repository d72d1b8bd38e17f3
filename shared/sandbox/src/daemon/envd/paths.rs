//! Paths as the SDK names them, mapped to the sandbox's `/workspace`: absolute paths under
//! `/workspace` (or `/home/user`, the E2B user's home, which is the workspace here) and paths
//! relative to it; anything else is outside what envd serves and refused. The workspace
//! module parses the result again and walks it without following symlinks.

use agentplane_domain::platform::path::ROOT;

use super::connect::{Code, ConnectError};
use crate::local::workspace::Failure;

/// The E2B user's home, served as the workspace.
const E2B_HOME: &str = "/home/user";

/// `path` relative to `/workspace` (empty: the workspace itself).
pub fn relative(path: &str) -> Result<String, ConnectError> {
    let trimmed = path.trim_end_matches('/');
    let rest = if trimmed.is_empty() && path.starts_with('/') {
        return Err(outside());
    } else if let Some(rest) = [ROOT, E2B_HOME].iter().find_map(|root| strip(trimmed, root)) {
        rest
    } else if trimmed.starts_with('/') {
        return Err(outside());
    } else {
        trimmed
    };
    Ok(rest.to_owned())
}

fn strip<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    match path.strip_prefix(root)? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

fn outside() -> ConnectError {
    ConnectError::new(Code::PermissionDenied, "the path is outside the sandbox's /workspace")
}

/// The absolute path the SDK is answered with.
pub fn absolute(relative: &str) -> String {
    if relative.is_empty() { ROOT.to_owned() } else { format!("{ROOT}/{relative}") }
}

/// A refused or failed workspace operation as envd answers it.
pub fn failure(failure: Failure) -> ConnectError {
    match failure {
        Failure::NotFound => ConnectError::new(Code::NotFound, "no such file or directory"),
        Failure::Symlink => ConnectError::new(
            Code::PermissionDenied,
            "the path goes through a symlink, which envd never follows",
        ),
        Failure::NotRegular => ConnectError::new(Code::InvalidArgument, "the path is not a regular file"),
        Failure::NotADirectory => ConnectError::new(
            Code::InvalidArgument,
            "the path goes through something that is not a directory",
        ),
        Failure::InvalidPath(err) => ConnectError::new(Code::InvalidArgument, format!("invalid path: {err}")),
        Failure::TooLarge(too_large) => ConnectError::new(Code::InvalidArgument, too_large.message()),
        Failure::Io(message) => ConnectError::new(Code::Internal, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_in_the_workspace_map() {
        assert_eq!(relative("/workspace/a/b.txt").ok().as_deref(), Some("a/b.txt"));
        assert_eq!(relative("/home/user/a.txt").ok().as_deref(), Some("a.txt"));
        assert_eq!(relative("/workspace/").ok().as_deref(), Some(""));
        assert_eq!(relative("a.txt").ok().as_deref(), Some("a.txt"));
        for outside in ["/etc/passwd", "/", "/workspaces/x", "/home/user2/x", "/tmp/x"] {
            assert!(relative(outside).is_err(), "{outside}");
        }
    }
}
