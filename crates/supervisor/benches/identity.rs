//! Execution-record capture for a node server (refresh contract §2): cold (every file
//! hashed) and warm (the digest cache keyed on file metadata), against a baseline
//! measured in the same run: one `stat` of every artifact, the least a relaunch must do.
//!
//! Run: `cargo bench -p postern-supervisor --bench identity`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use postern_domain::ServerConfig;
use postern_supervisor::DigestCache;

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path();
    // A node server as a developer has it: an entry, a lockfile, a dist/ tree.
    std::fs::create_dir_all(work.join("dist/lib")).expect("mkdir");
    std::fs::write(work.join("dist/server.js"), "x".repeat(200_000)).expect("write");
    for i in 0..50 {
        std::fs::write(work.join(format!("dist/lib/m{i}.js")), "y".repeat(20_000)).expect("write");
    }
    std::fs::write(work.join("package-lock.json"), "z".repeat(300_000)).expect("write");
    let mut config = ServerConfig::new(
        "bench".parse().expect("label"),
        vec!["node".into(), "dist/server.js".into()],
        Some(work.to_owned()),
        vec![],
    )
    .expect("config");
    config.identity_paths = vec![PathBuf::from("dist")];

    let cold = median(5, || {
        let cache = DigestCache::new();
        cache.observe(&config).expect("observe");
    });
    let cache = DigestCache::new();
    cache.observe(&config).expect("warm up");
    let warm = median(50, || {
        cache.observe(&config).expect("observe");
    });
    let seen = cache.observe(&config).expect("observe");
    let mut paths: Vec<PathBuf> = vec![
        seen.executable.path.clone(),
        work.join("dist/server.js"),
        work.join("package-lock.json"),
    ];
    paths.extend((0..50).map(|i| work.join(format!("dist/lib/m{i}.js"))));
    let baseline = median(50, || {
        for p in &paths {
            std::fs::metadata(p).expect("stat");
        }
    });

    println!("execution record capture, node server (entry + lockfile + dist/ tree of 51 files):");
    println!(
        "  cold (hash everything, node --version): {:>9.3} ms",
        ms(cold)
    );
    println!(
        "  warm (digest cache):                    {:>9.3} ms   target < 20 ms",
        ms(warm)
    );
    println!(
        "  baseline (stat every artifact once):    {:>9.3} ms",
        ms(baseline)
    );
    println!(
        "  warm / baseline:                        {:>9.1}x",
        warm.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "  cold / warm:                            {:>9.1}x",
        cold.as_secs_f64() / warm.as_secs_f64()
    );

    // Issue 16: the same server with the `node_modules` tree it loads (200 packages of 10
    // files), now part of the record, against the capture above (without it) in this run.
    for p in 0..200 {
        let package = work.join(format!("node_modules/pkg{p}/lib"));
        std::fs::create_dir_all(&package).expect("mkdir");
        std::fs::write(
            work.join(format!("node_modules/pkg{p}/package.json")),
            format!("{{\"name\":\"pkg{p}\"}}"),
        )
        .expect("write");
        for f in 0..9 {
            std::fs::write(package.join(format!("f{f}.js")), "w".repeat(2_000)).expect("write");
        }
    }
    let tree_cold = median(5, || {
        DigestCache::new().observe(&config).expect("observe");
    });
    let cache = DigestCache::new();
    let seen = cache.observe(&config).expect("warm up");
    assert!(
        seen.extra_paths
            .iter()
            .any(|a| a.path == work.join("node_modules")),
        "the tree is in the record"
    );
    let tree_warm = median(50, || {
        cache.observe(&config).expect("observe");
    });
    println!("with the node_modules tree it loads (200 packages, 2,000 files):");
    println!(
        "  cold:                                   {:>9.3} ms   {:>5.1}x without the tree",
        ms(tree_cold),
        tree_cold.as_secs_f64() / cold.as_secs_f64()
    );
    println!(
        "  warm:                                   {:>9.3} ms   {:>5.1}x without the tree",
        ms(tree_warm),
        tree_warm.as_secs_f64() / warm.as_secs_f64()
    );

    // The server's own source tree (refresh contract §2): the same server without
    // `--identity dist`, its package.json at the root, and beside its code 1,000 files it
    // writes as it runs (logs, a database), which the walk passes over.
    std::fs::write(work.join("package.json"), "{\"name\":\"bench\"}").expect("write");
    std::fs::create_dir_all(work.join("data")).expect("mkdir");
    for f in 0..1_000 {
        std::fs::write(work.join(format!("data/run{f}.log")), "l".repeat(500)).expect("write");
    }
    let mut own = config.clone();
    own.identity_paths = Vec::new();
    let cache = DigestCache::new();
    let seen = cache.observe(&own).expect("warm up");
    assert!(
        seen.extra_paths.iter().any(|a| a.path == work),
        "the source tree is in the record"
    );
    let own_warm = median(50, || {
        cache.observe(&own).expect("observe");
    });
    println!(
        "with the source tree walked instead of --identity dist (52 code files, 1,000 logs beside):"
    );
    println!(
        "  warm:                                   {:>9.3} ms   {:>5.1}x with --identity dist",
        ms(own_warm),
        own_warm.as_secs_f64() / tree_warm.as_secs_f64()
    );

    // A Python server on this machine's `python3`: when the user can write to its runtime
    // (pyenv, uv, conda, Homebrew; any runtime as root), the runtime's library is
    // fingerprinted by its files' metadata at each launch.
    std::fs::write(work.join("server.py"), "print('hi')").expect("write");
    std::fs::write(work.join("requirements.txt"), "mcp").expect("write");
    let python = ServerConfig::new(
        "bench-py".parse().expect("label"),
        vec!["python3".into(), "server.py".into()],
        Some(work.to_owned()),
        vec![],
    )
    .expect("config");
    let cache = DigestCache::new();
    let seen = cache.observe(&python).expect("warm up");
    let library = seen.unwatched.first().cloned();
    let py_warm = median(20, || {
        cache.observe(&python).expect("observe");
    });
    match library {
        Some(library) => {
            let files = walkdir_count(&library);
            println!(
                "a python3 server, its runtime's installation fingerprinted ({}, {files} entries):",
                library.display()
            );
        }
        None => {
            println!("a python3 server (its runtime's installation is not the user's to write):")
        }
    }
    println!(
        "  warm:                                   {:>9.3} ms   {:>5.1}x the node server's warm",
        ms(py_warm),
        py_warm.as_secs_f64() / warm.as_secs_f64()
    );
}

/// Every entry under `root`.
fn walkdir_count(root: &std::path::Path) -> usize {
    let mut stack = vec![root.to_owned()];
    let mut n = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            n += 1;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    n
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
