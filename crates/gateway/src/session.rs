//! One agent session: an agent connection (through its shim) and the server process
//! it owns. Everything the session does happens in one loop over one event queue, so
//! the order of messages is the order they arrived, and nothing in the loop waits on
//! a peer: a slow call never holds up a `ping` or another call.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use postern_domain::ServerLabel;
use postern_supervisor::{ExitReport, ProcessHandle};
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;
use tokio::sync::{mpsc, watch};

use crate::framing::{Line, LineReader, MAX_FRAME};
use crate::handshake::{client_name, initialize_result};
use crate::message::{self, Id, Kind, Message, code, sniff_id};
use crate::registry::{Phase, SessionInfo, Sessions};
use crate::upstream::{self, ServerDirectory, Started};

/// Everything a session needs from its surroundings.
#[derive(Clone)]
pub(crate) struct Context {
    pub directory: Arc<dyn ServerDirectory>,
    pub sessions: Sessions,
    pub shutdown: watch::Receiver<bool>,
}

/// Runs a session until the agent disconnects or the engine shuts down, then stops
/// its server.
pub(crate) async fn run<R>(
    ctx: Context,
    id: u64,
    label: ServerLabel,
    resume: Option<Value>,
    from_agent: LineReader<R>,
    to_agent: mpsc::UnboundedSender<Bytes>,
) where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    let (events, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(read_agent(from_agent, events.clone()));
    let mut shutdown = ctx.shutdown.clone();
    let mut session = Session {
        info: SessionInfo {
            id,
            server: label,
            client: resume.as_ref().and_then(client_name),
            connected_at_ms: now_ms(),
            phase: Phase::Stopped,
        },
        agent_initialized: resume.is_some(),
        client_init: resume,
        ctx,
        to_agent,
        events,
        pending_init: None,
        upstream: Upstream::Down,
        generation: 0,
        in_flight: HashMap::new(),
        server_requests: HashSet::new(),
    };
    session.publish();
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(Event::AgentClosed) | None => break,
                Some(event) => session.on_event(event),
            },
            _ = shutdown.changed() => break,
        }
    }
    session.close().await;
}

struct Session {
    ctx: Context,
    info: SessionInfo,
    to_agent: mpsc::UnboundedSender<Bytes>,
    events: mpsc::UnboundedSender<Event>,
    /// The agent's `initialize` params, once it sent them (or the shim resumed).
    client_init: Option<Value>,
    /// Whether the agent sent `notifications/initialized`.
    agent_initialized: bool,
    /// The agent's `initialize` request, answered once the server is up.
    pending_init: Option<Id>,
    upstream: Upstream,
    /// Bumped at every launch; events from older launches are ignored.
    generation: u64,
    /// Agent requests sent to the current server and not yet answered.
    in_flight: HashMap<Id, String>,
    /// Server-to-agent requests the agent has not answered yet.
    server_requests: HashSet<Id>,
}

enum Upstream {
    Down,
    Starting { queue: Vec<Message> },
    Running(Running),
}

struct Running {
    stdin: mpsc::UnboundedSender<Bytes>,
    handle: ProcessHandle,
    stdout_closed: bool,
    exit: Option<ExitReport>,
}

enum Event {
    Agent(Line),
    AgentClosed,
    Started { generation: u64, outcome: Result<Box<Started>, String> },
    Server { generation: u64, line: Line },
    ServerStdoutClosed { generation: u64 },
    ServerExited { generation: u64, report: ExitReport },
}

impl Session {
    fn on_event(&mut self, event: Event) {
        match event {
            Event::Agent(line) => self.on_agent_line(line),
            Event::AgentClosed => {}
            Event::Started { generation, outcome } if generation == self.generation => self.on_started(outcome),
            Event::Server { generation, line } if generation == self.generation => self.on_server_line(line),
            Event::ServerStdoutClosed { generation } if generation == self.generation => {
                if let Upstream::Running(running) = &mut self.upstream {
                    running.stdout_closed = true;
                    // A server that closes stdout has ended its side of the session.
                    running.handle.stop();
                }
                self.finish_if_gone();
            }
            Event::ServerExited { generation, report } if generation == self.generation => {
                if let Upstream::Running(running) = &mut self.upstream {
                    running.exit = Some(report);
                }
                self.finish_if_gone();
            }
            Event::Started { .. } | Event::Server { .. } | Event::ServerStdoutClosed { .. } | Event::ServerExited { .. } => {}
        }
    }

    // ---- from the agent ----

    fn on_agent_line(&mut self, line: Line) {
        let raw = match line {
            Line::Frame(raw) => raw,
            Line::Oversize { len, prefix } => {
                let id = sniff_id(&prefix);
                tracing::warn!(session = self.info.id, len, "agent message over the size cap; refused");
                let reason = format!("message of {len}+ bytes exceeds Postern's {} MiB limit", MAX_FRAME >> 20);
                self.reply(message::error(id.as_ref(), code::INVALID_REQUEST, &reason, None));
                return;
            }
        };
        let msg = match Message::parse(raw) {
            Ok(msg) => msg,
            Err(rejected) => {
                tracing::warn!(session = self.info.id, reason = %rejected.reason, "malformed agent message; refused");
                self.reply(message::error(rejected.id.as_ref(), rejected.code, &rejected.reason, None));
                return;
            }
        };
        match msg.kind.clone() {
            Kind::Request { id, method } => self.on_agent_request(msg, id, &method),
            Kind::Notification { method } => self.on_agent_notification(msg, &method),
            Kind::Response { id } => {
                if self.server_requests.remove(&id) {
                    self.send_upstream(msg.raw);
                } else {
                    tracing::warn!(session = self.info.id, %id, "agent answered a request nobody sent; dropped");
                }
            }
        }
    }

    fn on_agent_request(&mut self, msg: Message, id: Id, method: &str) {
        match method {
            "ping" => self.reply(message::result(&id, json!({}))),
            "server/discover" => self.reply(message::error(
                Some(&id),
                code::METHOD_NOT_FOUND,
                "server/discover is not supported yet: use initialize (protocol 2025-11-25)",
                None,
            )),
            "initialize" if self.client_init.is_some() => {
                self.reply(message::error(Some(&id), code::INVALID_REQUEST, "already initialized", None));
            }
            "initialize" => {
                let params = msg.params().cloned().unwrap_or_else(|| json!({}));
                self.info.client = client_name(&params);
                self.client_init = Some(params);
                self.pending_init = Some(id);
                self.start_upstream();
            }
            _ if self.client_init.is_none() => self.reply(message::error(
                Some(&id),
                code::INVALID_REQUEST,
                "send initialize before other requests",
                None,
            )),
            _ if self.in_flight.contains_key(&id) || self.queued(&id) => self.reply(message::error(
                Some(&id),
                code::INVALID_REQUEST,
                &format!("request id {id} is already in use by a request in flight"),
                None,
            )),
            _ => self.to_server(msg),
        }
    }

    fn on_agent_notification(&mut self, msg: Message, method: &str) {
        match method {
            "notifications/initialized" => {
                self.agent_initialized = true;
                self.to_server(msg);
            }
            "notifications/cancelled" => {
                // Once cancelled, a late answer is dropped and an exit owes no error.
                if let Some(id) = msg.params().and_then(|p| p.get("requestId")).and_then(Id::from_value) {
                    self.in_flight.remove(&id);
                }
                self.to_server(msg);
            }
            _ => self.to_server(msg),
        }
    }

    /// Sends an agent message to the server, starting the server when needed.
    fn to_server(&mut self, msg: Message) {
        match &mut self.upstream {
            Upstream::Running(_) => self.forward(msg),
            Upstream::Starting { queue } => queue.push(msg),
            Upstream::Down if matches!(msg.kind, Kind::Request { .. }) => {
                self.start_upstream();
                if let Upstream::Starting { queue } = &mut self.upstream {
                    queue.push(msg);
                }
            }
            Upstream::Down => {
                tracing::debug!(session = self.info.id, kind = ?msg.kind, "notification while the server is down; dropped");
            }
        }
    }

    fn forward(&mut self, msg: Message) {
        if let Kind::Request { id, method } = msg.kind {
            self.in_flight.insert(id, method);
        }
        self.send_upstream(msg.raw);
    }

    fn queued(&self, id: &Id) -> bool {
        matches!(&self.upstream, Upstream::Starting { queue }
            if queue.iter().any(|m| matches!(&m.kind, Kind::Request { id: q, .. } if q == id)))
    }

    // ---- the server's life ----

    fn start_upstream(&mut self) {
        self.generation += 1;
        let generation = self.generation;
        self.upstream = Upstream::Starting { queue: Vec::new() };
        self.info.phase = Phase::Starting;
        self.publish();
        let directory = Arc::clone(&self.ctx.directory);
        let label = self.info.server.clone();
        let params = self.client_init.clone().unwrap_or_else(|| json!({}));
        let events = self.events.clone();
        tokio::spawn(async move {
            let outcome = upstream::start(&*directory, &label, &params).await.map(Box::new);
            let _ = events.send(Event::Started { generation, outcome });
        });
    }

    fn on_started(&mut self, outcome: Result<Box<Started>, String>) {
        let queue = match std::mem::replace(&mut self.upstream, Upstream::Down) {
            Upstream::Starting { queue } => queue,
            _ => Vec::new(),
        };
        let started = match outcome {
            Ok(started) => *started,
            Err(reason) => {
                tracing::warn!(session = self.info.id, server = %self.info.server, "{reason}");
                self.info.phase = Phase::Stopped;
                self.publish();
                self.answer_init(None);
                for msg in queue {
                    if let Kind::Request { id, .. } = &msg.kind {
                        let data = json!({"error": "server_unavailable", "server": self.info.server.as_str()});
                        self.reply(message::error(Some(id), code::INTERNAL_ERROR, &reason, Some(data)));
                    }
                }
                return;
            }
        };
        let Started { stdin, stdout, handle, init } = started;
        let generation = self.generation;
        let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
        tokio::spawn(upstream::pump_stdin(stdin, stdin_rx));
        tokio::spawn(read_server(stdout, generation, self.events.clone()));
        let waiter = handle.waiter();
        let events = self.events.clone();
        tokio::spawn(async move {
            let report = waiter.wait().await;
            let _ = events.send(Event::ServerExited { generation, report });
        });
        self.info.phase = Phase::Running { pid: handle.pid() };
        self.publish();
        self.upstream = Upstream::Running(Running { stdin: stdin_tx, handle, stdout_closed: false, exit: None });
        self.answer_init(Some(&init));
        // A restarted server never saw the agent's `initialized`: send it on its behalf.
        let agent_said_initialized = queue.iter().any(|m| matches!(&m.kind, Kind::Notification { method } if method == "notifications/initialized"));
        if self.agent_initialized && !agent_said_initialized {
            self.send_upstream(message::notification("notifications/initialized", None));
        }
        for msg in queue {
            self.forward(msg);
        }
    }

    fn answer_init(&mut self, upstream: Option<&serde_json::Map<String, Value>>) {
        if let Some(id) = self.pending_init.take() {
            let params = self.client_init.clone().unwrap_or_else(|| json!({}));
            self.reply(message::result(&id, initialize_result(self.info.server.as_str(), &params, upstream)));
        }
    }

    /// Ends the running server's life once both its stdout has closed (every line it
    /// wrote has been routed) and its process has exited.
    fn finish_if_gone(&mut self) {
        let report = match &self.upstream {
            Upstream::Running(Running { stdout_closed: true, exit: Some(report), .. }) => *report,
            _ => return,
        };
        self.upstream = Upstream::Down;
        self.server_requests.clear();
        self.info.phase = Phase::Stopped;
        self.publish();
        let label = self.info.server.clone();
        tracing::warn!(session = self.info.id, server = %label, %report, unanswered = self.in_flight.len(), "server exited");
        let reason = format!(
            "server '{label}' exited ({report}) before answering; Postern starts it again on the next request"
        );
        for (id, method) in std::mem::take(&mut self.in_flight) {
            let data = json!({"error": "server_exited", "server": label.as_str(), "exit": report.to_string(), "method": method});
            self.reply(message::error(Some(&id), code::INTERNAL_ERROR, &reason, Some(data)));
        }
    }

    // ---- from the server ----

    fn on_server_line(&mut self, line: Line) {
        let raw = match line {
            Line::Frame(raw) => raw,
            Line::Oversize { len, prefix } => {
                tracing::warn!(session = self.info.id, len, "server message over the size cap; dropped");
                if let Some(id) = sniff_id(&prefix).filter(|id| self.in_flight.contains_key(id)) {
                    self.in_flight.remove(&id);
                    let reason = format!("the server's answer of {len}+ bytes exceeds Postern's {} MiB limit", MAX_FRAME >> 20);
                    self.reply(message::error(Some(&id), code::INTERNAL_ERROR, &reason, None));
                }
                return;
            }
        };
        let msg = match Message::parse(raw) {
            Ok(msg) => msg,
            Err(rejected) => {
                tracing::warn!(session = self.info.id, reason = %rejected.reason, "server wrote a line that is not JSON-RPC; dropped");
                return;
            }
        };
        match &msg.kind {
            Kind::Response { id } => {
                if self.in_flight.remove(id).is_some() {
                    self.reply(msg.raw);
                } else {
                    tracing::warn!(session = self.info.id, %id, "server answered a request nobody sent; dropped");
                }
            }
            Kind::Request { id, .. } => {
                self.server_requests.insert(id.clone());
                self.reply(msg.raw);
            }
            Kind::Notification { .. } => self.reply(msg.raw),
        }
    }

    // ---- plumbing ----

    fn reply(&self, line: Bytes) {
        let _ = self.to_agent.send(line);
    }

    fn send_upstream(&self, line: Bytes) {
        if let Upstream::Running(running) = &self.upstream {
            let _ = running.stdin.send(line);
        }
    }

    fn publish(&self) {
        self.ctx.sessions.upsert(self.info.clone());
    }

    async fn close(self) {
        self.ctx.sessions.remove(self.info.id);
        if let Upstream::Running(Running { stdin, mut handle, .. }) = self.upstream {
            // Closing stdin is the polite stop (MCP stdio shutdown); signals follow.
            drop(stdin);
            let exited = handle.waiter();
            if tokio::time::timeout(std::time::Duration::from_millis(500), exited.wait()).await.is_err() {
                handle.stop();
                handle.exited().await;
            }
        }
        tracing::info!(session = self.info.id, server = %self.info.server, "session ended");
    }
}

async fn read_agent<R: AsyncBufRead + Unpin>(mut reader: LineReader<R>, events: mpsc::UnboundedSender<Event>) {
    while let Ok(Some(line)) = reader.next().await {
        if events.send(Event::Agent(line)).is_err() {
            return;
        }
    }
    let _ = events.send(Event::AgentClosed);
}

async fn read_server<R: AsyncBufRead + Unpin>(
    mut reader: LineReader<R>,
    generation: u64,
    events: mpsc::UnboundedSender<Event>,
) {
    while let Ok(Some(line)) = reader.next().await {
        if events.send(Event::Server { generation, line }).is_err() {
            return;
        }
    }
    let _ = events.send(Event::ServerStdoutClosed { generation });
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
