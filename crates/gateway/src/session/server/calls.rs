//! A `tools/call` on its way to the server: the gate's decision, the credentials
//! injected into a built-in call, the durable intent that goes before it, and the
//! audit record of how it ended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use postern_domain::catalog::ToolDrift;
use postern_domain::decision::{Authority, Denial, DenyCode};
use postern_domain::{
    AgentRun, AuditEvent, CallId, CallOutcome, Caller, CatalogView, Presented, Request,
};
use postern_supervisor::LiveProcess;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Upstream;
use super::catalog::unreachable_empty;
use super::operations::not_made;
use crate::audit::Durable;
use crate::authorize::{
    CallToAuthorize, Hold, INJECT_META, InjectError, InjectedHeader, Verdict, Withdrawal,
    Withdrawn, credential_host, http_request_scope,
};
use crate::message::{self, Id, Message, code};
use crate::session::inline;
use crate::session::{Authorizing, Event, InFlight, Session, Settling, Stage, Unsent, now_ms};

/// How often a call waiting for a human tells the agent so (`notifications/progress`); the
/// crate's tests wait less.
const WAITING_PROGRESS: Duration = if cfg!(test) {
    Duration::from_millis(200)
} else {
    Duration::from_secs(10)
};

impl Session {
    /// Asks the gate about a `tools/call`; the verdict is taken at once when the gate gives it
    /// before `authorize` returns, else it comes back as [`Event::Authorized`].
    /// Nothing of the call reaches the server before it is allowed and its intent durable.
    pub(super) fn authorize_call(&mut self, msg: Message, id: Id) {
        let (tool, arguments) = match msg.tool_call() {
            Ok(call) => (
                call.name.to_owned(),
                call.arguments.cloned().map_or(Value::Null, Value::Object),
            ),
            Err(reason) => {
                // Refused on arrival already; never decided nor forwarded all the same.
                let line = message::error(Some(&id), code::INVALID_PARAMS, &reason, None);
                return self.reply(line);
            }
        };
        let Upstream::Running(running) = &self.upstream else {
            return;
        };
        let catalog = self
            .info
            .catalog
            .clone()
            .unwrap_or_else(|| Arc::new(unreachable_empty()));
        // What the agent knows of this epoch: what it was shown, or, once it was refused a call
        // as stale since the epoch changed, the current catalog (that refusal told it; at most
        // one call per session and epoch change is refused as stale, refresh-contract §4).
        let presented = postern_domain::decision::known_catalog(
            self.info.presented.as_ref().zip(self.info.presented_epoch),
            self.info
                .catalog
                .as_ref()
                .map(|c| (c, running.record.epoch)),
            self.stale_told,
        );
        let drift = match presented {
            Some((shown, _)) => shown.tool_drift(&tool, &catalog),
            None => ToolDrift::between(None, catalog.tool(&tool).map(|t| t.digest())),
        };
        let call = CallId::new(now_ms() as u64, rand_bits());
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
            client: self.info.client.clone(),
            request,
            record: running.record.clone(),
            catalog,
            arguments,
            withheld: self.info.credentials.withheld.clone(),
        };
        self.requests.decide(
            id.clone(),
            Authorizing {
                call,
                msg,
                tool,
                stage: Stage::Deciding,
            },
        );
        let events = self.events.clone();
        // Most calls are decided before `authorize` returns (a grant, a rule, a locked
        // vault), and go on at once ([`inline`]): only a call left waiting for a person gets
        // reminders, so a busy session does not keep a sleeping task per call it made in the
        // last ten seconds.
        let (asking, answer) = inline::ask();
        let waiting_id = id.clone();
        self.ctx.authorizer.authorize(
            pending,
            Box::new(move |verdict| {
                if let Err(verdict) = answer.give(verdict) {
                    let _ = events.send(Event::Authorized { id, call, verdict });
                }
            }),
        );
        match asking.returned() {
            Some(verdict) => self.on_authorized(waiting_id, call, verdict),
            None => self.remind_while_deciding(waiting_id, call, 1),
        }
    }

    /// While a call waits for a human, the agent hears so every [`WAITING_PROGRESS`] when the
    /// call carries a `progressToken` (so a client that resets its timeout on progress keeps
    /// waiting, and a person watching it sees why).
    fn remind_while_deciding(&self, id: Id, call: CallId, round: u32) {
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(WAITING_PROGRESS).await;
            let _ = events.send(Event::StillDeciding { id, call, round });
        });
    }

    pub(in crate::session) fn on_still_deciding(&mut self, id: Id, call: CallId, round: u32) {
        let Some(waiting) = self
            .requests
            .deciding(&id)
            .filter(|w| w.call == call && w.stage == Stage::Deciding)
        else {
            return; // decided, withdrawn or answered meanwhile
        };
        let Some(token) = waiting
            .msg
            .params()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned()
        else {
            return;
        };
        let waited = WAITING_PROGRESS.as_secs_f64() * f64::from(round);
        self.reply(message::notification(
            "notifications/progress",
            Some(json!({
                "progressToken": token,
                "progress": round,
                "message": format!(
                    "Postern is waiting for a person to approve this call ({waited:.0}s so far): in Postern's window or menu bar, or `postern approvals`"
                ),
            })),
        ));
        self.remind_while_deciding(id, call, round + 1);
    }

    /// Who is calling: the agent identified at connection, if it is still that process (a
    /// pid reused by another process is another caller).
    pub(super) fn caller(&self) -> Caller {
        let Some(agent) = &self.info.agent else {
            return Caller::Unidentifiable {
                reason: "the process that launched the shim could not be identified".into(),
            };
        };
        if self.agent_process.as_ref().is_some_and(LiveProcess::runs) {
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
    pub(super) fn on_authorized(&mut self, id: Id, call: CallId, verdict: Verdict) {
        if self.requests.settling(&id).is_some_and(|s| s.call == call)
            && let Some(settling) = self.requests.take_settling(&id)
        {
            return match verdict {
                Verdict::Deny(denial) => self.refuse(id, settling.tool, denial),
                // Allowed for an epoch or a catalog that is gone: it cannot go now.
                Verdict::Allow(_) | Verdict::Relaunch => {
                    self.answer_unsent(id, settling.tool, settling.unsent)
                }
            };
        }
        if self.requests.deciding(&id).is_none_or(|w| w.call != call) {
            return; // withdrawn meanwhile: cancelled, or its epoch ended
        }
        let Some(waiting) = self.requests.take_deciding(&id) else {
            return;
        };
        match verdict {
            Verdict::Deny(denial) => self.refuse(id, waiting.tool, denial),
            Verdict::Relaunch => {
                // The human released credentials this launch was not given: a new launch
                // of the same code gets them, and the call is decided again there.
                self.restart("credentials released after approval");
                self.hold(waiting.msg);
            }
            Verdict::Allow(authority) if self.is_builtin() => {
                self.fetch_injection(id, waiting, authority)
            }
            Verdict::Allow(authority) => {
                self.send_call(waiting.msg, id, waiting.tool, authority, None, Vec::new())
            }
        }
    }

    /// Stops waiting on the gate for every call it is deciding, none of which can be forwarded
    /// any more (`why`: the epoch ended, or the catalog changed). A call whose approval
    /// request was still open (now withdrawn), or whose credentials were being read, is
    /// answered `unsent` at once. One the gate had already decided (a lock answers the calls
    /// it finds waiting before it stops any server) waits for that verdict: a refusal
    /// answers it, anything else gets `unsent`. None of them is ever told it may have taken
    /// effect.
    pub(in crate::session) fn abandon_authorizing(&mut self, why: Withdrawn, unsent: &Unsent) {
        for (id, waiting) in self.requests.take_all_deciding() {
            let decided = waiting.stage == Stage::Deciding
                && self
                    .ctx
                    .authorizer
                    .withdraw(self.info.id, waiting.call, why)
                    == Withdrawal::AlreadyDecided;
            if decided {
                let settling = Settling {
                    call: waiting.call,
                    tool: waiting.tool,
                    unsent: unsent.clone(),
                };
                self.requests.settle(id, settling);
            } else {
                self.answer_unsent(id, waiting.tool, unsent.clone());
            }
        }
    }

    /// Answers a call that was never forwarded and never will be.
    fn answer_unsent(&mut self, id: Id, tool: String, unsent: Unsent) {
        match unsent {
            Unsent::Refused(denial) => self.refuse(id, tool, denial),
            Unsent::EpochEnded { text, detail } => {
                tracing::info!(session = self.info.id, %id, "call not forwarded: its epoch ended");
                self.reply(message::result(&id, tool_error(&text, detail)));
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
        let to = arguments
            .get("url")
            .and_then(Value::as_str)
            .and_then(credential_host);
        let Some(to) = to.filter(|_| !scope.is_empty()) else {
            let line = with_injection(&waiting.msg, &[]);
            return self.send_call(waiting.msg, id, waiting.tool, authority, line, Vec::new());
        };
        let egress = running.egress.clone();
        let call = waiting.call;
        let waiting = Authorizing {
            stage: Stage::Injecting,
            ..waiting
        };
        self.requests.decide(id.clone(), waiting);
        let authorizer = Arc::clone(&self.ctx.authorizer);
        let (server, events) = (self.info.server.clone(), self.events.clone());
        tokio::task::spawn_blocking(move || {
            let outcome = authorizer.inject(&server, &to, &scope, egress);
            let _ = events.send(Event::Injected {
                id,
                call,
                authority,
                outcome,
            });
        });
    }

    /// The engine supplied (or could not supply) the headers of an allowed built-in call.
    pub(super) fn on_injected(
        &mut self,
        id: Id,
        call: CallId,
        authority: Authority,
        outcome: Result<Vec<InjectedHeader>, InjectError>,
    ) {
        if self.requests.deciding(&id).is_none_or(|w| w.call != call) {
            return; // withdrawn meanwhile; the values are dropped unused
        }
        let Some(waiting) = self.requests.take_deciding(&id) else {
            return;
        };
        match outcome {
            Ok(mut headers) => {
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
                let holds = headers.iter_mut().filter_map(|h| h.hold.take()).collect();
                self.send_call(waiting.msg, id, waiting.tool, authority, line, holds);
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
    pub(super) fn refuse(&mut self, id: Id, tool: String, denial: Denial) {
        let stale = matches!(
            denial.code,
            DenyCode::AuthorizationStale | DenyCode::CatalogStale
        );
        self.journal_refusal(&id, &tool, &denial);
        self.reply(message::result(
            &id,
            tool_error(&denial.message, denial.detail),
        ));
        if stale && let Upstream::Running(running) = &self.upstream {
            // The agent now knows the epoch changed: its next call is decided against the new
            // code, and a client that re-lists on list_changed gets the new catalog.
            self.stale_told = Some(running.record.epoch);
            self.reply(message::tools_list_changed());
        }
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
        holds: Vec<Hold>,
    ) {
        // The call is forwarded as its line: the intent takes its parsed arguments as they are.
        let Message {
            line: sent,
            mut body,
            ..
        } = msg;
        let arguments = match body.remove("params") {
            Some(Value::Object(mut params)) => params.remove("arguments").unwrap_or(Value::Null),
            _ => Value::Null,
        };
        let out = Outgoing {
            line: line.unwrap_or(sent),
            holds,
        };
        self.send_after_intent(id, "tools/call", tool, arguments, authority, out);
    }

    /// Forwards a decided request once its intent row is durable: `name` and `arguments` are
    /// what the journal records (a tool and its arguments, or a method and its params).
    pub(super) fn send_after_intent(
        &mut self,
        id: Id,
        method: &str,
        name: String,
        arguments: Value,
        authority: Authority,
        out: Outgoing,
    ) {
        let Outgoing { line, holds } = out;
        let generation = self.generation;
        self.intents += 1;
        let number = self.intents;
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        let intent = AuditEvent::ToolCallIntent {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch: running.record.epoch,
            call: id.value().clone(),
            tool: name.clone(),
            arguments,
            authority: Some(authority),
        };
        self.requests.forward(
            id.clone(),
            InFlight {
                method: method.to_owned(),
                tool: Some(name),
                sent: Instant::now(),
                task: None,
                intent: Some(number),
                _holds: holds,
            },
        );
        running.send_after_intent(line, number);
        let (asking, answer) = inline::ask();
        let waiter = IntentWaiter {
            events: self.events.clone(),
            generation,
            id: id.clone(),
            intent: number,
            answer: Some(answer),
        };
        let done: Durable = Box::new(move |result| waiter.tell(result));
        match self.requests.at_most_one() {
            true => self.ctx.audit.record_durable_alone(intent, done),
            false => self.ctx.audit.record_durable(intent, done),
        }
        if let Some(result) = asking.returned() {
            self.on_intent_durable(id, number, result);
        }
    }

    /// Intent number `intent`, of the call the agent sent as `id`, is durable (its line goes),
    /// or could not be written (its line is dropped, and the call, if still open under that
    /// id and not another's that reuses it, is answered "not made").
    pub(super) fn on_intent_durable(&mut self, id: Id, intent: u64, result: Result<(), String>) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        match result {
            Ok(()) => running.release(intent, true),
            Err(reason) => {
                running.release(intent, false);
                let ours = self
                    .requests
                    .forwarded_mut(&id)
                    .is_some_and(|r| r.intent == Some(intent));
                if let Some((_, request)) =
                    ours.then(|| self.requests.take_forwarded(&id)).flatten()
                {
                    tracing::error!(session = self.info.id, %id, "call refused: its intent could not be recorded: {reason}");
                    let detail = json!({"error": "audit_unavailable", "reason": reason});
                    let text =
                        "Postern could not record this call in its audit log, so it was not made";
                    self.reply(not_made(&id, &request.method, text, detail));
                }
            }
        }
    }

    /// Records how a forwarded tool call ended.
    pub(in crate::session) fn audit_result(&self, id: &Id, call: &InFlight, outcome: CallOutcome) {
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
}

/// Tells the session whether a call's intent is durable: at once when the sink committed it on
/// the session's thread ([`inline`]), else through its queue. A sink that drops it untold (its
/// writer panicked with the intent in hand) does not leave the call waiting for ever: the call
/// is refused as one whose intent could not be recorded.
struct IntentWaiter {
    events: mpsc::UnboundedSender<Event>,
    generation: u64,
    /// The call's id and intent number.
    id: Id,
    intent: u64,
    /// Where the answer goes, until told.
    answer: Option<inline::Answer<Result<(), String>>>,
}

impl IntentWaiter {
    fn tell(mut self, result: Result<(), String>) {
        self.send(result);
    }

    fn send(&mut self, result: Result<(), String>) {
        let Some(answer) = self.answer.take() else {
            return;
        };
        if let Err(result) = answer.give(result) {
            let _ = self.events.send(Event::IntentDurable {
                generation: self.generation,
                id: self.id.clone(),
                intent: self.intent,
                result,
            });
        }
    }
}

impl Drop for IntentWaiter {
    fn drop(&mut self) {
        self.send(Err(
            "the audit log's writer stopped before it told whether the call's intent was recorded"
                .into(),
        ));
    }
}

/// What goes to the server for a decided request: its line, and what must stay alive while it
/// is open (the placeholders a built-in call was lent).
pub(super) struct Outgoing {
    pub(super) line: Bytes,
    pub(super) holds: Vec<Hold>,
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
    Some(crate::framing::encode(&body))
}

/// A tool result the model sees as an error, with a readable text and structured detail.
pub(super) fn tool_error(text: &str, detail: Value) -> Value {
    json!({"content": [{"type": "text", "text": format!("{text}\n{detail}")}], "structuredContent": detail, "isError": true})
}

/// 80 random bits for an id.
fn rand_bits() -> u128 {
    ulid::Ulid::new().random()
}
