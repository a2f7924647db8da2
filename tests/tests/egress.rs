//! Credentials never reach server code (issue 15), end to end: the real daemon and keychain, a
//! credential bound to `127.0.0.1` on the test host's port, and two fixture servers that call
//! HTTPS hosts with the token from their environment, one in Python (the official SDK, httpx)
//! and one in Node (its own fetch). Each launch holds a placeholder; the egress broker puts the
//! value in place of it toward that address and port only:
//!
//! - the server's environment (and every process's `/proc/<pid>/environ`) holds the
//!   placeholder, never the value;
//! - `127.0.0.1` receives the real value (and what it echoes comes back with the placeholder);
//!   a redirect from it to another host carries none;
//! - a request to `localhost` on that port goes to `127.0.0.1`, the address the credential
//!   names (`localhost` is two addresses);
//! - the same address on another port gets nothing: the request is refused, the attempt
//!   audited (names, never the value), and the launch frozen;
//! - server-everything's `get-env`, a real server's own view of its environment, shows the
//!   placeholder.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use postern_e2e::Gate;
use postern_e2e::https::{HttpsServer, Reply, TestCa};
use postern_e2e::human::{approved_call, card_id, open_approvals, wait_session};
use postern_e2e::raw::{self, RawAgent, ok_text};
use postern_e2e::{binaries, rebuild, servers};
use serde_json::json;

const ANSWER: Duration = Duration::from_secs(30);
const CANARY: &str = "canary-3e8d41f7-egress-broker-value";

async fn agent(gate: &Gate, label: &str) -> Result<RawAgent> {
    let (cmd, log) = gate.agent_command(label)?;
    raw::connect(cmd, &log, "egress-agent", ANSWER).await
}

/// A gate whose broker trusts the test CA, a credential bound to `127.0.0.1` on `port` as
/// `EGRESS_TOKEN`, and the fixture `label` (`program` and its arguments) holding it.
async fn gate_with(ca: &TestCa, port: u16, label: &str, program: &[String]) -> Result<Gate> {
    let gate = Gate::start_prompting_with_env(&[], &[("SSL_CERT_FILE", ca.pem_path().as_os_str())])
        .await?;
    gate.cli_with_stdin(
        &[
            "credential",
            "add",
            "api-token",
            "--kind",
            "env",
            "--env",
            "EGRESS_TOKEN",
            "--host",
            &format!("127.0.0.1:{port}"),
        ],
        &format!("{CANARY}\n"),
    )?;
    let mut add: Vec<String> = ["server", "add", label, "--"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    add.extend(program.iter().cloned());
    gate.cli(add)?;
    gate.cli(["server", "bind", label, "api-token"])?;
    Ok(gate)
}

/// Calls `tool` and answers with its text, approving for this agent run the card the call
/// raises, if it raises one (a grant of this run may already cover it).
async fn call(
    gate: &Gate,
    agent: &mut RawAgent,
    tool: &str,
    args: serde_json::Value,
) -> Result<String> {
    let id = agent
        .start("tools/call", json!({"name": tool, "arguments": args}))
        .await?;
    for _ in 0..10 {
        if let Some(card) = open_approvals(gate)?.into_iter().next() {
            gate.cli(["approve", &card_id(&card), "--run"])?;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ok_text(&agent.response(&id).await?)
}

/// `program` as found on PATH.
fn on_path(program: &str) -> Option<String> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .map(|path| path.display().to_string())
}

/// Every process environment this user can read that holds `needle`.
fn environs_holding(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path().join("environ");
        if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            found.push(path.display().to_string());
        }
    }
    found
}

async fn the_server_holds_a_placeholder_and_the_broker_the_value(
    label: &str,
    program: Vec<String>,
) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path())?;
    let other = HttpsServer::start(&ca, |_| Reply::ok("landed")).await?;
    let landing = other.url("localhost", "/landing");
    let api = HttpsServer::start(&ca, move |req| match req.path.as_str() {
        "/redirect" => Reply::status(302).header("location", &landing),
        _ => Reply::ok(format!(
            "you sent: {}",
            req.header("authorization").unwrap_or("nothing")
        )),
    })
    .await?;
    let gate = gate_with(&ca, api.port(), label, &program).await?;
    gate.scenario(async {
        let mut agent = agent(&gate, label).await?;
        agent.list_tools().await?;
        // The release is approved for this agent run; the server relaunches holding it.
        let (card, answer) = approved_call(
            &gate,
            &mut agent,
            "env",
            json!({"name": "EGRESS_TOKEN"}),
            "--run",
        )
        .await?;
        ensure!(card["credentials"] == json!(["api-token"]), "{card}");
        let placeholder = ok_text(&answer)?;
        ensure!(
            !placeholder.contains(CANARY) && placeholder.len() == CANARY.len(),
            "the server holds a placeholder of the value's length, not the value: {placeholder:?}"
        );
        let session = wait_session(&gate, label, "a launch holding the credential", |s| {
            s["credentials"]["released"] == json!(["api-token"])
        })
        .await?;
        let holders = environs_holding(CANARY);
        ensure!(
            holders.is_empty(),
            "no process's environment holds the value: {holders:?}"
        );
        let proxy = agent
            .call(2, "env", json!({"name": "HTTPS_PROXY"}))
            .await
            .and_then(|a| ok_text(&a))?;
        ensure!(proxy.starts_with("http://127.0.0.1:"), "{proxy}");

        // To the bound host: the host receives the value, and its echo comes back to the
        // server with the placeholder in the value's place.
        let url = api.url("127.0.0.1", "/echo");
        let answer = call(&gate, &mut agent, "fetch", json!({"url": url})).await?;
        ensure!(
            answer == format!("status=200 body=you sent: Bearer {placeholder}"),
            "{answer}"
        );
        let bearer = format!("Bearer {CANARY}");
        ensure!(
            api.received()
                .iter()
                .any(|r| r.header("authorization") == Some(bearer.as_str())),
            "the host received the value"
        );
        // A redirect to another host: the next hop carries no value (nor placeholder).
        let url = api.url("127.0.0.1", "/redirect");
        let answer = call(&gate, &mut agent, "fetch", json!({"url": url})).await?;
        ensure!(answer == "status=200 body=landed", "{answer}");
        for received in other.received() {
            let auth = received.header("authorization").unwrap_or_default();
            ensure!(
                !auth.contains(CANARY) && !auth.contains(&placeholder),
                "the other host got {auth:?}"
            );
        }

        // By name (`localhost`, two addresses) it goes to the address the credential names.
        let url = api.url("localhost", "/echo");
        let answer = call(&gate, &mut agent, "fetch", json!({"url": url})).await?;
        ensure!(
            answer == format!("status=200 body=you sent: Bearer {placeholder}"),
            "{answer}"
        );

        // The same address on another port: refused, audited, the launch frozen.
        let before = other.received().len();
        let url = other.url("127.0.0.1", "/echo");
        let answer = call(&gate, &mut agent, "fetch", json!({"url": url})).await?;
        ensure!(answer.starts_with("status=403"), "{answer}");
        ensure!(
            answer.contains("api-token") && !answer.contains(CANARY),
            "{answer}"
        );
        ensure!(
            other.received().len() == before,
            "nothing reached that port"
        );
        let url = api.url("127.0.0.1", "/echo");
        let answer = call(&gate, &mut agent, "fetch", json!({"url": url})).await?;
        ensure!(answer.starts_with("status=403"), "frozen: {answer}");

        let exported = gate.cli(["audit", "export"])?;
        ensure!(!exported.contains(CANARY), "no value in the audit log");
        let leak = exported
            .lines()
            .find(|l| l.contains("credential_leak_attempt"))
            .context("the leak attempt is audited")?;
        ensure!(
            leak.contains(&format!("127.0.0.1:{}", other.port()))
                && leak.contains("api-token")
                && leak.contains(label),
            "{leak}"
        );
        ensure!(
            exported
                .lines()
                .any(|l| l.contains("credential_substituted") && l.contains("127.0.0.1")),
            "the substitution is audited"
        );
        // The person is told: status shows the refused request until they dismiss it.
        let status = gate.cli(["server", "status", label])?;
        ensure!(
            status.contains(&format!(
                "REFUSED: a launch sent the placeholder of api-token toward 127.0.0.1:{}",
                other.port()
            )),
            "{status}"
        );
        // Any process may not clear it (the server that tried, the agent): a request
        // without the person's proof is refused and the notice stays.
        let bare = postern_gateway::control::request(
            &gate.socket(),
            postern_gateway::hello::ControlCommand::DismissLeaks,
        )
        .await?;
        ensure!(bare["refused"]["code"] == "proof_required", "{bare}");
        let status = gate.cli(["server", "status", label])?;
        ensure!(status.contains("REFUSED"), "{status}");
        let typed = gate.at_terminal(
            &[std::ffi::OsString::from("dismiss-leaks")],
            None,
            postern_e2e::tty::PASSPHRASE,
        )?;
        ensure!(
            String::from_utf8_lossy(&typed.output.stdout).starts_with("dismissed "),
            "{typed:?}"
        );
        let status = gate.cli(["server", "status", label])?;
        ensure!(!status.contains("REFUSED"), "{status}");

        // Where the credential went, as `postern credential list` shows it from the journal.
        let listed = gate.cli(["credential", "list"])?;
        let port = api.port();
        ensure!(
            listed.contains(&format!(
                "{label} -> 127.0.0.1:{}: 0 sent, 1 refused",
                other.port()
            )),
            "{listed}"
        );
        ensure!(
            listed
                .lines()
                .any(|l| l.contains(&format!("{label} -> 127.0.0.1:{port}: "))
                    && !l.contains(": 0 sent")),
            "{listed}"
        );
        let _ = session;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_python_server_holds_a_placeholder_and_only_the_bound_host_gets_the_value() -> Result<()>
{
    let python = rebuild::python()?.display().to_string();
    let entry = binaries::workspace_root().join("tests/fixtures/egress/server.py");
    the_server_holds_a_placeholder_and_the_broker_the_value(
        "egress-python",
        vec![python, entry.display().to_string()],
    )
    .await
}

#[tokio::test]
async fn a_node_server_holds_a_placeholder_and_only_the_bound_host_gets_the_value() -> Result<()> {
    let node = on_path("node").context("node is not on PATH")?;
    let entry = binaries::workspace_root().join("tests/fixtures/egress/server.mjs");
    the_server_holds_a_placeholder_and_the_broker_the_value(
        "egress-node",
        vec![node, entry.display().to_string()],
    )
    .await
}

/// server-everything (npm) holding the credential: its `get-env` tool, called through the gate,
/// shows the placeholder under the credential's variable and the broker as its proxy, never the
/// value; no process's environment holds the value.
#[tokio::test]
async fn server_everything_get_env_shows_the_placeholder_never_the_value() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path())?;
    let everything: Vec<String> = servers::everything()?
        .argv()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let gate = gate_with(&ca, 8443, "everything", &everything).await?;
    gate.scenario(async {
        let mut agent = agent(&gate, "everything").await?;
        agent.list_tools().await?;
        let (card, answer) =
            approved_call(&gate, &mut agent, "get-env", json!({}), "--run").await?;
        ensure!(card["credentials"] == json!(["api-token"]), "{card}");
        let text = ok_text(&answer)?;
        ensure!(!text.contains(CANARY), "get-env shows no value: {text}");
        let env: serde_json::Value = serde_json::from_str(&text).context("get-env's JSON")?;
        let placeholder = env["EGRESS_TOKEN"]
            .as_str()
            .context("EGRESS_TOKEN is set")?;
        ensure!(
            placeholder.len() == CANARY.len() && placeholder != CANARY,
            "a placeholder of the value's length: {placeholder:?}"
        );
        let proxy = env["HTTPS_PROXY"].as_str().unwrap_or_default();
        ensure!(proxy.starts_with("http://127.0.0.1:"), "{proxy:?}");
        ensure!(
            env["NODE_OPTIONS"]
                .as_str()
                .is_some_and(|o| o.contains("--require")),
            "Node's fetch is told to use the broker: {:?}",
            env["NODE_OPTIONS"]
        );
        let holders = environs_holding(CANARY);
        ensure!(
            holders.is_empty(),
            "no process's environment holds the value: {holders:?}"
        );
        Ok(())
    })
    .await
}
