//! Both backends against the same real processes: a child of this test process, then the
//! same child killed (a zombie until reaped), then reaped.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Child, Proc, portable, procfs};

/// One backend's answers, by name.
struct Backend {
    name: &'static str,
    read: fn(u32) -> Option<Proc>,
    exe: fn(u32) -> Option<PathBuf>,
    cmdline: fn(u32) -> Vec<String>,
    cwd: fn(u32) -> Option<PathBuf>,
    children: fn(u32) -> Vec<Child>,
}

const BACKENDS: [Backend; 2] = [
    Backend {
        name: "procfs",
        read: procfs::read,
        exe: procfs::exe,
        cmdline: procfs::cmdline,
        cwd: procfs::cwd,
        children: procfs::children,
    },
    Backend {
        name: "portable",
        read: portable::read,
        exe: portable::exe,
        cmdline: portable::cmdline,
        cwd: portable::cwd,
        children: portable::children,
    },
];

#[test]
fn both_backends_tell_a_child_its_parent_and_what_it_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new("sleep")
        .arg("30")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    let me = std::process::id();
    // Until its exec, the child is a copy of this test: wait for `sleep` to be what it runs.
    let deadline = Instant::now() + Duration::from_secs(5);
    while procfs::cmdline(pid).first().map(String::as_str) != Some("sleep") {
        assert!(Instant::now() < deadline, "sleep never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let home = dir.path().canonicalize().expect("canonical tempdir");
    for b in &BACKENDS {
        let name = b.name;
        let proc = (b.read)(pid).unwrap_or_else(|| panic!("{name}: no entry for the child"));
        assert_eq!(proc.name, "sleep", "{name}: name");
        assert_eq!(proc.ppid, me, "{name}: parent");
        assert_eq!((b.read)(pid), Some(proc.clone()), "{name}: a second read");
        let exe = (b.exe)(pid).unwrap_or_else(|| panic!("{name}: no executable"));
        assert_eq!(
            exe.file_name().and_then(|n| n.to_str()),
            Some("sleep"),
            "{name}: exe"
        );
        assert_eq!((b.cmdline)(pid), ["sleep", "30"], "{name}: command line");
        assert_eq!(
            (b.cwd)(pid),
            Some(home.clone()),
            "{name}: working directory"
        );
        let mine = (b.children)(me);
        assert!(
            mine.contains(&Child {
                pid,
                start_time: proc.start_time,
                name: "sleep".into()
            }),
            "{name}: the child among this process's children: {mine:?}"
        );
        let parent = (b.read)(me).unwrap_or_else(|| panic!("{name}: no entry for the test"));
        assert_eq!(
            parent.ppid,
            std::os::unix::process::parent_id(),
            "{name}: this process's parent"
        );
    }

    // Killed and not yet reaped, it is a zombie: no longer anybody's live child.
    child.kill().expect("kill");
    for b in &BACKENDS {
        let deadline = Instant::now() + Duration::from_secs(5);
        while (b.children)(me).iter().any(|c| c.pid == pid) {
            assert!(
                Instant::now() < deadline,
                "{}: a zombie stays a child",
                b.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    child.wait().expect("reap");
    for b in &BACKENDS {
        assert_eq!((b.read)(pid), None, "{}: a reaped process", b.name);
        assert!(
            (b.cmdline)(pid).is_empty(),
            "{}: a reaped process's command line",
            b.name
        );
    }
}
