//! What the app's Timeline and Activity tabs cost to open with 1,000,000 Activity rows in the
//! journal: the exact queries the window sends (src/timeline.ts, src/activity.ts), run the way
//! the app's `timeline` and `activity` commands run them (`postern_engine::journal`, a fresh
//! read-only connection each), plus turning the answer into the IPC payload (JSON). Each figure
//! is the median of 21 runs, next to a baseline measured in the same run: counting the window's
//! Activity rows over the time index (`SELECT count(*)`, the least any query that read every row
//! would do).
//!
//! ```text
//! cargo bench -p postern-app --bench timeline            # -- --rows N for another size
//! ```
//!
//! The journals are filled the way a rebuild from the log fills them (the store's projection,
//! `AuditWriter::project`) from synthetic events, the same model as the store's own bench
//! (crates/store/benches/timeline.rs): 200 agent sessions over 30 days, 5,000 calls each, 10
//! servers, 20 tools, a rebuild every 1,000 calls, 2% refused, a grant per epoch. Prints figures
//! only; asserts nothing.

use std::collections::{BTreeSet, BinaryHeap};
use std::path::Path;
use std::time::Instant;

use postern_audit::{Seq, UnixMillis};
use postern_domain::decision::Authority;
use postern_domain::{
    AgentRun, ApprovalId, Artifact, AuditEvent, Digest, ExecutionEpoch, ExecutionRecord, Grant,
    GrantEnd, GrantId, Pinning, ServerLabel, ToolScope,
};
use postern_engine::Home;
use postern_engine::journal::{self, ActivityFilter, TimelineQuery};
use postern_store::{AuditWriter, Opened, StoreError};
use serde_json::json;

const SESSIONS: u64 = 200;
const EPOCH_CALLS: u64 = 1_000;
const DAY: i64 = 86_400_000;
const T0: i64 = 1_790_000_000_000;
const RANGE: i64 = 30 * DAY;
const RUNS: usize = 21;
const CHUNK: usize = 50_000;
/// The window's buckets for a 1180 px wide drawing: one per 4 px of plot (src/timeline.ts).
const BUCKETS: u32 = 247;

fn main() {
    let rows: u64 = std::env::args()
        .skip_while(|a| a != "--rows")
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("--rows N"));
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home::at(dir.path());
    println!("postern-app timeline bench: {rows} Activity rows, {SESSIONS} sessions");
    let fill = Instant::now();
    let events = fill_journals(dir.path(), rows / SESSIONS);
    println!(
        "(projected {events} events in {:.1} s)\n",
        fill.elapsed().as_secs_f64()
    );
    let conn = rusqlite::Connection::open(dir.path().join(postern_store::DB_FILE)).expect("sqlite");

    let window = |since: i64, until: i64| TimelineQuery {
        since: Some(since),
        until: Some(until),
        ..first_paint()
    };
    let middle = T0 + 15 * DAY;
    let cases = [
        ("first paint: the whole range (Fit)", first_paint()),
        ("zoom: 1 day", window(middle, middle + DAY)),
        ("zoom: 1 hour", window(middle, middle + DAY / 24)),
        ("zoom: 10 minutes", window(middle, middle + DAY / 144)),
        (
            "pan: 1 hour, a week later",
            window(middle + 7 * DAY, middle + 7 * DAY + DAY / 24),
        ),
    ];
    println!(
        "| Timeline tab: query | lanes | marks | buckets | query | + JSON payload | payload | window count(*) | query / count |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, query) in cases {
        let mut got = None;
        let t = median(|| got = Some(journal::timeline(&home, &query).expect("timeline")));
        let got = got.expect("ran");
        let mut bytes = 0;
        let with_json = median(|| {
            let answer = journal::timeline(&home, &query).expect("timeline");
            bytes = serde_json::to_vec(&answer).expect("json").len();
        });
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
        println!(
            "| {name} | {}{} | {marks} | {buckets} | {:.2} ms | {:.2} ms | {} KiB | {:.2} ms ({count} rows) | {:.3}x |",
            got.lanes.len(),
            if got.more_lanes { "+" } else { "" },
            t * 1e3,
            with_json * 1e3,
            bytes / 1024,
            base * 1e3,
            t / base,
        );
    }

    let page = ActivityFilter {
        limit: 50,
        ..ActivityFilter::default()
    };
    let mut n = 0;
    let t = median(|| n = journal::activity(&home, &page).expect("page").len());
    println!("\n| Activity tab: first page | rows | query |\n|---|---:|---:|");
    println!("| newest 50, no filter | {n} | {:.2} ms |", t * 1e3);
}

/// The query the Timeline tab sends when it opens (src/timeline.ts): the engine's whole range,
/// 50 lanes, the default marks bound, a bucket per 4 px.
fn first_paint() -> TimelineQuery {
    TimelineQuery {
        since: None,
        until: None,
        lanes_after: None,
        max_lanes: 50,
        max_marks: 0,
        buckets: BUCKETS,
    }
}

fn median(mut run: impl FnMut()) -> f64 {
    run();
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[RUNS / 2]
}

/// Projects the synthetic events into fresh journals; returns how many.
fn fill_journals(home: &Path, calls_per_session: u64) -> u64 {
    let mut writer = AuditWriter::open(home).expect("writer");
    let mut sessions: BinaryHeap<Session> = (1..=SESSIONS)
        .map(|n| Session::new(n, calls_per_session))
        .collect();
    let mut seq = 1u64;
    let mut chunk: Vec<Result<Opened, StoreError>> = vec![Ok(opened(
        seq,
        T0,
        AuditEvent::EngineStarted {
            version: "bench".into(),
            pid: 1,
        },
    ))];
    loop {
        while chunk.len() < CHUNK {
            let Some(mut next) = sessions.pop() else {
                break;
            };
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
        writer
            .project(false, std::mem::take(&mut chunk))
            .expect("project");
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
    step: u64,
    epoch: Option<ExecutionEpoch>,
    grant: Option<GrantId>,
}

impl Session {
    fn new(n: u64, calls: u64) -> Self {
        let length = DAY + (splitmix(n) % (3 * DAY as u64)) as i64;
        Session {
            n,
            server: format!("server-{}", n % 10).parse().expect("label"),
            start: T0 + ((RANGE - length) as u64 * (n - 1) / (SESSIONS - 1)) as i64,
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

    fn step(&mut self) -> Vec<AuditEvent> {
        let (time, step, session, server) = (self.time(), self.step, self.n, self.server.clone());
        self.step += 1;
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
            17 | 71 => AuditEvent::AuthorizationDenied {
                session,
                server,
                epoch: Some(epoch),
                call: json!(call),
                tool,
                code: if call % 100 == 17 {
                    "catalog_stale"
                } else {
                    "approval_denied"
                }
                .into(),
                detail: json!({}),
            },
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

/// Ordered so the session with the earliest next event comes first out of a max-heap.
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

fn record(server: &ServerLabel, epoch: ExecutionEpoch, time: i64) -> ExecutionRecord {
    ExecutionRecord {
        server_label: server.clone(),
        epoch,
        launch_command: vec!["/usr/bin/node".into(), "server.js".into()],
        executable: Artifact {
            path: "/usr/bin/node".into(),
            digest: Digest::of(b"node"),
        },
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
