//! The timeline and Activity queries on 1,000,000 Activity rows, each figure next to a
//! baseline measured in the same run.
//!
//! ```text
//! cargo bench -p postern-store --bench timeline
//! ```
//!
//! The journals are filled through the store's own projection (`AuditWriter::project`, what
//! a rebuild from the log runs) from synthetic audit events: 200 agent sessions over 30 days,
//! each 1 to 4 days long with 5,000 calls spread over it, 10 servers, 20 tools, a rebuild
//! (a new epoch) every 1,000 calls (5 epochs per session), 2% of calls refused, a grant at
//! the start of each epoch that ends at its rebuild. No results are projected (they only fill
//! in an outcome), and the audit log itself is left empty (the queries read the journals).
//!
//! Then, each the median of 21 runs:
//!
//! 1. the timeline: the first paint (the whole range, every lane), zoomed windows, a pan, a
//!    second page of lanes; against counting the window's Activity rows (`SELECT count(*)`
//!    over the time index: the least any query that read every row would do);
//! 2. an Activity page (50 rows) per filter, against the first page with no filter;
//! 3. opening a read-only connection and reading one value, and the first paint on a fresh
//!    connection (what the engine does per query) against one kept open.
//!
//! Prints figures only; asserts nothing. `-- --rows N` fills N rows instead.

use std::collections::{BTreeSet, BinaryHeap};
use std::path::Path;
use std::time::Instant;

use postern_audit::{Seq, UnixMillis};
use postern_domain::decision::Authority;
use postern_domain::{
    AgentRun, ApprovalId, Artifact, AuditEvent, Digest, ExecutionEpoch, ExecutionRecord, Grant,
    GrantEnd, GrantId, Pinning, ServerLabel, ToolScope,
};
use postern_store::{ActivityFilter, AuditWriter, Opened, Store, StoreError, TimelineQuery};
use serde_json::json;

const SESSIONS: u64 = 200;
const EPOCH_CALLS: u64 = 1_000;
const DAY: i64 = 86_400_000;
const T0: i64 = 1_790_000_000_000;
const RANGE: i64 = 30 * DAY;
const RUNS: usize = 21;
/// Events per projection transaction.
const CHUNK: usize = 50_000;

fn main() {
    let rows: u64 = std::env::args()
        .skip_while(|a| a != "--rows")
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("--rows N"));
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "postern-store timeline bench: {rows} Activity rows, {SESSIONS} sessions, in {}",
        dir.path().display()
    );
    let fill = Instant::now();
    let events = fill_journals(dir.path(), rows / SESSIONS);
    println!(
        "(projected {events} events in {:.1} s; file {} MB)",
        fill.elapsed().as_secs_f64(),
        std::fs::metadata(dir.path().join(postern_store::DB_FILE)).map_or(0, |m| m.len() >> 20)
    );

    let store = Store::open_read_only(dir.path()).expect("reader");
    let conn = rusqlite::Connection::open(dir.path().join(postern_store::DB_FILE)).expect("sqlite");
    timeline(&store, &conn);
    activity(&store);
    reader_open(dir.path(), &store);
}

fn timeline(store: &Store, conn: &rusqlite::Connection) {
    let window = |since: i64, until: i64| TimelineQuery {
        since: Some(since),
        until: Some(until),
        max_lanes: 200,
        ..TimelineQuery::default()
    };
    let middle = T0 + 15 * DAY;
    let cases = [
        (
            "first paint: whole range, 200 lanes",
            TimelineQuery {
                max_lanes: 200,
                ..TimelineQuery::default()
            },
        ),
        ("zoom: 1 week", window(middle, middle + 7 * DAY)),
        ("zoom: 1 day", window(middle, middle + DAY)),
        ("zoom: 6 hours", window(middle, middle + DAY / 4)),
        ("zoom: 1 hour", window(middle, middle + DAY / 24)),
        ("zoom: 10 minutes", window(middle, middle + DAY / 144)),
        (
            "pan: 1 day, a week later",
            window(middle + 7 * DAY, middle + 8 * DAY),
        ),
        (
            "lanes 51-100 of the whole range",
            TimelineQuery {
                lanes_after: Some(lane_after(store, 50)),
                max_lanes: 50,
                ..TimelineQuery::default()
            },
        ),
    ];
    println!("\n## Timeline (default bounds: 2,000 marks, 200 buckets)\n");
    println!("| query | lanes | marks | buckets (width) | median | window count(*) | ratio |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, query) in cases {
        let mut got = None;
        let t = median(|| got = Some(store.timeline(&query).expect("timeline")));
        let got = got.expect("ran");
        let mut count = 0i64;
        let base = median(|| {
            count = conn
                .query_row(
                    "SELECT count(*) FROM journal_activity WHERE time >= ?1 AND time < ?2",
                    [got.since, got.until],
                    |r| r.get(0),
                )
                .expect("count");
        });
        let marks: usize = got.lanes.iter().map(|l| l.marks.len()).sum();
        let buckets: usize = got.lanes.iter().map(|l| l.buckets.len()).sum();
        let width = got
            .bucket_width
            .map_or("-".to_owned(), |w| format!("{} ({})", buckets, duration(w)));
        println!(
            "| {name} | {}{} | {marks} | {width} | {:.2} ms | {:.2} ms ({count} rows) | {:.3}x |",
            got.lanes.len(),
            if got.more_lanes { "+" } else { "" },
            t * 1e3,
            base * 1e3,
            t / base
        );
    }
}

fn activity(store: &Store) {
    let f = ActivityFilter::default;
    let day = DAY;
    let back = T0 + 10 * day;
    let cases: Vec<(&str, ActivityFilter)> = vec![
        ("no filter (baseline)", f()),
        (
            "--session (5,000 calls)",
            ActivityFilter {
                session: Some(lane_id(store, 100)),
                ..f()
            },
        ),
        (
            "--server (1 of 10)",
            ActivityFilter {
                server: Some("server-3".into()),
                ..f()
            },
        ),
        (
            "--epoch (1,000 calls)",
            ActivityFilter {
                epoch: Some(some_epoch(store)),
                ..f()
            },
        ),
        (
            "--tool (1 of 20)",
            ActivityFilter {
                tool: Some("tool-7".into()),
                ..f()
            },
        ),
        (
            "--tool --server",
            ActivityFilter {
                tool: Some("tool-7".into()),
                server: Some("server-3".into()),
                ..f()
            },
        ),
        (
            "--decision denied (2%)",
            ActivityFilter {
                decision: Some("denied".into()),
                ..f()
            },
        ),
        (
            "--decision catalog_stale (1%)",
            ActivityFilter {
                decision: Some("catalog_stale".into()),
                ..f()
            },
        ),
        (
            "--since/--until: 1 hour, 20 days back",
            ActivityFilter {
                since: Some(back),
                until: Some(back + day / 24),
                ..f()
            },
        ),
        (
            "--since: the last 20 days",
            ActivityFilter {
                since: Some(back),
                ..f()
            },
        ),
        (
            "--server + 1 day, 20 days back",
            ActivityFilter {
                server: Some("server-3".into()),
                since: Some(back),
                until: Some(back + day),
                ..f()
            },
        ),
        (
            "--tool, oldest page via --until",
            ActivityFilter {
                tool: Some("tool-7".into()),
                until: Some(T0 + day),
                ..f()
            },
        ),
        (
            "--decision denied + 1 day, 20 days back",
            ActivityFilter {
                decision: Some("denied".into()),
                since: Some(back),
                until: Some(back + day),
                ..f()
            },
        ),
        (
            "--before (a page in the middle)",
            ActivityFilter {
                before: Some(middle_seq(store)),
                ..f()
            },
        ),
        (
            "--session --before (its middle)",
            ActivityFilter {
                session: Some(lane_id(store, 100)),
                before: Some(middle_seq_of(store, lane_id(store, 100))),
                ..f()
            },
        ),
    ];
    let baseline = median(|| {
        store
            .activity(&ActivityFilter { limit: 50, ..f() })
            .expect("page");
    });
    println!("\n## Activity page (50 rows, newest first)\n");
    println!(
        "| filter | rows | median | vs first page, no filter ({:.3} ms) |",
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

fn reader_open(home: &Path, store: &Store) {
    let open = median(|| {
        let reader = Store::open_read_only(home).expect("reader");
        reader.journal_seq().expect("seq");
    });
    let warm = median(|| {
        store.journal_seq().expect("seq");
    });
    println!(
        "\n## Read-only connection\n\nopen + one read: {:.3} ms; the read on an open connection: \
         {:.3} ms ({:.0}x)",
        open * 1e3,
        warm * 1e3,
        open / warm
    );
    // What `Engine::timeline` does: a fresh connection (no statement cache, no page cache of
    // its own) for each query.
    let first_paint = TimelineQuery {
        max_lanes: 200,
        ..TimelineQuery::default()
    };
    let fresh = median(|| {
        let reader = Store::open_read_only(home).expect("reader");
        reader.timeline(&first_paint).expect("timeline");
    });
    let reused = median(|| {
        store.timeline(&first_paint).expect("timeline");
    });
    println!(
        "first paint on a fresh connection: {:.2} ms; on an open one: {:.2} ms ({:.2}x)",
        fresh * 1e3,
        reused * 1e3,
        fresh / reused
    );
}

/// Projects the synthetic events into fresh journals; returns how many.
fn fill_journals(home: &Path, calls_per_session: u64) -> u64 {
    let mut writer = AuditWriter::open(home).expect("writer");
    let mut sessions: BinaryHeap<Session> = (1..=SESSIONS)
        .map(|n| Session::new(n, calls_per_session))
        .collect();
    let mut seq = 0u64;
    let mut first = true;
    loop {
        let mut chunk: Vec<Result<Opened, StoreError>> = Vec::with_capacity(CHUNK);
        while chunk.len() < CHUNK {
            let Some(mut next) = sessions.pop() else {
                break;
            };
            if first {
                first = false;
                seq += 1;
                chunk.push(Ok(opened(
                    seq,
                    T0,
                    AuditEvent::EngineStarted {
                        version: "bench".into(),
                        pid: 1,
                    },
                )));
            }
            let time = next.time();
            for event in next.step() {
                seq += 1;
                chunk.push(Ok(opened(seq, time, event)));
            }
            if !next.done() {
                sessions.push(next);
            }
        }
        if chunk.is_empty() {
            return seq;
        }
        writer.project(false, chunk).expect("project");
    }
}

fn opened(seq: u64, time: i64, event: AuditEvent) -> Opened {
    Opened {
        seq: Seq::new(seq),
        time: UnixMillis::new(time),
        event,
    }
}

/// One synthetic agent session: its events in time order.
struct Session {
    n: u64,
    server: ServerLabel,
    start: i64,
    length: i64,
    calls: u64,
    /// Events emitted: 0 is the start, then one call each.
    step: u64,
    epoch: Option<ExecutionEpoch>,
    grant: Option<GrantId>,
}

impl Session {
    fn new(n: u64, calls: u64) -> Self {
        let mix = splitmix(n);
        let length = DAY + (mix % (3 * DAY as u64)) as i64;
        let start = T0 + ((RANGE - length) as u64 * (n - 1) / (SESSIONS - 1)) as i64;
        Session {
            n,
            server: format!("server-{}", n % 10).parse().expect("label"),
            start,
            length,
            calls,
            step: 0,
            epoch: None,
            grant: None,
        }
    }

    fn time(&self) -> i64 {
        if self.step > self.calls {
            return self.start + self.length;
        }
        self.start + self.length * self.step as i64 / (self.calls as i64 + 1)
    }

    fn done(&self) -> bool {
        self.step > self.calls + 1
    }

    /// The events at [`Session::time`], advancing.
    fn step(&mut self) -> Vec<AuditEvent> {
        let time = self.time();
        let step = self.step;
        self.step += 1;
        let session = self.n;
        let server = self.server.clone();
        if step == 0 {
            return vec![
                AuditEvent::SessionStarted {
                    session,
                    server: server.clone(),
                    client: Some(format!("agent-{}", self.n % 7)),
                    agent: None,
                },
                AuditEvent::SessionApproved {
                    session,
                    server,
                    agent_run: run(self.n),
                    by: "human".into(),
                },
            ];
        }
        if step > self.calls {
            let mut out = self.end_grant("run ended");
            out.push(AuditEvent::SessionEnded {
                session,
                server,
                reason: "agent left".into(),
            });
            return out;
        }
        let mut out = Vec::new();
        let call = step - 1;
        if call.is_multiple_of(EPOCH_CALLS) {
            let new = ExecutionEpoch::new(time as u64, u128::from(splitmix(self.n * 1_000 + call)));
            out.extend(self.end_grant("epoch ended"));
            out.push(match self.epoch {
                None => AuditEvent::ServerStarted {
                    session,
                    record: Box::new(record(&server, new, time)),
                },
                Some(old) => AuditEvent::ServerReplaced {
                    session,
                    server: server.clone(),
                    old_epoch: old,
                    new_epoch: Some(new),
                    reason: "on-change restart".into(),
                },
            });
            self.epoch = Some(new);
            let grant = Grant {
                id: GrantId::new(time as u64, u128::from(splitmix(call + self.n))),
                agent_run: run(self.n),
                server_label: server.clone(),
                execution_epoch: new,
                tool_scope: ToolScope::Tools(BTreeSet::from(["tool-1".to_owned()])),
                credential_scope: BTreeSet::new(),
                issued_at: time as u64,
                end: GrantEnd::UntilRunEnds,
            };
            self.grant = Some(grant.id);
            out.push(AuditEvent::ApprovalGranted {
                approval: ApprovalId::new(time as u64, u128::from(call)),
                session,
                admitted_session: false,
                grant: Some(Box::new(grant)),
            });
        }
        let epoch = self.epoch.expect("an epoch");
        let tool = format!("tool-{}", splitmix(call * 31 + self.n) % 20);
        out.push(match call % 100 {
            17 => refusal(session, server, epoch, call, tool, "catalog_stale"),
            71 => refusal(session, server, epoch, call, tool, "approval_denied"),
            _ => AuditEvent::ToolCallIntent {
                session,
                server,
                epoch,
                call: json!(call),
                tool,
                arguments: json!({}),
                authority: self.grant.map(Authority::Grant),
            },
        });
        out
    }

    fn end_grant(&mut self, reason: &str) -> Vec<AuditEvent> {
        self.grant
            .take()
            .map(|grant| AuditEvent::GrantEnded {
                grant,
                reason: reason.into(),
            })
            .into_iter()
            .collect()
    }
}

/// Sessions in a max-heap ordered so the one with the earliest next event comes first.
impl Ord for Session {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.time(), other.n).cmp(&(self.time(), self.n))
    }
}

impl PartialOrd for Session {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Session {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Session {}

fn refusal(
    session: u64,
    server: ServerLabel,
    epoch: ExecutionEpoch,
    call: u64,
    tool: String,
    code: &str,
) -> AuditEvent {
    AuditEvent::AuthorizationDenied {
        session,
        server,
        epoch: Some(epoch),
        call: json!(call),
        tool,
        code: code.into(),
        detail: json!({}),
    }
}

fn record(server: &ServerLabel, epoch: ExecutionEpoch, time: i64) -> ExecutionRecord {
    let executable = Artifact {
        path: "/usr/bin/node".into(),
        digest: Digest::of(b"node"),
    };
    ExecutionRecord {
        server_label: server.clone(),
        epoch,
        launch_command: vec!["/usr/bin/node".into(), "server.js".into()],
        executable,
        wrappers: vec![],
        entry: None,
        lockfiles: vec![],
        extra_paths: vec![],
        runtime: Some("v22".into()),
        working_directory: "/work".into(),
        env_names: vec![],
        pinning: Pinning::Pinned,
        pid: 4_000,
        started_at_ms: time,
    }
}

fn run(n: u64) -> AgentRun {
    AgentRun {
        pid: 1_000 + n as u32,
        start_time: n,
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The id of the `n`th session (1-based), by id.
fn lane_id(store: &Store, n: u32) -> i64 {
    let lanes = store
        .timeline(&TimelineQuery {
            max_lanes: n,
            max_marks: 1,
            buckets: 1,
            ..TimelineQuery::default()
        })
        .expect("lanes");
    lanes.lanes.last().expect("a lane").id
}

fn lane_after(store: &Store, n: u32) -> i64 {
    lane_id(store, n)
}

fn some_epoch(store: &Store) -> String {
    let page = store
        .activity(&ActivityFilter {
            session: Some(lane_id(store, 100)),
            limit: 1,
            ..ActivityFilter::default()
        })
        .expect("page");
    page[0].epoch.clone().expect("an epoch")
}

/// A seq about half way back through all the calls.
fn middle_seq(store: &Store) -> i64 {
    let newest = store
        .activity(&ActivityFilter {
            limit: 1,
            ..ActivityFilter::default()
        })
        .expect("page");
    newest[0].seq / 2
}

fn middle_seq_of(store: &Store, session: i64) -> i64 {
    let page = store
        .activity(&ActivityFilter {
            session: Some(session),
            limit: 10_000,
            ..ActivityFilter::default()
        })
        .expect("page");
    page[page.len() / 2].seq
}

fn duration(ms: i64) -> String {
    match ms {
        ms if ms % DAY == 0 => format!("{} d", ms / DAY),
        ms if ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms => format!("{:.1} s", ms as f64 / 1e3),
    }
}

fn median(mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[RUNS / 2]
}
