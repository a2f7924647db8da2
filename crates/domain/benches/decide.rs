//! What the decision ladder costs a call (not a test: it asserts nothing about time).
//!
//! Times `decide` for an allowed call against N live grants (the matching one last), and, as
//! a baseline run in the same process, cloning the call's `Request` (an allocation the gate
//! pays per call anyway). Prints nanoseconds per call and the ratio.
//!
//! Run: `cargo bench -p postern-domain --bench decide`. Figures go to docs/benchmarks.md.

use std::hint::black_box;
use std::time::Instant;

use postern_domain::catalog::ToolDrift;
use postern_domain::decision::{Inputs, SessionMode, SessionStatus, VaultState, decide};
use postern_domain::{
    AgentRun, CallId, Caller, CatalogView, Digest, ExecutionEpoch, Grant, GrantEnd, GrantId,
    Presented, Request, ToolScope,
};

const ITERATIONS: u32 = 200_000;

fn main() {
    let run = AgentRun {
        pid: 4242,
        start_time: 7,
    };
    let epoch = ExecutionEpoch::new(1_700_000_000_000, 1);
    let revision = Digest::of(b"catalog").to_string().parse().expect("digest");
    let request = Request {
        call: CallId::new(1_800_000_000_000, 9),
        caller: Caller::Identified { run },
        server: "inventory".parse().expect("label"),
        epoch,
        tool: "inventory_adjust".into(),
        credentials: ["inventory-api".to_owned()].into(),
        catalog: CatalogView {
            presented: Some(Presented { revision, epoch }),
            current: revision,
            drift: ToolDrift::Unchanged,
        },
    };
    println!("decide: an allowed call, the covering grant last among N live grants");
    println!(
        "{:>8}  {:>12}  {:>14}  {:>6}",
        "grants", "decide ns", "baseline ns", "ratio"
    );
    for n in [1usize, 10, 100, 1000] {
        let grants: Vec<Grant> = (0..n)
            .map(|i| Grant {
                id: GrantId::new(1_700_000_000_000, i as u128),
                agent_run: if i + 1 == n {
                    run
                } else {
                    AgentRun {
                        pid: 5000 + i as u32,
                        start_time: 1,
                    }
                },
                server_label: "inventory".parse().expect("label"),
                execution_epoch: epoch,
                tool_scope: ToolScope::Tools(["inventory_adjust".to_owned()].into()),
                credential_scope: ["inventory-api".to_owned()].into(),
                issued_at: 1_700_000_000_000,
                end: GrantEnd::UntilRunEnds,
            })
            .collect();
        let inputs = Inputs {
            vault: VaultState::Ready,
            mode: SessionMode::Prompt,
            session: SessionStatus::Approved,
            every_use: &[],
            grants: &grants,
            request: &request,
            now: 1_800_000_000_000,
        };
        let baseline = time(|| drop(black_box(request.clone())));
        let decided = time(|| drop(black_box(decide(black_box(&inputs)))));
        println!(
            "{n:>8}  {decided:>12.0}  {baseline:>14.0}  {:>6.1}",
            decided / baseline
        );
    }
}

/// Nanoseconds per call of `f`, after a warm-up.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..ITERATIONS / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..ITERATIONS {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(ITERATIONS)
}
