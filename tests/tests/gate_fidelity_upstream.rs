//! The gate decides every message it forwards (issue 12, "What it must show"), from the
//! server's side, against the project's fixture server: a server that answers the gate's
//! catalog fetch and the agent's `tools/list` differently cannot show the agent a catalog the
//! gate did not check; a reply whose id ends a 9 MiB line still reaches its call, as an error;
//! a server writing without end swells neither the engine nor the shim of the session it floods,
//! and does not slow another session. The agent's side is `gate_fidelity.rs`.
//!
//! Timings here are benchmarks, printed for a reader: the assertions hold a generous bound.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use postern_e2e::fixture::{Received, TWO_FACED};
use postern_e2e::raw::{self, RawAgent, ok_text};
use postern_e2e::{Gate, servers};
use serde_json::{Value, json};

/// How long one answer may take (a server starting on a loaded machine is slow).
const ANSWER: Duration = Duration::from_secs(30);
/// How long an answer the gate owes at once may take.
const AT_ONCE: Duration = Duration::from_secs(5);
const FIXTURE: &str = "fixture";

// ---- one catalog ----

/// The normal description of the fixture's `echo`; the second face rewrites it.
const ECHO_DESCRIPTION: &str = "Returns its text.";
/// How many characters the ids of two fetches must differ in, at least: a ULID's random
/// part (80 bits) is 16, a counter's few.
const UNPREDICTABLE: usize = 16;

#[tokio::test]
async fn a_server_with_two_faces_cannot_show_the_agent_a_catalog_the_gate_did_not_check()
-> Result<()> {
    let gate = Gate::start(&[(FIXTURE, &servers::fixture_with(&[TWO_FACED])?)]).await?;
    gate.scenario(async {
        // Two agent sessions: two launches of the server, each asked for its tools once.
        let first = one_faced_launch(&gate).await?;
        let second = one_faced_launch(&gate).await?;
        for id in [&first, &second] {
            ensure!(
                !is_counter(id),
                "the gate's fetch id {id} follows a counter an agent can predict"
            );
        }
        let fresh = differing_span(&first, &second);
        ensure!(
            fresh >= UNPREDICTABLE,
            "the ids of two launches' fetches, {first} and {second}, differ in {fresh} \
             characters: predictable"
        );
        Ok(())
    })
    .await
}

/// One agent session of the two-faced fixture: its `tools/list`, before and between calls,
/// shows the first face every time, and the server was asked for its tools once (by the gate).
/// Returns the id of that request, as the server saw it.
async fn one_faced_launch(gate: &Gate) -> Result<String> {
    let mut agent = shim(gate).await?;
    let checked = agent.list_tools().await?;
    let echo = checked
        .iter()
        .find(|t| t["name"] == "echo")
        .with_context(|| format!("no echo in {checked:?}"))?;
    ensure!(
        echo["description"] == ECHO_DESCRIPTION
            && !checked.iter().any(|t| t["name"] == "exfiltrate"),
        "the agent sees the server's second face: {checked:?}"
    );
    for n in 1..=3 {
        ok_text(&agent.call_next("echo", json!({"text": "hi"})).await?)?;
        let listed = agent.list_tools().await?;
        ensure!(
            listed == checked,
            "after {n} calls, tools/list differs from the checked catalog:\n\
             checked: {checked:?}\nnow: {listed:?}"
        );
    }
    let seen = Received::ask(&mut agent).await?;
    let ids = seen.tools_list_ids();
    ensure!(
        seen.requests("tools/list") == 1 && ids.len() == 1,
        "the server was asked for its tools more than once: {seen:?}"
    );
    agent.kill().await?;
    Ok(ids[0]
        .as_str()
        .map_or_else(|| ids[0].to_string(), str::to_owned))
}

/// Whether `id` is `postern-catalog-<n>-<n>`, today's counter.
fn is_counter(id: &str) -> bool {
    id.strip_prefix("postern-catalog-").is_some_and(|rest| {
        rest.split('-')
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// How many characters of the shorter of `a` and `b` lie between their common prefix and
/// their common suffix.
fn differing_span(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let shorter = a.len().min(b.len());
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(shorter - prefix)
        .take_while(|(x, y)| x == y)
        .count();
    shorter - prefix - suffix
}

// ---- a reply whose id ends an oversized line ----

#[tokio::test]
async fn a_reply_whose_id_ends_a_9_mib_line_reaches_its_call_as_an_error() -> Result<()> {
    let gate = Gate::start(&[(FIXTURE, &servers::fixture()?)]).await?;
    gate.scenario(async {
        let mut agent = shim(&gate).await?;
        let bytes = 9 << 20;
        assert!(
            bytes > postern_gateway::MAX_FRAME,
            "the line must exceed the cap"
        );
        let call = agent
            .start(
                "tools/call",
                json!({"name": "big_id_last", "arguments": {"bytes": bytes}}),
            )
            .await?;
        let answer = tokio::time::timeout(AT_ONCE, agent.response(&call))
            .await
            .with_context(|| {
                format!("the call {call} was left without an answer for {AT_ONCE:?}")
            })??;
        let limit = format!("{} MiB", postern_gateway::MAX_FRAME >> 20);
        ensure!(
            answer["error"]["code"] == -32603
                && answer["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&limit)),
            "not a -32603 error naming the {limit} limit: {answer}"
        );
        ensure_alive(&mut agent).await
    })
    .await
}

// ---- a server writing without end ----

/// How long the flooding session's agent reads nothing.
const FLOOD: Duration = Duration::from_secs(10);
/// The size of each line the server floods with: bytes, not line counts, fill memory (with
/// 1 KB lines today's shim grows by 9 MiB/s, with 64 KiB lines by 14 MiB/s, debug build).
const FLOOD_LINE: usize = 64 << 10;
/// Pings the other session sends meanwhile, spread over [`FLOOD`].
const PINGS: u32 = 50;
/// The longest a ping may take and the test still pass (issue 12 aims at 100 ms; printed).
const PING_BOUND: Duration = Duration::from_secs(2);
/// The resident memory each of Postern's processes must stay under while a server floods.
const RSS_BOUND: u64 = 300 << 20;
/// How much each may still grow in the flood's second half (when a bounded queue is full).
const LATE_GROWTH_BOUND: u64 = 16 << 20;
/// How often the watched processes' memory is sampled.
const RSS_EVERY: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_server_writing_without_end_swells_neither_postern_nor_another_sessions_latency()
-> Result<()> {
    let gate = Gate::start(&[(FIXTURE, &servers::fixture()?)]).await?;
    gate.scenario(async {
        let mut flooding = shim(&gate).await?;
        let mut other = shim(&gate).await?;
        // Postern's processes on the flood's way: the engine, and the flooding session's shim.
        let watched = [
            (
                "the engine",
                gate.daemon_pid().context("the daemon is not running")?,
            ),
            (
                "the flooding session's shim",
                flooding.pid().context("the shim exited")?,
            ),
        ];
        let started = flooding
            .call_next("flood", json!({"bytes": FLOOD_LINE}))
            .await?;
        ensure!(ok_text(&started)? == "flooding", "{started}");

        // From here on nobody reads the flooding session's shim.
        let (mut latencies, memory) = tokio::try_join!(pings(&mut other), watch_memory(&watched))?;
        latencies.sort();
        println!(
            "while a server floods, {PINGS} pings of another session: median {:?}, max {:?} \
             (issue 12 aims at 100 ms)",
            latencies[latencies.len() / 2],
            latencies[latencies.len() - 1]
        );
        for m in &memory {
            println!(
                "while a server floods, {}'s RSS: peak {} MiB (bound {} MiB), grew {} MiB in \
                 the last {:?} (bound {} MiB)",
                m.name,
                m.peak >> 20,
                RSS_BOUND >> 20,
                m.late_growth >> 20,
                FLOOD / 2,
                LATE_GROWTH_BOUND >> 20
            );
        }
        for m in &memory {
            ensure!(
                m.late_growth <= LATE_GROWTH_BOUND,
                "{}'s memory still grew by {} MiB in the flood's last {:?}: a queue without \
                 a bound",
                m.name,
                m.late_growth >> 20,
                FLOOD / 2
            );
        }

        flooding.kill().await?;
        ensure_alive(&mut other).await
    })
    .await
}

/// Sends [`PINGS`] pings one after the other, spread over [`FLOOD`]; each must be answered
/// within [`PING_BOUND`]. Returns how long each took.
async fn pings(agent: &mut RawAgent) -> Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    for n in 0..PINGS {
        let sent = Instant::now();
        let id = json!(format!("ping-{n}"));
        let pong = tokio::time::timeout(PING_BOUND, agent.request(id, "ping", json!({})))
            .await
            .with_context(|| format!("ping {n} was not answered within {PING_BOUND:?}"))??;
        latencies.push(sent.elapsed());
        ensure!(pong["result"] == json!({}), "ping {n}: {pong}");
        tokio::time::sleep(FLOOD / PINGS).await;
    }
    Ok(latencies)
}

/// What one process's resident memory did during the flood.
struct Memory<'a> {
    name: &'a str,
    /// The most it held, in bytes.
    peak: u64,
    /// How much more it held at the end than at any time in the first half, in bytes: a
    /// bounded queue has filled by then, so this stays near zero.
    late_growth: u64,
}

/// Samples the resident memory of each `(name, pid)` every [`RSS_EVERY`] for [`FLOOD`]; fails
/// as soon as one passes [`RSS_BOUND`].
async fn watch_memory<'a>(processes: &[(&'a str, u32)]) -> Result<Vec<Memory<'a>>> {
    let start = Instant::now();
    let mut memory: Vec<Memory> = processes
        .iter()
        .map(|(name, _)| Memory {
            name,
            peak: 0,
            late_growth: 0,
        })
        .collect();
    let mut first_half = vec![0; processes.len()];
    while start.elapsed() < FLOOD {
        for (((name, pid), m), early) in processes.iter().zip(&mut memory).zip(&mut first_half) {
            let now = rss(*pid)?;
            ensure!(
                now <= RSS_BOUND,
                "{name}'s RSS reached {} MiB while a server flooded (bound {} MiB)",
                now >> 20,
                RSS_BOUND >> 20
            );
            m.peak = m.peak.max(now);
            if start.elapsed() < FLOOD / 2 {
                *early = m.peak;
            }
            m.late_growth = now.saturating_sub(*early);
        }
        tokio::time::sleep(RSS_EVERY).await;
    }
    Ok(memory)
}

/// The resident memory of process `pid` (`VmRSS` in /proc), in bytes.
fn rss(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .with_context(|| format!("no VmRSS in /proc/{pid}/status"))?;
    Ok(kib << 10)
}

// ---- helpers ----

/// An agent whose shim is the test's own child, handshake done (observe mode).
async fn shim(gate: &Gate) -> Result<RawAgent> {
    let (cmd, log) = gate.mcp_command(FIXTURE)?;
    raw::connect(cmd, &log, "gate-fidelity", ANSWER).await
}

/// The session still works end to end: a call reaches the server and returns.
async fn ensure_alive(agent: &mut RawAgent) -> Result<()> {
    let answer: Value = agent.call_next("echo", json!({"text": "alive"})).await?;
    ensure!(ok_text(&answer)? == "alive", "{answer}");
    Ok(())
}
