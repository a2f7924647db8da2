//! The gate decides every message it forwards, and forwards exactly what it decided (issue 12,
//! "What it must show"), from the agent's side: a `tools/call` smuggled past the gate by bare
//! carriage returns never runs on a Python SDK server (mcp-server-time, whose stdin reader
//! splits lines on `\r`); methods other than `tools/call` (resources/read, prompts/get on
//! server-everything) are decided like calls, locked, admitted and journaled; a method the gate
//! does not know, and a call without an id, never reach the server; and ids two peers could read
//! differently (`1.0`, 2^60) are refused at the edge. The server's side is
//! `gate_fidelity_upstream.rs`.
//!
//! The agent speaks raw JSON-RPC lines: no client library would send any of this. What reached
//! the fixture server is its own account (`postern_e2e::fixture::Received`), so "never
//! forwarded" is shown, not inferred from silence.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use postern_e2e::fixture::Received;
use postern_e2e::human::{activity, approved_call, epoch, open_approvals, ready, wait_session};
use postern_e2e::raw::{self, RawAgent, initialize_params, ok_text};
use postern_e2e::{Gate, servers};
use serde_json::{Value, json};

/// How long one answer may take (a Python or Node server starting on a loaded machine is slow).
const ANSWER: Duration = Duration::from_secs(30);
/// How long a refusal at the edge may take: nothing is launched or asked before it.
const AT_ONCE: Duration = Duration::from_secs(5);
/// How long to keep listening for an answer that must never come.
const QUIET: Duration = Duration::from_secs(2);
/// How long the fixture may take to report a message it was sent.
const SETTLE: Duration = Duration::from_secs(10);

const TIME: &str = "time";
const EVERYTHING: &str = "everything";
const FIXTURE: &str = "fixture";
/// A resource and a prompt server-everything offers (its resources/list and prompts/list).
const RESOURCE: &str = "demo://resource/static/document/architecture.md";
const PROMPT: &str = "simple-prompt";

// ---- a tools/call smuggled by bare carriage returns ----

#[tokio::test]
async fn a_call_smuggled_inside_a_resources_list_never_runs() -> Result<()> {
    let gate = Gate::start(&[(TIME, &servers::time()?)]).await?;
    gate.scenario(async {
        let mut agent = shim(&gate, TIME).await?;
        let smuggled = smuggle(
            "s1",
            r#"{"jsonrpc":"2.0","id":"s1","method":"resources/list","params":{"x":"#,
        );
        agent.send_raw(&smuggled.line).await?;
        smuggled.expect_refused(&mut agent).await?;
        let journaled = activity(&gate, &["--tool", "get_current_time"])?;
        ensure!(
            journaled.is_empty(),
            "the smuggled call is in Activity, so it ran: {journaled:?}"
        );
        ensure!(
            gate.daemon_log().contains("carriage return"),
            "the daemon's log does not mention the refused line"
        );

        // The session survived, and a plain call is journaled (so the check above could fail).
        let answer = agent
            .call_next("get_current_time", json!({"timezone": "UTC"}))
            .await?;
        ensure!(
            ok_text(&answer)?.contains(r#""timezone": "UTC""#),
            "a plain call after the refusal: {answer}"
        );
        let journaled = activity(&gate, &["--tool", "get_current_time"])?;
        ensure!(journaled.len() == 1, "the plain call's row: {journaled:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_call_smuggled_inside_a_call_awaiting_a_human_never_reaches_one() -> Result<()> {
    let gate = Gate::start_prompting(&[(TIME, &servers::time()?)]).await?;
    gate.scenario(async {
        let mut agent = agent(&gate, TIME).await?;
        // The human would see get_current_time in UTC; the server would run Asia/Tokyo.
        let smuggled = smuggle(
            "s2",
            r#"{"jsonrpc":"2.0","id":"s2","method":"tools/call","params":{"name":"get_current_time","arguments":{"timezone":"UTC"},"x":"#,
        );
        agent.send_raw(&smuggled.line).await?;
        smuggled.expect_refused(&mut agent).await?;
        let cards = open_approvals(&gate)?;
        ensure!(
            cards.is_empty(),
            "a human was asked about a line the gate must refuse: {cards:?}"
        );

        // The session survived and still needs a human: a plain call asks, and runs in UTC.
        let answer = approve_run(&gate, &mut agent, "get_current_time", json!({"timezone": "UTC"}))
            .await?;
        ensure!(
            answer.contains(r#""timezone": "UTC""#),
            "the approved call: {answer}"
        );
        ensure_no_tokyo(agent.backlog())
    })
    .await
}

/// A line holding a whole second request between two bare carriage returns.
struct Smuggled {
    /// The request's id, which the hidden request shares.
    id: Value,
    /// The line, without its newline.
    line: String,
    /// The byte offset of its first `\r`.
    first_cr: usize,
}

/// `head` (the visible request up to a key whose value comes next), `\r`, a whole `tools/call`
/// of get_current_time in Asia/Tokyo with the same `id`, `\r`, `}}`. To a JSON parser `\r` is
/// whitespace and the hidden call is the value of the key: one request. To a reader that
/// splits on `\r` it is three lines, and the middle one is a call nobody approved.
fn smuggle(id: &str, head: &str) -> Smuggled {
    let hidden = format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/call","params":{{"name":"get_current_time","arguments":{{"timezone":"Asia/Tokyo"}}}}}}"#
    );
    Smuggled {
        id: json!(id),
        line: format!("{head}\r{hidden}\r}}}}"),
        first_cr: head.len(),
    }
}

impl Smuggled {
    /// The gate refuses the whole line at once (-32600, naming a bare carriage return and its
    /// offset), and nothing else ever answers its id: the hidden call did not run.
    async fn expect_refused(&self, agent: &mut RawAgent) -> Result<()> {
        let id = &self.id;
        let answer = tokio::time::timeout(AT_ONCE, agent.response(id))
            .await
            .with_context(|| {
                format!(
                    "no answer to {id} within {AT_ONCE:?}: the line was not refused at the edge"
                )
            })??;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        ensure!(
            answer["error"]["code"] == -32600
                && message.to_lowercase().contains("carriage return")
                && message.contains(&self.first_cr.to_string()),
            "not a -32600 refusal naming a bare carriage return at offset {}: {answer}",
            self.first_cr
        );
        let later = agent.read_until_quiet(QUIET).await;
        ensure!(
            !later.iter().any(|m| &m["id"] == id),
            "something else answered {id}: {later:?}"
        );
        ensure_no_tokyo(&later)
    }
}

/// No message shows the hidden call's effect: a time in Asia/Tokyo.
fn ensure_no_tokyo(messages: &[Value]) -> Result<()> {
    let leaked: Vec<&Value> = messages
        .iter()
        .filter(|m| {
            let text = m.to_string();
            text.contains("Asia/Tokyo") || text.contains("+09:00")
        })
        .collect();
    ensure!(leaked.is_empty(), "the hidden call ran: {leaked:?}");
    Ok(())
}

// ---- every method that reaches a server is decided ----

#[tokio::test]
async fn resources_and_prompts_are_refused_while_locked_and_journaled_with_their_epoch()
-> Result<()> {
    let gate = Gate::start(&[(EVERYTHING, &servers::everything()?)]).await?;
    gate.scenario(async {
        let mut agent = agent(&gate, EVERYTHING).await?;
        // Discovery passes; it shows this server offers what the steps below ask for.
        let resources = agent.request_next("resources/list", json!({})).await?;
        ensure!(resources.to_string().contains(RESOURCE), "{resources}");
        let prompts = agent.request_next("prompts/list", json!({})).await?;
        ensure!(prompts.to_string().contains(PROMPT), "{prompts}");

        gate.cli(["lock"])?;
        for refused in [
            read_resource(&mut agent).await?,
            get_prompt(&mut agent).await?,
        ] {
            ensure!(
                refused["error"]["code"] == -32603
                    && refused["error"]["data"]["error"] == "vault_locked",
                "not refused with vault_locked while the vault is locked: {refused}"
            );
        }

        gate.cli(["unlock"])?;
        let read = read_resource(&mut agent).await?;
        ensure!(read["result"]["contents"][0]["uri"] == RESOURCE, "{read}");
        let prompt = get_prompt(&mut agent).await?;
        ensure!(
            prompt["result"]["messages"]
                .as_array()
                .is_some_and(|m| !m.is_empty()),
            "{prompt}"
        );
        let running = wait_session(&gate, EVERYTHING, "the server running", ready).await?;
        let current = epoch(&running);
        for method in ["resources/read", "prompts/get"] {
            let rows = activity(&gate, &["--server", EVERYTHING, "--tool", method])?;
            ensure!(
                rows.iter()
                    .any(|r| r["decision"] == "observed" && r["epoch"] == current.as_str()),
                "Activity shows no {method} passed under the current epoch {current}: {rows:?}"
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_agent_run_nobody_admitted_cannot_read_a_resource() -> Result<()> {
    let gate = Gate::start_prompting(&[(EVERYTHING, &servers::everything()?)]).await?;
    gate.scenario(async {
        let mut agent = agent(&gate, EVERYTHING).await?;
        let refused = read_resource(&mut agent).await?;
        ensure!(
            refused["error"]["data"]["error"] == "session_not_admitted",
            "a resource read from a run nobody admitted: {refused}"
        );

        let echoed = approve_run(&gate, &mut agent, "echo", json!({"message": "admit me"})).await?;
        ensure!(echoed.contains("admit me"), "{echoed}");
        let read = read_resource(&mut agent).await?;
        ensure!(
            read["result"]["contents"][0]["uri"] == RESOURCE,
            "a resource read once the run is admitted: {read}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn unknown_methods_and_calls_without_an_id_never_reach_the_server() -> Result<()> {
    let gate = Gate::start(&[(FIXTURE, &servers::fixture()?)]).await?;
    gate.scenario(async {
        let (cmd, log) = gate.mcp_command(FIXTURE)?;
        let mut agent = RawAgent::spawn(cmd, std::fs::File::create(&log)?)?.answer_within(ANSWER);
        let capabilities = json!({"roots": {"listChanged": true}});
        let init = agent
            .initialize(json!(0), initialize_params("gate-fidelity", capabilities))
            .await?;
        ensure!(init.get("result").is_some(), "initialize: {init}");

        let unknown = agent.request_next("vendor/frobnicate", json!({})).await?;
        ensure!(unknown["error"]["code"] == -32601, "{unknown}");
        agent
            .send(&json!({"jsonrpc": "2.0", "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"text": "no id"}}}))
            .await?;

        // Notifications the gate knows still pass: a forwarded call's cancellation, new roots.
        let slow = agent
            .start(
                "tools/call",
                json!({"name": "sleep", "arguments": {"ms": 30000}}),
            )
            .await?;
        received(&mut agent, "the slow call", |r| r.calls("sleep") == 1).await?;
        agent
            .send(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": slow, "reason": "changed my mind"}}),
            )
            .await?;
        agent
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
            .await?;
        let seen = received(&mut agent, "the cancellation and the new roots", |r| {
            r.notifications("notifications/cancelled") == 1
                && r.notifications("notifications/roots/list_changed") == 1
        })
        .await?;
        ensure!(
            seen.requests("vendor/frobnicate") == 0,
            "a method the gate does not know reached the server: {seen:?}"
        );
        ensure!(
            seen.notifications("tools/call") == 0,
            "a tools/call without an id reached the server: {seen:?}"
        );
        Ok(())
    })
    .await
}

// ---- ids ----

#[tokio::test]
async fn ids_two_peers_could_read_differently_are_refused_and_2_pow_53_minus_1_works() -> Result<()>
{
    let gate = Gate::start(&[(FIXTURE, &servers::fixture()?)]).await?;
    gate.scenario(async {
        let mut agent = shim(&gate, FIXTURE).await?;
        for (id, written) in [
            (json!(1.0), "1.0"),
            (json!(1_u64 << 60), "1152921504606846976"),
        ] {
            agent
                .send_raw(&format!(
                    r#"{{"jsonrpc":"2.0","id":{written},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"id {written}"}}}}}}"#
                ))
                .await?;
            let answer = agent
                .wait_for(&format!("the answer to id {written}"), |m| {
                    m.get("method").is_none() && (m["id"] == id || m["id"].is_null())
                })
                .await?;
            ensure!(
                answer["error"]["code"] == -32600,
                "id {written} was not refused at the edge: {answer}"
            );
        }
        let seen = Received::ask(&mut agent).await?;
        ensure!(
            seen.calls("echo") == 0,
            "a call with a refused id reached the server: {seen:?}"
        );

        let largest = json!(9_007_199_254_740_991_u64);
        let answer = agent
            .request(
                largest.clone(),
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "2^53-1"}}),
            )
            .await?;
        ensure!(
            ok_text(&answer)? == "2^53-1" && answer["id"] == largest,
            "{answer}"
        );
        Ok(())
    })
    .await
}

// ---- helpers ----

/// An agent whose shim is the test's own child (observe mode: nobody approves anything).
async fn shim(gate: &Gate, label: &str) -> Result<RawAgent> {
    let (cmd, log) = gate.mcp_command(label)?;
    raw::connect(cmd, &log, "gate-fidelity", ANSWER).await
}

/// An agent run by a shell, so the test process, outside its process tree, may approve its
/// calls and unlock the vault as a human would.
async fn agent(gate: &Gate, label: &str) -> Result<RawAgent> {
    let (cmd, log) = gate.agent_command(label)?;
    raw::connect(cmd, &log, "gate-fidelity", ANSWER).await
}

/// Calls `tool` and, as a human, approves it for the agent run (`--run`); returns its text.
async fn approve_run(gate: &Gate, agent: &mut RawAgent, tool: &str, args: Value) -> Result<String> {
    let (card, answer) = approved_call(gate, agent, tool, args, "--run").await?;
    ensure!(
        card["tool"]["name"] == tool,
        "the card is not about {tool}: {card}"
    );
    ok_text(&answer)
}

async fn read_resource(agent: &mut RawAgent) -> Result<Value> {
    agent
        .request_next("resources/read", json!({"uri": RESOURCE}))
        .await
}

async fn get_prompt(agent: &mut RawAgent) -> Result<Value> {
    agent
        .request_next("prompts/get", json!({"name": PROMPT}))
        .await
}

/// Asks the fixture what reached it until `pred` holds (a forwarded message may still be on
/// its way), failing after [`SETTLE`].
async fn received(
    agent: &mut RawAgent,
    what: &str,
    pred: impl Fn(&Received) -> bool,
) -> Result<Received> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let seen = Received::ask(agent).await?;
        if pred(&seen) {
            return Ok(seen);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{what} never reached the fixture within {SETTLE:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
