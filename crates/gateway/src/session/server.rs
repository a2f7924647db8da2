//! The server side of a session: launches, execution epochs, the catalog, and what
//! each state lets through (docs/refresh-contract.md).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use postern_domain::catalog::{Catalog, ToolDrift};
use postern_domain::decision::{Authority, Denial};
use postern_domain::{
    AgentRun, AuditEvent, CallId, CallOutcome, Caller, CatalogView, ExecutionEpoch,
    ExecutionRecord, Presented, Request, RestartPolicy, ServerConfig,
};
use postern_supervisor::{
    ArtifactWatch, DigestCache, ExitReport, ProcessGroupSample, ProcessHandle,
};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Authorizing, Event, InFlight, Session, now_ms};
use crate::authorize::{
    CallToAuthorize, INJECT_META, InjectError, InjectedHeader, Verdict, Withdrawn, credential_host,
    http_request_scope,
};
use crate::framing::{Line, LineReader, MAX_FRAME};
use crate::handshake::initialize_result;
use crate::message::{self, Id, Kind, Message, code, sniff_id};
use crate::registry::{Credentials, Phase};
use crate::upstream::{self, StartError, Started};

/// A launch that ends sooner than this after starting counts as a crash for back-off.
const CRASH_WINDOW: Duration = Duration::from_secs(10);
/// Bursts of `tools/list_changed` are collected this long before the catalog is fetched.
const REFETCH_DEBOUNCE: Duration = Duration::from_millis(250);
/// How often a running server's process group is sampled for replaced workers.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

pub(super) enum Upstream {
    Down,
    Starting,
    Running(Box<Running>),
}

pub(super) struct Running {
    stdin: mpsc::UnboundedSender<Bytes>,
    handle: ProcessHandle,
    record: ExecutionRecord,
    config: ServerConfig,
    init: Map<String, Value>,
    started: Instant,
    stdout_closed: bool,
    exit: Option<ExitReport>,
    /// The catalog fetch in progress: the internal request id and the pages so far.
    fetch: Option<Fetch>,
    fetches: u32,
    refetch_scheduled: bool,
    /// Agent `tools/list` requests in flight: their answers present the catalog.
    listing: Vec<Id>,
    /// Lines to the server queued behind a tool call whose intent is not durable yet,
    /// so nothing overtakes it; `Some(id)` marks the call still waiting.
    outbox: VecDeque<(Bytes, Option<Id>)>,
    _watchers: Watchers,
}

struct Fetch {
    id: Id,
    pages: Vec<Value>,
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

impl Running {
    /// Sends a line, behind any tool call still waiting for its intent to be durable.
    fn send(&mut self, line: Bytes) {
        if self.outbox.is_empty() {
            let _ = self.stdin.send(line);
        } else {
            self.outbox.push_back((line, None));
        }
    }

    /// Queues a tool call until its intent is durable.
    fn send_after_intent(&mut self, line: Bytes, id: Id) {
        self.outbox.push_back((line, Some(id)));
    }

    /// The intent of call `id` is durable (`send`), or could not be written (drop it).
    fn release(&mut self, id: &Id, send: bool) {
        if let Some(i) = self
            .outbox
            .iter()
            .position(|(_, waiting)| waiting.as_ref() == Some(id))
        {
            if send {
                self.outbox[i].1 = None;
            } else {
                self.outbox.remove(i);
            }
        }
        while self
            .outbox
            .front()
            .is_some_and(|(_, waiting)| waiting.is_none())
        {
            if let Some((line, _)) = self.outbox.pop_front() {
                let _ = self.stdin.send(line);
            }
        }
    }
}

impl Upstream {
    pub(super) fn is_internal(&self, id: &Id) -> bool {
        matches!(self, Upstream::Running(r) if r.fetch.as_ref().is_some_and(|f| f.id == *id))
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
            Upstream::Running(running) if running.fetch.is_some() && is_request => {
                self.held.push(msg)
            }
            Upstream::Running(_) => self.forward(msg),
            Upstream::Starting => self.held.push(msg),
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
                self.held.push(msg);
                self.start_upstream();
            }
            Upstream::Down => {
                tracing::debug!(session = self.info.id, kind = ?msg.kind, "notification while the server is down; dropped");
            }
        }
    }

    fn forward(&mut self, msg: Message) {
        if let Kind::Request { id, method } = &msg.kind
            && method == "tools/call"
        {
            let id = id.clone();
            self.authorize_call(msg, id);
            return;
        }
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        match &msg.kind {
            Kind::Request { id, method } => {
                if method == "tools/list" {
                    running.listing.push(id.clone());
                }
                self.in_flight.insert(
                    id.clone(),
                    InFlight {
                        method: method.clone(),
                        tool: None,
                        sent: Instant::now(),
                    },
                );
                running.send(msg.raw);
            }
            Kind::Notification { method } => {
                let initialized = method == "notifications/initialized";
                running.send(msg.raw);
                if initialized {
                    self.begin_fetch(false);
                }
            }
            Kind::Response { .. } => running.send(msg.raw),
        }
    }

    /// Asks the gate about a `tools/call`; the verdict comes back as [`Event::Authorized`].
    /// Nothing of the call reaches the server before it is allowed and its intent durable.
    fn authorize_call(&mut self, msg: Message, id: Id) {
        let Upstream::Running(running) = &self.upstream else {
            return;
        };
        let tool = msg
            .params()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let catalog = self
            .info
            .catalog
            .clone()
            .unwrap_or_else(|| Arc::new(unreachable_empty()));
        let presented = self.info.presented.as_ref().zip(self.info.presented_epoch);
        let drift = match presented {
            Some((shown, _)) => shown.tool_drift(&tool, &catalog),
            None => ToolDrift::between(None, catalog.tool(&tool).map(|t| t.digest())),
        };
        let call = CallId::new(now_ms() as u64, rand_bits());
        let arguments = msg
            .params()
            .and_then(|p| p.get("arguments"))
            .cloned()
            .unwrap_or(Value::Null);
        // The credentials the call would use: for the built-in `http_request`, the bound
        // header credentials for the URL's host (injected per call); for any other server,
        // the env credentials its launch holds.
        let credentials = if self.is_builtin() {
            http_request_scope(&running.config.credentials, &arguments)
        } else {
            running
                .config
                .credentials
                .iter()
                .filter(|c| c.env_var().is_some())
                .map(|c| c.name.to_string())
                .collect()
        };
        let request = Request {
            call,
            caller: self.caller(),
            server: self.info.server.clone(),
            epoch: running.record.epoch,
            tool: tool.clone(),
            credentials,
            catalog: CatalogView {
                presented: presented.map(|(shown, epoch)| Presented {
                    revision: shown.digest(),
                    epoch,
                }),
                current: catalog.digest(),
                drift,
            },
        };
        let pending = CallToAuthorize {
            session: self.info.id,
            agent: self.info.agent.clone(),
            request,
            record: running.record.clone(),
            catalog,
            arguments,
            withheld: self.info.credentials.withheld.clone(),
        };
        self.authorizing
            .insert(id.clone(), Authorizing { call, msg, tool });
        let events = self.events.clone();
        self.ctx.authorizer.authorize(
            pending,
            Box::new(move |verdict| {
                let _ = events.send(Event::Authorized { id, call, verdict });
            }),
        );
    }

    /// Who is calling: the agent identified at connection, if it is still that process (a
    /// pid reused by another process is another caller).
    fn caller(&self) -> Caller {
        let Some(agent) = &self.info.agent else {
            return Caller::Unidentifiable {
                reason: "the process that launched the shim could not be identified".into(),
            };
        };
        if postern_supervisor::process_start_time(agent.pid) == Some(agent.start_time) {
            Caller::Identified {
                run: AgentRun::of(agent),
            }
        } else {
            Caller::Unidentifiable {
                reason: format!(
                    "the agent process (pid {}) has exited or its pid now belongs to another process",
                    agent.pid
                ),
            }
        }
    }

    /// The gate decided a call: forward it (intent first) or answer with the refusal.
    fn on_authorized(&mut self, id: Id, call: CallId, verdict: Verdict) {
        if self.authorizing.get(&id).is_none_or(|w| w.call != call) {
            return; // withdrawn meanwhile: cancelled, or its epoch ended
        }
        let Some(waiting) = self.authorizing.remove(&id) else {
            return;
        };
        match verdict {
            Verdict::Deny(denial) => self.refuse(id, waiting.tool, denial),
            Verdict::Relaunch => {
                // The human released credentials this launch was not given: a new launch
                // of the same code gets them, and the call is decided again there.
                self.restart("credentials released after approval");
                self.held.push(waiting.msg);
            }
            Verdict::Allow(authority) if self.is_builtin() => {
                self.fetch_injection(id, waiting, authority)
            }
            Verdict::Allow(authority) => {
                self.send_call(waiting.msg, id, waiting.tool, authority, None)
            }
        }
    }

    /// Whether this session's server is Postern's built-in one (`postern mcp postern`).
    fn is_builtin(&self) -> bool {
        self.info.server.as_str() == postern_domain::BUILTIN_LABEL
    }

    /// An allowed call to the built-in server: the engine supplies the header values of its
    /// credential scope (a keychain read, off the loop), then it is sent like any call. It
    /// stays in `authorizing` meanwhile, so a cancel or the epoch's end still stops it.
    fn fetch_injection(&mut self, id: Id, waiting: Authorizing, authority: Authority) {
        let Upstream::Running(running) = &self.upstream else {
            return;
        };
        let arguments = waiting
            .msg
            .params()
            .and_then(|p| p.get("arguments"))
            .cloned()
            .unwrap_or(Value::Null);
        let scope = http_request_scope(&running.config.credentials, &arguments);
        let host = arguments
            .get("url")
            .and_then(Value::as_str)
            .and_then(credential_host);
        let Some(host) = host.filter(|_| !scope.is_empty()) else {
            let line = with_injection(&waiting.msg, &[]);
            return self.send_call(waiting.msg, id, waiting.tool, authority, line);
        };
        let call = waiting.call;
        self.authorizing.insert(id.clone(), waiting);
        let authorizer = Arc::clone(&self.ctx.authorizer);
        let (server, events) = (self.info.server.clone(), self.events.clone());
        tokio::task::spawn_blocking(move || {
            let outcome = authorizer.inject(&server, &host, &scope);
            let _ = events.send(Event::Injected {
                id,
                call,
                authority,
                outcome,
            });
        });
    }

    /// The engine supplied (or could not supply) the headers of an allowed built-in call.
    fn on_injected(
        &mut self,
        id: Id,
        call: CallId,
        authority: Authority,
        outcome: Result<Vec<InjectedHeader>, InjectError>,
    ) {
        if self.authorizing.get(&id).is_none_or(|w| w.call != call) {
            return; // withdrawn meanwhile; the values are dropped unused
        }
        let Some(waiting) = self.authorizing.remove(&id) else {
            return;
        };
        match outcome {
            Ok(headers) => {
                if let (false, Some(record)) = (headers.is_empty(), &self.info.record) {
                    let mut names: Vec<String> =
                        headers.iter().map(|h| h.credential.clone()).collect();
                    names.dedup();
                    self.ctx.audit.record(AuditEvent::CredentialReleased {
                        session: self.info.id,
                        server: self.info.server.clone(),
                        epoch: record.epoch,
                        credentials: names,
                    });
                }
                let line = with_injection(&waiting.msg, &headers);
                self.send_call(waiting.msg, id, waiting.tool, authority, line);
            }
            Err(InjectError::VaultLocked) => self.refuse(id, waiting.tool, Denial::vault_locked()),
            Err(InjectError::Unavailable(reason)) => {
                tracing::warn!(session = self.info.id, %id, "call refused: {reason}");
                let detail = json!({
                    "error": "credential_unavailable",
                    "reason": reason,
                    "retry": "do not retry; ask the human to check the credential in Postern",
                });
                self.ctx.audit.record(AuditEvent::AuthorizationDenied {
                    session: self.info.id,
                    server: self.info.server.clone(),
                    epoch: self.info.record.as_ref().map(|r| r.epoch),
                    call: id.value().clone(),
                    tool: waiting.tool,
                    code: "credential_unavailable".into(),
                    detail: detail.clone(),
                });
                let text = format!(
                    "Postern could not supply the credential this call was approved with ({reason}), so it was not made"
                );
                self.reply(message::result(&id, tool_error(&text, detail)));
            }
        }
    }

    /// Answers a call the gate refused before anything was forwarded, and records why.
    fn refuse(&mut self, id: Id, tool: String, denial: Denial) {
        tracing::info!(session = self.info.id, %id, code = denial.code.as_str(), "call refused");
        self.ctx.audit.record(AuditEvent::AuthorizationDenied {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch: self.info.record.as_ref().map(|r| r.epoch),
            call: id.value().clone(),
            tool,
            code: denial.code.as_str().into(),
            detail: denial.detail.clone(),
        });
        self.reply(message::result(
            &id,
            tool_error(&denial.message, denial.detail),
        ));
    }

    /// Forwards an allowed call once its intent row is durable (intent before effect). The
    /// intent records the call as the agent sent it; `line`, when given, is what is forwarded
    /// instead (a built-in call with its injected headers).
    fn send_call(
        &mut self,
        msg: Message,
        id: Id,
        tool: String,
        authority: Authority,
        line: Option<Bytes>,
    ) {
        let generation = self.generation;
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        let intent = AuditEvent::ToolCallIntent {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch: running.record.epoch,
            call: id.value().clone(),
            tool: tool.clone(),
            arguments: msg
                .params()
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or(Value::Null),
            authority: Some(authority),
        };
        self.in_flight.insert(
            id.clone(),
            InFlight {
                method: "tools/call".into(),
                tool: Some(tool),
                sent: Instant::now(),
            },
        );
        running.send_after_intent(line.unwrap_or_else(|| msg.raw.clone()), id.clone());
        let events = self.events.clone();
        self.ctx.audit.record_durable(
            intent,
            Box::new(move |result| {
                let _ = events.send(Event::IntentDurable {
                    generation,
                    id,
                    result,
                });
            }),
        );
    }

    pub(super) fn send_upstream(&mut self, line: Bytes) {
        if let Upstream::Running(running) = &mut self.upstream {
            running.send(line);
        }
    }

    fn on_intent_durable(&mut self, id: Id, result: Result<(), String>) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        match result {
            Ok(()) => running.release(&id, true),
            Err(reason) => {
                running.release(&id, false);
                if self.in_flight.remove(&id).is_some() {
                    tracing::error!(session = self.info.id, %id, "call refused: its intent could not be recorded: {reason}");
                    let detail = json!({"error": "audit_unavailable", "reason": reason});
                    let text =
                        "Postern could not record this call in its audit log, so it was not made";
                    self.reply(message::result(&id, tool_error(text, detail)));
                }
            }
        }
    }

    /// Records how a forwarded tool call ended.
    fn audit_result(&self, id: &Id, call: &InFlight, outcome: CallOutcome) {
        let (Some(tool), Some(record)) = (&call.tool, &self.info.record) else {
            return;
        };
        self.ctx.audit.record(AuditEvent::ToolCallResult {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch: record.epoch,
            call: id.value().clone(),
            tool: tool.clone(),
            outcome,
            duration_ms: call.sent.elapsed().as_millis() as u64,
        });
    }

    // ---- launching ----

    pub(super) fn start_upstream(&mut self) {
        self.generation += 1;
        let generation = self.generation;
        self.upstream = Upstream::Starting;
        self.info.phase = Phase::Starting;
        self.publish();
        let (directory, cache) = (Arc::clone(&self.ctx.directory), Arc::clone(&self.ctx.cache));
        let label = self.info.server.clone();
        let params = self.client_init.clone().unwrap_or_else(|| json!({}));
        let events = self.events.clone();
        let whom = upstream::For {
            session: self.info.id,
            agent: self.info.agent.clone(),
            authorizer: Arc::clone(&self.ctx.authorizer),
        };
        tokio::spawn(async move {
            let outcome = upstream::start(&*directory, &cache, &label, &params, whom)
                .await
                .map(Box::new);
            let _ = events.send(Event::Started {
                generation,
                outcome,
            });
        });
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
                result,
            } if generation == self.generation => {
                self.on_intent_durable(id, result);
            }
            Event::Authorized { id, call, verdict } => self.on_authorized(id, call, verdict),
            Event::Injected {
                id,
                call,
                authority,
                outcome,
            } => self.on_injected(id, call, authority, outcome),
            Event::RefetchCatalog { generation } if generation == self.generation => {
                if let Upstream::Running(running) = &mut self.upstream {
                    running.refetch_scheduled = false;
                    if running.fetch.is_none() {
                        self.begin_fetch(false);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_started(&mut self, outcome: Result<Box<Started>, StartError>) {
        let started = match outcome {
            Ok(started) => *started,
            Err(reason) => return self.on_start_failed(reason),
        };
        let Started {
            stdin,
            stdout,
            handle,
            init,
            record,
            config,
            credentials,
        } = started;
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
        let watchers = Watchers(vec![
            tokio::spawn(watch_artifacts(
                config.clone(),
                Arc::clone(&self.ctx.cache),
                record.clone(),
                generation,
                self.events.clone(),
            )),
            tokio::spawn(sample_workers(
                config.clone(),
                Arc::clone(&self.ctx.cache),
                record.clone(),
                generation,
                self.events.clone(),
            )),
        ]);
        self.ctx.audit.record(AuditEvent::ServerStarted {
            session: self.info.id,
            record: Box::new(record.clone()),
        });
        if !credentials.released.is_empty() {
            self.ctx.audit.record(AuditEvent::CredentialReleased {
                session: self.info.id,
                server: self.info.server.clone(),
                epoch: record.epoch,
                credentials: credentials.released.clone(),
            });
        }
        if !credentials.withheld.is_empty() {
            let reason = credentials.reason.clone().unwrap_or_default();
            tracing::info!(session = self.info.id, server = %self.info.server, epoch = %record.epoch, withheld = ?credentials.withheld, "credentials withheld: {reason}");
            self.ctx.audit.record(AuditEvent::CredentialWithheld {
                session: self.info.id,
                server: self.info.server.clone(),
                epoch: record.epoch,
                credentials: credentials.withheld.clone(),
                reason,
            });
        }
        self.info.credentials = Credentials {
            released: credentials.released,
            withheld: credentials.withheld,
            reason: credentials.reason,
        };
        self.info.record = Some(record.clone());
        self.info.artifacts_newer.clear();
        self.info.last_exit = None;
        self.info.phase = Phase::IdentityPending;
        self.upstream = Upstream::Running(Box::new(Running {
            stdin: stdin_tx,
            handle,
            record,
            config,
            init,
            started: Instant::now(),
            stdout_closed: false,
            exit: None,
            fetch: None,
            fetches: 0,
            refetch_scheduled: false,
            listing: Vec::new(),
            outbox: VecDeque::new(),
            _watchers: watchers,
        }));
        self.publish();
        self.answer_init();

        let held = std::mem::take(&mut self.held);
        let agent_sends_initialized = held
            .iter()
            .any(|m| matches!(&m.kind, Kind::Notification { method } if method == "notifications/initialized"));
        if self.agent_initialized && !agent_sends_initialized {
            // A relaunched server never saw the agent's `initialized`: send it on its behalf.
            self.send_upstream(message::notification("notifications/initialized", None));
            self.begin_fetch(true);
        }
        for msg in held {
            self.toward_server(msg);
        }
    }

    fn on_start_failed(&mut self, error: StartError) {
        let reason = error.reason().to_owned();
        tracing::warn!(session = self.info.id, server = %self.info.server, "{reason}");
        self.upstream = Upstream::Down;
        self.info.phase = Phase::Stopped;
        self.info.last_exit = Some(reason.clone());
        self.count_crash(matches!(error, StartError::Crashed(_)));
        self.answer_init();
        let data = json!({"error": "server_unavailable", "server": self.info.server.as_str()});
        for msg in std::mem::take(&mut self.held) {
            if let Kind::Request { id, .. } = &msg.kind {
                self.reply(message::error(
                    Some(id),
                    code::INTERNAL_ERROR,
                    &reason,
                    Some(data.clone()),
                ));
            }
        }
        self.publish();
    }

    fn answer_init(&mut self) {
        if let Some(id) = self.pending_init.take() {
            let params = self.client_init.clone().unwrap_or_else(|| json!({}));
            let upstream = match &self.upstream {
                Upstream::Running(running) => Some(&running.init),
                _ => None,
            };
            self.reply(message::result(
                &id,
                initialize_result(self.info.server.as_str(), &params, upstream),
            ));
        }
    }

    // ---- the catalog ----

    fn begin_fetch(&mut self, announce: bool) {
        let generation = self.generation;
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        running.fetches += 1;
        let id_value = json!(format!("postern-catalog-{generation}-{}", running.fetches));
        let Some(id) = Id::from_value(&id_value) else {
            return;
        };
        let announce = announce || running.fetch.as_ref().is_some_and(|f| f.announce);
        running.fetch = Some(Fetch {
            id,
            pages: Vec::new(),
            announce,
        });
        let _ = running
            .stdin
            .send(message::request(&id_value, "tools/list", json!({})));
    }

    fn on_fetch_response(&mut self, mut msg: Message) {
        let generation = self.generation;
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        let Some(fetch) = running.fetch.as_mut() else {
            return;
        };
        match msg.body.remove("result") {
            Some(page) => {
                let cursor = page
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                fetch.pages.push(page);
                if let Some(cursor) = cursor {
                    running.fetches += 1;
                    let id_value =
                        json!(format!("postern-catalog-{generation}-{}", running.fetches));
                    if let Some(id) = Id::from_value(&id_value) {
                        fetch.id = id;
                        let _ = running.stdin.send(message::request(
                            &id_value,
                            "tools/list",
                            json!({"cursor": cursor}),
                        ));
                        return;
                    }
                }
            }
            None => {
                tracing::warn!(session = self.info.id, server = %self.info.server, "the server refused tools/list; its catalog is empty")
            }
        }
        let Some(fetch) = running.fetch.take() else {
            return;
        };
        let instructions = running
            .init
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let capabilities = running
            .init
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let catalog = Catalog::from_pages(fetch.pages, instructions.clone(), capabilities.clone()).unwrap_or_else(|e| {
            tracing::warn!(session = self.info.id, server = %self.info.server, "unusable tools/list ({e}); catalog treated as empty");
            Catalog::from_pages(Vec::new(), instructions, capabilities).unwrap_or_else(|_| unreachable_empty())
        });
        let epoch = running.record.epoch;
        self.install_catalog(Arc::new(catalog), epoch, fetch.announce);
    }

    fn install_catalog(&mut self, catalog: Arc<Catalog>, epoch: ExecutionEpoch, announce: bool) {
        let changed = self
            .info
            .catalog
            .as_ref()
            .is_none_or(|old| old.digest() != catalog.digest());
        if changed {
            if let Some(old) = self.info.catalog.take() {
                let diff = old.diff(&catalog);
                tracing::info!(
                    session = self.info.id, server = %self.info.server, %epoch, revision = %catalog.digest(),
                    changes = %diff.lines().join("; "), "catalog_refreshed"
                );
                self.info.previous_catalog = Some(old);
            } else {
                tracing::info!(session = self.info.id, server = %self.info.server, %epoch, revision = %catalog.digest(), tools = catalog.len(), "catalog_refreshed");
            }
        }
        let differs_from_shown = self
            .info
            .presented
            .as_ref()
            .is_some_and(|shown| shown.digest() != catalog.digest());
        self.info.catalog = Some(catalog);
        self.info.phase = Phase::CatalogReady;
        if changed {
            // A decision being made about the old definitions would be about something else.
            for (id, waiting) in std::mem::take(&mut self.authorizing) {
                self.ctx
                    .authorizer
                    .withdraw(self.info.id, waiting.call, Withdrawn::CatalogChanged);
                self.refuse(id, waiting.tool, Denial::approval_expired());
            }
        }
        self.publish();
        if announce && differs_from_shown {
            self.reply(message::notification(
                "notifications/tools/list_changed",
                None,
            ));
        }
        for msg in std::mem::take(&mut self.held) {
            self.toward_server(msg);
        }
    }

    // ---- from the server ----

    fn on_server_line(&mut self, line: Line) {
        let raw = match line {
            Line::Frame(raw) => raw,
            Line::Oversize { len, prefix } => {
                tracing::warn!(
                    session = self.info.id,
                    len,
                    "server message over the size cap; dropped"
                );
                if let Some(id) = sniff_id(&prefix).filter(|id| self.in_flight.contains_key(id)) {
                    self.in_flight.remove(&id);
                    let reason = format!(
                        "the server's answer of {len}+ bytes exceeds Postern's {} MiB limit",
                        MAX_FRAME >> 20
                    );
                    self.reply(message::error(
                        Some(&id),
                        code::INTERNAL_ERROR,
                        &reason,
                        None,
                    ));
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
            Kind::Response { id } if self.upstream.is_internal(id) => self.on_fetch_response(msg),
            Kind::Response { id } => {
                if let Some(call) = self.in_flight.remove(id) {
                    let outcome = match msg.body.get("result") {
                        Some(result) if result.get("isError") == Some(&Value::Bool(true)) => {
                            CallOutcome::ToolError
                        }
                        Some(_) => CallOutcome::Ok,
                        None => CallOutcome::Error,
                    };
                    self.audit_result(id, &call, outcome);
                    self.note_listing_answered(id);
                    self.reply(msg.raw);
                } else {
                    tracing::warn!(session = self.info.id, %id, "server answered a request nobody sent; dropped");
                }
            }
            Kind::Request { id, .. } => {
                self.server_requests.insert(id.clone());
                self.reply(msg.raw);
            }
            Kind::Notification { method } => {
                if method == "notifications/tools/list_changed" {
                    self.schedule_refetch();
                }
                self.reply(msg.raw);
            }
        }
    }

    /// The agent was shown the catalog through a forwarded `tools/list` answer.
    fn note_listing_answered(&mut self, id: &Id) {
        if let Upstream::Running(running) = &mut self.upstream
            && let Some(i) = running.listing.iter().position(|l| l == id)
        {
            running.listing.swap_remove(i);
            self.info.presented.clone_from(&self.info.catalog);
            self.info.presented_epoch = Some(running.record.epoch);
            if let Some(catalog) = &self.info.presented {
                self.ctx.audit.record(AuditEvent::CatalogPresented {
                    session: self.info.id,
                    server: self.info.server.clone(),
                    epoch: running.record.epoch,
                    revision: catalog.digest(),
                });
            }
            self.publish();
        }
    }

    fn schedule_refetch(&mut self) {
        let generation = self.generation;
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        if running.refetch_scheduled {
            return;
        }
        running.refetch_scheduled = true;
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(REFETCH_DEBOUNCE).await;
            let _ = events.send(Event::RefetchCatalog { generation });
        });
    }

    // ---- epochs ending ----

    /// Ends the running server's life once both its stdout has closed (every line it
    /// wrote has been routed) and its process has exited.
    fn finish_if_gone(&mut self) {
        let (report, started, old_epoch) = match &self.upstream {
            Upstream::Running(r) if r.stdout_closed && r.exit.is_some() => (
                r.exit.unwrap_or(ExitReport::Unknown),
                r.started,
                r.record.epoch,
            ),
            _ => return,
        };
        self.upstream = Upstream::Down;
        self.server_requests.clear();
        self.info.phase = Phase::Stopped;
        let reason = format!("server exited ({report})");
        self.info.last_exit = Some(reason.clone());
        tracing::warn!(session = self.info.id, server = %self.info.server, epoch = %old_epoch, %report, unanswered = self.in_flight.len(), "server exited");
        self.count_crash(started.elapsed() < CRASH_WINDOW);
        self.end_epoch(old_epoch, None, &reason);
        self.publish();
    }

    /// Restarts the server (on-change policy, or `postern server restart`).
    pub(super) fn restart(&mut self, why: &str) {
        let Upstream::Running(running) = std::mem::replace(&mut self.upstream, Upstream::Down)
        else {
            return;
        };
        let old_epoch = running.record.epoch;
        tracing::info!(session = self.info.id, server = %self.info.server, epoch = %old_epoch, "restarting: {why}");
        tokio::spawn(stop_gracefully(*running));
        self.server_requests.clear();
        self.crashes = 0;
        self.end_epoch(old_epoch, None, why);
        self.start_upstream();
    }

    /// Stops the server without starting another (the next request launches one).
    pub(super) fn stop_upstream(&mut self, why: &str) {
        let Upstream::Running(running) = std::mem::replace(&mut self.upstream, Upstream::Down)
        else {
            return;
        };
        let old_epoch = running.record.epoch;
        tracing::info!(session = self.info.id, server = %self.info.server, epoch = %old_epoch, "stopping: {why}");
        tokio::spawn(stop_gracefully(*running));
        self.server_requests.clear();
        self.info.phase = Phase::Stopped;
        self.info.last_exit = Some(why.to_owned());
        self.info.credentials = Credentials::default();
        self.end_epoch(old_epoch, None, why);
        self.publish();
    }

    /// The same process now runs other code (it reloaded itself): a new epoch without
    /// a new process (refresh-contract §6).
    fn replace_epoch(&mut self, record: ExecutionRecord, why: &str) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        let old_epoch = running.record.epoch;
        let new_epoch = record.epoch;
        tracing::warn!(session = self.info.id, server = %self.info.server, old_epoch = %old_epoch, new_epoch = %new_epoch, "server_replaced: {why}");
        running.record = record.clone();
        running.fetch = None;
        running.listing.clear();
        // Calls still waiting for their intent were meant for the old code.
        running.outbox.retain(|(_, waiting)| waiting.is_none());
        self.info.record = Some(record);
        self.info.artifacts_newer.clear();
        self.info.phase = Phase::IdentityPending;
        self.end_epoch(old_epoch, Some(new_epoch), why);
        self.begin_fetch(true);
        self.publish();
    }

    /// Answers every request in flight to the ended epoch, and every held one, with
    /// `epoch_transition` (refresh-contract §5). Nothing is retried.
    fn end_epoch(&mut self, old: ExecutionEpoch, new: Option<ExecutionEpoch>, reason: &str) {
        self.ctx.audit.record(AuditEvent::ServerReplaced {
            session: self.info.id,
            server: self.info.server.clone(),
            old_epoch: old,
            new_epoch: new,
            reason: reason.to_owned(),
        });
        for (id, call) in &self.in_flight {
            self.audit_result(id, call, CallOutcome::EpochTransition);
        }
        let label = self.info.server.as_str();
        let detail = json!({
            "error": "epoch_transition",
            "server": label,
            "oldEpoch": old.to_string(),
            "newEpoch": new.map(|e| e.to_string()),
            "reason": reason,
            "retry": "not retried: check whether the call took effect, refresh tools/list, call again",
        });
        let text = format!(
            "server '{label}' changed execution epoch ({reason}) before answering; the call was not retried"
        );
        let mut owed: Vec<(Id, String)> = std::mem::take(&mut self.in_flight)
            .into_iter()
            .map(|(id, f)| (id, f.method))
            .collect();
        // Calls the gate was still deciding were never forwarded; a decision now would be
        // about code that is gone.
        for (id, waiting) in std::mem::take(&mut self.authorizing) {
            self.ctx
                .authorizer
                .withdraw(self.info.id, waiting.call, Withdrawn::EpochEnded);
            owed.push((id, "tools/call".into()));
        }
        let held = std::mem::take(&mut self.held);
        owed.extend(held.into_iter().filter_map(|m| match m.kind {
            Kind::Request { id, method } => Some((id, method)),
            _ => None,
        }));
        for (id, method) in owed {
            let line = if method == "tools/call" {
                message::result(&id, tool_error(&text, detail.clone()))
            } else {
                message::error(Some(&id), code::INTERNAL_ERROR, &text, Some(detail.clone()))
            };
            self.reply(line);
        }
    }

    fn on_artifacts_changed(&mut self, observed: ExecutionRecord, _changed: Vec<PathBuf>) {
        let Upstream::Running(running) = &self.upstream else {
            return;
        };
        let changed = running.record.changed_artifacts(&observed);
        if changed.is_empty() {
            return;
        }
        for path in &changed {
            tracing::info!(server = %self.info.server, "build complete: {} changed", path.display());
        }
        let (policy, self_reloading) = (running.config.restart, running.config.self_reloading);
        let (pid, epoch) = (running.record.pid, running.record.epoch);
        let action = if self_reloading {
            "new epoch (self-reloading server)"
        } else if policy == RestartPolicy::OnChange {
            "restart (on-change)"
        } else {
            "none: running server unchanged (manual)"
        };
        self.ctx.audit.record(AuditEvent::ArtifactsChanged {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch,
            changed: changed.clone(),
            action: action.into(),
        });
        if self_reloading {
            let mut record = observed;
            record.pid = pid;
            self.replace_epoch(record, "artifacts changed under a self-reloading server");
        } else if policy == RestartPolicy::OnChange {
            self.restart("artifacts changed (restart on-change)");
        } else {
            tracing::info!(server = %self.info.server, "running server unchanged: pid={pid} epoch={epoch}");
            self.info.artifacts_newer = changed;
            self.publish();
        }
    }

    fn count_crash(&mut self, crashed: bool) {
        if !crashed {
            self.crashes = 0;
            self.info.backoff_until_ms = None;
            return;
        }
        self.crashes += 1;
        if self.crashes < 2 {
            return;
        }
        let delay =
            Duration::from_secs(1 << (self.crashes - 2).min(5)).min(Duration::from_secs(30));
        self.info.backoff_until_ms = Some(now_ms() + delay.as_millis() as i64);
        tracing::warn!(server = %self.info.server, crashes = self.crashes, delay_s = delay.as_secs(), "server crash loop: backing off");
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = events.send(Event::BackoffOver);
        });
    }

    pub(super) fn on_backoff_over(&mut self) {
        if self
            .info
            .backoff_until_ms
            .is_some_and(|until| until <= now_ms())
        {
            self.info.backoff_until_ms = None;
            self.publish();
        }
    }
}

/// A built-in `tools/call` as it is forwarded: any `_meta["postern/inject"]` the agent sent
/// removed, and `headers` (if any) put there for the builtin. `None` when the original bytes
/// can go as they are.
fn with_injection(msg: &Message, headers: &[InjectedHeader]) -> Option<Bytes> {
    let sent_one = msg
        .params()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(INJECT_META))
        .is_some();
    if headers.is_empty() && !sent_one {
        return None;
    }
    let mut body = msg.body.clone();
    let params = body
        .entry("params")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let meta = meta.as_object_mut()?;
    meta.remove(INJECT_META);
    if !headers.is_empty() {
        let injected: Vec<Value> = headers
            .iter()
            .map(|h| json!({"header": h.header, "value": h.value.expose(), "hosts": h.hosts}))
            .collect();
        meta.insert(INJECT_META.to_owned(), Value::Array(injected));
    }
    serde_json::to_vec(&Value::Object(body))
        .ok()
        .map(Bytes::from)
}

/// A tool result the model sees as an error, with a readable text and structured detail.
fn tool_error(text: &str, detail: Value) -> Value {
    json!({"content": [{"type": "text", "text": format!("{text}\n{detail}")}], "structuredContent": detail, "isError": true})
}

/// 80 random bits for an id.
fn rand_bits() -> u128 {
    ulid::Ulid::new().random()
}

fn unreachable_empty() -> Catalog {
    // An empty page list with plain values cannot fail to build.
    Catalog::new(Vec::new(), None, json!({}))
        .unwrap_or_else(|_| panic!("an empty catalog is always valid"))
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

async fn read_server<R: tokio::io::AsyncBufRead + Unpin>(
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

/// Watches the running epoch's artifacts and reports what is on disk now. The first
/// look happens at once: the record was captured before the launch, and a build that
/// landed while the server started must not go unseen.
async fn watch_artifacts(
    config: ServerConfig,
    cache: Arc<DigestCache>,
    record: ExecutionRecord,
    generation: u64,
    events: mpsc::UnboundedSender<Event>,
) {
    let paths: Vec<PathBuf> = record.artifacts().map(|a| a.path.clone()).collect();
    let mut watch = match ArtifactWatch::new(&paths) {
        Ok(watch) => watch,
        Err(e) => {
            tracing::warn!(server = %config.label, "cannot watch the server's files ({e}); rebuilds will not be noticed");
            return;
        }
    };
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            watch.changed().await;
        }
        let Some(now) = observe(&config, &cache, &record).await else {
            continue;
        };
        let changed = record.changed_artifacts(&now);
        if changed.is_empty() {
            continue;
        }
        if events
            .send(Event::ArtifactsChanged {
                generation,
                record: Box::new(now),
                changed,
            })
            .is_err()
        {
            return;
        }
    }
}

/// What is on disk now for `config`, as a record of the running process with a fresh
/// epoch; `None` while the files cannot be read (a build in progress).
async fn observe(
    config: &ServerConfig,
    cache: &Arc<DigestCache>,
    running: &ExecutionRecord,
) -> Option<ExecutionRecord> {
    let (cfg, cache) = (config.clone(), Arc::clone(cache));
    match tokio::task::spawn_blocking(move || cache.observe(&cfg)).await {
        Ok(Ok(observed)) => Some(postern_supervisor::record(
            config,
            observed,
            running.pid,
            running.started_at_ms,
        )),
        Ok(Err(e)) => {
            tracing::info!(server = %config.label, "build in progress? {e}");
            None
        }
        Err(_) => None,
    }
}

/// Samples the server's process group for a replaced worker (refresh-contract §6);
/// the new epoch's record is captured again from disk.
async fn sample_workers(
    config: ServerConfig,
    cache: Arc<DigestCache>,
    record: ExecutionRecord,
    generation: u64,
    events: mpsc::UnboundedSender<Event>,
) {
    let pid = record.pid;
    let mut sample = ProcessGroupSample::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tick.tick().await;
        let (replaced, back) = tokio::task::spawn_blocking(move || {
            let replaced = sample.next(pid);
            (replaced, sample)
        })
        .await
        .unwrap_or_default();
        sample = back;
        let Some(what) = replaced else { continue };
        let fresh = match observe(&config, &cache, &record).await {
            Some(fresh) => fresh,
            None => {
                let mut same = record.clone();
                same.epoch = postern_supervisor::new_epoch();
                same
            }
        };
        if events
            .send(Event::WorkerReplaced {
                generation,
                what,
                record: Box::new(fresh),
            })
            .is_err()
        {
            return;
        }
    }
}
