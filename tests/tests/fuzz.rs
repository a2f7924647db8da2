//! The fuzz driver's short pass (the long one is `src/bin/fuzz_gate.rs`): the checked-in
//! corpus and 20,000 generated cases through the gateway's real line reader and parser, and
//! one session of the real engine fed 2,000 hostile lines between plain calls.
//!
//! The session pass holds the gate to what it promises a server: a session that lives through
//! anything an agent writes, every plain call answered with exactly its text (line breaks of
//! every kind in it), and a server that receives only what the gate decided: no tool call
//! without an id, no method the gate does not know, no answer to a request it never sent, and
//! of every method no more messages than the agent validly sent.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nix::sys::signal::kill;
use nix::unistd::Pid;
use postern_e2e::fixture::Received;
use postern_e2e::fuzz::{self, Corpus, Plan};
use postern_e2e::raw::{self, RawAgent, ok_text};
use postern_e2e::{Gate, servers};
use postern_gateway::message::Kind;
use postern_gateway::method::{self, Route};
use serde_json::{Value, json};

/// The seed of CI's cases: the same cases every run.
const SEED: u64 = 20_261_202;
const CASES: u64 = 20_000;
const FIXTURE: &str = "fixture";
/// Hostile lines written to the session, and how many between two plain calls.
const HOSTILE_LINES: usize = 2_000;
const BATCH: usize = 8;
const ANSWER: Duration = Duration::from_secs(30);

#[test]
fn every_corpus_input_keeps_every_property() {
    let replay = Corpus::checked_in()
        .replay()
        .expect("the corpus is readable");
    assert!(
        replay.run.cases + replay.broken.len() as u64 >= 6,
        "the corpus lost its seeds: {replay:?}"
    );
    let broken: Vec<String> = replay
        .broken
        .iter()
        .map(|(path, violation)| format!("{}: {violation}", path.display()))
        .collect();
    assert!(
        broken.is_empty(),
        "{} corpus inputs break a property (tests/fuzz/README.md says what each one is):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn twenty_thousand_generated_cases_keep_every_property() {
    let plan = Plan {
        cases: CASES,
        seed: SEED,
        jobs: 2,
    };
    match fuzz::run(plan, &|_| {}) {
        Ok(run) => {
            assert_eq!(run.cases, CASES, "{run:?}");
            // The generator must mostly write what the gate accepts, or the properties of
            // accepted messages are barely tested.
            assert!(
                run.cases_accepted * 4 > run.cases && run.tally.accepted * 10 > run.tally.lines,
                "too few cases had a line the gate accepted: {run:?}"
            );
        }
        Err(found) => panic!(
            "{}\ninput ({} bytes): {}\n(`cargo run --release -p postern-e2e --bin fuzz_gate -- \
             --seed {SEED} --jobs 2 --cases {CASES}` finds it again and saves it in the corpus)",
            found.violation,
            found.input.len(),
            fuzz::show(&found.input),
        ),
    }
}

#[tokio::test]
async fn a_session_fed_hostile_lines_stays_alive_and_its_server_sees_only_decided_messages()
-> Result<()> {
    let gate = Gate::start(&[(FIXTURE, &servers::fixture()?)]).await?;
    gate.scenario(async {
        let (cmd, log) = gate.mcp_command(FIXTURE)?;
        let mut agent = raw::connect(cmd, &log, "fuzz", ANSWER).await?;
        let mut sent = Sent::default();
        let lines = fuzz::session_lines(SEED, HOSTILE_LINES);
        for (n, batch) in lines.chunks(BATCH).enumerate() {
            for line in batch {
                sent.note(line);
                agent.send_bytes(&[line, &b"\n"[..]].concat()).await?;
            }
            plain_call(&mut agent, n)
                .await
                .with_context(|| format!("after the hostile lines {:?}", shown(batch)))?;
            sent.clean_calls += 1;
        }

        let pong = agent
            .request(json!("clean-ping"), "ping", json!({}))
            .await?;
        ensure!(pong["result"] == json!({}), "ping answered {pong}");
        // Every hostile line was answered before the ping was: those answers (under the ids
        // the lines carried, where one could be read) leave the backlog before the `seen` call
        // uses an id of its own.
        ensure_no_stray_answers(&agent.take_backlog())?;
        let seen = Received::ask(&mut agent).await?;
        sent.ensure_only_decided(&seen)?;
        ensure_no_stray_answers(&agent.take_backlog())?;

        let pid = gate.daemon_pid().context("the daemon's pid")?;
        ensure!(
            kill(Pid::from_raw(i32::try_from(pid)?), None).is_ok(),
            "the daemon died"
        );
        let log = gate.daemon_log();
        ensure!(
            !log.contains("panicked"),
            "the daemon's log holds a panic:\n{}",
            postern_e2e::gate::tail(&log, 40)
        );
        Ok(())
    })
    .await
}

/// A plain `echo` call with an id no hostile line uses, whose text holds every line break some
/// reader knows; it must come back exactly.
async fn plain_call(agent: &mut RawAgent, n: usize) -> Result<()> {
    let text =
        format!("plain {n}: \r\n \r \n \u{85} \u{2028} \u{2029} \u{b} \u{c} \" \\ \u{1f600}");
    let id = json!(format!("clean-{n}"));
    let answer = agent
        .request(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text}}),
        )
        .await?;
    let echoed = ok_text(&answer)?;
    ensure!(echoed == text, "echo answered {echoed:?} for {text:?}");
    Ok(())
}

/// What the agent sent that the gate may pass on, by its own parser's reading of the lines.
#[derive(Debug, Default)]
struct Sent {
    /// Requests the gate accepts, by method (`tools/call` counted again by tool).
    requests: HashMap<String, u64>,
    calls: HashMap<String, u64>,
    /// Notifications the gate accepts, by method.
    notifications: HashMap<String, u64>,
    /// Plain `echo` calls (and the `seen` call at the end is one more tool call).
    clean_calls: u64,
}

impl Sent {
    fn note(&mut self, line: &[u8]) {
        for msg in fuzz::accepted_through_shim(line) {
            match &msg.kind {
                Kind::Request { method, .. } => {
                    *self.requests.entry(method.clone()).or_default() += 1;
                    if let Ok(call) = msg.tool_call() {
                        *self.calls.entry(call.name.to_owned()).or_default() += 1;
                    }
                }
                Kind::Notification { method } => {
                    *self.notifications.entry(method.clone()).or_default() += 1;
                }
                Kind::Response { .. } => {}
            }
        }
    }

    /// The server got only what the gate decides to pass, and never more of a method than the
    /// agent validly sent of it.
    fn ensure_only_decided(&self, seen: &Received) -> Result<()> {
        // The gate's own: its handshake, its catalog fetch and its health pings.
        let own = |method: &str| matches!(method, "initialize" | "tools/list" | "ping");
        for (method, n) in seen.all_requests() {
            if own(&method) {
                continue;
            }
            ensure!(
                matches!(
                    method::route(&method),
                    Route::Call | Route::Operation | Route::Discovery
                ),
                "a {method} request reached the server ({n}): {seen:?}"
            );
            let allowed = self.requests.get(&method).copied().unwrap_or(0)
                + if method == "tools/call" {
                    self.clean_calls + 1
                } else {
                    0
                };
            ensure!(
                n <= allowed,
                "{n} {method} requests reached the server; the agent validly sent {allowed}: {seen:?}"
            );
        }
        ensure!(
            seen.requests("initialize") == 1,
            "the server was initialized {} times (relaunched?): {seen:?}",
            seen.requests("initialize")
        );
        // The agent's own tools/list is answered from the gate's catalog, never forwarded.
        for id in seen.tools_list_ids() {
            ensure!(
                id.as_str().is_some_and(|id| id.starts_with("postern-")),
                "a tools/list with the id {id} reached the server: not one of the gate's: {seen:?}"
            );
        }
        for (tool, n) in seen.all_calls() {
            let allowed = self.calls.get(&tool).copied().unwrap_or(0)
                + match tool.as_str() {
                    "echo" => self.clean_calls,
                    "seen" => 1,
                    _ => 0,
                };
            ensure!(
                n <= allowed,
                "{n} calls of {tool:?} reached the server; the agent validly sent {allowed}: {seen:?}"
            );
        }
        ensure!(
            seen.calls("echo") >= self.clean_calls,
            "fewer echo calls reached the server than were answered: {seen:?}"
        );
        for (method, n) in seen.all_notifications() {
            // The agent's own at the handshake, and the gate's when it launched the server.
            let handshake = if method == "notifications/initialized" {
                2
            } else {
                0
            };
            let sent = self.notifications.get(&method).copied().unwrap_or(0);
            ensure!(
                method::forwards_notification(&method) && n <= sent + handshake,
                "{n} {method} notifications reached the server; the agent validly sent {sent}: {seen:?}"
            );
        }
        ensure!(
            seen.responses() == 0,
            "the server received {} responses, and it asked nothing: {seen:?}",
            seen.responses()
        );
        Ok(())
    }
}

/// No message reached the agent with one of the plain calls' ids but theirs: every plain call
/// was answered once, and no hostile line was answered under a plain call's id.
fn ensure_no_stray_answers(backlog: &[Value]) -> Result<()> {
    let stray: Vec<&Value> = backlog
        .iter()
        .filter(|m| m["id"].as_str().is_some_and(|id| id.starts_with("clean-")))
        .collect();
    ensure!(
        stray.is_empty(),
        "answers under the plain calls' ids beyond their own: {stray:?}"
    );
    Ok(())
}

fn shown(batch: &[Vec<u8>]) -> Vec<String> {
    batch.iter().map(|line| fuzz::show(line)).collect()
}
