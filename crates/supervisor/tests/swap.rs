//! Issue 16, "hashed is what runs": a file of a server's identity swapped between the identity
//! capture and the process start is caught before anything is released or started, and one
//! changed while the process starts is seen by the watch that goes with the launch.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use postern_domain::ServerConfig;
use postern_supervisor::{DigestCache, Given, LaunchError, launch_checked, launch_with};

/// A server that is an executable shell script (a `#!` wrapper the host hashes).
fn script_server(dir: &Path) -> ServerConfig {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("server.sh");
    std::fs::write(&script, "#!/bin/sh\nsleep 5\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    ServerConfig::new(
        "swap".parse().expect("label"),
        vec!["./server.sh".into()],
        Some(dir.to_owned()),
        vec![],
    )
    .expect("config")
}

#[test]
fn a_file_swapped_after_the_capture_is_caught_before_any_release_or_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = script_server(dir.path());
    let cache = DigestCache::new();
    let released = AtomicBool::new(false);
    let swapped = launch_checked(
        &config,
        &cache,
        |_| {
            released.store(true, Ordering::SeqCst);
            Given::default()
        },
        // The attacker's moment: after the host hashed server.sh, before it starts.
        || std::fs::write(dir.path().join("server.sh"), "#!/bin/sh\necho pwned\n").expect("swap"),
    );
    match swapped {
        Err(LaunchError::Changed(what)) => assert!(what.contains("server.sh"), "{what}"),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("the swapped file was started"),
    }
    assert!(!released.load(Ordering::SeqCst), "nothing was released");
}

#[tokio::test]
async fn a_file_changed_while_the_process_starts_is_seen_by_the_launchs_watch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = script_server(dir.path());
    let cache = DigestCache::new();
    let mut launched = launch_with(&config, &cache, |_| Given::default()).expect("launch");
    let watch = launched.watch.as_mut().expect("watched");
    assert!(!watch.touched(), "nothing changed yet");
    std::fs::write(dir.path().join("server.sh"), "#!/bin/sh\necho pwned\n").expect("swap");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !watch.touched() {
        assert!(
            std::time::Instant::now() < deadline,
            "the change was not seen"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    launched.spawned.handle.stop();
}

/// The server's entry is a link to a build's output elsewhere (red team, 2026-12-06): a write
/// to the file it names says nothing in the link's own directory, and is seen all the same.
#[tokio::test]
async fn a_linked_entry_changed_where_it_lives_is_seen_by_the_launchs_watch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, build) = (dir.path().join("app"), dir.path().join("build"));
    std::fs::create_dir_all(&app).expect("app");
    std::fs::create_dir_all(&build).expect("build");
    let entry = build.join("server.py");
    std::fs::write(&entry, "import time\ntime.sleep(5)\n").expect("write");
    std::os::unix::fs::symlink(&entry, app.join("server.py")).expect("link");
    let config = ServerConfig::new(
        "swap".parse().expect("label"),
        vec!["python3".into(), "server.py".into()],
        Some(app.clone()),
        vec![],
    )
    .expect("config");
    let mut launched =
        launch_with(&config, &DigestCache::new(), |_| Given::default()).expect("launch");
    let watch = launched.watch.as_mut().expect("watched");
    assert!(!watch.touched(), "nothing changed yet");
    std::fs::write(&entry, "print('pwned')\n").expect("swap");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !watch.touched() {
        assert!(
            std::time::Instant::now() < deadline,
            "the change where the link points was not seen"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    launched.spawned.handle.stop();
}

/// The path a launch executes is often a link to the executable hashed (a virtual
/// environment's `bin/python`): re-pointed after the second capture, while the credentials are
/// being released (review 5, S3), it would run something else. The launch's watch sees it.
#[tokio::test]
async fn a_launch_link_repointed_while_the_credentials_are_released_is_seen() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let real = bin.join("real-server");
    std::fs::write(&real, "#!/bin/sh\nsleep 5\n").expect("write");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let evil = bin.join("evil-server");
    std::fs::write(&evil, "#!/bin/sh\necho pwned\n").expect("write");
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let link = bin.join("server");
    std::os::unix::fs::symlink("real-server", &link).expect("link");
    let config = ServerConfig::new(
        "swap".parse().expect("label"),
        vec![link.display().to_string()],
        Some(dir.path().to_owned()),
        vec![],
    )
    .expect("config");
    let mut launched = launch_with(&config, &DigestCache::new(), |_| {
        // The attacker's moment: both captures agreed, the keychain is being read.
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink("evil-server", &link).expect("re-point");
        Given::default()
    })
    .expect("launch");
    let watch = launched.watch.as_mut().expect("watched");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !watch.touched() {
        assert!(
            std::time::Instant::now() < deadline,
            "the re-pointed link was not seen"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    launched.spawned.handle.stop();
}
