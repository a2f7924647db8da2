//! The audit log as the engine runs it, each figure next to a baseline from the same run.
//!
//! ```text
//! dbus-run-session -- bash -c 'printf pass | gnome-keyring-daemon --unlock --components=secrets >/dev/null;
//!     cargo bench -p postern-engine --bench audit'
//! ```
//!
//! 1. Durable appends per second (`record_durable` of a tool-call intent, waiting for the
//!    commit) with 1, 8 and 32 concurrent writers, against this disk's single-fsync rate
//!    (write 4 KiB + fdatasync, in a loop) and SQLite's single-row `synchronous=FULL` commit
//!    rate, in alternation (3 rounds, best of each kept). The anchor goes to the real OS
//!    keychain (`--memory`: an in-memory store instead).
//! 2. Start-up verification of the stored log (SQLite read + chain, no opening), rows/s.
//! 3. An Activity journal page (50 rows) on 1,000,000 rows, for several filters, against
//!    fetching 50 known rows by primary key.
//!
//! Prints figures only; asserts nothing.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use postern_domain::{AuditEvent, ExecutionEpoch, ServerLabel};
use postern_engine::audit::{ANCHOR, OPENING_KEY};
use postern_engine::{AuditLog, AuditState, Home};
use postern_gateway::audit::AuditSink;
use postern_store::{ActivityFilter, Store};
use postern_vault::{Keychain, MemoryStore, SecretStore};
use serde_json::json;

const APPEND_SECS: f64 = 2.0;
const BASELINE_SECS: f64 = 1.0;
/// Rounds per writer count: baselines and appends alternate, the best of each is kept.
const ROUNDS: usize = 3;
const ROWS: i64 = 1_000_000;
const QUERY_RUNS: usize = 21;

fn main() {
    let memory = std::env::args().any(|a| a == "--memory");
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "postern-engine audit bench ({} keychain), in {}",
        if memory { "in-memory" } else { "OS" },
        dir.path().display()
    );

    println!("\n## durable appends (tool_call_intent, ~200-byte body)");
    println!(
        "| writers | appends/s | fsyncs/s (4 KiB + fdatasync) | SQLite FULL commits/s | appends per fsync |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for writers in [1usize, 8, 32] {
        let home = Home::at(dir.path().join(format!("home-{writers}")));
        home.prepare().expect("home");
        let secrets: Arc<dyn SecretStore> = if memory {
            Arc::new(MemoryStore::new())
        } else {
            Arc::new(Keychain::for_home(home.path()))
        };
        let log = Arc::new(AuditLog::open(home.path(), Arc::clone(&secrets)));
        if log.status().state != AuditState::Ready {
            panic!(
                "the audit log is not ready: {:?} (run inside dbus-run-session with an unlocked \
                 gnome-keyring, or pass --memory)",
                log.status().state
            );
        }
        let (mut fsyncs, mut commits, mut appends) = (0f64, 0f64, 0f64);
        for round in 0..ROUNDS {
            let base = dir.path().join(format!("baseline-{writers}-{round}"));
            fsyncs = fsyncs.max(fsync_rate(&base));
            commits = commits.max(sqlite_commit_rate(&base.with_extension("db")));
            appends = appends.max(append_rate(&log, writers));
        }
        log.close("bench");
        println!(
            "| {writers} | {appends:.0} | {fsyncs:.0} | {commits:.0} | {:.2} |",
            appends / fsyncs
        );
        if writers == 32 {
            verify_rate(&home, &*secrets);
        }
        forget(&*secrets);
    }

    println!("\n## Activity journal page (50 rows) on {ROWS} rows");
    activity_pages(&dir.path().join("activity"));
}

/// Durable appends per second with `writers` threads, each waiting for its commit.
fn append_rate(log: &Arc<AuditLog>, writers: usize) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(APPEND_SECS);
    let start = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (log, done) = (Arc::clone(log), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut call = 0i64;
                while Instant::now() < deadline {
                    call += 1;
                    let (tx, rx) = mpsc::channel();
                    log.record_durable(
                        intent(w as u64, call),
                        Box::new(move |r| {
                            let _ = tx.send(r);
                        }),
                    );
                    rx.recv().expect("done").expect("durable");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Start-up verification of the stored log: SQLite read + chain, no opening.
fn verify_rate(home: &Home, secrets: &dyn SecretStore) {
    let mut best = f64::MAX;
    let mut records = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let report = postern_engine::audit::verify(home, secrets, None, false).expect("verifies");
        best = best.min(start.elapsed().as_secs_f64());
        records = report.records;
    }
    let store = Store::open(home.path()).expect("store");
    let start = Instant::now();
    let mut bytes = 0usize;
    for _ in 0..5 {
        store
            .audit_records(0, |r| {
                bytes += r.header.len() + r.sealed.len() + r.hash.len();
                Ok::<(), postern_store::StoreError>(())
            })
            .expect("read");
    }
    let read = start.elapsed().as_secs_f64() / 5.0;
    println!(
        "\nverify the stored log ({records} rows, no opening): {:.0} rows/s; reading the rows \
         alone: {:.0} rows/s ({:.2}x); {bytes} bytes read in 5 passes",
        records as f64 / best,
        records as f64 / read,
        best / read
    );
}

fn fsync_rate(path: &Path) -> f64 {
    let mut file = File::create(path).expect("file");
    let block = [7u8; 4096];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < BASELINE_SECS {
        file.write_all(&block).expect("write");
        file.sync_data().expect("fdatasync");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn sqlite_commit_rate(path: &Path) -> f64 {
    let conn = rusqlite::Connection::open(path).expect("sqlite");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "FULL")
        .expect("full");
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
        .expect("table");
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < BASELINE_SECS {
        conn.execute("INSERT INTO t (b) VALUES (zeroblob(300))", [])
            .expect("insert");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn intent(session: u64, call: i64) -> AuditEvent {
    AuditEvent::ToolCallIntent {
        session,
        server: "fixture".parse::<ServerLabel>().expect("label"),
        epoch: ExecutionEpoch::new(1_700_000_000_000, 42),
        call: json!(call),
        tool: "echo".into(),
        arguments: json!({"text": "x".repeat(60)}),
        authority: None,
    }
}

fn forget(secrets: &dyn SecretStore) {
    let _ = secrets.delete(OPENING_KEY);
    let _ = secrets.delete(ANCHOR);
}

/// Fills the journal with `ROWS` synthetic calls (30 days, 10 servers, 10,000 sessions, 100
/// epochs, 20 tools, 2% refused), then times a page per filter.
fn activity_pages(home: &Path) {
    std::fs::create_dir_all(home).expect("dir");
    drop(Store::open(home).expect("schema"));
    let start = Instant::now();
    let mut conn =
        rusqlite::Connection::open(home.join(postern_store::JOURNAL_FILE)).expect("sqlite");
    let t0: i64 = 1_790_000_000_000;
    let span: i64 = 30 * 86_400_000;
    {
        let tx = conn.transaction().expect("tx");
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO journal_activity (seq, time, session, server, epoch, tool, \
                     call, decision, outcome, duration_ms, result_seq)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .expect("prepare");
            for i in 1..=ROWS {
                let seq = i * 2;
                let session = 1 + (i - 1) / 100;
                let server = format!("server-{}", session % 10);
                let epoch = format!("epoch-{:03}", (i - 1) / 10_000);
                let tool = format!("tool-{}", i % 20);
                let decision = match i % 50 {
                    0 => "catalog_stale",
                    25 => "authorization_stale",
                    _ => "allowed",
                };
                insert
                    .execute(rusqlite::params![
                        seq,
                        t0 + i * span / ROWS,
                        session,
                        server,
                        epoch,
                        tool,
                        i.to_string(),
                        decision,
                        if decision == "allowed" {
                            "ok"
                        } else {
                            "refused"
                        },
                        5,
                        seq + 1
                    ])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    println!(
        "(filled in {:.1} s; file {} MB)\n",
        start.elapsed().as_secs_f64(),
        std::fs::metadata(home.join(postern_store::JOURNAL_FILE))
            .map_or(0, |m| m.len() / 1_000_000)
    );

    let store = Store::open(home).expect("store");
    let day = 86_400_000;
    let cases: Vec<(&str, ActivityFilter)> = vec![
        ("newest page, no filter", ActivityFilter::default()),
        (
            "--server (1 of 10)",
            ActivityFilter {
                server: Some("server-3".into()),
                ..Default::default()
            },
        ),
        (
            "--session (100 calls)",
            ActivityFilter {
                session: Some(4_321),
                ..Default::default()
            },
        ),
        (
            "--epoch (10,000 calls)",
            ActivityFilter {
                epoch: Some("epoch-050".into()),
                ..Default::default()
            },
        ),
        (
            "--tool --server",
            ActivityFilter {
                tool: Some("tool-7".into()),
                server: Some("server-3".into()),
                ..Default::default()
            },
        ),
        (
            "--decision denied (2%)",
            ActivityFilter {
                decision: Some("denied".into()),
                ..Default::default()
            },
        ),
        (
            "--decision catalog_stale",
            ActivityFilter {
                decision: Some("catalog_stale".into()),
                ..Default::default()
            },
        ),
        (
            "--since/--until: 1 hour, 20 days back",
            ActivityFilter {
                since: Some(t0 + 10 * day),
                until: Some(t0 + 10 * day + 3_600_000),
                ..Default::default()
            },
        ),
        (
            "--server + 1 day, 20 days back",
            ActivityFilter {
                server: Some("server-3".into()),
                since: Some(t0 + 10 * day),
                until: Some(t0 + 11 * day),
                ..Default::default()
            },
        ),
        (
            "--before (page in the middle)",
            ActivityFilter {
                before: Some(ROWS),
                ..Default::default()
            },
        ),
        (
            "--tool, oldest page via --until",
            ActivityFilter {
                tool: Some("tool-7".into()),
                until: Some(t0 + day),
                ..Default::default()
            },
        ),
    ];
    // Baseline: the same 50 rows fetched by primary key.
    let conn = rusqlite::Connection::open(home.join(postern_store::JOURNAL_FILE)).expect("sqlite");
    let keys: Vec<String> = (0..50).map(|i| ((ROWS - i) * 2).to_string()).collect();
    let baseline_sql = format!(
        "SELECT seq, time, session, server, epoch, tool, call, decision, outcome, duration_ms \
         FROM journal_activity WHERE seq IN ({})",
        keys.join(",")
    );
    let baseline = median(|| {
        let mut stmt = conn.prepare_cached(&baseline_sql).expect("prepare");
        let n = stmt
            .query_map([], |r| r.get::<_, i64>(0))
            .expect("query")
            .count();
        assert_eq!(n, 50);
    });
    println!(
        "| query | rows | median | vs 50 rows by key ({:.3} ms) |",
        baseline * 1e3
    );
    println!("|---|---:|---:|---:|");
    for (name, mut filter) in cases {
        filter.limit = 50;
        let mut rows = 0;
        let t = median(|| rows = store.activity(&filter).expect("page").len());
        println!(
            "| {name} | {rows} | {:.3} ms | {:.1}x |",
            t * 1e3,
            t / baseline
        );
    }
}

fn median(mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..QUERY_RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[QUERY_RUNS / 2]
}
