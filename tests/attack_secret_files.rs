//! Attacks on the local gateway's secrets on disk (issue 24, item 5): another user of the
//! machine reading `.agentplane/core-key`, `webhook-key` or `node-token`. Each is created
//! `0600` in a folder others cannot list; one left readable by an older gateway is closed
//! before it is used; a secret that is a link elsewhere is refused. The gateway's `main`
//! touches these files only through `agentplane_local::secrets`, the code tested here.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use agentplane_local::secrets::{FOLDER_MODE, SECRET_MODE, StateDir};
use agentplane_tests::unique_prefix;

type R = anyhow::Result<()>;

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0)
}

/// A state folder of this test's own (not yet created).
fn state_dir() -> PathBuf {
    std::env::temp_dir().join(format!("agentplane-secrets-{}", unique_prefix())).join(".agentplane")
}

#[test]
fn generated_secrets_are_readable_by_their_owner_only() -> R {
    let dir = state_dir();
    let state = StateDir::new(&dir);
    for name in ["core-key", "webhook-key", "node-token"] {
        let text = state.read_or_create(name, || Ok(format!("{name}-generated-secret-0123456789")))?;
        assert_eq!(fs::read_to_string(dir.join(name))?, text);
        assert_eq!(mode(&dir.join(name)), SECRET_MODE, "{name}");
        // Read again, it is the same secret.
        assert_eq!(state.read_or_create(name, || anyhow::bail!("generated twice"))?, text);
    }
    assert_eq!(SECRET_MODE, 0o600);
    // Others may pass through (to the node's workspaces) but not list the folder.
    assert_eq!(mode(&dir), FOLDER_MODE);
    assert_eq!(FOLDER_MODE & 0o066, 0, "group and others can neither list nor write");
    // A replaced secret (the node re-registered) is 0600 too, and no temporary is left.
    state.write("node-token", "apnode_replaced")?;
    assert_eq!(
        (fs::read_to_string(dir.join("node-token"))?, mode(&dir.join("node-token"))),
        ("apnode_replaced".into(), 0o600)
    );
    let names: Vec<String> =
        fs::read_dir(&dir)?.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    fs::remove_dir_all(dir.parent().unwrap_or(&dir))?;
    Ok(())
}

#[test]
fn a_secret_an_older_gateway_left_readable_is_closed_before_it_is_used() -> R {
    let dir = state_dir();
    fs::create_dir_all(&dir)?;
    fs::set_permissions(&dir, Permissions::from_mode(0o755))?;
    let key = dir.join("core-key");
    fs::write(&key, "core_key_written_world_readable\n")?;
    fs::set_permissions(&key, Permissions::from_mode(0o644))?;

    let state = StateDir::new(&dir);
    state.prepare()?;
    assert_eq!(mode(&dir), 0o711, "the folder no longer lists to others");
    let read = state.read("core-key")?.ok_or_else(|| anyhow::anyhow!("no secret"))?;
    assert_eq!(read.text, "core_key_written_world_readable");
    assert_eq!(read.was_readable_by_others, Some(0o644), "the gateway says so");
    assert_eq!(mode(&key), 0o600);
    // Group-readable only is readable by others too.
    fs::set_permissions(&key, Permissions::from_mode(0o640))?;
    assert_eq!(state.read("core-key")?.and_then(|s| s.was_readable_by_others), Some(0o640));
    assert_eq!(mode(&key), 0o600);
    // A closed one is read as it is, without a word.
    assert_eq!(state.read("core-key")?.and_then(|s| s.was_readable_by_others), None);
    fs::remove_dir_all(dir.parent().unwrap_or(&dir))?;
    Ok(())
}

#[test]
fn a_secret_that_is_a_link_is_refused_and_its_target_left_alone() -> R {
    let dir = state_dir();
    let state = StateDir::new(&dir);
    state.prepare()?;
    let target = dir.parent().unwrap_or(&dir).join("elsewhere");
    fs::write(&target, "not a key of ours")?;
    fs::set_permissions(&target, Permissions::from_mode(0o644))?;
    std::os::unix::fs::symlink(&target, dir.join("webhook-key"))?;
    let err = state.read_or_create("webhook-key", || Ok("fresh".into())).expect_err("a link is refused");
    assert!(format!("{err:#}").contains("not a regular file"), "{err:#}");
    assert_eq!(mode(&target), 0o644, "the link's target was changed");
    assert_eq!(fs::read_to_string(&target)?, "not a key of ours");
    fs::remove_dir_all(dir.parent().unwrap_or(&dir))?;
    Ok(())
}

#[test]
fn the_gateway_reaches_its_secrets_only_through_the_tested_code() -> R {
    let main =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../localstack/gateway/src/main.rs"))?;
    for direct in ["fs::write", "read_to_string", "File::create", "OpenOptions"] {
        assert!(
            !main.contains(direct),
            "localstack/gateway/src/main.rs uses {direct}: secrets go through `secrets`"
        );
    }
    for name in ["\"core-key\"", "\"webhook-key\"", "\"node-token\""] {
        assert!(main.contains(name), "{name} is one of the gateway's secrets");
    }
    Ok(())
}
