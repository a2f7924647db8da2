//! A real MCP client (rmcp's), launched against a server directly or through `postern mcp`.
//!
//! The client runs the server command as a child process over stdio, like an agent does. The
//! transport is what rmcp's `TokioChildProcess` builds (an `AsyncRwTransport` over the child's
//! stdout and stdin), with one addition: the pipes are wrapped in a wire tap (see
//! [`crate::wire`]), so tests can also check the exact JSON the client received. Requests,
//! responses and the handshake always go through rmcp's client API.

#![expect(
    deprecated,
    reason = "roots, sampling and logging are deprecated by the 2026-07-28 revision (SEP-2577), \
              but they are exactly the 2025-11-25 features the gate must carry"
)]

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorData, Implementation, ListRootsResult, LoggingMessageNotificationParam,
    PaginatedRequestParams, PingRequest, ProgressNotificationParam, ProtocolVersion, Root,
    ServerResult,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::gate::{Gate, tail};
use crate::servers::ServerCommand;
use crate::wire::{Direction, Tap, Wire};

/// How long any single request may take before the test fails (instead of hanging).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The text the client's sampling handler answers with.
pub const SAMPLED_TEXT: &str = "sampled by postern-e2e";
/// The name the client's elicitation handler fills in.
pub const ELICITED_NAME: &str = "Postern E2E";

/// What the client declares and how it answers server-to-client requests.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// `Some(roots)`: declare the `roots` capability and answer `roots/list` with these
    /// `(uri, name)` pairs.
    pub roots: Option<Vec<(String, String)>>,
    /// Declare `sampling` and answer `sampling/createMessage` with [`SAMPLED_TEXT`].
    pub sampling: bool,
    /// Declare form `elicitation` and accept every form with `name` = [`ELICITED_NAME`].
    pub elicitation: bool,
}

impl Profile {
    /// No client capabilities at all.
    pub fn bare() -> Profile {
        Profile::default()
    }

    /// Roots (one root, `root_uri`), sampling and form elicitation.
    pub fn full(root_uri: &str) -> Profile {
        Profile {
            roots: Some(vec![(root_uri.to_owned(), "postern-e2e root".to_owned())]),
            sampling: true,
            elicitation: true,
        }
    }

    fn capabilities(&self) -> ClientCapabilities {
        let mut caps = serde_json::Map::new();
        if self.roots.is_some() {
            caps.insert("roots".into(), json!({ "listChanged": true }));
        }
        if self.sampling {
            caps.insert("sampling".into(), json!({}));
        }
        if self.elicitation {
            caps.insert("elicitation".into(), json!({ "form": {} }));
        }
        serde_json::from_value(Value::Object(caps)).expect("client capabilities are well-formed")
    }
}

/// What the client's handler has seen from the server so far.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// `notifications/progress`, in arrival order.
    pub progress: Vec<ProgressNotificationParam>,
    /// How many `notifications/tools/list_changed` arrived.
    pub tools_list_changed: usize,
    /// How many `roots/list` requests the client answered.
    pub roots_requests: usize,
    /// `sampling/createMessage` requests the client answered.
    pub sampling_requests: Vec<CreateMessageRequestParams>,
    /// `elicitation/create` messages the client answered.
    pub elicitations: Vec<String>,
    /// `notifications/message` log entries.
    pub log_messages: Vec<LoggingMessageNotificationParam>,
}

/// The rmcp client handler: records everything and answers server-to-client requests.
#[derive(Debug, Clone)]
pub struct Handler {
    profile: Profile,
    seen: Arc<Mutex<Seen>>,
}

impl Handler {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            self.profile.capabilities(),
            Implementation::new("postern-e2e", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.seen().roots_requests += 1;
        let roots = self.profile.roots.clone().unwrap_or_default();
        let roots = roots
            .into_iter()
            .map(|(uri, name)| {
                serde_json::from_value::<Root>(json!({ "uri": uri, "name": name }))
                    .expect("a root is well-formed")
            })
            .collect();
        Ok(ListRootsResult::new(roots))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.seen().sampling_requests.push(params);
        Ok(serde_json::from_value(json!({
            "role": "assistant",
            "content": { "type": "text", "text": SAMPLED_TEXT },
            "model": "postern-e2e-model",
            "stopReason": "endTurn",
        }))
        .expect("a sampling result is well-formed"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            other => format!("{other:?}"),
        };
        self.seen().elicitations.push(message);
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({ "name": ELICITED_NAME, "check": true }));
        Ok(result)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen().progress.push(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.seen().tools_list_changed += 1;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen().log_messages.push(params);
    }
}

type Transport =
    AsyncRwTransport<RoleClient, Tap<tokio::process::ChildStdout>, Tap<tokio::process::ChildStdin>>;

/// A connected, initialized MCP client session.
#[derive(Debug)]
pub struct Client {
    service: RunningService<RoleClient, Handler>,
    handler: Handler,
    wire: Wire,
    child: tokio::process::Child,
    stderr: PathBuf,
    _scratch: Option<TempDir>,
}

impl Client {
    /// Launches `server` itself and connects to it, as an agent configured without Postern.
    pub async fn direct(server: &ServerCommand, profile: Profile) -> Result<Client> {
        let scratch = tempfile::Builder::new()
            .prefix("postern-e2e-direct-")
            .tempdir()?;
        let stderr = scratch.path().join("server.stderr");
        Client::launch(server.command(), stderr, Some(scratch), profile)
            .await
            .with_context(|| format!("connecting directly to {}", server.program.display()))
    }

    /// Launches `postern mcp <label>` against `gate` and connects through it, as an agent
    /// configured with Postern.
    pub async fn through(gate: &Gate, label: &str, profile: Profile) -> Result<Client> {
        let (cmd, stderr) = gate.mcp_command(label)?;
        Client::launch(cmd, stderr, None, profile)
            .await
            .with_context(|| format!("connecting through `postern mcp {label}`"))
    }

    async fn launch(
        mut cmd: tokio::process::Command,
        stderr: PathBuf,
        scratch: Option<TempDir>,
        profile: Profile,
    ) -> Result<Client> {
        let log = std::fs::File::create(&stderr)?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("spawning the MCP server process")?;
        let wire = Wire::default();
        let stdout = child.stdout.take().context("child stdout")?;
        let stdin = child.stdin.take().context("child stdin")?;
        let transport: Transport = AsyncRwTransport::new_client(
            Tap::new(stdout, wire.clone(), Direction::Received),
            Tap::new(stdin, wire.clone(), Direction::Sent),
        );
        let handler = Handler {
            profile,
            seen: Arc::default(),
        };
        let service =
            match tokio::time::timeout(REQUEST_TIMEOUT, handler.clone().serve(transport)).await {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => bail!(
                    "initialize failed: {e}\nwire: {}\nstderr:\n{}",
                    wire.summary(),
                    tail(&std::fs::read_to_string(&stderr).unwrap_or_default(), 40)
                ),
                Err(_) => bail!(
                    "initialize did not complete within {REQUEST_TIMEOUT:?}\nwire: {}\nstderr:\n{}",
                    wire.summary(),
                    tail(&std::fs::read_to_string(&stderr).unwrap_or_default(), 40)
                ),
            };
        Ok(Client {
            service,
            handler,
            wire,
            child,
            stderr,
            _scratch: scratch,
        })
    }

    /// rmcp's peer handle, for requests the helpers below don't cover.
    pub fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// Every line this client sent and received.
    pub fn wire(&self) -> &Wire {
        &self.wire
    }

    /// A snapshot of what the handler has seen.
    pub fn seen(&self) -> Seen {
        self.handler.seen().clone()
    }

    /// What the server process (or shim) wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until `pred` holds for what the handler has seen.
    pub async fn wait_seen(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Seen) -> bool,
    ) -> Result<Seen> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.seen();
            if pred(&seen) {
                return Ok(seen);
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}; seen: {seen:?}\nwire: {}",
                    self.wire.summary()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The raw `initialize` result the client received.
    pub fn initialize_result(&self) -> Result<Value> {
        self.wire.last_result("initialize")
    }

    /// `tools/list` through rmcp, all pages; returns every tool object exactly as it came
    /// off the wire (rmcp's typed `Tool` would drop fields such as `execution`).
    pub async fn list_tools_raw(&self) -> Result<Vec<Value>> {
        let mut tools = Vec::new();
        let mut cursor = None;
        loop {
            let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self
                .timed("tools/list", self.peer().list_tools(params))
                .await?;
            let raw = self.wire.last_result("tools/list")?;
            let raw_tools = raw["tools"]
                .as_array()
                .with_context(|| format!("tools/list result without a tools array: {raw}"))?;
            if raw_tools.len() != page.tools.len() {
                bail!(
                    "rmcp parsed {} tools but the wire carried {}",
                    page.tools.len(),
                    raw_tools.len()
                );
            }
            tools.extend(raw_tools.iter().cloned());
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
    }

    /// `tools/call` through rmcp. rmcp puts a `_meta.progressToken` of its own on every
    /// request, so progress can be matched to a call by reading that token off the wire
    /// ([`crate::wire::Wire::exchanges`]).
    pub async fn call(&self, name: &str, arguments: Value) -> Result<CallToolResult> {
        self.timed(
            &format!("tools/call {name}"),
            self.peer().call_tool(call_params(name, arguments)?),
        )
        .await
    }

    /// `tools/call`, returning the JSON-RPC error the call failed with (and failing if it
    /// succeeded).
    pub async fn call_expecting_error(&self, name: &str, arguments: Value) -> Result<ErrorData> {
        let res = tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.peer().call_tool(call_params(name, arguments)?),
        )
        .await
        .map_err(|_| anyhow!("tools/call {name} got no answer within {REQUEST_TIMEOUT:?}"))?;
        match res {
            Err(rmcp::ServiceError::McpError(e)) => Ok(e),
            Err(other) => bail!("tools/call {name} failed, but not with an MCP error: {other}"),
            Ok(result) => bail!("tools/call {name} succeeded unexpectedly: {result:?}"),
        }
    }

    /// `ping` through rmcp.
    pub async fn ping(&self) -> Result<()> {
        let request = ClientRequest::PingRequest(PingRequest::default());
        match self
            .timed("ping", self.peer().send_request(request))
            .await?
        {
            ServerResult::EmptyResult(_) => Ok(()),
            other => bail!("ping answered with something other than {{}}: {other:?}"),
        }
    }

    /// Ends the session like an agent that quits: closes the child's stdin and waits for it
    /// to exit. Fails if it is still running after `timeout`.
    pub async fn close(mut self, timeout: Duration) -> Result<ExitStatus> {
        let _ = self.service.close().await;
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => bail!("the process did not exit within {timeout:?} after its stdin closed"),
        }
    }

    /// The operating system id of the launched process (the server, or the shim).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn timed<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<T> {
        match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(anyhow!(
                "{what} failed: {e}\nwire: {}\nstderr:\n{}",
                self.wire.summary(),
                tail(&self.stderr(), 40)
            )),
            Err(_) => Err(anyhow!(
                "{what} got no answer within {REQUEST_TIMEOUT:?}\nwire: {}\nstderr:\n{}",
                self.wire.summary(),
                tail(&self.stderr(), 40)
            )),
        }
    }
}

/// The params of a `tools/call`.
pub fn call_params(name: &str, arguments: Value) -> Result<CallToolRequestParams> {
    let Value::Object(arguments) = arguments else {
        bail!("tool arguments must be a JSON object, got {arguments}");
    };
    Ok(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
}
