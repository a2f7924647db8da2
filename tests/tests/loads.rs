//! What a launch loads is its identity (issue 16), end to end: a Node server with no
//! dependencies (tests/fixtures/egress/server.mjs) run as `node -r ./pre.cjs server.mjs` beside
//! its own `node_modules`, with `NODE_OPTIONS` configured, and a credential bound to it. Once a
//! person approved its identity the launch holds the credential; then each of these is new code
//! whose launch is refused the credential until a person approves it again, and the card names
//! what changed: a file edited under `node_modules`, the `-r` preload edited, `NODE_OPTIONS`
//! changed. And a Python server's venv gaining a `.pth` file (which Python runs at start-up).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, ensure};
use postern_e2e::Gate;
use postern_e2e::binaries::workspace_root;
use postern_e2e::human::{approved_call, epoch, ready, wait_session};
use postern_e2e::raw::{self, RawAgent, tool_error};
use postern_e2e::rebuild;
use serde_json::{Value, json};

const ANSWER: Duration = Duration::from_secs(30);
const LABEL: &str = "loads";
const CREDENTIAL: &str = "loads-token";

/// The server's directory: the fixture server, its preload and its `node_modules`.
fn node_app(root: &Path) -> Result<PathBuf> {
    let app = root.join("app");
    std::fs::create_dir_all(app.join("node_modules/dep"))?;
    std::fs::copy(
        workspace_root().join("tests/fixtures/egress/server.mjs"),
        app.join("server.mjs"),
    )?;
    std::fs::write(app.join("pre.cjs"), "globalThis.preloaded = 1;\n")?;
    std::fs::write(
        app.join("node_modules/dep/index.js"),
        "module.exports = 1;\n",
    )?;
    Ok(app)
}

/// Configures `command` as [`LABEL`] in `cwd` (restarting on its own file changes), with
/// `env`, and binds the credential [`CREDENTIAL`] (`EGRESS_TOKEN`) to it.
fn configure(gate: &Gate, cwd: &Path, env: &[&str], command: &[&str]) -> Result<()> {
    let mut args: Vec<String> = ["server", "add", LABEL, "--restart", "on-change", "--cwd"]
        .map(str::to_owned)
        .to_vec();
    args.push(cwd.display().to_string());
    for var in env {
        args.extend(["--env".to_owned(), (*var).to_owned()]);
    }
    args.push("--".into());
    args.extend(command.iter().map(|w| (*w).to_owned()));
    gate.cli(args)?;
    Ok(())
}

fn add_credential(gate: &Gate) -> Result<()> {
    gate.cli_with_stdin(
        &[
            "credential",
            "add",
            CREDENTIAL,
            "--kind",
            "env",
            "--env",
            "EGRESS_TOKEN",
        ],
        "loads-secret-value\n",
    )?;
    gate.cli(["server", "bind", LABEL, CREDENTIAL])?;
    Ok(())
}

/// A harmless call of the server's: a tool and its arguments.
type Call = (&'static str, fn() -> Value);

const NODE_CALL: Call = ("env", || json!({"name": "PATH"}));
const PYTHON_CALL: Call = ("read", || json!({"path": "/etc/hostname"}));

/// The agent's `call` is approved for the run, and a launch that holds the credential is up;
/// returns the card and that launch's session.
async fn approve(gate: &Gate, agent: &mut RawAgent, call: Call) -> Result<(Value, Value)> {
    let (card, _) = approved_call(gate, agent, call.0, call.1(), "--run").await?;
    let holding = wait_session(gate, LABEL, "a launch holding the credential", |s| {
        ready(s) && s["credentials"]["released"] == json!([CREDENTIAL])
    })
    .await?;
    Ok((card, holding))
}

/// After a change while `holding` ran: the next launch is refused the credential, the agent's
/// next call is stale, and the card asking again says the code changed, naming `changed`
/// (an artifact's path, or a fact such as `loaderEnv`). Returns the launch holding it again.
async fn refused_until_approved(
    gate: &Gate,
    agent: &mut RawAgent,
    call: Call,
    holding: &Value,
    what: &str,
    changed: &str,
) -> Result<Value> {
    let rebuilt = wait_session(gate, LABEL, what, |s| {
        ready(s) && epoch(s) != epoch(holding)
    })
    .await?;
    ensure!(
        rebuilt["credentials"]["withheld"] == json!([CREDENTIAL])
            && rebuilt["credentials"]["reason"] == "identity changed since approval",
        "{what}: the new launch was given the credential: {rebuilt}"
    );
    let stale = agent.call_next(call.0, call.1()).await?;
    ensure!(
        tool_error(&stale)?["error"] == "authorization_stale",
        "{what}: {stale}"
    );
    // As a real client does: the tools are listed again when the gate says they changed.
    agent.wait_list_changed().await?;
    agent.list_tools().await?;
    let (card, holding) = approve(gate, agent, call).await?;
    let since = &card["epoch"]["since"];
    ensure!(since["kind"] == "changed", "{what}: {card}");
    let named = since["changedArtifacts"]
        .as_array()
        .into_iter()
        .chain(since["changedFacts"].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .any(|c| c.ends_with(changed));
    ensure!(named, "{what}: the card does not name {changed}: {since}");
    Ok(holding)
}

#[tokio::test]
async fn node_modules_a_preload_and_node_options_are_each_new_code_to_approve() -> Result<()> {
    let root = tempfile::tempdir()?;
    let app = node_app(root.path())?;
    let gate = Gate::start_prompting(&[]).await?;
    let command = ["node", "-r", "./pre.cjs", "server.mjs"];
    configure(
        &gate,
        &app,
        &["NODE_OPTIONS=--max-old-space-size=128"],
        &command,
    )?;
    add_credential(&gate)?;
    gate.scenario(async {
        let (cmd, log) = gate.agent_command(LABEL)?;
        let mut agent = raw::connect(cmd, &log, "loads-agent", ANSWER).await?;
        agent.list_tools().await?;
        let (_, holding) = approve(&gate, &mut agent, NODE_CALL).await?;

        std::fs::write(
            app.join("node_modules/dep/index.js"),
            "module.exports = 2;\n",
        )?;
        let holding = refused_until_approved(
            &gate,
            &mut agent,
            NODE_CALL,
            &holding,
            "a file edited under node_modules",
            "node_modules",
        )
        .await?;

        std::fs::write(app.join("pre.cjs"), "globalThis.preloaded = 2;\n")?;
        let holding = refused_until_approved(
            &gate,
            &mut agent,
            NODE_CALL,
            &holding,
            "the -r preload edited",
            "pre.cjs",
        )
        .await?;

        // A configuration change applies from the next launch: restart it.
        configure(
            &gate,
            &app,
            &["NODE_OPTIONS=--max-old-space-size=256"],
            &command,
        )?;
        gate.cli(["server", "restart", LABEL])?;
        refused_until_approved(
            &gate,
            &mut agent,
            NODE_CALL,
            &holding,
            "NODE_OPTIONS changed",
            "loaderEnv",
        )
        .await?;
        agent.kill().await
    })
    .await
}

#[tokio::test]
async fn a_pth_file_added_to_the_venv_is_new_code_to_approve() -> Result<()> {
    let root = tempfile::tempdir()?;
    let venv = root.path().join("venv");
    let python = venv.join("bin/python").display().to_string();
    pth_planted_is_new_code(root.path(), &venv, &[], &python, "venv").await
}

/// Red team 3's F1 behind pyenv, its default set-up: `python3` on PATH is pyenv's shim, which
/// picks the interpreter from a `.python-version` when it runs. The engine reads that choice
/// and launches the interpreter itself, so the environment pyenv would pick is hashed, and a
/// `.pth` planted in it is new code. (The shim's `pyenv` is not there: the server runs only
/// if the engine launched the interpreter in its place.)
#[tokio::test]
async fn a_pth_file_added_to_the_env_a_pyenv_shim_picks_is_new_code_to_approve() -> Result<()> {
    let root = tempfile::tempdir()?;
    let pyenv = root.path().join("pyenv");
    let shims = pyenv.join("shims");
    std::fs::create_dir_all(&shims)?;
    let shim = shims.join("python3");
    let template = std::fs::read_to_string(workspace_root().join("tests/fixtures/pyenv-shim"))?;
    std::fs::write(
        &shim,
        template.replace("@PYENV_ROOT@", &pyenv.display().to_string()),
    )?;
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let app = root.path().join("app");
    std::fs::create_dir_all(&app)?;
    std::fs::write(app.join(".python-version"), "ci-env\n")?;
    let path = format!("PATH={}:/usr/bin:/bin", shims.display());
    let venv = pyenv.join("versions/ci-env");
    pth_planted_is_new_code(root.path(), &venv, &[&path], "python3", "ci-env").await
}

/// A venv of its own at `venv` whose one `.pth` file puts the test venv's packages (the MCP
/// SDK) on the path, and the probe server in `root`/app run as `python probe.py` with `env`
/// and the credential: once approved, another `.pth` added there (which changes what Python
/// runs at start-up) is new code, and the card names `changed`.
async fn pth_planted_is_new_code(
    root: &Path,
    venv: &Path,
    env: &[&str],
    python: &str,
    changed: &str,
) -> Result<()> {
    let made = std::process::Command::new(rebuild::python()?)
        .args(["-m", "venv", "--without-pip"])
        .arg(venv)
        .status()?;
    ensure!(made.success(), "python -m venv failed");
    let site = |python: &Path| -> Result<PathBuf> {
        let out = std::process::Command::new(python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()?;
        Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
    };
    let shared = site(&rebuild::python()?)?;
    let own = site(&venv.join("bin/python"))?;
    std::fs::write(own.join("shared.pth"), format!("{}\n", shared.display()))?;
    let app = root.join("app");
    std::fs::create_dir_all(&app)?;
    std::fs::copy(
        workspace_root().join("tests/fixtures/confined/probe.py"),
        app.join("probe.py"),
    )?;
    let gate = Gate::start_prompting(&[]).await?;
    configure(&gate, &app, env, &[python, "probe.py"])?;
    add_credential(&gate)?;
    gate.scenario(async {
        let (cmd, log) = gate.agent_command(LABEL)?;
        let mut agent = raw::connect(cmd, &log, "loads-agent", ANSWER).await?;
        agent.list_tools().await?;
        let (_, holding) = approve(&gate, &mut agent, PYTHON_CALL).await?;
        std::fs::write(own.join("extra.pth"), "import sys\n")?;
        refused_until_approved(
            &gate,
            &mut agent,
            PYTHON_CALL,
            &holding,
            "a .pth file added to the venv",
            changed,
        )
        .await?;
        agent.kill().await
    })
    .await
}
