//! The server side of a session: launches, execution epochs, the catalog, and what
//! each state lets through (docs/refresh-contract.md).
//!
//! This file holds the upstream's states and the routing between the agent and the
//! server; the rest is split by concern:
//! - `launch`: starting a server, its watchers, and answering `initialize`;
//! - `epochs`: an epoch ending (exit, restart, stop, in-place replacement), rebuilt
//!   artifacts, and crash back-off;
//! - `catalog`: fetching `tools/list`, installing the catalog, and what the agent was shown;
//! - `calls`: `tools/call` authorization, credential injection, intents and results;
//! - `operations`: every other request the gate decides, both ways.

mod calls;
mod catalog;
mod epochs;
mod health;
mod launch;
mod operations;
mod tasks;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use postern_domain::{ExecutionRecord, ServerConfig};
use postern_supervisor::{ExitReport, ProcessHandle};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;

use super::{Event, InFlight, Session, now_ms, outcome_of};

use crate::framing::{Line, MAX_FRAME, Outbound, Pressure, top_level_id};
use crate::message::{self, Id, Kind, Message, code};
use crate::method::{self, Route};
use crate::registry::Phase;
pub(super) use tasks::Task;

pub(super) enum Upstream {
    Down,
    Starting,
    Running(Box<Running>),
}

pub(super) struct Running {
    stdin: Outbound,
    handle: ProcessHandle,
    record: Arc<ExecutionRecord>,
    config: ServerConfig,
    init: Map<String, Value>,
    started: Instant,
    stdout_closed: bool,
    exit: Option<ExitReport>,
    /// Where the epoch's catalog stands, and the fetch in progress.
    catalog: CatalogStage,
    fetches: u32,
    refetch_scheduled: bool,
    /// The gate's health ping in flight, and when it went out.
    ping: Option<(Id, Instant)>,
    /// Lines to the server queued behind a tool call whose intent is not durable yet,
    /// so nothing overtakes it; `Some(id)` marks the call still waiting.
    outbox: Outbox,
    _watchers: Watchers,
    /// The launch's way out through the egress broker (closed when the epoch ends).
    egress: Option<Arc<dyn crate::authorize::LaunchEgress>>,
}

/// Where a running epoch's catalog stands (refresh-contract §7): the session's status is
/// derived from it ([`Upstream::phase`]), so it cannot say one thing while requests do another.
pub(super) enum CatalogStage {
    /// The epoch's catalog is not in: agent requests are held. The fetch starts once the server
    /// is initialized (`None` until then).
    Fetching(Option<Fetch>),
    /// The catalog is in and checked: requests flow.
    Ready,
    /// The server said its tools changed: a newer catalog of the same epoch is being fetched,
    /// and agent requests are held until it is in and checked.
    Refreshing(Fetch),
}

impl CatalogStage {
    /// The fetch in progress, if any.
    fn fetch(&self) -> Option<&Fetch> {
        match self {
            Self::Fetching(fetch) => fetch.as_ref(),
            Self::Refreshing(fetch) => Some(fetch),
            Self::Ready => None,
        }
    }

    fn fetch_mut(&mut self) -> Option<&mut Fetch> {
        match self {
            Self::Fetching(fetch) => fetch.as_mut(),
            Self::Refreshing(fetch) => Some(fetch),
            Self::Ready => None,
        }
    }

    /// A fetch starts: from `Ready` it is a refresh; otherwise it replaces the one in progress.
    fn begin(self, fetch: Fetch) -> Self {
        match self {
            Self::Ready | Self::Refreshing(_) => Self::Refreshing(fetch),
            Self::Fetching(_) => Self::Fetching(Some(fetch)),
        }
    }

    /// The fetch is over: the catalog is in (whatever the fetch brought), and the stage `Ready`.
    fn finish(self) -> (Option<Fetch>, Self) {
        match self {
            Self::Fetching(fetch) => (fetch, Self::Ready),
            Self::Refreshing(fetch) => (Some(fetch), Self::Ready),
            Self::Ready => (None, Self::Ready),
        }
    }

    fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }
}

pub(super) struct Fetch {
    /// The id of the page requested now.
    id: Id,
    /// The id of the first page's request: the fetch's deadline runs from it.
    origin: Id,
    pages: Vec<Value>,
    /// Bytes of the pages so far, and the cursors followed: a server cannot keep a fetch
    /// going (and the session's requests held) by paging without end.
    bytes: usize,
    cursors: std::collections::HashSet<String>,
    /// Tell the agent to list again if the catalog differs from what it was shown.
    announce: bool,
}

/// Background tasks tied to one running process, stopped with it.
struct Watchers(Vec<JoinHandle<()>>);

impl Drop for Watchers {
    fn drop(&mut self) {
        for watcher in &self.0 {
            watcher.abort();
        }
    }
}

/// Lines to the server queued behind a tool call whose intent is not durable yet (`Some(id)`
/// marks the call still waiting), counted in the upstream's pressure like the lines in its
/// stdin queue, so an agent that sends while intents are slow waits for them.
pub(super) struct Outbox {
    /// Each line, and the intent it waits for (a call's number, [`Session::intents`]).
    lines: VecDeque<(Bytes, Option<u64>)>,
    pressure: Pressure,
}

impl Outbox {
    pub(super) fn new(pressure: Pressure) -> Self {
        Self {
            lines: VecDeque::new(),
            pressure,
        }
    }

    fn push(&mut self, line: Bytes, waiting: Option<u64>) {
        self.pressure.add(line.len() + 1);
        self.lines.push_back((line, waiting));
    }

    fn pop_ready(&mut self) -> Option<Bytes> {
        if self.lines.front().is_some_and(|(_, w)| w.is_none()) {
            let (line, _) = self.lines.pop_front()?;
            self.pressure.sub(line.len() + 1);
            return Some(line);
        }
        None
    }

    /// Keeps only the lines `keep` says to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Option<u64>) -> bool) {
        let pressure = self.pressure.clone();
        self.lines.retain(|(line, waiting)| {
            let kept = keep(waiting);
            if !kept {
                pressure.sub(line.len() + 1);
            }
            kept
        });
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.retain(|_| false);
    }
}

impl Running {
    /// Sends a line, behind any tool call still waiting for its intent to be durable.
    fn send(&mut self, line: Bytes) {
        if self.outbox.lines.is_empty() {
            let _ = self.stdin.send(line);
        } else {
            self.outbox.push(line, None);
        }
    }

    /// Queues a tool call until its intent (number `intent`) is durable.
    fn send_after_intent(&mut self, line: Bytes, intent: u64) {
        self.outbox.push(line, Some(intent));
    }

    /// Intent `intent` is durable (`send`), or could not be written (drop its line).
    fn release(&mut self, intent: u64, send: bool) {
        if send {
            if let Some(entry) = self
                .outbox
                .lines
                .iter_mut()
                .find(|(_, waiting)| *waiting == Some(intent))
            {
                entry.1 = None;
            }
        } else {
            self.unsend(intent);
        }
        while let Some(line) = self.outbox.pop_ready() {
            let _ = self.stdin.send(line);
        }
    }

    /// Drops the line still waiting for intent `intent` (numbers are the session's own, one
    /// line each); whether there was one.
    fn unsend(&mut self, intent: u64) -> bool {
        let mut dropped = false;
        self.outbox.retain(|waiting| {
            let this = *waiting == Some(intent);
            dropped |= this;
            !this
        });
        dropped
    }
}

impl Upstream {
    /// Drops the line of a call still waiting for intent `intent`: whether there was one
    /// (the server never sees it).
    pub(super) fn unsend(&mut self, intent: u64) -> bool {
        match self {
            Upstream::Running(running) => running.unsend(intent),
            _ => false,
        }
    }

    /// Whether `id` is one of the gate's own requests in flight (a catalog fetch, a ping).
    pub(super) fn is_internal(&self, id: &Id) -> bool {
        matches!(self, Upstream::Running(r) if r.catalog.fetch().is_some_and(|f| f.id == *id)
            || r.ping.as_ref().is_some_and(|(p, _)| p == id))
    }

    /// The session's state as status shows it, derived from the upstream's own.
    pub(super) fn phase(&self) -> Phase {
        match self {
            Upstream::Down => Phase::Stopped,
            Upstream::Starting => Phase::Starting,
            Upstream::Running(running) => match running.catalog {
                CatalogStage::Fetching(_) => Phase::IdentityPending,
                CatalogStage::Ready => Phase::CatalogReady,
                CatalogStage::Refreshing(_) => Phase::CatalogRefreshing,
            },
        }
    }

    fn is_ping(&self, id: &Id) -> bool {
        matches!(self, Upstream::Running(r) if r.ping.as_ref().is_some_and(|(p, _)| p == id))
    }

    /// Closes stdin (the polite stop), then signals the process group.
    pub(super) async fn stop_gracefully(self) {
        if let Upstream::Running(running) = self {
            stop_gracefully(*running).await;
        }
    }
}

impl Session {
    /// Sends an agent message toward the server, starting it or holding the message as
    /// the state requires (refresh-contract §7).
    pub(super) fn toward_server(&mut self, msg: Message) {
        let is_request = matches!(msg.kind, Kind::Request { .. });
        match &mut self.upstream {
            Upstream::Running(running) if !running.catalog.is_ready() && is_request => {
                self.hold(msg)
            }
            Upstream::Running(_) => self.forward(msg),
            Upstream::Starting => self.hold(msg),
            Upstream::Down if is_request => {
                if let Some(until) = self.info.backoff_until_ms.filter(|until| *until > now_ms()) {
                    if let Kind::Request { id, .. } = &msg.kind {
                        let wait = (until - now_ms()) as f64 / 1000.0;
                        let reason = format!(
                            "server '{}' crashed {} times in a row; Postern launches it again in {wait:.1}s",
                            self.info.server, self.crashes
                        );
                        let data = json!({"error": "server_backoff", "server": self.info.server.as_str(), "retryAfterMs": until - now_ms()});
                        self.reply(message::error(
                            Some(id),
                            code::INTERNAL_ERROR,
                            &reason,
                            Some(data),
                        ));
                    }
                    return;
                }
                self.hold(msg);
                self.start_upstream();
            }
            Upstream::Down => {
                tracing::debug!(session = self.info.id, kind = ?msg.kind, "notification while the server is down; dropped");
            }
        }
    }

    /// Holds a message for the server, or refuses it when the session holds its budget
    /// already (`too_many_requests`; a notification is dropped).
    pub(super) fn hold(&mut self, msg: Message) {
        let Err(refused) = self.requests.hold(msg) else {
            return;
        };
        match &refused.kind {
            Kind::Request { id, .. } => {
                tracing::warn!(session = self.info.id, %id, "request refused: the session holds its budget of messages for the server");
                self.reply(message::error(
                    Some(id),
                    code::INTERNAL_ERROR,
                    "this session already holds as many bytes of requests for its server as it may while the server starts; Postern takes more once those are sent",
                    Some(json!({"error": "too_many_requests"})),
                ));
            }
            _ => {
                tracing::warn!(
                    session = self.info.id,
                    "notification dropped: the session holds its budget of messages for the server"
                );
            }
        }
    }

    fn forward(&mut self, msg: Message) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        match &msg.kind {
            Kind::Request { id, method } => {
                let id = id.clone();
                match method::route(method) {
                    Route::Call => self.authorize_call(msg, id),
                    Route::Answered if method == "tools/list" => self.answer_tools_list(&msg, &id),
                    Route::Operation => self.authorize_operation(msg, id),
                    Route::Unknown if running.config.pass_methods.contains(method) => {
                        self.authorize_operation(msg, id)
                    }
                    Route::Unknown => {
                        tracing::info!(
                            session = self.info.id,
                            method,
                            "agent request for a method Postern does not know; refused"
                        );
                        let reason = format!(
                            "Postern does not pass '{method}' to servers: it is not a method it knows how to decide (a server's configuration can pass it: postern server add ... --pass-method {method})"
                        );
                        self.reply(message::error(
                            Some(&id),
                            code::METHOD_NOT_FOUND,
                            &reason,
                            None,
                        ));
                    }
                    // Discovery (and the few methods the gate answers, which never get here).
                    Route::Discovery | Route::Answered => {
                        self.requests.forward(
                            id,
                            InFlight {
                                method: method.clone(),
                                tool: None,
                                sent: Instant::now(),
                                task: None,
                                intent: None,
                                _holds: Vec::new(),
                            },
                        );
                        running.send(msg.line);
                    }
                }
            }
            Kind::Notification { method } => {
                let initialized = method == "notifications/initialized";
                running.send(msg.line);
                if initialized {
                    self.begin_fetch(false);
                }
            }
            Kind::Response { .. } => running.send(msg.line),
        }
    }

    pub(super) fn send_upstream(&mut self, line: Bytes) {
        if let Upstream::Running(running) = &mut self.upstream {
            running.send(line);
        }
    }

    pub(super) fn on_server_event(&mut self, event: Event) {
        match event {
            Event::Started {
                generation,
                outcome,
            } if generation == self.generation => self.on_started(outcome),
            Event::Server { generation, line } if generation == self.generation => {
                self.on_server_line(line)
            }
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
            Event::ArtifactsChanged {
                generation,
                record,
                changed,
            } if generation == self.generation => {
                self.on_artifacts_changed(*record, changed);
            }
            Event::WorkerReplaced {
                generation,
                what,
                record,
            } if generation == self.generation => {
                self.replace_epoch(*record, &what);
            }
            Event::IntentDurable {
                generation,
                id,
                intent,
                result,
            } if generation == self.generation => {
                self.on_intent_durable(id, intent, result);
            }
            Event::Authorized { id, call, verdict } => self.on_authorized(id, call, verdict),
            Event::Injected {
                id,
                call,
                authority,
                outcome,
            } => self.on_injected(id, call, authority, outcome),
            Event::FetchDeadline { generation, id } if generation == self.generation => {
                self.on_fetch_deadline(&id)
            }
            Event::HealthCheck { generation } if generation == self.generation => {
                self.on_health_check()
            }
            Event::RefetchCatalog { generation } if generation == self.generation => {
                if let Upstream::Running(running) = &mut self.upstream {
                    running.refetch_scheduled = false;
                    if running.catalog.is_ready() {
                        // The server said its tools changed: the agent is told once the gate
                        // has the new catalog, if it differs from what the agent was shown.
                        self.begin_fetch(true);
                    }
                }
            }
            _ => {}
        }
    }

    // ---- from the server ----

    fn on_server_line(&mut self, line: Line) {
        let raw = match line {
            Line::Frame(raw) => raw,
            Line::Oversize { len, id } => {
                tracing::warn!(
                    session = self.info.id,
                    len,
                    "server message over the size cap; dropped"
                );
                let reason = format!(
                    "the server's answer of {len}+ bytes exceeds Postern's {} MiB limit",
                    MAX_FRAME >> 20
                );
                return self.answer_unreadable(id, &reason);
            }
        };
        let msg = match Message::parse(raw.clone()) {
            Ok(msg) => msg,
            Err(rejected) => {
                tracing::warn!(session = self.info.id, reason = %rejected.reason, "server wrote a line that is not one Postern forwards; dropped");
                let reason = format!(
                    "the server's answer could not be passed on: {}",
                    rejected.reason
                );
                return self.answer_unreadable(top_level_id(&raw), &reason);
            }
        };
        match &msg.kind {
            Kind::Response { id } if self.upstream.is_ping(id) => self.on_pong(),
            Kind::Response { id } if self.upstream.is_internal(id) => self.on_fetch_response(msg),
            Kind::Response { id } => {
                let id = id.clone();
                if let Some((sent, call)) = self.requests.take_forwarded(&id) {
                    // A call answered with a task has its outcome journaled when its result
                    // comes (or its epoch ends).
                    if !(call.method == "tools/call" && self.note_created_task(&sent, &call, &msg))
                    {
                        self.audit_result(&sent, &call, outcome_of(&msg));
                    }
                    if let (true, Some(task)) = (call.method == "tasks/result", &call.task) {
                        self.note_task_result(task, &msg);
                    }
                    self.reply(answer_as_sent(msg, &sent));
                } else if self.requests.take_abandoned(&id) {
                    tracing::debug!(session = self.info.id, %id, "a late answer to a request the gate already answered; dropped");
                } else {
                    tracing::warn!(session = self.info.id, %id, "server answered a request nobody sent; dropped");
                }
            }
            Kind::Request { id, method } => {
                let (id, method) = (id.clone(), method.clone());
                self.on_server_request(msg, id, method);
            }
            Kind::Notification { method } => {
                if method == "notifications/tools/list_changed" {
                    // The agent hears of it from the gate, once the new catalog is fetched and
                    // checked, and only if it differs from what the agent was shown.
                    self.schedule_refetch();
                } else if method == "notifications/cancelled" {
                    self.on_server_cancelled(msg);
                } else {
                    self.reply(msg.line);
                }
            }
        }
    }
}

impl Session {
    /// A server line Postern cannot forward, whose top-level id is `id`: the request it
    /// answers, if one is open, gets an error saying why (never silence); the gate's own
    /// catalog fetch ends with what it has.
    fn answer_unreadable(&mut self, id: Option<Value>, reason: &str) {
        let Some(id) = id.as_ref().and_then(Id::from_value) else {
            return;
        };
        if self.upstream.is_ping(&id) {
            return self.on_pong();
        }
        if self.upstream.is_internal(&id) {
            return self.fail_fetch(&id, reason);
        }
        if let Some((sent, call)) = self.requests.take_forwarded(&id) {
            self.audit_result(&sent, &call, postern_domain::CallOutcome::Error);
            self.reply(message::error(
                Some(&sent),
                code::INTERNAL_ERROR,
                reason,
                None,
            ));
        } else {
            self.requests.take_abandoned(&id);
        }
    }
}

/// A server's answer as the agent's request named itself: a server may answer `"7"` as `7`,
/// and the agent matches on what it sent.
fn answer_as_sent(mut msg: Message, sent: &Id) -> Bytes {
    if msg.body.get("id") == Some(sent.value()) {
        return msg.line;
    }
    msg.body.insert("id".into(), sent.value().clone());
    crate::framing::encode(&msg.body)
}

async fn stop_gracefully(running: Running) {
    let Running {
        stdin, mut handle, ..
    } = running;
    drop(stdin);
    let exited = handle.waiter();
    if tokio::time::timeout(Duration::from_millis(500), exited.wait())
        .await
        .is_err()
    {
        handle.stop();
        handle.exited().await;
    }
}
