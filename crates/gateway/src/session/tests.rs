//! One session driven from both ends inside the crate: an agent writing JSON-RPC lines, a real
//! server process (a small Python MCP server that logs every line it receives), and a gate
//! whose verdicts the test gives by hand, so the order of events a race can produce (a lock's
//! verdict arriving after the server stopped) is forced rather than hoped for.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postern_domain::decision::{Authority, Denial};
use postern_domain::{AgentIdentity, AuditEvent, CallId, Digest, ServerConfig, ServerLabel};
use postern_supervisor::DigestCache;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{broadcast, watch};

use super::{Command, Context, run};
use crate::audit::{AuditSink, Durable, NoAudit};
use crate::authorize::{
    Authorizer, CallToAuthorize, Decided, OperationToAuthorize, Release, Verdict, Withdrawal,
    Withdrawn,
};
use crate::framing::{self, Inbound, LineReader, Pressure};
use crate::registry::{Phase, Sessions};
use crate::upstream::ServerDirectory;

/// How long any one awaited step may take (a Python server starting on a loaded machine).
const STEP: Duration = Duration::from_secs(20);

/// The server's label.
const LABEL: &str = "echo";

/// A minimal MCP server: `initialize` (answered after half a second when started with
/// `slow-init`), `tools/list` (one tool, `echo`; never answered when
/// started with `mute-list`, only the first time with `mute-relist`; one more page every time
/// with `endless-pages`), and `tools/call`
/// (answers with the call's arguments, or with a task when the call asks for one; says its
/// tools changed first when the arguments hold `"announce": true`, asks the agent for its
/// roots twice with one id first when they hold `"ask_twice": true`, never answers when they
/// hold `"mute": true`). Every line it reads is appended to the log file named by
/// its first argument.
const SERVER: &str = r#"
import json, sys
log = open(sys.argv[1], "a", buffering=1)
mute_list = sys.argv[2:] == ["mute-list"]
slow_init = sys.argv[2:] == ["slow-init"]
mute_relist = sys.argv[2:] == ["mute-relist"]
endless_pages = sys.argv[2:] == ["endless-pages"]
lists = 0
for line in sys.stdin:
    log.write(line)
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        if slow_init:
            import time
            time.sleep(0.5)
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "echo", "version": "1"}}
    elif method == "tools/list":
        lists += 1
        if mute_list or (mute_relist and lists > 1):
            continue
        if endless_pages:
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "tools": [{"name": "echo%d" % lists, "inputSchema": {"type": "object"}}],
                "nextCursor": str(lists)}}), flush=True)
            continue
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call" and "task" in msg["params"]:
        now = "2026-12-02T00:00:00Z"
        result = {"task": {"taskId": "task-" + str(msg["id"]), "status": "working",
                           "createdAt": now, "lastUpdatedAt": now, "ttl": 60000}}
    elif method == "tools/call" and msg["params"]["arguments"].get("mute"):
        continue
    elif method == "tools/call":
        if msg["params"]["arguments"].get("ask_twice"):
            for _ in range(2):
                print(json.dumps({"jsonrpc": "2.0", "id": "dup", "method": "roots/list"}), flush=True)
        if msg["params"]["arguments"].get("announce"):
            print(json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}), flush=True)
        result = {"content": [{"type": "text", "text": json.dumps(msg["params"]["arguments"])}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// The one server configuration the sessions under test launch.
struct Directory(ServerConfig);

impl ServerDirectory for Directory {
    fn lookup(&self, _label: &ServerLabel) -> Result<Option<ServerConfig>, String> {
        Ok(Some(self.0.clone()))
    }
}

/// A gate that decides nothing by itself: every call waits until the test gives its verdict.
/// Launches are told they hold the credentials in `released`.
#[derive(Default)]
struct HandGate {
    /// Calls waiting for a verdict, oldest first.
    waiting: Mutex<Vec<(CallToAuthorize, Decided)>>,
    /// Every call ever asked about.
    asked: Mutex<Vec<CallToAuthorize>>,
    /// Every withdrawal, with its reason.
    withdrawn: Mutex<Vec<(CallId, Withdrawn)>>,
    /// What every launch is told it holds.
    released: Vec<String>,
    /// Every request other than a tool call it was asked about.
    operations: Mutex<Vec<OperationToAuthorize>>,
    /// The refusal it answers them with; `None` allows them (observed).
    refuse_operations: Mutex<Option<Denial>>,
    /// A verdict it gives every call before `authorize` returns (a grant, a rule, a locked
    /// vault), instead of leaving the call waiting.
    at_once: Option<Verdict>,
}

impl HandGate {
    /// Waits until a call waits for a verdict, and takes it out of the gate's hands: the test
    /// now holds its `done`, as the engine does once it decided (a lock, an answer).
    async fn decided(&self) -> (CallToAuthorize, Decided) {
        take_first("a call to wait for the gate", &self.waiting).await
    }

    /// Waits until a call waits for a verdict, and leaves it waiting.
    async fn asked_about(&self) -> CallToAuthorize {
        within("a call to wait for the gate", async {
            loop {
                if let Some((call, _)) = lock(&self.waiting).first() {
                    return call.clone();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }
}

impl Authorizer for HandGate {
    fn authorize(&self, call: CallToAuthorize, done: Decided) {
        lock(&self.asked).push(call.clone());
        match &self.at_once {
            Some(verdict) => done(verdict.clone()),
            None => lock(&self.waiting).push((call, done)),
        }
    }

    fn authorize_operation(&self, operation: &OperationToAuthorize) -> Verdict {
        lock(&self.operations).push(operation.clone());
        match lock(&self.refuse_operations).clone() {
            Some(denial) => Verdict::Deny(denial),
            None => Verdict::Allow(Authority::Observed),
        }
    }

    fn withdraw(&self, _session: u64, call: CallId, why: Withdrawn) -> Withdrawal {
        lock(&self.withdrawn).push((call, why));
        let mut waiting = lock(&self.waiting);
        let before = waiting.len();
        waiting.retain(|(c, _)| c.request.call != call);
        if waiting.len() < before {
            Withdrawal::Withdrawn
        } else {
            Withdrawal::AlreadyDecided
        }
    }

    fn session_ended(&self, _session: u64, _agent: Option<&AgentIdentity>) {}

    fn release(&self, _: u64, _: Option<&AgentIdentity>, _: &ServerConfig, _: &Digest) -> Release {
        Release {
            released: self.released.clone(),
            ..Release::default()
        }
    }
}

/// The agent's end of one running session, and what the test needs to watch the rest.
struct Agent {
    to_session: DuplexStream,
    from_session: Inbound,
    gate: Arc<HandGate>,
    commands: broadcast::Sender<Command>,
    sessions: Sessions,
    /// Every line the server received.
    server_log: PathBuf,
    _shutdown: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Agent {
    /// Starts a session for a server that lists its catalog (or, with `mute_list`, never
    /// does), behind `gate`. Nothing is sent yet.
    fn connect(gate: HandGate, mute_list: bool) -> Agent {
        let mode = if mute_list { Some("mute-list") } else { None };
        Agent::start(gate, mode, &[])
    }

    /// [`Agent::connect`] to a server whose configuration passes the methods `pass`.
    fn connect_passing(gate: HandGate, mute_list: bool, pass: &[&str]) -> Agent {
        let mode = if mute_list { Some("mute-list") } else { None };
        Agent::start(gate, mode, pass)
    }

    /// A session for the server started with `mode` (`mute-list`, `mute-relist`), whose
    /// configuration passes the methods `pass`.
    fn start(gate: HandGate, mode: Option<&str>, pass: &[&str]) -> Agent {
        Agent::start_with(gate, mode, pass, Arc::new(NoAudit))
    }

    /// [`Agent::start`] with `audit` as the session's audit sink.
    fn start_with(
        gate: HandGate,
        mode: Option<&str>,
        pass: &[&str],
        audit: Arc<dyn AuditSink>,
    ) -> Agent {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("server.py");
        std::fs::write(&script, SERVER).expect("write the server");
        let server_log = dir.path().join("received.jsonl");
        let mut command = vec![
            "python3".to_owned(),
            script.display().to_string(),
            server_log.display().to_string(),
        ];
        if let Some(mode) = mode {
            command.push(mode.into());
        }
        let label: ServerLabel = LABEL.parse().expect("label");
        let mut config = ServerConfig::new(label.clone(), command, Some(dir.path().into()), vec![])
            .expect("config");
        config.pass_methods = pass.iter().map(|m| (*m).to_owned()).collect();
        let gate = Arc::new(gate);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let ctx = Context {
            directory: Arc::new(Directory(config)),
            sessions: Sessions::new(),
            cache: Arc::new(DigestCache::new()),
            commands: broadcast::channel(8).0,
            control: None,
            audit,
            authorizer: Arc::clone(&gate) as Arc<dyn Authorizer>,
            shutdown,
        };
        let (sessions, commands) = (ctx.sessions.clone(), ctx.commands.clone());
        let (to_session, agent_lines) = tokio::io::duplex(1 << 16);
        let (to_agent, from_session) = framing::outbound(Pressure::default());
        let side = super::AgentSide {
            from: LineReader::new(BufReader::new(agent_lines)),
            to: to_agent,
            shim: None,
        };
        tokio::spawn(run(ctx, 1, label, None, None, side));
        Agent {
            to_session,
            from_session,
            gate,
            commands,
            sessions,
            server_log,
            _shutdown: shutdown_tx,
            _dir: dir,
        }
    }

    /// [`Agent::connect`] to a server that lists its catalog, the handshake, and a
    /// `tools/list` once the catalog is in.
    async fn ready(gate: HandGate) -> Agent {
        Agent::ready_with(gate, Arc::new(NoAudit)).await
    }

    /// [`Agent::ready`] with `audit` as the session's audit sink.
    async fn ready_with(gate: HandGate, audit: Arc<dyn AuditSink>) -> Agent {
        let mut agent = Agent::start_with(gate, None, &[], audit);
        agent.handshake().await;
        let listed = agent.request(json!("list"), "tools/list", json!({})).await;
        assert_eq!(listed["result"]["tools"][0]["name"], "echo", "{listed}");
        agent
    }

    /// `initialize` as id 0, its answer, then `notifications/initialized`.
    async fn handshake(&mut self) {
        self.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "session-test", "version": "1"}}}))
            .await;
        let init = self.next().await;
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Writes one message as a line.
    async fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string()).await;
    }

    /// Writes `line` and a newline, as it is.
    async fn send_raw(&mut self, line: &str) {
        self.to_session
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to the session");
    }

    /// Sends a request and returns the next message with an id the session writes (its
    /// answer, in these tests: nothing else is outstanding when they use it); notifications
    /// on the way are skipped.
    async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = self.next().await;
            if line.get("id").is_some() {
                return line;
            }
        }
    }

    /// Sends `tools/call echo` as `id` without waiting for an answer.
    async fn start_call(&mut self, id: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": "hi"}}}))
            .await;
    }

    /// The next line the session writes to the agent.
    async fn next(&mut self) -> Value {
        let line = within("a line from the session", self.from_session.recv())
            .await
            .expect("the session is running");
        self.from_session.done(&line);
        serde_json::from_slice(&line).expect("the session writes JSON")
    }

    /// `postern server restart` for the session's server: a new process, a new epoch.
    fn restart(&self) {
        self.commands
            .send(Command::Restart(LABEL.parse().expect("label")))
            .expect("the session listens");
    }

    /// Waits until the session's server is in `phase`.
    async fn wait_phase(&self, phase: Phase) {
        within("the server's state", async {
            while self.sessions.snapshot().first().map(|s| s.phase) != Some(phase) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }

    /// The methods of the requests the server received, in order.
    fn server_received(&self) -> Vec<String> {
        self.server_messages()
            .iter()
            .filter(|msg| msg.get("id").is_some())
            .filter_map(|msg| msg["method"].as_str().map(str::to_owned))
            .collect()
    }

    /// Every message the server read, as its own line reader split them (Python's, which
    /// splits on `\r` too), in order; a line that is not JSON as a JSON string.
    fn server_messages(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.server_log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap_or_else(|_| json!(line)))
            .collect()
    }
}

/// `fut`'s output, or a panic naming `what` after [`STEP`].
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("waited {STEP:?} for {what}"))
}

/// Waits until `queue` holds something (`what`), and takes the oldest.
async fn take_first<T>(what: &str, queue: &Mutex<Vec<T>>) -> T {
    within(what, async {
        loop {
            let first = {
                let mut queue = lock(queue);
                (!queue.is_empty()).then(|| queue.remove(0))
            };
            if let Some(first) = first {
                return first;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A JSON-RPC error's code and message.
fn rpc_error(answer: &Value) -> (i64, String) {
    let error = &answer["error"];
    assert!(error.is_object(), "expected a JSON-RPC error, got {answer}");
    (
        error["code"].as_i64().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A tool error's structured content.
fn tool_error(answer: &Value) -> &Value {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    &answer["result"]["structuredContent"]
}

mod fidelity;

/// A sink that loses what it is to make durable, untold (as a writer that panicked with it).
struct LosingAudit;

impl AuditSink for LosingAudit {
    fn record(&self, _event: AuditEvent) {}

    fn record_durable(&self, _event: AuditEvent, done: Durable) {
        drop(done);
    }
}

#[tokio::test]
async fn a_call_whose_intent_the_log_loses_is_refused_and_never_forwarded() {
    let mut agent = Agent::ready_with(HandGate::default(), Arc::new(LosingAudit)).await;
    agent.start_call(json!(7)).await;
    let (_, done) = agent.gate.decided().await;
    done(Verdict::Allow(Authority::Observed));
    let answer = agent.next().await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(
        tool_error(&answer)["error"],
        "audit_unavailable",
        "{answer}"
    );
    assert!(
        !agent.server_received().iter().any(|m| m == "tools/call"),
        "the server got the call: {:?}",
        agent.server_received()
    );
}

/// A sink that holds what it is to make durable until the test says how it went.
#[derive(Default)]
struct HeldAudit {
    held: Mutex<Vec<Durable>>,
}

impl AuditSink for HeldAudit {
    fn record(&self, _event: AuditEvent) {}

    fn record_durable(&self, _event: AuditEvent, done: Durable) {
        lock(&self.held).push(done);
    }
}

impl HeldAudit {
    /// Waits for the next intent handed to the log, and takes its `done`.
    async fn next(&self) -> Durable {
        take_first("an intent for the log", &self.held).await
    }
}

/// Review 11, F2 and F3: a call its agent cancels while its intent is still being written is
/// never sent, nor is its cancellation; its id is free again at once, and when the agent uses
/// it for its next call, the first intent failing afterwards refuses nothing of that call,
/// which goes once its own intent is durable.
#[tokio::test]
async fn a_call_cancelled_before_its_intent_is_durable_is_never_sent() {
    let audit = Arc::new(HeldAudit::default());
    let gate = HandGate {
        at_once: Some(Verdict::Allow(Authority::Observed)),
        ..HandGate::default()
    };
    let mut agent = Agent::ready_with(gate, Arc::clone(&audit) as Arc<dyn AuditSink>).await;
    agent.start_call(json!(7)).await;
    let first = audit.next().await;
    agent
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 7}}),
        )
        .await;
    agent.start_call(json!(7)).await;
    let second = audit.next().await;
    first(Err("the disk is full".into()));
    second(Ok(()));
    let answer = agent.next().await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
    let received = agent.server_messages();
    let methods: Vec<&str> = received
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        methods.iter().filter(|m| **m == "tools/call").count(),
        1,
        "{received:?}"
    );
    assert!(
        !methods.contains(&"notifications/cancelled"),
        "{received:?}"
    );
}

/// The gate allows the call inside `authorize`, and the log makes its intent durable inside the
/// append (`NoAudit`): the session goes on with it there (`session/inline.rs`), and the call
/// reaches the server and its answer the agent.
#[tokio::test]
async fn a_call_the_gate_allows_before_authorize_returns_reaches_the_server() {
    let gate = HandGate {
        at_once: Some(Verdict::Allow(Authority::Observed)),
        ..HandGate::default()
    };
    let mut agent = Agent::ready(gate).await;
    for id in [7, 8] {
        agent.start_call(json!(id)).await;
        let answer = agent.next().await;
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
        let text = answer["result"]["content"][0]["text"].as_str();
        assert!(text.is_some_and(|t| t.contains("hi")), "{answer}");
    }
    let forwarded = agent.server_received();
    assert_eq!(
        forwarded.iter().filter(|m| *m == "tools/call").count(),
        2,
        "{forwarded:?}"
    );
}

/// The gate refuses the call inside `authorize`: it is answered once, with the refusal, and
/// never forwarded.
#[tokio::test]
async fn a_call_the_gate_refuses_before_authorize_returns_is_answered_once_and_never_forwarded() {
    let gate = HandGate {
        at_once: Some(Verdict::Deny(Denial::vault_locked())),
        ..HandGate::default()
    };
    let mut agent = Agent::ready(gate).await;
    agent.start_call(json!(9)).await;
    let answer = agent.next().await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(tool_error(&answer)["error"], "vault_locked", "{answer}");
    // The next answer is the ping's: the call got no second one.
    let pong = agent.request(json!("ping"), "ping", json!({})).await;
    assert_eq!(pong["id"], "ping", "{pong}");
    assert!(!agent.server_received().contains(&"tools/call".to_owned()));
}

#[tokio::test]
async fn a_request_reusing_the_id_of_a_call_waiting_for_the_gate_is_refused_whatever_its_method() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent.start_call(json!(20)).await;
    agent.gate.asked_about().await;

    for method in ["ping", "server/discover", "initialize", "tools/list"] {
        let answer = agent.request(json!(20), method, json!({})).await;
        assert_eq!(answer["id"], 20, "{answer}");
        assert_eq!(
            rpc_error(&answer),
            (
                -32600,
                "request id 20 is already in use by a request in flight".to_owned()
            ),
            "{method}: {answer}"
        );
    }

    // The call itself still gets its one answer, once the gate allows it.
    let (_, done) = agent.gate.decided().await;
    done(Verdict::Allow(Authority::Observed));
    let answer = agent.next().await;
    assert_eq!(answer["id"], 20, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], r#"{"text": "hi"}"#);
    assert_eq!(
        agent.server_received().last().map(String::as_str),
        Some("tools/call")
    );
}

/// A server's request to the agent that reuses the id of one still open is refused to the
/// server, never passed on: the agent sees each id once, and the answer it gives goes to the
/// one request that asked.
#[tokio::test]
async fn a_server_request_reusing_the_id_of_an_open_one_is_refused_to_the_server() {
    let gate = HandGate {
        at_once: Some(Verdict::Allow(Authority::Observed)),
        ..HandGate::default()
    };
    let mut agent = Agent::ready(gate).await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"ask_twice": true}}}))
        .await;
    let mut asked = Vec::new();
    loop {
        let line = agent.next().await;
        if line["id"] == 30 {
            break;
        }
        asked.push(line);
    }
    assert_eq!(
        asked.iter().filter(|m| m["method"] == "roots/list").count(),
        1,
        "{asked:?}"
    );
    let refused = within("the refusal at the server", async {
        loop {
            let found = agent
                .server_messages()
                .into_iter()
                .find(|m| m["id"] == "dup" && m.get("error").is_some());
            if let Some(found) = found {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        rpc_error(&refused),
        (
            -32600,
            "request id \"dup\" is already in use by an open request of this server".to_owned()
        )
    );
}

#[tokio::test]
async fn a_second_initialize_with_the_same_id_is_answered_after_the_first() {
    let mut agent = Agent::connect(HandGate::default(), false);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "session-test", "version": "1"}}});
    agent.send(init.clone()).await;
    agent.send(init).await;

    let first = agent.next().await;
    assert_eq!(first["id"], 0, "{first}");
    assert!(
        first["result"]["serverInfo"].is_object(),
        "the first answer for id 0 is the first initialize's: {first}"
    );
    let second = agent.next().await;
    assert_eq!(second["id"], 0, "{second}");
    assert_eq!(
        rpc_error(&second),
        (-32600, "already initialized".to_owned())
    );
    // The session goes on as initialized once.
    agent
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let listed = agent.request(json!(1), "tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "echo", "{listed}");
    let inits = agent
        .server_received()
        .iter()
        .filter(|m| *m == "initialize")
        .count();
    assert_eq!(inits, 1, "{:?}", agent.server_received());
}

#[tokio::test]
async fn a_tools_call_with_malformed_params_is_invalid_params_and_never_reaches_the_gate() {
    let mut agent = Agent::ready(HandGate::default()).await;
    for (params, says) in [
        (json!("notanobject"), "must be an object"),
        (json!({"name": 42}), "\"name\" must be a string"),
        (json!({"arguments": {}}), "need a \"name\""),
        (json!(null), "must be an object"),
        (
            json!({"name": "echo", "arguments": ["hi"]}),
            "\"arguments\" must be an object",
        ),
    ] {
        let answer = agent.request(json!(7), "tools/call", params.clone()).await;
        assert_eq!(answer["id"], 7, "{answer}");
        let (code, message) = rpc_error(&answer);
        assert_eq!(code, -32602, "{params}: {answer}");
        assert!(message.contains(says), "{params}: {message}");
    }
    agent
        .send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call"}))
        .await;
    let answer = agent.next().await;
    assert_eq!(rpc_error(&answer).0, -32602, "{answer}");

    assert!(lock(&agent.gate.asked).is_empty(), "the gate was asked");
    assert!(
        !agent.server_received().contains(&"tools/call".to_owned()),
        "{:?}",
        agent.server_received()
    );
}

/// The vault locks while a call waits for a human on a server holding a credential: the lock
/// answers the call (`vault_locked`) and stops the server. However the two reach the session,
/// the call gets the gate's verdict, never the "may have taken effect" `epoch_transition`.
#[tokio::test]
async fn a_call_waiting_for_the_gate_when_the_vault_locks_gets_vault_locked() {
    let gate = HandGate {
        released: vec!["token".into()],
        ..HandGate::default()
    };
    let mut agent = Agent::ready(gate).await;
    agent.start_call(json!(20)).await;
    // The lock takes the call's request and answers it; the session sees the servers
    // holding credentials stop first.
    let (_, done) = agent.gate.decided().await;
    agent
        .commands
        .send(Command::DropCredentials)
        .expect("the session listens");
    agent.wait_phase(Phase::Stopped).await;
    done(Verdict::Deny(Denial::vault_locked()));

    let answer = agent.next().await;
    assert_eq!(answer["id"], 20, "{answer}");
    assert_eq!(tool_error(&answer)["error"], "vault_locked", "{answer}");
    assert!(!agent.server_received().contains(&"tools/call".to_owned()));
}

/// Commands flood in while the session's loop is busy (here: before it runs at all), more
/// than the channel holds, and the lock among them is lost to it: not knowing which ones it
/// missed, the session stops its server holding credentials as at a lock. (It used to skip the
/// loss, and the server kept its credentials after the vault locked.)
#[tokio::test]
async fn a_session_that_misses_commands_stops_its_server_holding_credentials() {
    let gate = HandGate {
        released: vec!["token".into()],
        ..HandGate::default()
    };
    let agent = Agent::ready(gate).await;
    agent
        .commands
        .send(Command::DropCredentials)
        .expect("the session listens");
    let other: ServerLabel = "other".parse().expect("label");
    for _ in 0..32 {
        agent
            .commands
            .send(Command::Restart(other.clone()))
            .expect("the session listens");
    }
    agent.wait_phase(Phase::Stopped).await;
}

/// The vault locks while the server is being launched, with credentials the launch was given
/// before the lock: once the server runs it is stopped, as at a lock (it used to keep them:
/// the lock's command found nothing running yet, and was dropped).
#[tokio::test]
async fn a_lock_during_a_launch_stops_the_server_once_it_runs() {
    let gate = HandGate {
        released: vec!["token".into()],
        ..HandGate::default()
    };
    let mut agent = Agent::start(gate, Some("slow-init"), &[]);
    agent
        .send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "session-test", "version": "1"}}}))
        .await;
    agent.wait_phase(Phase::Starting).await;
    agent
        .commands
        .send(Command::DropCredentials)
        .expect("the session listens");
    let init = agent.next().await;
    assert_eq!(init["id"], 0, "{init}");
    agent.wait_phase(Phase::Stopped).await;
}

/// The epoch ends while a call waits for a human: the request is withdrawn, and the call is
/// told it was not forwarded (not "check whether the call took effect").
#[tokio::test]
async fn a_call_whose_approval_is_withdrawn_by_the_epochs_end_is_told_it_was_not_forwarded() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent.start_call(json!(20)).await;
    let asked = agent.gate.asked_about().await;
    agent.restart();

    let answer = agent.next().await;
    assert_eq!(answer["id"], 20, "{answer}");
    let detail = tool_error(&answer);
    assert_eq!(detail["error"], "epoch_ended_before_forwarding", "{answer}");
    assert_eq!(detail["server"], LABEL);
    assert_eq!(detail["reason"], "restart requested");
    assert_eq!(
        detail["retry"],
        "not forwarded: refresh tools/list, call again"
    );
    assert_eq!(
        *lock(&agent.gate.withdrawn),
        [(asked.request.call, Withdrawn::EpochEnded)]
    );
    assert!(!agent.server_received().contains(&"tools/call".to_owned()));
}

/// Requests held while the epoch's catalog is fetched were never forwarded either.
#[tokio::test]
async fn requests_held_when_the_epoch_ends_are_told_they_were_not_forwarded() {
    let mut agent = Agent::connect(HandGate::default(), true);
    agent.handshake().await;
    agent.wait_phase(Phase::IdentityPending).await;
    agent.start_call(json!("call")).await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}))
        .await;
    // Answered at once, after the two before it were held.
    let pong = agent.request(json!("ping"), "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    agent.restart();

    let call = agent.next().await;
    assert_eq!(call["id"], "call", "{call}");
    assert_eq!(
        tool_error(&call)["error"],
        "epoch_ended_before_forwarding",
        "{call}"
    );
    let list = agent.next().await;
    assert_eq!(list["id"], "list", "{list}");
    let (code, _) = rpc_error(&list);
    assert_eq!(code, -32603);
    assert_eq!(
        list["error"]["data"]["error"],
        "epoch_ended_before_forwarding"
    );
    let methods = agent.server_received();
    assert!(!methods.contains(&"tools/call".to_owned()), "{methods:?}");
}
