//! One agent session: an agent connection (through its shim) and the server process
//! it owns. Everything the session does happens in one loop over one event queue, so
//! the order of messages is the order they arrived, and nothing in the loop waits on
//! a peer: a slow call never holds up a `ping` or another call.
//!
//! The server side (launches, epochs, the catalog, tool calls) lives in
//! `session/server.rs` and its submodules and follows docs/refresh-contract.md; this
//! file is the agent side.

mod inline;
mod requests;
mod server;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use postern_domain::{AgentIdentity, AuditEvent, CallOutcome, ServerLabel};
use postern_supervisor::{DigestCache, ExitReport, LiveProcess};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, BufReader};
use tokio::sync::{broadcast, mpsc, watch};

use crate::framing::{Line, LineReader, Outbound, Pressure, READ_AHEAD, read_lines_until};
use crate::handshake::client_name;
use crate::hello::HandoffNote;
use crate::message::{self, Id, Kind, Message, Rejected, code};
use crate::method;
use crate::registry::{Phase, SessionInfo, Sessions};
use crate::upstream::{ServerDirectory, StartError, Started};

use requests::Requests;
use server::Upstream;

/// How many requests one agent session may have open at once (in flight, held, or with the
/// gate): more are refused (`too_many_requests`), so an agent that pipelines without end
/// cannot grow the engine's memory.
pub(crate) const MAX_OPEN_REQUESTS: usize = 1024;

/// A command for every session of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Restart the server's running processes (`postern server restart <label>`).
    Restart(ServerLabel),
    /// Stop every server process holding a credential (the vault locked).
    DropCredentials,
    /// Restart every server process holding this credential (it was rotated or removed).
    RestartHolding(String),
}

/// Everything a session needs from its surroundings.
#[derive(Clone)]
pub(crate) struct Context {
    pub directory: Arc<dyn ServerDirectory>,
    pub sessions: Sessions,
    pub cache: Arc<DigestCache>,
    pub commands: broadcast::Sender<Command>,
    pub control: Option<Arc<dyn crate::control::ControlHandler>>,
    pub audit: Arc<dyn crate::audit::AuditSink>,
    pub authorizer: Arc<dyn crate::authorize::Authorizer>,
    pub shutdown: watch::Receiver<bool>,
}

/// The shim of a session whose stdio the engine serves itself (`crate::handoff`).
pub(crate) struct ShimLink {
    /// Lines to the shim ([`HandoffNote`]s).
    pub notes: Outbound,
    /// Fires when the shim's socket closes: the agent killed it, and the session is over.
    pub gone: tokio::sync::oneshot::Receiver<()>,
    /// Where the shim reads the requests owed if the engine is killed (an older shim sends
    /// none).
    #[cfg(target_os = "linux")]
    pub ledger: Option<crate::ledger::Ledger>,
}

/// Resolves when the shim is gone; never without one.
async fn gone(shim: &mut Option<tokio::sync::oneshot::Receiver<()>>) {
    match shim {
        Some(gone) => {
            let _ = gone.await;
        }
        None => std::future::pending().await,
    }
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The agent closed its stdin (or its shim's connection).
    AgentClosed,
    /// The shim that handed over the agent's stdio went away.
    ShimGone,
    /// The engine is stopping.
    Shutdown,
}

/// The agent's side of a session.
pub(crate) struct AgentSide<X> {
    /// The agent's lines: from its shim's connection, or from its own stdin.
    pub from: LineReader<BufReader<X>>,
    /// The queue of lines to the agent.
    pub to: Outbound,
    /// The shim, when it handed the agent's stdio to the engine.
    pub shim: Option<ShimLink>,
}

/// Runs a session until the agent disconnects or the engine shuts down, then stops
/// its server.
pub(crate) async fn run<X>(
    ctx: Context,
    id: u64,
    label: ServerLabel,
    resume: Option<Value>,
    agent: Option<(AgentIdentity, LiveProcess)>,
    side: AgentSide<X>,
) where
    X: AsyncRead + Unpin + Send + 'static,
{
    let AgentSide {
        from: from_agent,
        to: to_agent,
        shim,
    } = side;
    let (events, mut rx) = mpsc::unbounded_channel();
    // Lines from the agent and from the server come through bounded queues whose readers wait
    // while the queues they feed are congested: a peer that writes without end, or one that
    // stops reading, fills its own pipe and slows only itself.
    let (agent_tx, mut agent_rx) = mpsc::channel(READ_AHEAD);
    let (server_lines, mut server_rx) = mpsc::channel(READ_AHEAD);
    let upstream_pressure = Pressure::default();
    let (stop_reading, stop) = tokio::sync::oneshot::channel::<()>();
    let mut reading = tokio::spawn(read_lines_until(
        from_agent,
        agent_tx,
        vec![to_agent.pressure().clone(), upstream_pressure.clone()],
        async {
            let _ = stop.await;
        },
    ));
    let mut shutdown = ctx.shutdown.clone();
    let mut commands = ctx.commands.subscribe();
    let (agent, agent_process) = agent.unzip();
    #[cfg(target_os = "linux")]
    let (shim, requests) = match shim {
        Some(ShimLink {
            notes,
            gone,
            ledger,
        }) => (Some((notes, gone)), Requests::with_ledger(ledger)),
        None => (None, Requests::default()),
    };
    #[cfg(not(target_os = "linux"))]
    let (shim, requests) = (shim.map(|s| (s.notes, s.gone)), Requests::default());
    let (notes, mut shim_gone) = shim.unzip();
    let mut session = Session {
        info: SessionInfo {
            id,
            server: label,
            client: resume.as_ref().and_then(client_name),
            agent,
            connected_at_ms: now_ms(),
            phase: Phase::Stopped,
            record: None,
            catalog: None,
            previous_catalog: None,
            presented: None,
            presented_epoch: None,
            artifacts_newer: Vec::new(),
            last_exit: None,
            backoff_until_ms: None,
            credentials: Default::default(),
            unresponsive_since_ms: None,
        },
        agent_process,
        agent_initialized: resume.is_some(),
        started_recorded: false,
        client_init: resume,
        ctx,
        to_agent,
        notes,
        events,
        server_lines,
        upstream_pressure,
        upstream: Upstream::Down,
        generation: 0,
        intents: 0,
        requests,
        server_requests: HashMap::new(),
        server_request_times: Default::default(),
        tasks: HashMap::new(),
        stale_told: None,
        commands_while_starting: Vec::new(),
        crashes: 0,
    };
    session.publish();
    if session.client_init.is_some() {
        session.record_started();
    }
    let ending = loop {
        tokio::select! {
            Some(event) = rx.recv() => session.on_event(event),
            line = agent_rx.recv() => match line {
                Some(line) => session.on_agent_line(line),
                None => break Ending::AgentClosed,
            },
            Some(event) = server_rx.recv() => session.on_event(event),
            command = commands.recv() => match command {
                Ok(command) => session.on_command(command),
                Err(broadcast::error::RecvError::Lagged(missed)) => session.on_commands_missed(missed),
                // The listener (the commands' sender) outlives every session.
                Err(broadcast::error::RecvError::Closed) => {}
            },
            () = gone(&mut shim_gone) => break Ending::ShimGone,
            _ = shutdown.changed() => break Ending::Shutdown,
        }
        session.requests.settle_ledger();
    };
    // The agent's reader ends with the session: it must not take a line after it (a shim
    // may carry the agent's stdio on).
    drop(stop_reading);
    if ending == Ending::Shutdown {
        // Every request still owed gets its answer now, and so does each one in the lines the
        // reader holds (it stops at a line's end): the agent's last answers come from here.
        for (id, owed) in session.requests.owed() {
            for _ in 0..owed {
                session.reply(crate::shim::engine_stopped(&id));
            }
        }
        session.requests.paid_all();
        let unread = async {
            while let Some(line) = agent_rx.recv().await {
                session.answer_unread(line);
            }
            (&mut reading).await.unwrap_or_default()
        };
        // What the reader held of the next line is the shim's, with the rest of the pipe.
        if let Ok(rest) = tokio::time::timeout(STOP_READING, unread).await
            && !rest.is_empty()
        {
            session.note(&HandoffNote::Unread { bytes: rest });
        }
    }
    reading.abort();
    session.close(ending).await;
}

/// How long a stopping session waits for the agent's reader to reach a line's end.
const STOP_READING: std::time::Duration = std::time::Duration::from_secs(1);

struct Session {
    ctx: Context,
    info: SessionInfo,
    to_agent: Outbound,
    /// Lines to the shim, when the engine serves the agent's stdio itself.
    notes: Option<Outbound>,
    events: mpsc::UnboundedSender<Event>,
    /// Where each launch's stdout reader sends the server's lines (bounded: see [`run`]).
    server_lines: mpsc::Sender<Event>,
    /// What is queued toward the server, across launches: the agent's reader waits while it
    /// is congested.
    upstream_pressure: Pressure,
    /// The agent's `initialize` params, once it sent them (or the shim resumed).
    client_init: Option<Value>,
    /// The agent's process (`info.agent`), held to ask before each call whether it still runs.
    agent_process: Option<LiveProcess>,
    /// Whether the agent sent `notifications/initialized`.
    agent_initialized: bool,
    /// Whether `session_started` is in the audit log: written once the agent said who it is
    /// (its `initialize`, or the shim's resume), or at the end for one that never did.
    started_recorded: bool,
    upstream: Upstream,
    /// Bumped at every launch and every epoch change; older events are ignored.
    generation: u64,
    /// The number of the last call sent after its intent: what its line waits under in the
    /// outbox, and what the intent's answer names (never the agent's id, which a cancelled
    /// call gives back for reuse while its intent may still be on its way).
    intents: u64,
    /// Every agent request still owed an answer, by id and where it stands (held, with the
    /// gate, withdrawn but owed a verdict, forwarded), and the messages held for the server.
    requests: Requests,
    /// Server-to-agent requests the agent has not answered yet.
    server_requests: HashMap<Id, InFlight>,
    /// When the last server-to-agent requests were journaled (the last minute's).
    server_request_times: std::collections::VecDeque<std::time::Instant>,
    /// Tasks this session's calls created, by task id (`session/server/tasks.rs`).
    tasks: HashMap<String, server::Task>,
    /// The epoch for which this session was already refused a call as stale
    /// (`authorization_stale`, `catalog_stale`): later calls are decided against it.
    stale_told: Option<postern_domain::ExecutionEpoch>,
    /// A lock's or a credential change's commands that came while a launch was under way:
    /// carried out once it runs (see `Session::on_command`).
    commands_while_starting: Vec<Command>,
    /// Launches in a row that ended in a crash soon after starting.
    crashes: u32,
}

#[derive(Debug, Clone)]
struct InFlight {
    method: String,
    /// What the journal calls it, for the record of its result: a tool call's tool, or the
    /// method of any other decided request (`resources/read`); `None` for discovery.
    tool: Option<String>,
    sent: std::time::Instant,
    /// For `tasks/get`, `tasks/result` and `tasks/cancel`: the task it is about.
    task: Option<String>,
    /// The number its line waits under until its intent is durable ([`Session::intents`]);
    /// `None` for a request sent without one.
    intent: Option<u64>,
    /// Kept while it is open: the placeholders a built-in call was lent.
    _holds: Vec<crate::authorize::Hold>,
}

/// A tool call the gate is deciding.
#[derive(Debug)]
struct Authorizing {
    call: postern_domain::CallId,
    msg: Message,
    tool: String,
    stage: Stage,
}

/// How far the gate got with a call it is deciding ([`requests::Open::Deciding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Deciding (perhaps asking a human); a verdict not given at once comes as
    /// [`Event::Authorized`].
    Deciding,
    /// Allowed; the engine is reading the credentials it carries ([`Event::Injected`]).
    Injecting,
}

/// A tool call withdrawn from the gate after the gate had decided it (a lock answered it
/// first, say), which can no longer be forwarded: its epoch ended or its catalog changed.
#[derive(Debug)]
struct Settling {
    call: postern_domain::CallId,
    tool: String,
    /// The answer unless the verdict, once it arrives, refuses the call.
    unsent: Unsent,
}

/// How a tool call that was never forwarded, and now never will be, is answered when the
/// gate does not refuse it itself.
#[derive(Debug, Clone)]
enum Unsent {
    /// With a refusal of the gate's kind, journaled like one (`approval_expired`: the
    /// catalog changed while it waited).
    Refused(postern_domain::decision::Denial),
    /// With this sentence and detail (`epoch_ended_before_forwarding`: its epoch ended).
    EpochEnded { text: String, detail: Value },
}

enum Event {
    /// The gate decided a call (matched by call id: a withdrawn call's verdict is ignored).
    Authorized {
        id: Id,
        call: postern_domain::CallId,
        verdict: crate::authorize::Verdict,
    },
    /// The engine supplied the headers of an allowed call to the built-in server (matched by
    /// call id, like a verdict).
    Injected {
        id: Id,
        call: postern_domain::CallId,
        authority: postern_domain::decision::Authority,
        outcome: Result<Vec<crate::authorize::InjectedHeader>, crate::authorize::InjectError>,
    },
    IntentDurable {
        generation: u64,
        id: Id,
        intent: u64,
        result: Result<(), String>,
    },
    Started {
        generation: u64,
        outcome: Result<Box<Started>, StartError>,
    },
    Server {
        generation: u64,
        line: Line,
    },
    ServerStdoutClosed {
        generation: u64,
    },
    ServerExited {
        generation: u64,
        report: ExitReport,
    },
    ArtifactsChanged {
        generation: u64,
        record: Box<postern_domain::ExecutionRecord>,
        changed: Vec<PathBuf>,
    },
    WorkerReplaced {
        generation: u64,
        what: String,
        record: Box<postern_domain::ExecutionRecord>,
    },
    RefetchCatalog {
        generation: u64,
    },
    /// The gate's catalog fetch `id` may have gone unanswered too long.
    FetchDeadline {
        generation: u64,
        id: Id,
    },
    /// Time for a health ping.
    HealthCheck {
        generation: u64,
    },
    BackoffOver,
    /// A call still with the gate may be owed a progress notification (its `progressToken`).
    StillDeciding {
        id: Id,
        call: postern_domain::CallId,
        round: u32,
    },
}

impl Session {
    fn on_event(&mut self, event: Event) {
        match event {
            Event::BackoffOver => self.on_backoff_over(),
            Event::StillDeciding { id, call, round } => self.on_still_deciding(id, call, round),
            event => self.on_server_event(event),
        }
    }

    /// The session fell `missed` commands behind (a flood of restarts while its loop was busy)
    /// and cannot tell which: one of them may have been the vault's lock or a credential's
    /// rotation or removal, so a server holding credentials stops as at a lock (the next
    /// request starts it again, with what the authority releases then).
    fn on_commands_missed(&mut self, missed: u64) {
        tracing::warn!(
            session = self.info.id,
            missed,
            "the session missed engine commands"
        );
        if matches!(self.upstream, Upstream::Starting) {
            self.commands_while_starting.push(Command::DropCredentials);
        } else if !self.info.credentials.released.is_empty() {
            self.stop_upstream(
                "the session missed engine commands, perhaps a lock or a credential change: servers holding credentials stop",
            );
        }
    }

    fn on_command(&mut self, command: Command) {
        if matches!(self.upstream, Upstream::Starting)
            && matches!(
                command,
                Command::DropCredentials | Command::RestartHolding(_)
            )
        {
            // The launch under way may be releasing what this takes back: carried out once
            // the server runs (`on_started`).
            self.commands_while_starting.push(command);
            return;
        }
        match command {
            Command::Restart(label) if label == self.info.server => {
                self.restart("restart requested")
            }
            Command::Restart(_) => {}
            Command::DropCredentials if !self.info.credentials.released.is_empty() => {
                self.stop_upstream("the vault was locked: servers holding credentials stop")
            }
            Command::RestartHolding(name) if self.info.credentials.released.contains(&name) => {
                self.restart(&format!("credential '{name}' changed"))
            }
            Command::DropCredentials | Command::RestartHolding(_) => {}
        }
    }

    // ---- from the agent ----

    fn on_agent_line(&mut self, line: Line) {
        let raw = match line {
            Line::Frame(raw) => raw,
            Line::Oversize { len, id } => {
                tracing::warn!(
                    session = self.info.id,
                    len,
                    "agent message over the size cap; refused"
                );
                self.reply(Rejected::oversize(len, id.as_ref()).answer());
                return;
            }
        };
        let msg = match Message::parse(raw) {
            Ok(msg) => msg,
            Err(rejected) => {
                tracing::warn!(session = self.info.id, reason = %rejected.reason, "malformed agent message; refused");
                self.reply(rejected.answer());
                return;
            }
        };
        match msg.kind.clone() {
            Kind::Request { id, method } => self.on_agent_request(msg, id, &method),
            Kind::Notification { method } => self.on_agent_notification(msg, &method),
            Kind::Response { id } => {
                if let Some(request) = self.server_requests.remove(&id) {
                    self.audit_result(&id, &request, outcome_of(&msg));
                    self.send_upstream(msg.line);
                } else {
                    tracing::warn!(session = self.info.id, %id, "agent answered a request nobody sent; dropped");
                }
            }
        }
    }

    fn on_agent_request(&mut self, msg: Message, id: Id, method: &str) {
        if self.open_requests() >= MAX_OPEN_REQUESTS {
            return self.refuse_too_many(&id, method);
        }
        if method == "initialize" && self.requests.repeat_initialize(&id) {
            // The agent's `initialize` sent again while the first waits for the server: it is
            // refused once the first is answered, so the first answer with this id is the
            // first request's own.
            return;
        }
        // Checked before any method is looked at: an answer to a request whose id is taken,
        // even a `ping`'s, would read as the answer to the request that holds it.
        if self.id_in_use(&id) {
            self.reply(message::error(
                Some(&id),
                code::INVALID_REQUEST,
                &format!("request id {id} is already in use by a request in flight"),
                None,
            ));
            return;
        }
        match method {
            "ping" => self.reply(message::result(&id, json!({}))),
            "server/discover" => self.reply(message::error(
                Some(&id),
                code::METHOD_NOT_FOUND,
                "server/discover is not supported yet: use initialize (protocol 2025-11-25)",
                None,
            )),
            "initialize" if self.client_init.is_some() => {
                self.reply(message::error(
                    Some(&id),
                    code::INVALID_REQUEST,
                    "already initialized",
                    None,
                ));
            }
            "initialize" => {
                let params = msg.params().cloned().unwrap_or_else(|| json!({}));
                self.info.client = client_name(&params);
                self.note(&HandoffNote::Initialize {
                    params: params.clone(),
                });
                self.client_init = Some(params);
                self.record_started();
                self.requests.initialize(id);
                self.start_upstream();
            }
            _ if self.client_init.is_none() => self.reply(message::error(
                Some(&id),
                code::INVALID_REQUEST,
                "send initialize before other requests",
                None,
            )),
            "tools/call" => match msg.tool_call() {
                // Never forwarded, nor put to the gate: there is no tool call to decide.
                Err(reason) => self.reply(message::error(
                    Some(&id),
                    code::INVALID_PARAMS,
                    &reason,
                    None,
                )),
                Ok(_) => self.toward_server(msg),
            },
            _ => self.toward_server(msg),
        }
    }

    /// Writes `session_started` (once), naming the agent's client as its `initialize` did.
    fn record_started(&mut self) {
        if std::mem::replace(&mut self.started_recorded, true) {
            return;
        }
        self.audit(AuditEvent::SessionStarted {
            session: self.info.id,
            server: self.info.server.clone(),
            client: self.info.client.clone(),
            agent: self.info.agent.clone(),
        });
    }

    fn on_agent_notification(&mut self, msg: Message, method: &str) {
        match method {
            "notifications/initialized" if self.agent_initialized => {
                // Once is the protocol; each again would start another catalog fetch.
                tracing::debug!(
                    session = self.info.id,
                    "a repeated notifications/initialized; dropped"
                );
            }
            "notifications/initialized" => {
                self.agent_initialized = true;
                self.toward_server(msg);
            }
            "notifications/cancelled" => {
                // Once cancelled, a late answer is dropped and an exit owes no error; a
                // request the server never saw is simply never sent, and the server hears of
                // no request it was not sent.
                let Some(id) = msg
                    .params()
                    .and_then(|p| p.get("requestId"))
                    .and_then(Id::from_value)
                else {
                    tracing::warn!(
                        session = self.info.id,
                        "a cancellation naming no valid request id; dropped"
                    );
                    return;
                };
                if let Some((sent, call)) = self.requests.take_forwarded(&id) {
                    // Forwarded: the journal says how it ended, not "no result" forever.
                    self.audit_result(&sent, &call, CallOutcome::Cancelled);
                    if let Some(intent) = call.intent
                        && self.upstream.unsend(intent)
                    {
                        // Its line still waited for its intent: the server never sees it.
                        return;
                    }
                    // The id stays in use until the server answers (or its process is gone),
                    // so its late answer cannot reach a request that reuses the id.
                    self.requests.abandon(sent);
                    return self.toward_server(msg);
                }
                if self.requests.take_settling(&id).is_some() {
                    return; // withdrawn already; its verdict will find nothing to answer
                }
                if let Some(waiting) = self.requests.take_deciding(&id) {
                    // The server never saw it: nothing to tell it.
                    self.ctx.authorizer.withdraw(
                        self.info.id,
                        waiting.call,
                        crate::authorize::Withdrawn::Cancelled,
                    );
                    return;
                }
                self.requests.unhold(&id);
            }
            _ if method::forwards_notification(method) => self.toward_server(msg),
            _ => {
                // A `tools/call` (or any request) without an id would reach the server
                // undecided: never forwarded.
                tracing::warn!(
                    session = self.info.id,
                    method,
                    "agent sent a notification that is not one of the protocol's (a request without an id?); dropped, never forwarded"
                );
            }
        }
    }

    /// Whether a request with this id is still open: the agent's `initialize` not yet
    /// answered, a request in flight, a call the gate is deciding (or whose verdict is still
    /// on its way), a held request (or the catalog fetch's own id).
    fn id_in_use(&self, id: &Id) -> bool {
        self.requests.contains(id) || self.upstream.is_internal(id)
    }

    fn refuse_too_many(&self, id: &Id, method: &str) {
        tracing::warn!(session = self.info.id, %id, method, "request refused: too many open");
        self.reply(message::error(
            Some(id),
            code::INTERNAL_ERROR,
            &format!(
                "this session already has {MAX_OPEN_REQUESTS} requests open; Postern takes more once some are answered"
            ),
            Some(json!({"error": "too_many_requests", "open": MAX_OPEN_REQUESTS})),
        ));
    }

    /// Requests of the agent still owed an answer: in flight, held, or with the gate.
    fn open_requests(&self) -> usize {
        self.requests.len()
    }

    // ---- plumbing ----

    fn reply(&self, line: Bytes) {
        let _ = self.to_agent.send(line);
    }

    /// Tells the shim, when it handed over the agent's stdio.
    fn note(&self, note: &HandoffNote) {
        if let Some(notes) = &self.notes {
            let _ = notes.send(crate::framing::encode(note));
        }
    }

    /// Shows the session's state in status: its phase derived from the upstream's state.
    fn publish(&mut self) {
        self.info.phase = self.upstream.phase();
        self.ctx.sessions.upsert(self.info.clone());
    }

    fn audit(&self, event: AuditEvent) {
        self.ctx.audit.record(event);
    }

    /// A line the agent sent as the engine stopped: a request in it is told so.
    fn answer_unread(&self, line: Line) {
        let id = match line {
            Line::Frame(raw) => match Message::parse(raw) {
                Ok(Message {
                    kind: Kind::Request { id, .. },
                    ..
                }) => Some(id),
                _ => None,
            },
            Line::Oversize { id, .. } => id.and_then(|id| Id::from_value(&id)),
        };
        if let Some(id) = id {
            self.reply(crate::shim::engine_stopped(&id));
        }
    }

    async fn close(mut self, ending: Ending) {
        if ending == Ending::AgentClosed {
            self.note(&HandoffNote::Ended);
        }
        self.ctx.sessions.remove(self.info.id);
        for waiting in self.requests.all_deciding() {
            self.ctx.authorizer.withdraw(
                self.info.id,
                waiting.call,
                crate::authorize::Withdrawn::Disconnected,
            );
        }
        self.ctx
            .authorizer
            .session_ended(self.info.id, self.info.agent.as_ref());
        // An agent that never said who it is still connected: its session has a start.
        self.record_started();
        self.audit(AuditEvent::SessionEnded {
            session: self.info.id,
            server: self.info.server.clone(),
            reason: "agent disconnected".into(),
        });
        self.upstream.stop_gracefully().await;
        tracing::info!(session = self.info.id, server = %self.info.server, "session ended");
    }
}

/// How a response ended, for the journal: a result (a tool's own error when it says so), or
/// an error.
fn outcome_of(msg: &Message) -> CallOutcome {
    match msg.body.get("result") {
        Some(result) if result.get("isError") == Some(&Value::Bool(true)) => CallOutcome::ToolError,
        Some(_) => CallOutcome::Ok,
        None => CallOutcome::Error,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
