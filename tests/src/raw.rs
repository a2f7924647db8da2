//! An agent speaking raw JSON-RPC lines to `postern mcp <label>`, for the tests a real client
//! library cannot drive: lines that are not JSON-RPC, requests it would refuse to send, or an
//! agent that ignores `notifications/tools/list_changed`.
//!
//! Every line the shim writes is read as JSON. Messages read while waiting for something else
//! are kept, in order, in a backlog ([`RawAgent::backlog`]) that later waits search first.
//!
//! ```ignore
//! let mut agent = RawAgent::launch(gate.bin(), gate.home(), "fixture")?;
//! agent.initialize(json!(0), initialize_params("my-test", json!({}))).await?;
//! let answer = agent.call(1, "echo", json!({"text": "hi"})).await?;
//! ```

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long one awaited message may take unless [`RawAgent::answer_within`] says otherwise.
pub const DEFAULT_ANSWER: Duration = Duration::from_secs(20);

/// The method of the notification a server sends when its tools change.
pub const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// A raw agent: the `postern mcp <label>` shim it launched (piped stdin and stdout, killed on
/// drop), the backlog of messages it read but has not handed out, and its next request id.
#[derive(Debug)]
pub struct RawAgent {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The agent's end of the shim's stdout, by number.
    stdout_fd: i32,
    /// The id [`RawAgent::next_id`] hands out next.
    next_id: i64,
    /// How long [`RawAgent::wait_for`] waits.
    answer: Duration,
    /// Messages read while waiting for something else, oldest first.
    backlog: Vec<Value>,
}

impl RawAgent {
    /// Launches `postern --home <home> mcp <label>`, its stderr inherited from the test.
    pub fn launch(postern: &Path, home: &Path, label: &str) -> Result<RawAgent> {
        let mut cmd = Command::new(postern);
        cmd.arg("--home").arg(home).args(["mcp", label]);
        RawAgent::spawn(cmd, Stdio::inherit())
    }

    /// [`RawAgent::launch`] run by a separate agent process (`sh`, a child of the test), so
    /// that the test process is outside the agent's process tree and may act as the person at
    /// another terminal (choose the passphrase, approve), as
    /// [`crate::gate::Gate::agent_command`] does. [`RawAgent::kill`] then kills the shell,
    /// not the shim.
    pub fn launch_beside(postern: &Path, home: &Path, label: &str) -> Result<RawAgent> {
        let mut cmd = Command::new("sh");
        // Not `exec`: the shell stays, as the agent process the shim reports to the engine.
        cmd.arg("-c").arg("\"$@\"; exit $?").arg("agent");
        cmd.arg(postern)
            .arg("--home")
            .arg(home)
            .args(["mcp", label]);
        RawAgent::spawn(cmd, Stdio::inherit())
    }

    /// Spawns `cmd` (a `postern ... mcp <label>` command, environment and all) with piped
    /// stdin and stdout and the given stderr. Answers are awaited for [`DEFAULT_ANSWER`];
    /// request ids from [`RawAgent::next_id`] start at 1.
    pub fn spawn(mut cmd: Command, stderr: impl Into<Stdio>) -> Result<RawAgent> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .context("launching postern mcp")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let stdout_fd = std::os::fd::AsRawFd::as_raw_fd(&stdout);
        let stdout = BufReader::new(stdout).lines();
        Ok(RawAgent {
            child,
            stdin,
            stdout,
            stdout_fd,
            next_id: 1,
            answer: DEFAULT_ANSWER,
            backlog: Vec::new(),
        })
    }

    /// Makes every later wait fail after `limit` instead of [`DEFAULT_ANSWER`].
    pub fn answer_within(mut self, limit: Duration) -> RawAgent {
        self.answer = limit;
        self
    }

    /// The MCP handshake in one step: `initialize` with `id` and `params` (see
    /// [`initialize_params`]), its answer, then `notifications/initialized`. Returns the
    /// answer, which is not judged: an error answer is returned as it is.
    pub async fn initialize(&mut self, id: Value, params: Value) -> Result<Value> {
        let id = self.start_initialize(id, params).await?;
        self.finish_initialize(&id).await
    }

    /// The first half of the handshake: sends `initialize` (which makes the engine launch the
    /// server) without waiting for its answer. Returns `id`, for
    /// [`RawAgent::finish_initialize`].
    pub async fn start_initialize(&mut self, id: Value, params: Value) -> Result<Value> {
        self.send_request(id, "initialize", params).await
    }

    /// The second half of the handshake: waits for the answer to the `initialize` sent as `id`
    /// (the server is up), then sends `notifications/initialized`. Returns the answer, unjudged.
    pub async fn finish_initialize(&mut self, id: &Value) -> Result<Value> {
        let init = self.response(id).await?;
        self.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await?;
        Ok(init)
    }

    /// Writes `line` and a newline, as it is: nothing checks that it is JSON.
    pub async fn send_raw(&mut self, line: &str) -> Result<()> {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Writes `bytes` as they are: not UTF-8, several lines, no newline, whatever they hold.
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.stdin.write_all(bytes).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Writes `msg` as one line of JSON.
    pub async fn send(&mut self, msg: &Value) -> Result<()> {
        self.send_raw(&msg.to_string()).await
    }

    /// Sends the request `id` without waiting for its answer; returns `id`.
    pub async fn send_request(&mut self, id: Value, method: &str, params: Value) -> Result<Value> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Hands out the next of this agent's own request ids (1, 2, 3, ...). Ids a test passes
    /// explicitly do not advance it.
    pub fn next_id(&mut self) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        id
    }

    /// Sends a request with the next id ([`RawAgent::next_id`]) without waiting for its
    /// answer; returns its id, for [`RawAgent::response`].
    pub async fn start(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id();
        self.send_request(id, method, params).await
    }

    /// Sends the request `id` and returns its whole response (a result or an error).
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> Result<Value> {
        let id = self.send_request(id, method, params).await?;
        self.response(&id).await
    }

    /// [`RawAgent::request`] with the next id.
    pub async fn request_next(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.start(method, params).await?;
        self.response(&id).await
    }

    /// `tools/call` as request `id`; returns the whole response.
    pub async fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Result<Value> {
        self.request(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    /// `tools/call` with the next id; returns the whole response.
    pub async fn call_next(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        self.request_next("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// `tools/list` with the next id; returns the tools, failing on any other answer.
    pub async fn list_tools(&mut self) -> Result<Vec<Value>> {
        let answer = self.request_next("tools/list", json!({})).await?;
        let tools = answer["result"]["tools"]
            .as_array()
            .with_context(|| format!("tools/list answered {answer}"))?;
        Ok(tools.clone())
    }

    /// Waits for the response (not a request of the same id) to the request `id`.
    pub async fn response(&mut self, id: &Value) -> Result<Value> {
        let id = id.clone();
        self.wait_for(&format!("the response to {id}"), move |m| {
            m.get("id") == Some(&id) && m.get("method").is_none()
        })
        .await
    }

    /// Returns the first message matching `pred`: from the backlog if one is there, else the
    /// next one the shim writes, keeping the others in the backlog. Fails after the answer
    /// time, if the shim closes stdout, or if it writes a line that is not JSON; `what` names
    /// the awaited message in the error.
    pub async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Result<Value> {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return Ok(self.backlog.remove(i));
        }
        let answer = self.answer;
        let deadline = tokio::time::Instant::now() + answer;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.stdout.next_line()).await {
                Ok(line) => line?
                    .with_context(|| format!("the shim closed stdout while waiting for {what}"))?,
                Err(_) => bail!("no {what} within {answer:?}; saw {:?}", self.backlog),
            };
            let msg: Value = serde_json::from_str(&line)
                .with_context(|| format!("the shim wrote non-JSON: {line}"))?;
            if pred(&msg) {
                return Ok(msg);
            }
            self.backlog.push(msg);
        }
    }

    /// Waits for a `notifications/tools/list_changed` (and, like an agent that ignores it,
    /// does nothing about it).
    pub async fn wait_list_changed(&mut self) -> Result<Value> {
        self.wait_for(LIST_CHANGED, is_list_changed).await
    }

    /// How many `notifications/tools/list_changed` arrived and sit in the backlog, unawaited.
    pub fn list_changed_seen(&self) -> usize {
        self.backlog.iter().filter(|m| is_list_changed(m)).count()
    }

    /// The messages read while waiting for others, oldest first.
    pub fn backlog(&self) -> &[Value] {
        &self.backlog
    }

    /// Takes the backlog: the messages read while waiting for others, oldest first.
    pub fn take_backlog(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.backlog)
    }

    /// Reads what the shim writes until `quiet` passes with no new line (or stdout closes,
    /// or a read fails); returns the lines that are JSON, skipping the others. The backlog is
    /// neither searched nor added to.
    pub async fn read_until_quiet(&mut self, quiet: Duration) -> Vec<Value> {
        let mut read = Vec::new();
        while let Ok(Ok(Some(line))) = tokio::time::timeout(quiet, self.stdout.next_line()).await {
            if let Ok(msg) = serde_json::from_str(&line) {
                read.push(msg);
            }
        }
        read
    }

    /// The shim's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The kernel's names of the agent's ends of the shim's stdin and stdout (`pipe:[N]`): a
    /// process holding either pipe has a descriptor by the same name.
    pub fn pipes(&self) -> Result<[String; 2]> {
        use std::os::fd::AsRawFd;
        let name = |fd: i32| -> Result<String> {
            let link = std::fs::read_link(format!("/proc/self/fd/{fd}"))?;
            Ok(link.to_string_lossy().into_owned())
        };
        Ok([name(self.stdin.as_raw_fd())?, name(self.stdout_fd)?])
    }

    /// Kills the shim (SIGKILL) and reaps it: the agent disconnects mid-whatever.
    pub async fn kill(&mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// `initialize` params: protocol version 2025-11-25, the client's `capabilities`, and
/// `clientInfo` naming `client` (version "1").
pub fn initialize_params(client: &str, capabilities: Value) -> Value {
    json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
           "clientInfo": {"name": client, "version": "1"}})
}

/// Whether `msg` is a `notifications/tools/list_changed`.
pub fn is_list_changed(msg: &Value) -> bool {
    msg["method"] == LIST_CHANGED
}

/// Spawns `cmd` (a shim, as [`crate::Gate::agent_command`] or [`crate::Gate::mcp_command`]
/// makes it) with its stderr in `log`, and completes the MCP handshake as `client`; answers
/// are awaited for `answer`.
pub async fn connect(cmd: Command, log: &Path, client: &str, answer: Duration) -> Result<RawAgent> {
    let mut agent = RawAgent::spawn(cmd, std::fs::File::create(log)?)?.answer_within(answer);
    let init = agent
        .initialize(json!(0), initialize_params(client, json!({})))
        .await?;
    if init.get("result").is_none() {
        bail!("initialize failed: {init}");
    }
    Ok(agent)
}

/// A successful tool result's text; fails on anything else (a tool error, a JSON-RPC error).
pub fn ok_text(response: &Value) -> Result<String> {
    if response["result"]["isError"] == true || response.get("result").is_none() {
        bail!("expected a successful tool result, got {response}");
    }
    Ok(response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// The structured content of a tool error (`isError: true`); fails on anything else.
pub fn tool_error(response: &Value) -> Result<&Value> {
    if response["result"]["isError"] != true {
        bail!("expected a tool error (isError: true), got {response}");
    }
    Ok(&response["result"]["structuredContent"])
}
