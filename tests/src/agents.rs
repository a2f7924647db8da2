//! Real MCP clients, run headless against the scripted model stand-in ([`crate::model`]) with
//! `postern mcp <label>` as their MCP server:
//!
//! - Claude Code and Codex as shipped on npm (`scripts/setup-test-deps.sh` installs the versions
//!   pinned in `tests/deps/agents` into `tests/.deps/agents`): `claude -p`, its model API at
//!   `ANTHROPIC_BASE_URL`; `codex exec`, a custom model provider's `base_url` in its
//!   `config.toml`. Each gets a private home, so nothing of the machine's own configuration is
//!   read, and no network is used.
//! - Applications on the official SDKs, used the way applications use them
//!   (`tests/clients/`): the Python SDK (`mcp`, in the tests' venv) and the TypeScript SDK
//!   (`@modelcontextprotocol/sdk`, installed with server-everything). Each lists tools at start
//!   and again only on `list_changed`, and asks the stand-in what to do next.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::Gate;
use crate::binaries::workspace_root;
use crate::model::Model;

fn installed(bin: &str) -> Result<PathBuf> {
    let path = workspace_root()
        .join("tests/.deps/agents/node_modules/.bin")
        .join(bin);
    if !path.exists() {
        bail!(
            "{} is not installed: run scripts/setup-test-deps.sh",
            path.display()
        );
    }
    Ok(path)
}

/// A private directory an agent keeps its state in (its `HOME`, `CODEX_HOME`).
fn private_home(gate: &Gate, name: &str) -> Result<PathBuf> {
    let dir = gate
        .home()
        .parent()
        .context("the gate's home has a parent")?
        .join(name);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// `claude -p <prompt>` with `label` as its only MCP server (`mcp__<label>__<tool>` for the
/// model), its tools allowed, talking to `model`, giving each tool call `tool_timeout_ms`.
pub fn claude_code(
    gate: &Gate,
    model: &Model,
    label: &str,
    prompt: &str,
    tool_timeout_ms: u64,
) -> Result<tokio::process::Command> {
    let home = private_home(gate, "claude-home")?;
    let config = home.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {label: {
            "command": gate.bin(),
            "args": ["--home", gate.home(), "mcp", label],
        }}})
        .to_string(),
    )?;
    let mut cmd = tokio::process::Command::new(installed("claude")?);
    cmd.arg("-p")
        .arg(prompt)
        .arg("--mcp-config")
        .arg(&config)
        .arg("--strict-mcp-config")
        .arg("--allowedTools")
        .arg(format!("mcp__{label}"))
        .arg("--output-format")
        .arg("json")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-stand-in")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        // MCP tools listed to the model directly, not through a search tool.
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("MCP_TOOL_TIMEOUT", tool_timeout_ms.to_string())
        .current_dir(&home);
    captured(&mut cmd);
    Ok(cmd)
}

/// `codex exec <prompt>` with `label` as its only MCP server (the namespace `mcp__<label>` for
/// the model), required at start (Codex otherwise asks the model before the server listed its
/// tools), its tools approved by Codex itself (Postern is the gate), giving each tool call
/// `tool_timeout_sec`, talking to `model` as a custom Responses-API provider.
pub fn codex(
    gate: &Gate,
    model: &Model,
    label: &str,
    prompt: &str,
    tool_timeout_sec: u64,
) -> Result<tokio::process::Command> {
    let home = private_home(gate, "codex-home")?;
    let quote = |s: &std::path::Path| json!(s.to_string_lossy()).to_string();
    std::fs::write(
        home.join("config.toml"),
        format!(
            r#"model = "stand-in"
model_provider = "stand-in"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.stand-in]
name = "stand-in"
base_url = "{base}/v1"
env_key = "STAND_IN_API_KEY"
wire_api = "responses"

[mcp_servers.{label}]
command = {command}
args = ["--home", {home}, "mcp", "{label}"]
required = true
tool_timeout_sec = {tool_timeout_sec}
default_tools_approval_mode = "approve"
"#,
            base = model.base_url(),
            command = quote(gate.bin()),
            home = quote(gate.home()),
        ),
    )?;
    let work = home.join("work");
    std::fs::create_dir_all(&work)?;
    let mut cmd = tokio::process::Command::new(installed("codex")?);
    cmd.arg("exec")
        .arg("--skip-git-repo-check")
        .arg(prompt)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("CODEX_HOME", &home)
        .env("STAND_IN_API_KEY", "sk-stand-in")
        .current_dir(&work);
    captured(&mut cmd);
    Ok(cmd)
}

/// The Python SDK application (`tests/clients/python_agent.py`), each tool call given
/// `tool_timeout`.
pub fn python_sdk(
    gate: &Gate,
    model: &Model,
    label: &str,
    prompt: &str,
    tool_timeout: std::time::Duration,
) -> Result<tokio::process::Command> {
    let python = workspace_root().join("tests/.deps/venv/bin/python");
    let script = workspace_root().join("tests/clients/python_agent.py");
    let timeout = tool_timeout.as_secs_f64().to_string();
    Ok(sdk_application(
        python.as_os_str(),
        &[script.as_os_str()],
        gate,
        model,
        label,
        prompt,
        &timeout,
    ))
}

/// The TypeScript SDK application (`tests/clients/typescript_agent.mjs`), each tool call given
/// `tool_timeout`.
pub fn typescript_sdk(
    gate: &Gate,
    model: &Model,
    label: &str,
    prompt: &str,
    tool_timeout: std::time::Duration,
) -> Result<tokio::process::Command> {
    let sdk = workspace_root().join("tests/.deps/node/node_modules/@modelcontextprotocol/sdk");
    if !sdk.exists() {
        bail!(
            "{} is not installed: run scripts/setup-test-deps.sh",
            sdk.display()
        );
    }
    let script = workspace_root().join("tests/clients/typescript_agent.mjs");
    let timeout = tool_timeout.as_millis().to_string();
    Ok(sdk_application(
        "node".as_ref(),
        &[script.as_os_str(), sdk.as_os_str()],
        gate,
        model,
        label,
        prompt,
        &timeout,
    ))
}

/// `<program> <script...> <model base url> <prompt> <tool timeout> -- postern --home H mcp
/// <label>`: an SDK application's command line (tests/clients/).
fn sdk_application(
    program: &std::ffi::OsStr,
    script: &[&std::ffi::OsStr],
    gate: &Gate,
    model: &Model,
    label: &str,
    prompt: &str,
    timeout: &str,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(script)
        .arg(model.base_url())
        .arg(prompt)
        .arg(timeout)
        .arg("--")
        .arg(gate.bin())
        .arg("--home")
        .arg(gate.home())
        .arg("mcp")
        .arg(label)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    captured(&mut cmd);
    cmd
}

/// No input; output captured for the test; killed with the test.
fn captured(cmd: &mut tokio::process::Command) {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
}
