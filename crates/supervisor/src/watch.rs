//! Noticing change: identity artifacts changing on disk (the `notify` crate), and a
//! server replacing its own worker behind one stdio pipe (process-group sampling).
//! See docs/refresh-contract.md §6.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// Extensions of the files a server writes as it runs, never part of a source tree's digest.
const RUNTIME_EXTENSIONS: [&str; 13] = [
    "log",
    "db",
    "sqlite",
    "sqlite3",
    "db-wal",
    "db-shm",
    "db-journal",
    "sqlite-wal",
    "sqlite-shm",
    "sqlite-journal",
    "tmp",
    "swp",
    "pid",
];

/// Whether `path` is a file a server writes as it runs ([`RUNTIME_EXTENSIONS`]).
fn written_as_it_runs(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| RUNTIME_EXTENSIONS.contains(&e))
}

/// How long a burst of file events is collected before it is reported (a build writes
/// many files).
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Watches a set of identity artifacts; [`ArtifactWatch::changed`] resolves after any
/// of them is written, replaced, or removed.
#[derive(Debug)]
pub struct ArtifactWatch {
    _watcher: notify::RecommendedWatcher,
    events: mpsc::UnboundedReceiver<()>,
}

impl ArtifactWatch {
    /// Watches `paths`: files through their parent directory (so an atomic
    /// rename-over is seen), directories recursively; a path that is a link (or lies under
    /// one) through the file it names too, since that is what is hashed and run, and a write
    /// there says nothing in the link's directory.
    pub fn new(paths: &[PathBuf]) -> notify::Result<Self> {
        Self::with_shallow(paths, &[])
    }

    /// [`ArtifactWatch::new`], and `shallow` directories without what lies below them: an
    /// entry created, written or removed directly in one (a runtime's `site-packages`, whose
    /// `.pth` files run at start) is a change, at the price of one watch each.
    pub fn with_shallow(paths: &[PathBuf], shallow: &[PathBuf]) -> notify::Result<Self> {
        let (tx, events) = mpsc::unbounded_channel();
        let paths: Vec<PathBuf> = paths
            .iter()
            .flat_map(|p| {
                let target = std::fs::canonicalize(p).ok().filter(|t| t != p);
                std::iter::once(p.clone()).chain(target)
            })
            .collect();
        let files: HashSet<PathBuf> = paths.iter().filter(|p| !p.is_dir()).cloned().collect();
        let dirs: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).cloned().collect();
        let shallow: Vec<PathBuf> = shallow.iter().filter(|d| d.is_dir()).cloned().collect();
        let relevant = {
            let (files, dirs, shallow) = (files.clone(), dirs.clone(), shallow.clone());
            // Anything under a directory but what a server writes as it runs (a log, its
            // database): a source tree's digest leaves those out, and a server that logs beside
            // its code would have its files looked at again at every line. Anything else is
            // looked at, and a change the digest does not take is found no change.
            move |path: &Path| {
                files.contains(path)
                    || ((dirs.iter().any(|d| path.starts_with(d))
                        || path
                            .parent()
                            .is_some_and(|p| shallow.iter().any(|d| d == p)))
                        && !written_as_it_runs(path))
            }
        };
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event
                    && !matches!(event.kind, notify::EventKind::Access(_))
                    && event.paths.iter().any(|p| relevant(p))
                {
                    let _ = tx.send(());
                }
            })?;
        let mut parents: Vec<&Path> = files.iter().filter_map(|f| f.parent()).collect();
        parents.sort();
        parents.dedup();
        for parent in parents {
            watcher.watch(parent, RecursiveMode::NonRecursive)?;
        }
        for dir in &dirs {
            watcher.watch(dir, RecursiveMode::Recursive)?;
        }
        for dir in &shallow {
            watcher.watch(dir, RecursiveMode::NonRecursive)?;
        }
        Ok(Self {
            _watcher: watcher,
            events,
        })
    }

    /// Whether any of the paths was written, replaced or removed since the watch began (or
    /// since the last call), without waiting.
    pub fn touched(&mut self) -> bool {
        let mut any = false;
        while self.events.try_recv().is_ok() {
            any = true;
        }
        any
    }

    /// Resolves once a change has happened and the burst it belongs to is over.
    pub async fn changed(&mut self) {
        if self.events.recv().await.is_none() {
            return std::future::pending().await;
        }
        loop {
            match tokio::time::timeout(DEBOUNCE, self.events.recv()).await {
                Ok(Some(())) => continue,
                Ok(None) | Err(_) => return,
            }
        }
    }
}

/// How many samples after a worker went a child of its name still counts as its replacement.
const GONE_FOR: u32 = 2;

/// The direct children of a server's process-group leader, with how long each has
/// been seen: the "workers" of a self-reloading server (nodemon, `tsx watch`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessGroupSample {
    /// (pid, start time in the process table's unit) -> (command name, samples seen in a row).
    workers: BTreeMap<(i32, u64), (String, u32)>,
    /// Workers (seen in two samples or more) that went, with how many samples ago: a child of
    /// the same name that comes within [`GONE_FOR`] samples replaced one (a loaded machine, or
    /// a watcher that waits before it restarts its worker, leaves samples between the two).
    gone: Vec<((i32, u64), String, u32)>,
    /// The leader sampled, and the server's own process under it (a confined launch's
    /// sandbox layers descended once).
    innermost: Option<(u32, u32)>,
}

impl ProcessGroupSample {
    /// Takes the next sample of `leader`'s group and tells whether a worker was
    /// replaced: a child seen in at least two samples in a row has gone, and a new child
    /// with the same command name has appeared (in the same sample or up to [`GONE_FOR`]
    /// later). A short-lived helper (a `git` run per
    /// call) is never seen twice, so it never counts.
    pub fn next(&mut self, leader: u32) -> Option<String> {
        // The server's own process under a sandbox's layers: found once, it stays.
        let inner = match self.innermost {
            Some((outer, inner)) if outer == leader => inner,
            _ => {
                let inner = crate::sandbox::innermost(leader)?;
                self.innermost = Some((leader, inner));
                inner
            }
        };
        self.observe(children_of(inner))
    }

    fn observe(&mut self, now: Vec<((i32, u64), String)>) -> Option<String> {
        let mut next = BTreeMap::new();
        for (key, name) in now {
            let seen = self.workers.get(&key).map_or(1, |(_, n)| n + 1);
            next.insert(key, (name, seen));
        }
        for (_, _, ago) in &mut self.gone {
            *ago += 1;
        }
        self.gone.retain(|(_, _, ago)| *ago <= GONE_FOR);
        for (key, (name, seen)) in &self.workers {
            if *seen >= 2 && !next.contains_key(key) {
                self.gone.push((*key, name.clone(), 0));
            }
        }
        let replaced = self
            .gone
            .iter()
            .enumerate()
            .find_map(|(at, ((old_pid, _), name, _))| {
                next.iter()
                    .find(|(_, (new_name, seen))| *seen == 1 && new_name == name)
                    .map(|((new_pid, _), _)| {
                        (
                            at,
                            format!("worker {name} replaced: pid {old_pid} -> {new_pid}"),
                        )
                    })
            });
        self.workers = next;
        let (at, what) = replaced?;
        self.gone.remove(at);
        Some(what)
    }
}

/// (pid, start time) and command name of every live direct child of `leader`.
fn children_of(leader: u32) -> Vec<((i32, u64), String)> {
    crate::table::children(leader)
        .into_iter()
        .filter_map(|c| Some(((i32::try_from(c.pid).ok()?, c.start_time), c.name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_rewritten_file_is_reported_once_per_burst() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = dir.path().join("server.js");
        std::fs::write(&entry, "v1").expect("write");
        let mut watch = ArtifactWatch::new(std::slice::from_ref(&entry)).expect("watch");
        // An unrelated file in the same directory is not a change.
        std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
        let quiet = tokio::time::timeout(Duration::from_millis(400), watch.changed()).await;
        assert!(quiet.is_err(), "an unrelated file was reported");
        // An atomic replace (write elsewhere, rename over) is.
        let tmp = dir.path().join(".server.js.tmp");
        std::fs::write(&tmp, "v2").expect("write");
        std::fs::rename(&tmp, &entry).expect("rename");
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("change reported");
    }

    /// A server that logs beside its code (its source tree a watched directory) is not looked
    /// at again at every line it writes; a module it imports, rewritten there, is.
    #[tokio::test]
    async fn a_log_written_in_a_watched_tree_is_not_a_change_and_a_module_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut watch = ArtifactWatch::new(&[dir.path().to_owned()]).expect("watch");
        for line in 0..5 {
            std::fs::write(dir.path().join("server.log"), format!("{line}")).expect("log");
            std::fs::write(dir.path().join("state.db-wal"), "w").expect("wal");
        }
        let quiet = tokio::time::timeout(Duration::from_millis(400), watch.changed()).await;
        assert!(quiet.is_err(), "a log line was reported");
        std::fs::write(dir.path().join("helper.py"), "import os").expect("module");
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("the module reported");
    }

    /// A runtime's `site-packages` is watched without what lies below it: a `.pth` file
    /// planted there (and removed again) is a change; a package's own files, deeper, are left
    /// to the next launch's fingerprint, at no watch each.
    #[tokio::test]
    async fn a_file_planted_directly_in_a_shallow_directory_is_a_change_and_deeper_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let site = dir.path().join("site-packages");
        std::fs::create_dir_all(site.join("pkg")).expect("dirs");
        let mut watch =
            ArtifactWatch::with_shallow(&[], std::slice::from_ref(&site)).expect("watch");
        std::fs::write(site.join("pkg/module.py"), "x").expect("deeper");
        let quiet = tokio::time::timeout(Duration::from_millis(400), watch.changed()).await;
        assert!(
            quiet.is_err(),
            "a file below the shallow directory was reported"
        );
        std::fs::write(site.join("zz.pth"), "import os").expect("plant");
        std::fs::remove_file(site.join("zz.pth")).expect("remove");
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("the planted file reported");
    }

    /// A child as the process table gives it: (pid, start time) and name.
    fn child(pid: i32, name: &str) -> ((i32, u64), String) {
        ((pid, pid as u64 * 10), name.to_owned())
    }

    #[test]
    fn only_a_worker_seen_twice_and_replaced_by_its_like_counts() {
        let mut s = ProcessGroupSample::default();
        assert_eq!(s.observe(vec![child(10, "node")]), None);
        assert_eq!(s.observe(vec![child(10, "node"), child(11, "git")]), None);
        // The helper `git` was seen once and went: not a replacement.
        assert_eq!(s.observe(vec![child(10, "node"), child(12, "git")]), None);
        // The worker `node`, seen three times, went and another `node` came.
        assert_eq!(
            s.observe(vec![child(13, "node")]).as_deref(),
            Some("worker node replaced: pid 10 -> 13")
        );
        // A worker that simply exits, with nothing new, is not a replacement.
        assert_eq!(s.observe(vec![child(13, "node")]), None);
        assert_eq!(s.observe(vec![]), None);
    }

    #[test]
    fn a_worker_replaced_a_sample_or_two_after_it_went_counts_and_later_does_not() {
        let mut s = ProcessGroupSample::default();
        assert_eq!(s.observe(vec![child(10, "node")]), None);
        assert_eq!(s.observe(vec![child(10, "node")]), None);
        // Gone, and its replacement not started yet at this sample.
        assert_eq!(s.observe(vec![]), None);
        assert_eq!(
            s.observe(vec![child(11, "node")]).as_deref(),
            Some("worker node replaced: pid 10 -> 11")
        );
        // One replacement per worker that went.
        assert_eq!(s.observe(vec![child(11, "node"), child(12, "node")]), None);
        // Gone for longer than the window: a new one is a new worker, not a replacement.
        for _ in 0..=GONE_FOR {
            assert_eq!(s.observe(vec![]), None);
        }
        assert_eq!(s.observe(vec![child(14, "node")]), None);
    }

    #[test]
    fn a_replaced_worker_is_noticed_in_a_real_process_group() {
        use std::process::{Command, Stdio};
        // sh (the leader) runs a long-lived worker, kills it, and starts another.
        let mut leader = Command::new("sh")
            .args(["-c", "sleep 30 & w=$!; sleep 1.2; kill $w; sleep 30 & wait"])
            .stdout(Stdio::null())
            .spawn()
            .expect("sh");
        let pid = leader.id();
        let mut sample = ProcessGroupSample::default();
        let mut replaced = None;
        // Sampled as a session samples its server (every 500 ms there; faster here), for up to
        // 10 s: a loaded machine may start the shell's workers late, and the new worker may
        // come a sample or two after the old one went.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Some(what) = sample.next(pid) {
                replaced = Some(what);
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let _ = leader.kill();
        let _ = leader.wait();
        let what = replaced.expect("the replacement was noticed");
        assert!(what.starts_with("worker sleep replaced: pid "), "{what}");
    }
}
