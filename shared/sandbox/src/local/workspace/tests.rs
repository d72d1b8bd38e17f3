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
