//! Tasks (MCP 2025-11-25): a tool call the server answers with a task follows the epoch
//! that created it (docs/refresh-contract.md §10). `tasks/get`, `tasks/result` and
//! `tasks/cancel` for it go only to that epoch; once the epoch ends the agent is told (a
//! `failed` status naming the transition) and later requests for it are answered by the gate,
//! so a task id of epoch A never reaches epoch B. The task's real outcome (its `tasks/result`)
//! is journaled as the call's result.

use std::time::Instant;

use postern_domain::{AuditEvent, CallOutcome, ExecutionEpoch};
use serde_json::{Map, Value, json};

use super::Upstream;
use crate::message::{self, Id, Message, code};
use crate::session::{InFlight, Session, outcome_of};

/// The most tasks a session remembers; the oldest ended ones are forgotten first.
const MAX_TASKS: usize = 1024;

/// The fields of a task the session keeps, and how long each may be (as JSON).
const TASK_FIELDS: &[&str] = &[
    "taskId",
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttl",
    "pollInterval",
];
const MAX_TASK_FIELD: usize = 1024;

/// A task a forwarded tool call created.
#[derive(Debug, Clone)]
pub(in crate::session) struct Task {
    /// The epoch whose code runs it.
    epoch: ExecutionEpoch,
    /// The id of the tool call that created it, and its tool (for the journal).
    call: Value,
    tool: String,
    created: Instant,
    /// The task as the server described it (`taskId`, `status`, `createdAt`, ...).
    described: Map<String, Value>,
    /// Why it ended without its result reaching the agent (its epoch ended), if it did.
    lost: Option<Value>,
    /// Whether its outcome is journaled.
    journaled: bool,
}

/// Whether a request for a task may go on to the server.
pub(super) enum TaskCheck {
    /// Not a request about one task (or the server's own business): decide it as usual.
    NotATask,
    /// A task of the current epoch: decide and forward it.
    Current(String),
    /// Answered by the gate: the task is unknown here, or its epoch ended.
    Answered,
}

impl Session {
    /// Checks an agent's `tasks/get`, `tasks/result` or `tasks/cancel` against the tasks this
    /// session's calls created, answering it when it must not reach the server.
    pub(super) fn check_task_request(&mut self, msg: &Message, id: &Id, method: &str) -> TaskCheck {
        if !matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel") {
            return TaskCheck::NotATask;
        }
        let Some(task_id) = msg
            .params()
            .and_then(|p| p.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            self.reply(message::error(
                Some(id),
                code::INVALID_PARAMS,
                &format!("{method} needs a \"taskId\" string"),
                None,
            ));
            return TaskCheck::Answered;
        };
        let current = match &self.upstream {
            Upstream::Running(running) => Some(running.record.epoch),
            _ => None,
        };
        match self.tasks.get(&task_id) {
            None => {
                let reason = format!(
                    "no task {task_id:?} was created through this session: Postern passes requests only for tasks its calls created"
                );
                self.reply(message::error(
                    Some(id),
                    code::INVALID_PARAMS,
                    &reason,
                    None,
                ));
                TaskCheck::Answered
            }
            Some(task) if task.lost.is_some() || Some(task.epoch) != current => {
                let detail = task.lost.clone().unwrap_or_else(|| {
                    transition(
                        &self.info.server,
                        task.epoch,
                        current,
                        "the server is not running",
                    )
                });
                let text = format!(
                    "task {task_id} ran on code that is gone (epoch {}); it was not carried over to the new code, and was not retried",
                    task.epoch
                );
                self.reply(message::error(
                    Some(id),
                    code::INTERNAL_ERROR,
                    &text,
                    Some(detail),
                ));
                TaskCheck::Answered
            }
            Some(_) => TaskCheck::Current(task_id),
        }
    }

    /// A forwarded tool call was answered: if with a task, the session remembers it and its
    /// outcome is journaled when its result comes. Returns whether it was a task.
    pub(super) fn note_created_task(&mut self, id: &Id, call: &InFlight, msg: &Message) -> bool {
        let Some(described) = msg
            .body
            .get("result")
            .and_then(|r| r.get("task"))
            .and_then(Value::as_object)
            .filter(|t| t.get("taskId").is_some_and(Value::is_string))
        else {
            return false;
        };
        let (Upstream::Running(running), Some(tool)) = (&self.upstream, &call.tool) else {
            return false;
        };
        let task_id = described["taskId"].as_str().unwrap_or_default().to_owned();
        tracing::info!(session = self.info.id, %id, task = %task_id, epoch = %running.record.epoch, "the call runs as a task");
        if self.tasks.len() >= MAX_TASKS
            && let Some(oldest) = self
                .tasks
                .iter()
                .min_by_key(|(_, t)| (!t.journaled, t.created))
                .map(|(k, _)| k.clone())
        {
            // Forgotten: a poll for it is refused as unknown from now on.
            self.tasks.remove(&oldest);
        }
        // Only the task's own fields are kept (and echoed in a failed status): a server cannot
        // park megabytes in the session with each task.
        let described: Map<String, Value> = described
            .iter()
            .filter(|(k, v)| {
                TASK_FIELDS.contains(&k.as_str()) && v.to_string().len() <= MAX_TASK_FIELD
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let task = Task {
            epoch: running.record.epoch,
            call: id.value().clone(),
            tool: tool.clone(),
            created: call.sent,
            described,
            lost: None,
            journaled: false,
        };
        self.tasks.insert(task_id, task);
        true
    }

    /// The server answered a `tasks/result`: that is the task's call's outcome.
    pub(super) fn note_task_result(&mut self, task_id: &str, msg: &Message) {
        let outcome = outcome_of(msg);
        self.journal_task(task_id, outcome);
    }

    /// The epoch `old` ended: its open tasks are lost. The agent gets a `failed` status for
    /// each, and the journal the transition as the call's outcome.
    pub(super) fn lose_tasks(&mut self, old: ExecutionEpoch, detail: &Value, why: &str) {
        let lost: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.epoch == old && t.lost.is_none() && !t.journaled)
            .map(|(k, _)| k.clone())
            .collect();
        for task_id in lost {
            let Some(task) = self.tasks.get_mut(&task_id) else {
                continue;
            };
            task.lost = Some(detail.clone());
            let mut status = task.described.clone();
            status.insert("status".into(), json!("failed"));
            status.insert(
                "statusMessage".into(),
                json!(format!(
                    "Postern: the server's execution epoch ended ({why}); this task ran on code that is gone and was not carried over"
                )),
            );
            self.reply(message::notification(
                "notifications/tasks/status",
                Some(Value::Object(status)),
            ));
            self.journal_task(&task_id, CallOutcome::EpochTransition);
        }
    }

    fn journal_task(&mut self, task_id: &str, outcome: CallOutcome) {
        let Some(task) = self.tasks.get_mut(task_id).filter(|t| !t.journaled) else {
            return;
        };
        task.journaled = true;
        self.ctx.audit.record(AuditEvent::ToolCallResult {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch: task.epoch,
            call: task.call.clone(),
            tool: task.tool.clone(),
            outcome,
            duration_ms: task.created.elapsed().as_millis() as u64,
        });
    }
}

/// The detail of a request for a task whose epoch is gone.
fn transition(
    server: &postern_domain::ServerLabel,
    old: ExecutionEpoch,
    new: Option<ExecutionEpoch>,
    reason: &str,
) -> Value {
    json!({
        "error": "epoch_transition",
        "server": server.as_str(),
        "oldEpoch": old.to_string(),
        "newEpoch": new.map(|e| e.to_string()),
        "reason": reason,
        "retry": "not retried: the task ran on code that is gone; call the tool again",
    })
}
