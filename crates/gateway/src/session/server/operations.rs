//! Requests other than tool calls that the gate decides (docs/refresh-contract.md §10):
//! the agent's `resources/read`, `prompts/get`, `completion/complete`, `tasks/*` and the
//! methods a server's configuration passes, decided at once (the vault, the caller,
//! admission) and forwarded behind a durable intent; and the requests a server sends the
//! agent (`sampling/createMessage`, `elicitation/create`, `roots/list`), journaled and refused
//! while the vault is locked.

use std::time::{Duration, Instant};

use postern_domain::AuditEvent;
use postern_domain::decision::Denial;
use serde_json::Value;

use super::tasks::TaskCheck;
use crate::authorize::{Direction, OperationToAuthorize, Verdict};
use crate::message::{self, Id, Message, code};
use crate::method::{self, SERVER_REQUESTS};
use crate::session::{InFlight, Session};

/// How many requests of its server to the agent a session keeps open at once.
const MAX_SERVER_REQUESTS: usize = 64;

/// How many requests (other than `ping`) a server may send the agent per minute.
const SERVER_REQUEST_RATE: usize = 120;

impl Session {
    /// Decides an agent's request other than a tool call and forwards it behind its intent,
    /// or answers it with the refusal (a JSON-RPC error whose data is the refusal's detail).
    pub(super) fn authorize_operation(&mut self, msg: Message, id: Id) {
        let message::Kind::Request { method, .. } = &msg.kind else {
            return;
        };
        let method = method.clone();
        let task = match self.check_task_request(&msg, &id, &method) {
            TaskCheck::Answered => return,
            TaskCheck::Current(task) => Some(task),
            TaskCheck::NotATask => None,
        };
        let verdict = self.decide_operation(&method, Direction::ToServer);
        let arguments = method::operation_arguments(msg.params());
        match verdict {
            Verdict::Allow(authority) => {
                let name = method.clone();
                let out = super::calls::Outgoing {
                    line: msg.line,
                    holds: Vec::new(),
                };
                self.send_after_intent(id.clone(), &method, name, arguments, authority, out);
                if let Some(request) = self.requests.forwarded_mut(&id) {
                    request.task = task;
                }
            }
            Verdict::Deny(denial) => {
                let answer = refusal(&id, &denial);
                self.journal_refusal(&id, &method, &denial);
                self.reply(answer);
            }
            Verdict::Relaunch => {
                tracing::error!(session = self.info.id, %id, method, "the gate asked to relaunch for a request other than a tool call; refused");
                let denial = Denial::approval_expired();
                self.journal_refusal(&id, &method, &denial);
                self.reply(refusal(&id, &denial));
            }
        }
    }

    /// A request the server sends the agent: journaled and forwarded, refused to the server
    /// while the vault is locked (a `ping` always goes), and refused (-32601) when it is not
    /// one MCP defines for servers.
    pub(super) fn on_server_request(&mut self, msg: Message, id: Id, method: String) {
        if !SERVER_REQUESTS.contains(&method.as_str()) {
            tracing::warn!(
                session = self.info.id,
                method,
                "server sent a request the protocol does not let servers send; refused"
            );
            let reason = format!("Postern does not pass '{method}' from servers to agents");
            let answer = message::error(Some(&id), code::METHOD_NOT_FOUND, &reason, None);
            return self.send_upstream(answer);
        }
        if self.server_requests.contains_key(&id) {
            tracing::warn!(
                session = self.info.id,
                method,
                "server request refused: its id is in use by an open one"
            );
            let reason =
                format!("request id {id} is already in use by an open request of this server");
            let answer = message::error(Some(&id), code::INVALID_REQUEST, &reason, None);
            return self.send_upstream(answer);
        }
        if let Some(reason) = self.server_requests_over_limit(&method) {
            tracing::warn!(
                session = self.info.id,
                method,
                "server request refused: {reason}"
            );
            let answer = message::error(Some(&id), code::INTERNAL_ERROR, &reason, None);
            return self.send_upstream(answer);
        }
        if method != "ping"
            && let Verdict::Deny(denial) = self.decide_operation(&method, Direction::ToAgent)
        {
            self.journal_refusal(&id, &method, &denial);
            return self.send_upstream(refusal(&id, &denial));
        }
        if method != "ping"
            && let Some(record) = &self.info.record
        {
            self.ctx.audit.record(AuditEvent::ToolCallIntent {
                session: self.info.id,
                server: self.info.server.clone(),
                epoch: record.epoch,
                call: id.value().clone(),
                tool: method.clone(),
                arguments: method::operation_arguments(msg.params()),
                authority: None,
            });
        }
        let tool = (method != "ping").then(|| method.clone());
        let request = InFlight {
            method,
            tool,
            sent: Instant::now(),
            task: None,
            intent: None,
            _holds: Vec::new(),
        };
        self.server_requests.insert(id, request);
        self.reply(msg.line);
    }

    /// Why a server's request to the agent is refused for its number, if it is: at most
    /// [`MAX_SERVER_REQUESTS`] open at once, and at most [`SERVER_REQUEST_RATE`] journaled per
    /// minute (a server cannot flood the agent or the audit log).
    fn server_requests_over_limit(&mut self, method: &str) -> Option<String> {
        if self.server_requests.len() >= MAX_SERVER_REQUESTS {
            return Some(format!(
                "{MAX_SERVER_REQUESTS} requests of this server to the agent are open already"
            ));
        }
        if method == "ping" {
            return None;
        }
        let now = Instant::now();
        let recent = &mut self.server_request_times;
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= SERVER_REQUEST_RATE {
            return Some(format!(
                "this server sent the agent {SERVER_REQUEST_RATE} requests in the last minute; Postern passes more later"
            ));
        }
        recent.push_back(now);
        None
    }

    /// The server cancelled one of its requests to the agent: the agent is told, if it was one
    /// the agent still owes; any other is dropped.
    pub(super) fn on_server_cancelled(&mut self, msg: Message) {
        let id = msg
            .params()
            .and_then(|p| p.get("requestId"))
            .and_then(Id::from_value);
        match id.and_then(|id| self.server_requests.remove_entry(&id)) {
            Some((id, request)) => {
                self.audit_result(&id, &request, postern_domain::CallOutcome::Cancelled);
                self.reply(msg.line);
            }
            None => {
                tracing::debug!(
                    session = self.info.id,
                    "the server cancelled a request it did not send the agent; dropped"
                );
            }
        }
    }

    fn decide_operation(&self, method: &str, direction: Direction) -> Verdict {
        let operation = OperationToAuthorize {
            session: self.info.id,
            server: self.info.server.clone(),
            caller: self.caller(),
            method: method.to_owned(),
            direction,
            credentials: self.info.credentials.released.clone(),
        };
        self.ctx.authorizer.authorize_operation(&operation)
    }

    /// Records a refused request (a tool call or any other) in the audit log, and so in
    /// Activity, under the epoch that would have run it.
    pub(super) fn journal_refusal(&self, id: &Id, name: &str, denial: &Denial) {
        tracing::info!(session = self.info.id, %id, name, code = denial.code.as_str(), "request refused");
        self.ctx.audit.record(AuditEvent::AuthorizationDenied {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch: self.info.record.as_ref().map(|r| r.epoch),
            call: id.value().clone(),
            tool: name.to_owned(),
            code: denial.code.as_str().into(),
            detail: denial.detail.clone(),
        });
    }
}

/// A refused request other than a tool call: a JSON-RPC error (-32603) with the refusal's
/// sentence and, as data, its structured detail (`{"error": "vault_locked", ...}`).
pub(super) fn refusal(id: &Id, denial: &Denial) -> bytes::Bytes {
    message::error(
        Some(id),
        code::INTERNAL_ERROR,
        &denial.message,
        Some(denial.detail.clone()),
    )
}

/// Whether an answer the gate owes is a tool result (`tools/call`) or a JSON-RPC error.
pub(super) fn answers_with_tool_error(method: &str) -> bool {
    method == "tools/call"
}

/// The answer to a request that was decided but could not go (its intent could not be
/// written): a tool error for a tool call, a JSON-RPC error otherwise.
pub(super) fn not_made(id: &Id, method: &str, text: &str, detail: Value) -> bytes::Bytes {
    if answers_with_tool_error(method) {
        message::result(id, super::calls::tool_error(text, detail))
    } else {
        message::error(Some(id), code::INTERNAL_ERROR, text, Some(detail))
    }
}
