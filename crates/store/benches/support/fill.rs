//! The synthetic journal both timeline benches read (crates/store/benches/timeline.rs and
//! crates/desk/benches/timeline.rs include this file): 200 agent sessions over 30 days, each 1 to
//! 4 days long, 10 servers, 20 tools, a rebuild (a new epoch) every 1,000 calls, 2% of calls
//! refused, a grant at the start of each epoch that ends at its rebuild, projected through the
//! store's own projection (`JournalWriter::project`, what a rebuild from the log runs).

use std::collections::{BTreeSet, BinaryHeap};
use std::path::Path;

use postern_audit::{Seq, UnixMillis};
use postern_domain::decision::Authority;
use postern_domain::{
    AgentRun, ApprovalId, Artifact, AuditEvent, Digest, ExecutionEpoch, ExecutionRecord, Grant,
    GrantEnd, GrantId, Pinning, ServerLabel, ToolScope,
};
use postern_store::{JournalWriter, Opened, StoreError};
use serde_json::json;

/// Sessions in the synthetic log.
pub const SESSIONS: u64 = 200;
/// Calls between two rebuilds (epochs) of a session.
pub const EPOCH_CALLS: u64 = 1_000;
/// One day (ms).
pub const DAY: i64 = 86_400_000;
/// When the synthetic log starts (unix ms).
pub const T0: i64 = 1_790_000_000_000;
/// How long it spans.
pub const RANGE: i64 = 30 * DAY;
/// Events per projection transaction.
pub const CHUNK: usize = 50_000;

/// Projects the synthetic events into fresh journals; returns how many.
pub fn fill_journals(home: &Path, calls_per_session: u64) -> u64 {
    let mut writer = JournalWriter::open(home).expect("writer");
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
        writer.project(chunk).expect("project");
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
                by: Some(postern_domain::AnswerChannel::Window),
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
        loader_env: vec![],
        sandbox: None,
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
