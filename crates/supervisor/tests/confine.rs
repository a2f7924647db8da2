//! Issue 16, confined servers (Linux, bubblewrap): a confined launch cannot read a canary under
//! the user's `~/.ssh` or the Postern home, writes only to its directory, reaches no loopback
//! port, and says what it runs in; the same server unconfined can do all of it.
#![cfg(target_os = "linux")]

use std::path::PathBuf;

use postern_domain::{Confinement, ServerConfig};
use postern_supervisor::{DigestCache, Given, SandboxHost, launch_with};
use tokio::io::AsyncReadExt;

struct Place {
    _dir: tempfile::TempDir,
    user_home: PathBuf,
    postern_home: PathBuf,
    project: PathBuf,
}

fn place() -> Place {
    let dir = tempfile::tempdir().expect("tempdir");
    let user_home = dir.path().join("user");
    let postern_home = dir.path().join("postern");
    let project = dir.path().join("project");
    for d in [&user_home.join(".ssh"), &postern_home, &project] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(user_home.join(".ssh/id_canary"), "ssh-canary\n").expect("canary");
    std::fs::write(user_home.join(".netrc"), "netrc-canary\n").expect("canary");
    std::fs::write(postern_home.join("canary"), "home-canary\n").expect("canary");
    Place {
        _dir: dir,
        user_home,
        postern_home,
        project,
    }
}

/// A shell "server" that reports what it could do, then exits.
fn probe(place: &Place, confinement: Confinement, port: u16) -> ServerConfig {
    let script = format!(
        "cat {ssh}/id_canary 2>/dev/null || echo no-ssh; \
         cat {home}/.netrc 2>/dev/null || echo no-netrc; \
         cat {postern}/canary 2>/dev/null || echo no-postern; \
         echo written > written && echo wrote-project; \
         (echo x > {home}/outside) 2>/dev/null; \
         (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo no-connect",
        ssh = place.user_home.join(".ssh").display(),
        home = place.user_home.display(),
        postern = place.postern_home.display(),
    );
    let mut config = ServerConfig::new(
        "probe".parse().expect("label"),
        vec!["/bin/bash".into(), "-c".into(), script],
        Some(place.project.clone()),
        vec![],
    )
    .expect("config");
    config.confinement = confinement;
    config
}

async fn run(place: &Place, confinement: Confinement) -> (String, Option<postern_domain::Sandbox>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let cache = DigestCache::with_sandbox(SandboxHost {
        postern_home: Some(place.postern_home.clone()),
        user_home: Some(place.user_home.clone()),
        relay: None,
        exposed: Vec::new(),
    });
    let config = probe(place, confinement, port);
    let mut launched = launch_with(&config, &cache, |_| Given::default()).expect("launch");
    let mut out = String::new();
    launched
        .spawned
        .stdout
        .read_to_string(&mut out)
        .await
        .expect("read");
    launched.spawned.handle.exited().await;
    (out, launched.record.sandbox)
}

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[tokio::test]
async fn a_confined_server_sees_no_credentials_writes_only_its_directory_and_has_no_network() {
    let place = place();
    let (out, sandbox) = run(&place, Confinement::Confined).await;
    assert_eq!(
        lines(&out),
        [
            "no-ssh",
            "no-netrc",
            "no-postern",
            "wrote-project",
            "no-connect"
        ],
        "{out}"
    );
    assert!(place.project.join("written").is_file());
    assert!(
        !place.user_home.join("outside").exists(),
        "a write outside its directory reached the user's files"
    );
    let sandbox = sandbox.expect("the record names its sandbox");
    assert_eq!(sandbox.tool, "bubblewrap");
    assert!(sandbox.hidden.contains(&place.user_home.join(".ssh")));
}

#[tokio::test]
async fn the_same_server_unconfined_can_do_all_of_it() {
    let place = place();
    let (out, sandbox) = run(&place, Confinement::Unconfined).await;
    assert_eq!(
        lines(&out),
        [
            "ssh-canary",
            "netrc-canary",
            "home-canary",
            "wrote-project",
            "connected"
        ],
        "{out}"
    );
    assert!(place.user_home.join("outside").is_file());
    assert_eq!(sandbox, None, "the record says unconfined");
}
