//! Fuzzes the gate's framing and parsing on the stable toolchain (see `postern_e2e::fuzz`).
//!
//! Run: `cargo run --release -p postern-e2e --bin fuzz_gate -- --cases N [--seed S]
//! [--corpus DIR] [--jobs J]`. It replays every input in the corpus first, then runs N
//! generated cases, and prints how many, how many lines the gate accepted and refused, how
//! long it took and the rate. An input that breaks a property is saved in the corpus (named
//! by its hash) and the run exits 1. Figures go to docs/benchmarks.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use clap::Parser;
use postern_e2e::fuzz::{self, Corpus, Plan, Run};

/// Fuzz the gate's line reader and message parser with structure-aware hostile input.
#[derive(Debug, Parser)]
#[command(name = "fuzz_gate")]
struct Args {
    /// Generated cases to run (after the corpus).
    #[arg(long, default_value_t = 100_000)]
    cases: u64,
    /// The seed cases derive from (default: from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// The corpus to replay and to save failing inputs in (default: tests/fuzz/corpus).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Threads (default: one per CPU).
    #[arg(long)]
    jobs: Option<usize>,
}

fn main() -> Result<ExitCode> {
    let args = Args::parse();
    let corpus = args.corpus.map_or_else(Corpus::checked_in, Corpus::at);
    let replay = corpus.replay()?;
    println!(
        "corpus {}: {} inputs replayed ({}), {} broke a property",
        corpus.dir().display(),
        replay.run.cases + replay.broken.len() as u64,
        lines(&replay.run),
        replay.broken.len()
    );
    if !replay.broken.is_empty() {
        for (path, violation) in &replay.broken {
            eprintln!("fuzz_gate: FAILED on {}\n  {violation}", path.display());
        }
        return Ok(ExitCode::FAILURE);
    }
    let plan = Plan {
        cases: args.cases,
        seed: args.seed.unwrap_or_else(clock_seed),
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
    };
    println!(
        "fuzz_gate: {} cases, seed {}, {} job(s)",
        plan.cases, plan.seed, plan.jobs
    );
    let progress = |run: &Run| {
        if plan.cases >= 1_000_000 {
            eprintln!("  {} cases, {:.0} cases/s", run.cases, run.rate());
        }
    };
    match fuzz::run(plan, &progress) {
        Ok(run) => {
            println!(
                "fuzz_gate: {} cases ({:.1} MB) in {:.1} s, {:.0} cases/s; {}; {} cases had a line accepted; 0 failures",
                run.cases,
                run.bytes as f64 / 1e6,
                run.elapsed.as_secs_f64(),
                run.rate(),
                lines(&run),
                run.cases_accepted
            );
            if run.cases > 1000 && run.cases_accepted * 20 < run.cases {
                eprintln!(
                    "fuzz_gate: FAILED: fewer than 5% of the cases had a line the gate accepted, so the run checked little beyond refusals"
                );
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(found) => {
            let saved = corpus.save(&found.input)?;
            eprintln!(
                "fuzz_gate: FAILED (seed {})\n{}\ninput ({} bytes): {}\nsaved as {} (it is replayed first from now on; check it in)",
                plan.seed,
                found.violation,
                found.input.len(),
                fuzz::show(&found.input),
                saved.display()
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The lines a run read, and what became of them.
fn lines(run: &Run) -> String {
    let t = run.tally;
    format!(
        "{} lines: {} accepted, {} refused",
        t.lines, t.accepted, t.refused
    )
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
