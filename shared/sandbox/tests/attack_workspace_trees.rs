//! Attacks on the node's walk over a workspace: trees a sandbox process can build (deep, wide,
//! long names, names that are not UTF-8, FIFOs, sockets, devices, symlink loops, a tree changing
//! while walked). Each must end in a listing or a named refusal — never a stack overflow, a
//! panic or a hang of the node (which, embedded in the local gateway, takes every surface down).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentplane_domain::platform::path::refusal::{Cap, TooLarge};
use agentplane_sandbox::local::workspace::{self, Entry, Failure, Limits};
use rustix::fs::{CWD, FileType, Mode, OFlags};

/// A temporary workspace, removed with `rm -rf` (which walks any depth without recursing).
struct Workspace {
    base: PathBuf,
    root: PathBuf,
}

impl Workspace {
    fn new() -> Self {
        let base = std::env::temp_dir().join(format!("ws-attack-{}", uuid::Uuid::new_v4().simple()));
        let root = base.join("workspace");
        std::fs::create_dir_all(&root).unwrap();
        Self { base, root }
    }

    fn file(&self, relative: &str, bytes: &[u8]) {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::process::Command::new("rm").arg("-rf").arg(&self.base).status();
    }
}

fn open_dir(path: &Path) -> OwnedFd {
    rustix::fs::openat(CWD, path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .unwrap()
}

/// Makes `names` nested under `dir` one `mkdirat` at a time (deeper than PATH_MAX allows by
/// path); the innermost directory.
fn chain(dir: &Path, names: impl IntoIterator<Item = String>) -> OwnedFd {
    let mut fd = open_dir(dir);
    for name in names {
        rustix::fs::mkdirat(&fd, name.as_str(), Mode::from_raw_mode(0o755)).unwrap();
        fd = rustix::fs::openat(
            &fd,
            name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
    }
    fd
}

/// The listing, walked on a thread with a small stack (a recursive walk of a deep tree would
/// overflow it and abort the process, as it aborted the gateway), within a bound that only a
/// hang (a FIFO opened blocking) could reach.
fn list_on_small_stack(root: &Path, limit: usize, limits: Limits) -> Result<(Vec<Entry>, bool), Failure> {
    let root = root.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(move || {
            let _ = tx.send(workspace::list(&root, "", limit, &limits));
        })
        .unwrap();
    rx.recv_timeout(Duration::from_secs(300)).expect("the walk hung")
}

fn paths(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|e| e.path.as_str()).collect()
}

fn too_large(cap: Cap, limit: u64) -> Failure {
    Failure::TooLarge(TooLarge { cap, limit })
}

#[test]
fn attack_a_5000_deep_tree_is_refused_at_the_depth_cap_without_recursing() {
    let ws = Workspace::new();
    ws.file("top.txt", b"top");
    let bottom = chain(&ws.root, (0..5000).map(|_| "d".to_owned()));
    rustix::fs::openat(&bottom, "deepest", OFlags::WRONLY | OFlags::CREATE, Mode::from_raw_mode(0o644))
        .unwrap();

    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, Limits::default()), Err(too_large(Cap::Depth, 64)));
    // The message Core reads back names the cap, nothing of the tree.
    assert_eq!(too_large(Cap::Depth, 64).message(), "workspace:too_large:depth:64");

    // With the depth cap lifted, the same walk goes all the way down on a 128 KiB stack: it
    // holds the path in memory, not in stack frames.
    let unbounded = Limits { max_depth: usize::MAX, max_path_bytes: usize::MAX, ..Limits::default() };
    let (entries, more) = list_on_small_stack(&ws.root, usize::MAX, unbounded).unwrap();
    assert!(!more);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].path, "top.txt");
    assert_eq!(entries[0].path, format!("{}deepest", "d/".repeat(5000)));
}

#[test]
fn attack_an_empty_chain_of_directories_past_the_depth_cap_is_refused_too() {
    let ws = Workspace::new();
    chain(&ws.root, (0..65).map(|_| "d".to_owned()));
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, Limits::default()), Err(too_large(Cap::Depth, 64)));
    // 64 levels are within the cap (a file at depth 64 is a valid workspace path).
    let ws = Workspace::new();
    let bottom = chain(&ws.root, (0..63).map(|_| "d".to_owned()));
    rustix::fs::openat(&bottom, "f", OFlags::WRONLY | OFlags::CREATE, Mode::from_raw_mode(0o644)).unwrap();
    let (entries, _) = list_on_small_stack(&ws.root, usize::MAX, Limits::default()).unwrap();
    assert_eq!(paths(&entries), [format!("{}f", "d/".repeat(63))]);
}

#[test]
fn attack_20000_entries_in_one_directory_are_listed_and_a_lower_entry_cap_refuses_them() {
    let ws = Workspace::new();
    let dir = ws.root.join("wide");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..20_000 {
        std::fs::File::create(dir.join(format!("f{i:05}"))).unwrap();
    }
    let (entries, more) = list_on_small_stack(&ws.root, usize::MAX, Limits::default()).unwrap();
    assert!(!more);
    assert_eq!(entries.len(), 20_000);
    let (first, more) = list_on_small_stack(&ws.root, 1000, Limits::default()).unwrap();
    assert!(more);
    assert_eq!(first.len(), 1000);

    // Every name read counts (directory `wide` and its entries), listed or not: protected
    // names the listing leaves out count too.
    let capped = Limits { max_entries: 10_000, ..Limits::default() };
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, capped), Err(too_large(Cap::Entries, 10_000)));
    for i in 0..20_000 {
        std::fs::rename(dir.join(format!("f{i:05}")), dir.join(format!(".agentplane-{i}"))).unwrap();
    }
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, capped), Err(too_large(Cap::Entries, 10_000)));
}

#[test]
fn attack_255_byte_names_are_listed_until_their_path_passes_the_path_cap() {
    let ws = Workspace::new();
    let long = "n".repeat(255);
    ws.file(&long, b"x");
    let (entries, _) = list_on_small_stack(&ws.root, usize::MAX, Limits::default()).unwrap();
    assert_eq!(paths(&entries), [long.as_str()]);

    // 16 levels of 255-byte names: 16 × 256 − 1 = 4095 bytes, more than a workspace path holds.
    let bottom = chain(&ws.root, (0..16).map(|i| format!("{i:x}").repeat(255)[..255].to_owned()));
    drop(bottom);
    assert_eq!(workspace::MAX_RELATIVE_PATH_BYTES, 4084);
    assert_eq!(
        list_on_small_stack(&ws.root, usize::MAX, Limits::default()),
        Err(too_large(Cap::PathBytes, 4084))
    );
}

#[test]
fn attack_the_listing_s_total_size_is_capped() {
    let ws = Workspace::new();
    ws.file("aaaaaaaa", b"1");
    ws.file("bbbbbbbb", b"2");
    let capped = Limits { max_listing_bytes: 10, ..Limits::default() };
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, capped), Err(too_large(Cap::ListingBytes, 10)));
    let roomy = Limits { max_listing_bytes: 16, ..Limits::default() };
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, roomy).unwrap().0.len(), 2);
}

#[test]
fn attack_a_file_past_the_file_cap_is_refused_not_hashed_to_its_end() {
    let ws = Workspace::new();
    ws.file("small", b"1234");
    ws.file("big", b"123456789");
    let capped = Limits { max_file_bytes: 8, ..Limits::default() };
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, capped), Err(too_large(Cap::FileBytes, 8)));
    // A sparse file claiming a terabyte is refused after `max_file_bytes`, not read for hours.
    let sparse = std::fs::File::create(ws.root.join("sparse")).unwrap();
    sparse.set_len(1 << 40).unwrap();
    std::fs::remove_file(ws.root.join("big")).unwrap();
    assert_eq!(
        list_on_small_stack(&ws.root, usize::MAX, Limits { max_file_bytes: 1 << 20, ..Limits::default() }),
        Err(too_large(Cap::FileBytes, 1 << 20))
    );
}

#[test]
fn attack_names_that_are_not_utf8_are_left_out_without_a_panic() {
    let ws = Workspace::new();
    ws.file("ok.txt", b"ok");
    std::fs::write(ws.root.join(OsStr::from_bytes(b"bad\xff")), b"x").unwrap();
    let dir = ws.root.join(OsStr::from_bytes(b"dir\xfe\xfd"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inside.txt"), b"x").unwrap();
    std::fs::write(ws.root.join(OsStr::from_bytes(b"\xc3\x28")), b"x").unwrap();
    let (entries, more) = list_on_small_stack(&ws.root, usize::MAX, Limits::default()).unwrap();
    assert!(!more);
    assert_eq!(paths(&entries), ["ok.txt"]);
}

#[test]
fn attack_fifos_sockets_devices_and_symlink_loops_are_skipped_without_blocking() {
    let ws = Workspace::new();
    ws.file("real/file.txt", b"real");
    let root = open_dir(&ws.root);
    // A FIFO with no writer: opening it for reading the ordinary way blocks forever.
    rustix::fs::mknodat(&root, "fifo", FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
    let real = open_dir(&ws.root.join("real"));
    rustix::fs::mknodat(&real, "fifo2", FileType::Fifo, Mode::from_raw_mode(0o666), 0).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(ws.root.join("sock")).unwrap();
    // As root, a character device (a sandbox cannot make one; a node must not open one).
    let _ = rustix::fs::mknodat(
        &root,
        "null",
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    );
    std::os::unix::fs::symlink("loop-b", ws.root.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", ws.root.join("loop-b")).unwrap();
    std::os::unix::fs::symlink("..", ws.root.join("real/up")).unwrap();
    std::os::unix::fs::symlink(".", ws.root.join("self")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.root.join("passwd")).unwrap();

    let (entries, more) = list_on_small_stack(&ws.root, usize::MAX, Limits::default()).unwrap();
    assert!(!more);
    assert_eq!(paths(&entries), ["real/file.txt"]);
    assert_eq!(entries[0].size, 4);
}

#[test]
fn attack_a_tree_changing_while_walked_never_panics_or_lists_a_non_regular_file() {
    let ws = Workspace::new();
    for i in 0..20 {
        ws.file(&format!("stable/{i}"), b"s");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mutator = {
        let (root, stop) = (ws.root.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                let x = root.join("x");
                // A directory full of files, then a file, then a symlink, then a FIFO, by turns.
                let _ = std::fs::create_dir(&x);
                for i in 0..10 {
                    let _ = std::fs::write(x.join(format!("f{i}")), round.to_le_bytes());
                    let _ = std::fs::create_dir_all(x.join(format!("d{i}/e")));
                }
                let _ = std::process::Command::new("rm").arg("-rf").arg(&x).status();
                let _ = std::fs::write(&x, b"now a file");
                let _ = std::fs::remove_file(&x);
                let _ = std::os::unix::fs::symlink("/etc", &x);
                let _ = std::fs::remove_file(&x);
                if let Ok(dir) = rustix::fs::openat(
                    CWD,
                    &root,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    let _ = rustix::fs::mknodat(&dir, "x", FileType::Fifo, Mode::from_raw_mode(0o644), 0);
                }
                let _ = std::fs::remove_file(&x);
            }
            round
        })
    };
    let mut listed = 0;
    for _ in 0..300 {
        match list_on_small_stack(&ws.root, usize::MAX, Limits::default()) {
            Ok((entries, _)) => {
                listed += 1;
                let (empty, file) = (workspace::sha256_hex(b""), workspace::sha256_hex(b"now a file"));
                for e in &entries {
                    // What is listed was a regular file when read: its bytes, or none yet.
                    match e.path.as_str() {
                        p if p.starts_with("stable/") => assert_eq!(e.sha256, workspace::sha256_hex(b"s")),
                        "x" => assert!(e.sha256 == empty || e.sha256 == file, "{e:?}"),
                        p if p.starts_with("x/f") => assert!(e.size == 0 || e.size == 8, "{e:?}"),
                        other => panic!("listed {other}"),
                    }
                }
                assert_eq!(entries.iter().filter(|e| e.path.starts_with("stable/")).count(), 20);
            }
            // A directory removed while read is an I/O refusal, never a panic.
            Err(Failure::Io(_) | Failure::NotFound) => {}
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = mutator.join().expect("the mutator");
    assert!(listed > 0);
    assert!(rounds > 0);
}

#[test]
fn attack_a_restore_clears_a_tree_past_the_caps_without_following_links_or_recursing() {
    let ws = Workspace::new();
    let outside = ws.base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("host.txt"), b"host").unwrap();
    ws.file("keep/.git/config", b"git");
    ws.file("top.txt", b"top");
    std::os::unix::fs::symlink(&outside, ws.root.join("out")).unwrap();
    std::fs::write(ws.root.join(OsStr::from_bytes(b"odd\xff")), b"x").unwrap();
    let bottom = chain(&ws.root, (0..5000).map(|_| "d".to_owned()));
    rustix::fs::mknodat(&bottom, "fifo", FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
    std::os::unix::fs::symlink(&outside, ws.root.join("d/d/into-outside")).unwrap();
    drop(bottom);
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, Limits::default()), Err(too_large(Cap::Depth, 64)));

    let root = ws.root.clone();
    let removed = std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(move || workspace::clear(&root, &Limits::default()))
        .unwrap()
        .join()
        .expect("clear");
    // 5,000 directories, the FIFO, two links and `top.txt`.
    assert_eq!(removed, Ok(5004));
    assert_eq!(list_on_small_stack(&ws.root, usize::MAX, Limits::default()), Ok((Vec::new(), false)));
    // What no walk visits stays, with the directory holding it; nothing outside was touched.
    assert_eq!(std::fs::read(ws.root.join("keep/.git/config")).unwrap(), b"git");
    assert!(ws.root.join(OsStr::from_bytes(b"odd\xff")).exists());
    assert!(!ws.root.join("d").exists());
    assert_eq!(std::fs::read(outside.join("host.txt")).unwrap(), b"host");
}

mod property {
    use proptest::prelude::*;

    use super::*;

    /// One node of a generated tree.
    #[derive(Debug, Clone)]
    enum Node {
        File(Vec<u8>),
        Dir(Vec<(Vec<u8>, Node)>),
        Fifo,
        Symlink(Vec<u8>),
    }

    fn name() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z]{1,8}".prop_map(String::into_bytes),
            Just(b".git".to_vec()),
            Just(b".agentplane-x".to_vec()),
            proptest::collection::vec(1u8..=255, 1..12)
                .prop_map(|v| v.into_iter().filter(|b| *b != b'/').collect::<Vec<u8>>())
                .prop_filter("a name", |v| !v.is_empty() && v != b"." && v != b".."),
        ]
    }

    fn node() -> impl Strategy<Value = Node> {
        let leaf = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(Node::File),
            Just(Node::Fifo),
            prop_oneof![Just(b"..".to_vec()), Just(b"/".to_vec()), Just(b"x".to_vec())]
                .prop_map(Node::Symlink),
        ];
        leaf.prop_recursive(6, 48, 6, |inner| {
            proptest::collection::vec((name(), inner), 0..6).prop_map(Node::Dir)
        })
    }

    /// Builds `children` in `dir`; the regular files a listing must show, with their bytes.
    fn build(dir: &Path, prefix: &str, children: &[(Vec<u8>, Node)], out: &mut Vec<(String, Vec<u8>)>) {
        let mut seen = std::collections::BTreeSet::new();
        for (name, node) in children {
            if !seen.insert(name.clone()) {
                continue;
            }
            let path = dir.join(OsStr::from_bytes(name));
            let listed = std::str::from_utf8(name)
                .ok()
                .filter(|n| agentplane_domain::platform::path::WorkspacePath::listable(n))
                .map(|n| if prefix.is_empty() { n.to_owned() } else { format!("{prefix}/{n}") });
            match node {
                Node::File(bytes) => {
                    std::fs::write(&path, bytes).unwrap();
                    if let Some(p) = listed {
                        out.push((p, bytes.clone()));
                    }
                }
                Node::Dir(inner) => {
                    std::fs::create_dir(&path).unwrap();
                    if let Some(p) = listed {
                        build(&path, &p, inner, out);
                    } else {
                        build(&path, "-", inner, &mut Vec::new());
                    }
                }
                Node::Fifo => {
                    let fd = open_dir(dir);
                    rustix::fs::mknodat(
                        &fd,
                        OsStr::from_bytes(name),
                        FileType::Fifo,
                        Mode::from_raw_mode(0o644),
                        0,
                    )
                    .unwrap();
                }
                Node::Symlink(target) => {
                    std::os::unix::fs::symlink(OsStr::from_bytes(target), &path).unwrap()
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Whatever the tree, the listing is exactly its reachable regular files with names a
        /// workspace path can carry, each with its size and digest; nothing else, no panic.
        #[test]
        fn attack_any_generated_tree_lists_exactly_its_regular_files(
            children in proptest::collection::vec((name(), node()), 0..8)
        ) {
            let ws = Workspace::new();
            let mut expected = Vec::new();
            build(&ws.root, "", &children, &mut expected);
            expected.sort();
            let (entries, more) = list_on_small_stack(&ws.root, usize::MAX, Limits::default()).unwrap();
            prop_assert!(!more);
            let got: Vec<(String, u64, String)> =
                entries.into_iter().map(|e| (e.path, e.size, e.sha256)).collect();
            let want: Vec<(String, u64, String)> = expected
                .into_iter()
                .map(|(p, b)| (p, b.len() as u64, workspace::sha256_hex(&b)))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
