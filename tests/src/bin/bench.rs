//! The gate benchmark (not a test: it asserts nothing about time).
//!
//! In one run, against one server command, with the same rmcp client:
//! 1. latency: sequential `tools/call echo` round trips, directly and through `postern mcp`,
//!    interleaved in blocks so drift on the machine hits both alike; prints both medians (and
//!    p90/p99) and their ratio;
//! 2. throughput: many calls in flight on ONE session, directly and through Postern; prints
//!    calls/s and messages/s (a call is two messages through the session: request + result);
//! 3. many sessions: `--sessions N` agents at once (each its own session and server process),
//!    each with one call at a time, directly and through Postern: audited calls/s in all;
//! 4. the disk: one 512-byte write and `fdatasync` in the gate's home, the floor under an
//!    audited call (each intent is durable before its call is forwarded), sampled between the
//!    latency blocks (a disk's fsync time drifts from minute to minute, as the machine's
//!    round trips do), and the added median per gated call against that floor plus 0.15 ms
//!    (issue 17's target).
//!
//! Beside each throughput figure, the CPU time the engine (all its threads) and the gated
//! session's shim spent per call in that phase (Linux: `/proc/<pid>/stat`): steadier from run
//! to run than the rates, which the 2 cores' scheduling moves by 10% and more.
//!
//! Run: `cargo run --release -p postern-e2e --bin bench -- [--server fixture|everything]
//! [--calls N] [--throughput-calls N] [--in-flight N] [--sessions N]`. A release bench drives
//! a release `postern`. Figures go to docs/benchmarks.md.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use postern_e2e::client::call_params;
use postern_e2e::{Client, Gate, Profile, ServerCommand, servers};
use rmcp::RoleClient;
use rmcp::service::Peer;
use serde_json::json;

const LABEL: &str = "bench";

#[derive(Debug)]
struct Options {
    server: String,
    calls: usize,
    warmup: usize,
    block: usize,
    throughput_calls: usize,
    in_flight: usize,
    sessions: usize,
}

impl Options {
    fn parse() -> Result<Options> {
        let mut o = Options {
            server: "auto".into(),
            calls: 2000,
            warmup: 200,
            block: 100,
            throughput_calls: 20_000,
            in_flight: 32,
            sessions: 32,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--server" => o.server = value()?,
                "--calls" => o.calls = value()?.parse()?,
                "--warmup" => o.warmup = value()?.parse()?,
                "--block" => o.block = value()?.parse()?,
                "--throughput-calls" => o.throughput_calls = value()?.parse()?,
                "--in-flight" => o.in_flight = value()?.parse()?,
                "--sessions" => o.sessions = value()?.parse()?,
                "-h" | "--help" => {
                    println!(
                        "bench [--server auto|fixture|everything] [--calls N] [--warmup N] \
                         [--block N] [--throughput-calls N] [--in-flight N] [--sessions N]"
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other} (try --help)"),
            }
        }
        if o.block == 0 || o.in_flight == 0 || o.sessions == 0 {
            bail!("--block, --in-flight and --sessions must be positive");
        }
        Ok(o)
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let o = Options::parse()?;
    let (name, server) = pick_server(&o.server)?;
    let gate = Gate::start(&[(LABEL, &server)]).await?;
    let direct = Client::direct(&server, Profile::bare()).await?;
    let gated = Client::through(&gate, LABEL, Profile::bare()).await?;
    direct.wire().set_recording(false);
    gated.wire().set_recording(false);

    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("server: {name} ({})", server.program.display());
    println!("postern: {} ({profile} build)", gate.bin().display());
    println!(
        "machine: {} cores; calls: {} (+{} warm-up), blocks of {}; throughput: {} calls, {} in flight",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        o.calls,
        o.warmup,
        o.block,
        o.throughput_calls,
        o.in_flight
    );

    // 1. Latency.
    for _ in 0..o.warmup {
        echo(&direct).await?;
        echo(&gated).await?;
    }
    let mut d = Vec::with_capacity(o.calls);
    let mut g = Vec::with_capacity(o.calls);
    let mut disk = SyncProbe::new(gate.home())?;
    while d.len() < o.calls {
        let n = o.block.min(o.calls - d.len());
        for _ in 0..n {
            d.push(echo(&direct).await?);
        }
        for _ in 0..n {
            g.push(echo(&gated).await?);
        }
        disk.sample(n.div_ceil(4))?;
    }
    let (dm, gm) = (percentile(&mut d, 50.0), percentile(&mut g, 50.0));
    println!();
    println!("| tools/call round trip | median | p90 | p99 |");
    println!("|---|---|---|---|");
    for (label, samples, median) in [("direct", &mut d, dm), ("through Postern", &mut g, gm)] {
        println!(
            "| {label} | {} | {} | {} |",
            us(median),
            us(percentile(samples, 90.0)),
            us(percentile(samples, 99.0))
        );
    }
    println!(
        "\nmedian ratio (through Postern / direct): {:.2}x; added per round trip: {}",
        gm.as_secs_f64() / dm.as_secs_f64(),
        us(gm.saturating_sub(dm))
    );

    // 2. Throughput on one session.
    let dt = throughput(&direct, o.throughput_calls, o.in_flight).await?;
    let cpu = Cpu::start(&[gate.daemon_pid(), gated.pid()]);
    let gt = throughput(&gated, o.throughput_calls, o.in_flight).await?;
    let per_call = cpu.per_call(o.throughput_calls);
    println!();
    println!(
        "| one session, {} calls in flight | calls/s | messages/s |",
        o.in_flight
    );
    println!("|---|---|---|");
    for (label, rate) in [("direct", dt), ("through Postern", gt)] {
        println!("| {label} | {rate:.0} | {:.0} |", rate * 2.0);
    }
    println!(
        "\nthroughput ratio (through Postern / direct): {:.2}x",
        gt / dt
    );
    if let [Some(engine), Some(shim)] = per_call[..] {
        println!(
            "CPU per call through Postern: engine {}, shim {}",
            us(engine),
            us(shim)
        );
    }

    // 3. Many sessions at once.
    let mut directs = Vec::with_capacity(o.sessions);
    let mut gateds = Vec::with_capacity(o.sessions);
    for _ in 0..o.sessions {
        directs.push(Client::direct(&server, Profile::bare()).await?);
        gateds.push(Client::through(&gate, LABEL, Profile::bare()).await?);
    }
    for client in directs.iter().chain(&gateds) {
        client.wire().set_recording(false);
        echo(client).await?;
    }
    let ds = sessions(&directs, o.throughput_calls).await?;
    let cpu = Cpu::start(&[gate.daemon_pid()]);
    let gs = sessions(&gateds, o.throughput_calls).await?;
    let engine_per_call = cpu.per_call(o.throughput_calls)[0];
    println!();
    println!(
        "| {} sessions at once, one call in flight each | calls/s |",
        o.sessions
    );
    println!("|---|---|");
    println!("| direct | {ds:.0} |");
    println!("| through Postern (audited) | {gs:.0} |");
    println!(
        "\nsessions ratio (through Postern / direct): {:.2}x",
        gs / ds
    );
    if let Some(engine) = engine_per_call {
        println!("engine CPU per call through Postern: {}", us(engine));
    }

    // 4. The disk under the audit log.
    let sync = disk.median();
    let added = gm.saturating_sub(dm);
    let target = sync + Duration::from_micros(150);
    println!();
    println!(
        "one 512-byte write + fdatasync in the home, between the latency blocks: median {}; added per gated call {} against fdatasync + 0.15 ms = {} ({:.2}x of it)",
        us(sync),
        us(added),
        us(target),
        added.as_secs_f64() / target.as_secs_f64()
    );
    Ok(())
}

/// Calls per second with every client calling, one call at a time each.
async fn sessions(clients: &[Client], calls: usize) -> Result<f64> {
    calls_per_second(clients.iter().map(|c| c.peer().clone()).collect(), calls).await
}

/// 512-byte appends, each followed by `fdatasync`, to a file in the gate's home: the disk's
/// floor under an audited call, sampled as the latency blocks go.
struct SyncProbe {
    path: std::path::PathBuf,
    file: std::fs::File,
    samples: Vec<Duration>,
}

impl SyncProbe {
    fn new(dir: &std::path::Path) -> Result<Self> {
        let path = dir.join("bench-fdatasync");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        Ok(Self {
            path,
            file,
            samples: Vec::new(),
        })
    }

    fn sample(&mut self, n: usize) -> Result<()> {
        use std::io::Write;
        let block = [0x5au8; 512];
        for _ in 0..n {
            let start = Instant::now();
            self.file.write_all(&block)?;
            self.file.sync_data()?;
            self.samples.push(start.elapsed());
        }
        Ok(())
    }

    fn median(&mut self) -> Duration {
        percentile(&mut self.samples, 50.0)
    }
}

impl Drop for SyncProbe {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn pick_server(choice: &str) -> Result<(&'static str, ServerCommand)> {
    match choice {
        "fixture" => Ok(("fixture_server", servers::fixture()?)),
        "everything" => Ok(("server-everything", servers::everything()?)),
        "auto" => match servers::fixture() {
            Ok(cmd) => Ok(("fixture_server", cmd)),
            Err(e) => {
                eprintln!("fixture server unavailable ({e:#}); using server-everything");
                Ok(("server-everything", servers::everything()?))
            }
        },
        other => bail!("--server must be auto, fixture or everything, not {other}"),
    }
}

async fn echo(client: &Client) -> Result<Duration> {
    let params = call_params("echo", json!({ "message": "bench" }))?;
    let start = Instant::now();
    let result = client.peer().call_tool(params).await?;
    let took = start.elapsed();
    if result.is_error == Some(true) {
        bail!("echo failed: {result:?}");
    }
    Ok(took)
}

/// Calls per second with `in_flight` concurrent callers sharing one session.
async fn throughput(client: &Client, calls: usize, in_flight: usize) -> Result<f64> {
    calls_per_second(vec![client.peer().clone(); in_flight], calls).await
}

/// Calls per second with one caller per peer, each making its share of `calls` one at a time.
async fn calls_per_second(peers: Vec<Peer<RoleClient>>, calls: usize) -> Result<f64> {
    let start = Instant::now();
    let callers = peers.len();
    let mut workers = Vec::with_capacity(callers);
    for (w, peer) in peers.into_iter().enumerate() {
        let share = calls / callers + usize::from(w < calls % callers);
        workers.push(tokio::spawn(async move {
            for _ in 0..share {
                let params = call_params("echo", json!({ "message": "bench" }))?;
                peer.call_tool(params).await?;
            }
            anyhow::Ok(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok(calls as f64 / start.elapsed().as_secs_f64())
}

/// CPU time (user and system, all threads) of some processes from a start.
struct Cpu {
    pids: Vec<Option<u32>>,
    at_start: Vec<Option<Duration>>,
}

impl Cpu {
    fn start(pids: &[Option<u32>]) -> Cpu {
        Cpu {
            pids: pids.to_vec(),
            at_start: pids.iter().map(|p| p.and_then(cpu_time)).collect(),
        }
    }

    /// Each process's CPU time since the start, per one of `calls`.
    fn per_call(&self, calls: usize) -> Vec<Option<Duration>> {
        let calls = u32::try_from(calls.max(1)).unwrap_or(u32::MAX);
        self.pids
            .iter()
            .zip(&self.at_start)
            .map(|(pid, start)| Some(cpu_time((*pid)?)?.saturating_sub((*start)?) / calls))
            .collect()
    }
}

/// The CPU time `pid` has used (`utime` + `stime`, in clock ticks, of `/proc/<pid>/stat`).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (which may hold spaces, in parentheses): state is field 3, utime
    // field 14 and stime field 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let per_second = u64::try_from(per_second).ok().filter(|t| *t > 0)?;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / per_second))
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let rank = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[rank]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}
