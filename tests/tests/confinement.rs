//! Confined servers (issue 16), end to end on Linux: the real daemon launches a Python SDK
//! server (tests/fixtures/confined/probe.py) in bubblewrap. Confined, it cannot read a canary
//! under the user's `~/.ssh` or in the Postern home, cannot connect to another loopback port,
//! cannot reach the session bus (where the Secret Service lives), and still serves its tools;
//! the same server opted out (`--unconfined`) can do all of it, and the status, the CLI and the
//! execution record say "unconfined". Turning confinement off is a new identity.
#![cfg(target_os = "linux")]

use std::path::Path;

use anyhow::{Context, Result, ensure};
use postern_e2e::{Client, Gate, Profile, binaries, rebuild};
use serde_json::{Value, json};

const CANARY: &str = "canary-5b1f-confinement";

struct Probe {
    gate: Gate,
    user_home: tempfile::TempDir,
    listener: std::net::TcpListener,
}

/// A gate whose daemon (and so its servers) has `HOME` at a fresh directory holding
/// `.ssh/id_canary`, with the probe configured as `probe` (confined) and `open` (unconfined).
async fn probe() -> Result<Probe> {
    let user_home = tempfile::tempdir()?;
    std::fs::create_dir_all(user_home.path().join(".ssh"))?;
    std::fs::write(user_home.path().join(".ssh/id_canary"), CANARY)?;
    let gate =
        Gate::start_prompting_with_env(&[], &[("HOME", user_home.path().as_os_str())]).await?;
    gate.cli(["settings", "--session-mode", "observe"])?;
    std::fs::write(gate.home().join("canary"), CANARY)?;
    let python = rebuild::python()?;
    let entry = binaries::workspace_root().join("tests/fixtures/confined/probe.py");
    let command = [python.display().to_string(), entry.display().to_string()];
    let mut add: Vec<String> = vec!["server".into(), "add".into(), "probe".into(), "--".into()];
    add.extend(command.iter().cloned());
    gate.cli(&add)?;
    let mut add: Vec<String> = vec![
        "server".into(),
        "add".into(),
        "open".into(),
        "--unconfined".into(),
        "--".into(),
    ];
    add.extend(command.iter().cloned());
    gate.cli(&add)?;
    Ok(Probe {
        gate,
        user_home,
        listener: std::net::TcpListener::bind("127.0.0.1:0")?,
    })
}

async fn text(client: &Client, tool: &str, args: Value) -> Result<String> {
    let result = client.call(tool, args).await?;
    ensure!(result.is_error != Some(true), "{tool} failed: {result:?}");
    Ok(result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect())
}

/// What the probe could do as `label`: the ssh canary, the Postern home's canary, a loopback
/// port, the session bus; and the client, whose session stays open.
async fn tried(probe: &Probe, label: &str) -> Result<(Client, [String; 4])> {
    let client = Client::through(&probe.gate, label, Profile::bare()).await?;
    let ssh = probe.user_home.path().join(".ssh/id_canary");
    let home = probe.gate.home().join("canary");
    let port = probe.listener.local_addr()?.port();
    let tried = [
        text(&client, "read", json!({"path": path(&ssh)})).await?,
        text(&client, "read", json!({"path": path(&home)})).await?,
        text(&client, "connect", json!({"port": port})).await?,
        // The engine's own bus (a confined server does not even get the variable).
        text(
            &client,
            "bus",
            json!({"address": std::env::var("DBUS_SESSION_BUS_ADDRESS")?}),
        )
        .await?,
    ];
    Ok((client, tried))
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_server_reads_no_secrets_reaches_nothing_and_still_serves_its_tools()
-> Result<()> {
    let probe = probe().await?;
    probe
        .gate
        .scenario(async {
            let (_client, [ssh, home, port, bus]) = tried(&probe, "probe").await?;
            ensure!(ssh.starts_with("error="), "~/.ssh was readable: {ssh}");
            ensure!(
                home.starts_with("error="),
                "the Postern home was readable: {home}"
            );
            ensure!(
                port.starts_with("error="),
                "a loopback port was reachable: {port}"
            );
            ensure!(
                bus.starts_with("error="),
                "the session bus was reachable: {bus}"
            );
            // It served every call above; the record names its sandbox.
            let status = probe.gate.status().await?;
            let sandbox = execution(&status, "probe")?["sandbox"].clone();
            ensure!(sandbox["tool"] == "bubblewrap", "the record: {sandbox}");
            let hidden: Vec<&str> = sandbox["hidden"]
                .as_array()
                .context("hidden")?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            // The record names the variables the process has: not the engine's bus address.
            let names = execution(&status, "probe")?["envNames"].clone();
            ensure!(
                names.as_array().is_some_and(|n| n.contains(&json!("PATH"))
                    && !n.contains(&json!("DBUS_SESSION_BUS_ADDRESS"))),
                "the record's variables: {names}"
            );
            let ssh_dir = probe.user_home.path().join(".ssh");
            ensure!(hidden.contains(&path(&ssh_dir).as_str()), "{hidden:?}");
            let shown = probe.gate.cli(["server", "status", "probe"])?;
            ensure!(shown.contains("confined (bubblewrap)"), "{shown}");
            Ok(())
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfined_it_can_and_every_surface_says_unconfined() -> Result<()> {
    let probe = probe().await?;
    probe
        .gate
        .scenario(async {
            let (_client, [ssh, home, port, bus]) = tried(&probe, "open").await?;
            ensure!(ssh == format!("read={CANARY}"), "{ssh}");
            ensure!(home == format!("read={CANARY}"), "{home}");
            ensure!(port == "connected", "{port}");
            ensure!(bus == "connected", "{bus}");
            let status = probe.gate.status().await?;
            let server = status["servers"]
                .as_array()
                .context("servers")?
                .iter()
                .find(|s| s["label"] == "open")
                .context("the open server")?
                .clone();
            ensure!(server["confinement"] == "unconfined", "{server}");
            ensure!(
                execution(&status, "open")?["sandbox"].is_null(),
                "the record of an unconfined launch names no sandbox"
            );
            let shown = probe.gate.cli(["server", "status", "open"])?;
            ensure!(shown.contains("UNCONFINED"), "{shown}");
            let list = probe.gate.cli(["server", "list"])?;
            let line = list
                .lines()
                .find(|l| l.starts_with("open"))
                .context("listed")?;
            ensure!(line.contains("UNCONFINED"), "{list}");
            Ok(())
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_confinement_off_is_a_new_identity() -> Result<()> {
    let probe = probe().await?;
    probe
        .gate
        .scenario(async {
            let confined = identity(&probe, "probe").await?;
            let python = rebuild::python()?;
            let entry = binaries::workspace_root().join("tests/fixtures/confined/probe.py");
            probe.gate.cli([
                "server".into(),
                "add".into(),
                "probe".into(),
                "--unconfined".into(),
                "--".into(),
                python.display().to_string(),
                entry.display().to_string(),
            ] as [String; 7])?;
            let unconfined = identity(&probe, "probe").await?;
            ensure!(
                confined != unconfined,
                "the same identity confined and unconfined: {confined}"
            );
            Ok(())
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_add_refuses_a_writable_path_a_confined_server_must_not_write() -> Result<()> {
    let probe = probe().await?;
    let python = rebuild::python()?.display().to_string();
    let home = std::env::var("HOME")?;
    for (path, why) in [
        (format!("{home}/.ssh"), "holds credentials"),
        (home.clone(), "your home"),
        ("/".to_owned(), "root of the file system"),
    ] {
        let args = [
            "server",
            "add",
            "wide",
            "--writable",
            &path,
            "--",
            &python,
            "x.py",
        ];
        let out = probe.gate.cli_output(&args, "")?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(!out.status.success(), "--writable {path} was taken");
        ensure!(stderr.contains(why), "--writable {path}: {stderr}");
    }
    let list = probe.gate.cli(["server", "list"])?;
    ensure!(!list.contains("wide"), "{list}");
    Ok(())
}

/// The identity of a fresh launch of `label`.
async fn identity(probe: &Probe, label: &str) -> Result<String> {
    let client = Client::through(&probe.gate, label, Profile::bare()).await?;
    text(&client, "read", json!({"path": "/etc/hostname"})).await?;
    let status = probe.gate.status().await?;
    let identity = execution(&status, label)?["identity"].clone();
    client.close(std::time::Duration::from_secs(5)).await?;
    Ok(identity.as_str().context("identity")?.to_owned())
}

/// The execution record of the (last) running session of `label`.
fn execution(status: &Value, label: &str) -> Result<Value> {
    status["sessions"]
        .as_array()
        .context("sessions")?
        .iter()
        .rev()
        .find(|s| s["server"] == label && !s["execution"].is_null())
        .map(|s| s["execution"].clone())
        .with_context(|| format!("no running session of {label}: {status}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_in_its_sandbox_is_told_what_it_was_denied() -> Result<()> {
    let probe = probe().await?;
    // A server that writes outside its directory at start, and gives up when it cannot.
    probe.gate.cli([
        "server",
        "add",
        "writer",
        "--",
        "/bin/sh",
        "-c",
        "echo x > /usr/postern-confinement-probe || exit 3",
    ])?;
    probe
        .gate
        .scenario(async {
            let (cmd, log) = probe.gate.agent_command("writer")?;
            let mut agent = postern_e2e::raw::RawAgent::spawn(cmd, std::fs::File::create(&log)?)?
                .answer_within(std::time::Duration::from_secs(30));
            let init = agent
                .start_initialize(
                    json!(0),
                    postern_e2e::raw::initialize_params("confinement-test", json!({})),
                )
                .await?;
            agent.response(&init).await?;
            agent
                .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await?;
            let listed = agent.request_next("tools/list", json!({})).await?;
            let said = listed.to_string();
            ensure!(
                said.contains("it runs confined"),
                "the agent was told: {said}"
            );
            let status = probe.gate.status().await?;
            let session = status["sessions"]
                .as_array()
                .context("sessions")?
                .iter()
                .find(|s| s["server"] == "writer")
                .with_context(|| format!("no session of writer: {status}"))?
                .clone();
            let last = session["lastExit"].as_str().unwrap_or_default();
            ensure!(
                last.contains("it runs confined (bubblewrap)") && last.contains("--unconfined"),
                "the Servers view shows: {last}"
            );
            Ok(())
        })
        .await
}
