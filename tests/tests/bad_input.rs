//! Bad input from either peer (issue 2, "Bad input"): each gets a clear error or a logged
//! drop, and the gate and every other session keep working.
//!
//! These speak raw JSON-RPC lines on purpose: a real client library would refuse to send
//! most of this. The fixture server (`src/bin/fixture_server.rs`) misbehaves on command.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use postern_e2e::raw::{RawAgent, initialize_params};
use postern_e2e::{Gate, binaries, servers, within};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);

/// An agent speaking raw lines to the gate's `postern mcp <label>`, handshake done.
async fn connect(gate: &Gate, label: &str) -> Result<RawAgent> {
    let mut agent = RawAgent::launch(gate.bin(), gate.home(), label)?;
    initialize(&mut agent).await?;
    Ok(agent)
}

/// The MCP handshake, declaring the roots capability (the fixture's `roots` tool asks).
async fn initialize(agent: &mut RawAgent) -> Result<Value> {
    let params = initialize_params("raw-agent", json!({"roots": {}}));
    agent.initialize(json!(0), params).await
}

/// Proves the session still works end to end: a call reaches the server and returns.
async fn assert_alive(agent: &mut RawAgent, id: i64) -> Result<()> {
    let answer = agent
        .call(id, "echo", json!({"text": format!("alive {id}")}))
        .await?;
    assert_eq!(
        answer["result"]["content"][0]["text"],
        format!("alive {id}"),
        "{answer}"
    );
    Ok(())
}

/// Starts a `sleep` call of `ms` with the id "slow", without waiting for its answer.
async fn start_sleep(agent: &mut RawAgent, ms: u64) -> Result<()> {
    agent
        .send(
            &json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": ms}}}),
        )
        .await
}

fn error_code(response: &Value) -> Option<i64> {
    response["error"]["code"].as_i64()
}

async fn fixture_gate() -> Result<Gate> {
    Gate::start(&[("fixture", &servers::fixture()?)]).await
}

/// [`fixture_gate`] with the fixture unconfined: the test reads the server's own pid to find
/// its process, and a confined server sees its own PID namespace.
async fn unconfined_fixture_gate() -> Result<Gate> {
    let gate = Gate::start(&[]).await?;
    let mut add: Vec<std::ffi::OsString> = vec![
        "server".into(),
        "add".into(),
        "fixture".into(),
        "--unconfined".into(),
        "--".into(),
    ];
    add.extend(servers::fixture()?.argv());
    gate.cli(add)?;
    Ok(gate)
}

#[tokio::test]
async fn lines_that_are_not_json_rpc_objects_get_clear_errors_and_the_session_continues()
-> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;

        agent.send_raw("this is not json").await?;
        let err = agent
            .wait_for("a parse error", |m| {
                m["id"].is_null() && m.get("error").is_some()
            })
            .await?;
        assert_eq!(error_code(&err), Some(-32700), "{err}");

        for (line, what) in [
            ("[1,2,3]", "an array"),
            ("42", "a number"),
            ("\"hello\"", "a string"),
        ] {
            agent.send_raw(line).await?;
            let err = agent
                .wait_for("an invalid-request error", |m| {
                    m["id"].is_null() && m.get("error").is_some()
                })
                .await?;
            assert_eq!(error_code(&err), Some(-32600), "{line}: {err}");
            let message = err["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(what), "{line}: {message}");
        }

        // A request without "jsonrpc" names what is missing and keeps its id.
        agent
            .send_raw(r#"{"id":"no-version","method":"ping"}"#)
            .await?;
        let err = agent.response(&json!("no-version")).await?;
        assert_eq!(error_code(&err), Some(-32600), "{err}");

        assert_alive(&mut agent, 10).await
    })
    .await
}

#[tokio::test]
async fn duplicate_keys_are_refused_and_never_reach_the_server() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        agent
            .send_raw(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"checked","text":"forwarded"}}}"#)
            .await?;
        let err = agent.wait_for("the refusal", |m| m.get("error").is_some()).await?;
        assert_eq!(error_code(&err), Some(-32600), "{err}");
        assert!(err["error"]["message"].as_str().unwrap_or_default().contains("duplicate key \"text\""), "{err}");
        // It answers the request it refused, which is not left to the client's timeout.
        assert_eq!(err["id"], json!(5), "{err}");
        // Had it been forwarded, the server would have answered id 5 with an echo.
        assert_alive(&mut agent, 6).await?;
        assert!(
            !agent.backlog().iter().any(|m| m["id"] == json!(5) && m.get("result").is_some()),
            "the server answered the refused request: {:?}",
            agent.backlog()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_line_over_the_size_cap_is_refused_by_id_and_the_next_one_works() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        let huge = "y".repeat(postern_gateway::MAX_FRAME + 10);
        let line = format!(r#"{{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{huge}"}}}}}}"#);
        agent.send_raw(&line).await?;
        let err = agent.response(&json!(77)).await?;
        assert_eq!(error_code(&err), Some(-32600), "{err}");
        assert!(err["error"]["message"].as_str().unwrap_or_default().contains("8 MiB"), "{err}");
        assert_alive(&mut agent, 78).await?;

        // The same cap holds for the server's answers: an oversized result is an error
        // for that one call, not a dead session.
        let answer = agent.call(79, "big", json!({"bytes": postern_gateway::MAX_FRAME + 1})).await?;
        assert_eq!(error_code(&answer), Some(-32603), "{answer}");
        assert_alive(&mut agent, 80).await
    })
    .await
}

#[tokio::test]
async fn garbage_and_stray_responses_from_the_server_are_dropped() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        let answer = agent.call(1, "garbage", json!({})).await?;
        assert_eq!(
            answer["result"]["content"][0]["text"], "garbage sent",
            "{answer}"
        );
        assert_alive(&mut agent, 2).await?;
        assert!(
            !agent
                .backlog()
                .iter()
                .any(|m| m["id"] == json!("nobody-asked")),
            "a response nobody asked for reached the agent: {:?}",
            agent.backlog()
        );
        assert!(
            gate.daemon_log()
                .contains("server answered a request nobody sent"),
            "{}",
            gate.daemon_log()
        );
        assert!(
            gate.daemon_log()
                .contains("a line that is not one Postern forwards"),
            "{}",
            gate.daemon_log()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_response_from_the_agent_with_an_unknown_id_is_dropped() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        agent
            .send(&json!({"jsonrpc": "2.0", "id": "never-asked", "result": {"roots": []}}))
            .await?;
        assert_alive(&mut agent, 1).await?;
        assert!(
            gate.daemon_log()
                .contains("agent answered a request nobody sent"),
            "{}",
            gate.daemon_log()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_server_exiting_mid_call_answers_the_call_and_restarts_on_the_next() -> Result<()> {
    within(LIMIT, async {
        let gate = unconfined_fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        let first_pid =
            agent.call(1, "pid", json!({})).await?["result"]["content"][0]["text"].clone();

        // A slow call in flight when the server dies is answered too, never left hanging.
        start_sleep(&mut agent, 30000).await?;
        let crash = agent.call(2, "crash", json!({"code": 3})).await?;
        // refresh-contract §5: a tool error naming the epoch transition, never a retry.
        let detail = &crash["result"]["structuredContent"];
        assert_eq!(crash["result"]["isError"], true, "{crash}");
        assert_eq!(detail["error"], "epoch_transition", "{crash}");
        assert_eq!(detail["reason"], "server exited (exit status 3)", "{crash}");
        assert!(
            detail["oldEpoch"].as_str().is_some_and(|e| e.len() == 26),
            "{crash}"
        );
        let slow = agent.response(&json!("slow")).await?;
        assert_eq!(
            slow["result"]["structuredContent"]["error"], "epoch_transition",
            "{slow}"
        );
        assert_eq!(
            slow["result"]["structuredContent"]["oldEpoch"],
            detail["oldEpoch"]
        );

        // The session is alive, and the next call starts a new server process.
        assert_alive(&mut agent, 3).await?;
        let second_pid =
            agent.call(4, "pid", json!({})).await?["result"]["content"][0]["text"].clone();
        assert_ne!(first_pid, second_pid);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_agent_disconnecting_mid_call_ends_only_its_own_session() -> Result<()> {
    within(LIMIT, async {
        let gate = unconfined_fixture_gate().await?;
        let mut leaving = connect(&gate, "fixture").await?;
        let mut staying = connect(&gate, "fixture").await?;
        let pid: i32 = leaving.call(1, "pid", json!({})).await?["result"]["content"][0]["text"]
            .as_str()
            .context("pid text")?
            .parse()?;
        leaving
            .send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 30000}}}))
            .await?;
        leaving.kill().await?;

        // Its server process goes with it...
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            if tokio::time::Instant::now() > deadline {
                bail!("the server of the disconnected agent (pid {pid}) is still running");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // ...and the other session never noticed.
        assert_alive(&mut staying, 1).await
    })
    .await
}

/// A forwarded call the agent cancels is journaled as cancelled, not left "(no result)".
#[tokio::test]
async fn a_call_cancelled_in_flight_is_journaled_as_cancelled() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        start_sleep(&mut agent, 30000).await?;
        let outcome = |gate: &Gate| -> Result<Option<Value>> {
            let rows = gate.cli(["activity", "--json", "--tool", "sleep"])?;
            let row = rows
                .lines()
                .next()
                .map(serde_json::from_str::<Value>)
                .transpose()?;
            Ok(row.map(|r| r["outcome"].clone()))
        };
        // Forwarded (its intent is in the journal), then cancelled.
        while outcome(&gate)?.is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        agent
            .send(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "slow", "reason": "the user pressed Esc"}}),
            )
            .await?;
        while outcome(&gate)? != Some(json!("cancelled")) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_alive(&mut agent, 1).await?;
        Ok(())
    })
    .await
}

/// A request reusing a waiting call's id is refused, and the call is still owed an answer:
/// when the engine dies, the shim gives it `engine_unavailable` rather than nothing.
#[tokio::test]
async fn a_refused_duplicate_id_does_not_cost_the_original_its_answer() -> Result<()> {
    within(LIMIT, async {
        let mut gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        start_sleep(&mut agent, 30000).await?;
        agent
            .send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "ping"}))
            .await?;
        let refused = agent.response(&json!("slow")).await?;
        assert_eq!(error_code(&refused), Some(-32600), "{refused}");
        gate.stop_daemon();
        let owed = agent.response(&json!("slow")).await?;
        assert_eq!(
            owed["error"]["data"]["error"], "engine_unavailable",
            "{owed}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_slow_call_never_blocks_a_ping_or_another_call() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        start_sleep(&mut agent, 3000).await?;
        let pong = agent.request(json!("ping-1"), "ping", json!({})).await?;
        assert_eq!(pong["result"], json!({}));
        assert_alive(&mut agent, 1).await?;
        // Neither waited for the slow call: it has not answered yet.
        assert!(
            !agent.backlog().iter().any(|m| m["id"] == json!("slow")),
            "{:?}",
            agent.backlog()
        );
        let slow = agent.response(&json!("slow")).await?;
        assert_eq!(slow["result"]["content"][0]["text"], "slept 3000 ms");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn server_to_client_requests_travel_to_the_agent_and_back() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "fixture").await?;
        agent.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "roots", "arguments": {}}})).await?;
        let ask = agent.wait_for("roots/list", |m| m["method"] == "roots/list").await?;
        agent.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///work", "name": "work"}]}})).await?;
        let answer = agent.response(&json!(1)).await?;
        assert_eq!(answer["result"]["content"][0]["text"], r#"[{"uri":"file:///work","name":"work"}]"#, "{answer}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_label_that_is_not_configured_gets_a_clear_error_per_call() -> Result<()> {
    within(LIMIT, async {
        let gate = fixture_gate().await?;
        let mut agent = connect(&gate, "nosuch").await?;
        let err = agent.request(json!(1), "tools/list", json!({})).await?;
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("no server is configured as 'nosuch'"),
            "{err}"
        );
        // Configuring it later makes the same session work without reconnecting.
        gate.add_server("nosuch", &servers::fixture()?)?;
        assert_alive(&mut agent, 2).await?;

        // A label that cannot exist is refused before anything starts.
        let out = tokio::process::Command::new(gate.bin())
            .arg("--home")
            .arg(gate.home())
            .args(["mcp", "Not A Label"])
            .stdin(Stdio::null())
            .output()
            .await?;
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("a server label may hold only"), "{stderr}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_shim_outlives_the_engine_and_reconnects_when_it_appears() -> Result<()> {
    within(LIMIT, async {
        let postern = binaries::postern()?;
        let dir = tempfile::tempdir()?;
        let home = dir.path().join("home");
        let fixture = servers::fixture()?;
        let status = std::process::Command::new(&postern)
            .arg("--home")
            .arg(&home)
            .args(["server", "add", "fixture", "--"])
            .args(fixture.argv())
            .status()?;
        assert!(status.success());

        // No engine yet: the agent still gets a session and a clear answer per call.
        // Launched beside the test, so the test may choose the passphrase as the person.
        let mut agent = RawAgent::launch_beside(&postern, &home, "fixture")?;
        let init = initialize(&mut agent).await?;
        assert_eq!(
            init["result"]["capabilities"]["tools"]["listChanged"], true,
            "{init}"
        );
        let err = agent.call(1, "echo", json!({"text": "x"})).await?;
        assert_eq!(
            err["error"]["message"],
            "Postern is not running: start the app or `postern daemon`"
        );
        let pong = agent.request(json!(2), "ping", json!({})).await?;
        assert_eq!(pong["result"], json!({}));

        // The engine appears: the shim reconnects and tells the agent to list tools again.
        // Its own private keychain, like every engine the harness starts.
        let keychain = postern_e2e::keychain::PrivateKeychain::start(dir.path())?;
        let mut daemon = tokio::process::Command::new(&postern)
            .arg("--home")
            .arg(&home)
            .arg("daemon")
            .envs(keychain.env().iter().map(|(k, v)| (k, v)))
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        agent.wait_list_changed().await?;
        // The engine starts locked: the person chooses the passphrase at a terminal.
        let mut choose = std::process::Command::new(&postern);
        choose
            .arg("--home")
            .arg(&home)
            .arg("passphrase")
            .envs(keychain.env().iter().map(|(k, v)| (k, v)));
        let chosen = postern_e2e::tty::run(&mut choose, postern_e2e::tty::PASSPHRASE, None)?;
        assert!(chosen.output.status.success(), "{chosen:?}");
        let tools = agent.request(json!(3), "tools/list", json!({})).await?;
        assert!(
            tools["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "echo")),
            "{tools}"
        );
        // A call reaches the gate, which asks a human (the engine's default); the human
        // denies it.
        agent
            .send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"text": "x"}}}))
            .await?;
        let cli = |args: &[&str]| {
            std::process::Command::new(&postern)
                .arg("--home")
                .arg(&home)
                .args(args)
                .output()
        };
        let cards = cli(&["approvals", "--json", "--wait", "20"])?;
        let cards: Value = serde_json::from_slice(&cards.stdout)?;
        let id = cards[0]["id"].as_str().unwrap_or_default().to_owned();
        assert!(cli(&["deny", &id])?.status.success());
        let denied = agent.response(&json!(4)).await?;
        assert_eq!(
            denied["result"]["structuredContent"]["error"], "approval_denied",
            "{denied}"
        );

        // The engine goes away mid-session: calls fail clearly, the shim stays up.
        daemon.kill().await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let answer = agent.call(5, "echo", json!({"text": "x"})).await?;
            if answer["error"]["data"]["error"] == "engine_unavailable" {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the shim still answers from a dead engine: {answer}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    })
    .await
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}
