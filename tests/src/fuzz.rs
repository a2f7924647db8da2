//! A fuzz driver for the gate's framing and parsing that runs on the stable toolchain
//! (cargo-fuzz needs nightly): proptest strategies write structure-aware hostile input
//! ([`generate`]), and every input goes through the gateway's real [`LineReader`] and
//! [`Message::parse`], whose properties [`check`] holds it to (never panics; every receiving
//! peer's line reader reads back exactly the value the gate decided, numbers included; ids
//! every peer reads alike; no line break in a forwarded line; refusals that are sound and
//! answerable; an oversize path that agrees with the parser; a hop that changes nothing).

//!
//! Inputs that ever broke a property are kept in `tests/fuzz/corpus/` (checked in, each
//! named by the start of its SHA-256), and every run replays them first. The command line is
//! `src/bin/fuzz_gate.rs`; CI runs a short pass (`tests/tests/fuzz.rs`).
//!
//! [`LineReader`]: postern_gateway::framing::LineReader
//! [`Message::parse`]: postern_gateway::message::Message::parse

mod check;
pub mod generate;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use sha2::{Digest, Sha256};

pub use check::{Tally, Violation, accepted_through_shim, check, same, show};

/// How many cases one runner generates before the next takes over with a seed of its own
/// (and progress is reported).
const ROUND: u64 = 250_000;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// How many generated cases, in all.
    pub cases: u64,
    /// The seed every case derives from: the same seed and jobs, the same cases.
    pub seed: u64,
    /// How many threads share the cases.
    pub jobs: usize,
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    /// Cases generated and checked.
    pub cases: u64,
    /// Cases in which the gate accepted at least one line.
    pub cases_accepted: u64,
    /// Bytes of input, over all cases.
    pub bytes: u64,
    /// Lines read, accepted and refused over all cases.
    pub tally: Tally,
    /// How long it took.
    pub elapsed: Duration,
}

impl Run {
    /// Cases per second.
    pub fn rate(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn add(&mut self, other: &Run) {
        self.cases += other.cases;
        self.cases_accepted += other.cases_accepted;
        self.bytes += other.bytes;
        self.tally.add(other.tally);
    }
}

/// A generated input that broke a property, shrunk by proptest to a small one.
#[derive(Debug, Clone)]
pub struct Found {
    /// The input's bytes.
    pub input: Vec<u8>,
    /// The property it broke.
    pub violation: Violation,
}

/// Runs `plan.cases` generated cases on `plan.jobs` threads; `progress` hears of every
/// [`ROUND`] cases done (the run so far). Stops at the first input that breaks a property.
pub fn run(plan: Plan, progress: &(dyn Fn(&Run) + Sync)) -> Result<Run, Box<Found>> {
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let total = std::sync::Mutex::new(Run::default());
    let found = std::sync::Mutex::new(None);
    let jobs = plan.jobs.max(1);
    std::thread::scope(|scope| {
        for job in 0..jobs {
            let share =
                plan.cases / jobs as u64 + u64::from((job as u64) < plan.cases % jobs as u64);
            let (stop, total, found) = (&stop, &total, &found);
            scope.spawn(move || {
                let mut round = 0;
                let mut left = share;
                while left > 0 && !stop.load(Ordering::Relaxed) {
                    let cases = left.min(ROUND);
                    let seed = round_seed(plan.seed, job, round);
                    let outcome = run_round(cases, seed, stop);
                    let mut sum = total.lock().unwrap_or_else(|e| e.into_inner());
                    match outcome {
                        Ok(done) => sum.add(&done),
                        Err(failure) => {
                            stop.store(true, Ordering::Relaxed);
                            found
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(failure);
                        }
                    }
                    sum.elapsed = started.elapsed();
                    progress(&sum);
                    left -= cases;
                    round += 1;
                }
            });
        }
    });
    if let Some(failure) = found.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(failure);
    }
    let mut total = total.into_inner().unwrap_or_else(|e| e.into_inner());
    total.elapsed = started.elapsed();
    Ok(total)
}

/// One proptest runner's share: `cases` cases from `seed`.
fn run_round(cases: u64, seed: [u8; 16], stop: &AtomicBool) -> Result<Run, Box<Found>> {
    let config = Config {
        cases: u32::try_from(cases).unwrap_or(u32::MAX),
        failure_persistence: None,
        max_shrink_iters: 20_000,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::XorShift, &seed));
    let run = Cell::new(Run::default());
    let outcome = runner.run(&generate::case(generate::ANY_TOOLS), |case| {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let input = case.render();
        let tally = check(&input).map_err(|v| TestCaseError::fail(v.to_string()))?;
        let mut sum = run.get();
        sum.cases += 1;
        sum.bytes += input.len() as u64;
        sum.cases_accepted += u64::from(tally.accepted > 0);
        sum.tally.add(tally);
        run.set(sum);
        Ok(())
    });
    match outcome {
        Ok(()) => Ok(run.get()),
        Err(TestError::Fail(reason, case)) => {
            let input = minimize(case.render());
            let violation = check(&input).err().unwrap_or_else(|| Violation {
                property: "the same input fails the same way",
                detail: format!("the shrunk input passed when checked again; first: {reason}"),
            });
            Err(Box::new(Found { input, violation }))
        }
        Err(TestError::Abort(reason)) => Err(Box::new(Found {
            input: Vec::new(),
            violation: Violation {
                property: "the driver runs",
                detail: format!("proptest aborted: {reason}"),
            },
        })),
    }
}

/// `n` hostile lines for a session (see [`generate::session_case`]), the same for a seed: each
/// one case's bytes, which may hold several lines or none whole.
pub fn session_lines(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::XorShift, &round_seed(seed, usize::MAX, 0)),
    );
    let strategy = generate::session_case();
    (0..n)
        .map(|_| match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current().render(),
            Err(_) => b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/none\"}".to_vec(),
        })
        .collect()
}

/// Drops whole lines from a failing input while it still breaks the same property (proptest
/// shrinks each line, but keeps lines a failure does not need when shrinking them passes).
fn minimize(mut input: Vec<u8>) -> Vec<u8> {
    let Err(first) = check(&input) else {
        return input;
    };
    let mut at = 0;
    loop {
        let lines: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
        if at >= lines.len() || lines.len() == 1 {
            return input;
        }
        let without: Vec<u8> = lines
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != at)
            .flat_map(|(_, line)| line.iter().copied())
            .collect();
        match check(&without) {
            Err(v) if v.property == first.property => input = without,
            _ => at += 1,
        }
    }
}

/// The seed of one round of one job (XorShift's 16 bytes: ChaCha's quality buys nothing here,
/// and unoptimised, in the debug build CI runs, it takes a third of the time).
fn round_seed(seed: u64, job: usize, round: u64) -> [u8; 16] {
    let mut hash = Sha256::new();
    hash.update(b"postern fuzz_gate");
    hash.update(seed.to_le_bytes());
    hash.update((job as u64).to_le_bytes());
    hash.update(round.to_le_bytes());
    let digest = hash.finalize();
    let mut out = [0; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// The checked-in inputs that once broke a property: one file each, named by the first 12
/// hex digits of its SHA-256.
#[derive(Debug, Clone)]
pub struct Corpus {
    dir: PathBuf,
}

impl Corpus {
    /// The project's corpus, `tests/fuzz/corpus`.
    pub fn checked_in() -> Corpus {
        Corpus::at(crate::binaries::workspace_root().join("tests/fuzz/corpus"))
    }

    /// A corpus in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Corpus {
        Corpus { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every input, by file name.
    pub fn inputs(&self) -> Result<Vec<(PathBuf, Vec<u8>)>> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .with_context(|| format!("reading the corpus {}", self.dir.display()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        paths.retain(|p| p.is_file() && p.extension().is_none());
        paths.sort();
        paths
            .into_iter()
            .map(|path| {
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                Ok((path, bytes))
            })
            .collect()
    }

    /// Checks every input.
    pub fn replay(&self) -> Result<Replay> {
        let started = Instant::now();
        let mut replay = Replay::default();
        for (path, input) in self.inputs()? {
            match check(&input) {
                Ok(tally) => {
                    replay.run.cases += 1;
                    replay.run.bytes += input.len() as u64;
                    replay.run.cases_accepted += u64::from(tally.accepted > 0);
                    replay.run.tally.add(tally);
                }
                Err(violation) => replay.broken.push((path, violation)),
            }
        }
        replay.run.elapsed = started.elapsed();
        Ok(replay)
    }

    /// Saves an input (once: the name is its hash); returns its path.
    pub fn save(&self, input: &[u8]) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(name(input));
        std::fs::write(&path, input).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

/// What replaying a corpus found.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// The inputs that kept every property.
    pub run: Run,
    /// The inputs that broke one, with the property.
    pub broken: Vec<(PathBuf, Violation)>,
}

/// A corpus file's name: the first 12 hex digits of the input's SHA-256.
pub fn name(input: &[u8]) -> String {
    Sha256::digest(input)[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
