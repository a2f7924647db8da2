//! An execution epoch ending: the server exited, was restarted or stopped, or the
//! same process now runs other code; what rebuilt artifacts lead to under each restart
//! policy; and the back-off after a crash loop (refresh-contract §5, §6).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use postern_domain::{AuditEvent, CallOutcome, ExecutionEpoch, ExecutionRecord, RestartPolicy};
use postern_supervisor::ExitReport;
use serde_json::json;

use super::operations::not_made;
use super::{CatalogStage, Upstream, stop_gracefully};
use crate::authorize::Withdrawn;
use crate::message::{self, Kind};
use crate::registry::Credentials;
use crate::session::{Event, Session, Unsent, now_ms};

/// A launch that ends sooner than this after starting counts as a crash for back-off.
const CRASH_WINDOW: Duration = Duration::from_secs(10);

impl Session {
    /// Ends the running server's life once both its stdout has closed (every line it
    /// wrote has been routed) and its process has exited.
    pub(super) fn finish_if_gone(&mut self) {
        let (report, started, old_epoch) = match &self.upstream {
            Upstream::Running(r) if r.stdout_closed && r.exit.is_some() => (
                r.exit.unwrap_or(ExitReport::Unknown),
                r.started,
                r.record.epoch,
            ),
            _ => return,
        };
        self.upstream = Upstream::Down;
        let reason = format!("server exited ({report})");
        self.info.last_exit = Some(reason.clone());
        tracing::warn!(session = self.info.id, server = %self.info.server, epoch = %old_epoch, %report, unanswered = self.requests.forwarded_count(), "server exited");
        self.count_crash(started.elapsed() < CRASH_WINDOW);
        self.end_epoch(old_epoch, None, &reason);
        self.publish();
    }

    /// Restarts the server (on-change policy, or `postern server restart`).
    pub(in crate::session) fn restart(&mut self, why: &str) {
        let Upstream::Running(running) = std::mem::replace(&mut self.upstream, Upstream::Down)
        else {
            return;
        };
        let old_epoch = running.record.epoch;
        tracing::info!(session = self.info.id, server = %self.info.server, epoch = %old_epoch, "restarting: {why}");
        tokio::spawn(stop_gracefully(*running));
        self.crashes = 0;
        self.end_epoch(old_epoch, None, why);
        self.start_upstream();
    }

    /// Stops the server without starting another (the next request launches one).
    pub(in crate::session) fn stop_upstream(&mut self, why: &str) {
        let Upstream::Running(running) = std::mem::replace(&mut self.upstream, Upstream::Down)
        else {
            return;
        };
        let old_epoch = running.record.epoch;
        tracing::info!(session = self.info.id, server = %self.info.server, epoch = %old_epoch, "stopping: {why}");
        tokio::spawn(stop_gracefully(*running));
        self.info.last_exit = Some(why.to_owned());
        self.info.credentials = Credentials::default();
        self.end_epoch(old_epoch, None, why);
        self.publish();
    }

    /// The same process now runs other code (it reloaded itself): a new epoch without
    /// a new process (refresh-contract §6).
    pub(super) fn replace_epoch(&mut self, record: ExecutionRecord, why: &str) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        let old_epoch = running.record.epoch;
        let new_epoch = record.epoch;
        tracing::warn!(session = self.info.id, server = %self.info.server, old_epoch = %old_epoch, new_epoch = %new_epoch, "server_replaced: {why}");
        running.record = Arc::new(record.clone());
        running.catalog = CatalogStage::Fetching(None);
        // Nothing queued for the old code goes to the new: calls waiting for their intent, and
        // whatever waited behind them (answers to the old code's questions, cancels).
        running.outbox.retain(|_| false);
        self.info.record = Some(record);
        self.info.artifacts_newer.clear();
        self.end_epoch(old_epoch, Some(new_epoch), why);
        self.begin_fetch(true);
        self.publish();
    }

    /// Answers every request to the ended epoch (refresh-contract §5). Nothing is retried.
    /// Those in flight get `epoch_transition`: the old code may have acted on them. Those
    /// held, or waiting for the gate, were never forwarded and are told so
    /// (`epoch_ended_before_forwarding`), unless the gate's verdict refuses a call first.
    fn end_epoch(&mut self, old: ExecutionEpoch, new: Option<ExecutionEpoch>, reason: &str) {
        self.ctx.audit.record(AuditEvent::ServerReplaced {
            session: self.info.id,
            server: self.info.server.clone(),
            old_epoch: old,
            new_epoch: new,
            reason: reason.to_owned(),
        });

        let label = self.info.server.as_str();
        let detail = |code: &str, retry: &str| {
            json!({
                "error": code,
                "server": label,
                "oldEpoch": old.to_string(),
                "newEpoch": new.map(|e| e.to_string()),
                "reason": reason,
                "retry": retry,
            })
        };
        let forwarded = detail(
            "epoch_transition",
            "not retried: check whether the call took effect, refresh tools/list, call again",
        );
        let forwarded_text = format!(
            "server '{label}' changed execution epoch ({reason}) before answering; the call was not retried"
        );
        let unsent = detail(
            "epoch_ended_before_forwarding",
            "not forwarded: refresh tools/list, call again",
        );
        let unsent_text = format!(
            "server '{label}' changed execution epoch ({reason}) before this request was forwarded; nothing of it reached the server"
        );
        // A process that lives on (it reloaded itself) may still answer them: their ids stay
        // in use until it does. A process that is gone answers nothing more.
        let lives_on = matches!(self.upstream, Upstream::Running(_));
        if !lives_on {
            self.requests.forget_abandoned();
        }
        for (id, call) in self.requests.take_all_forwarded() {
            self.audit_result(&id, &call, CallOutcome::EpochTransition);
            self.reply(not_made(
                &id,
                &call.method,
                &forwarded_text,
                forwarded.clone(),
            ));
            if lives_on {
                self.requests.abandon(id);
            }
        }
        self.lose_tasks(old, &forwarded, reason);
        // The old code's questions to the agent (an elicitation, a sampling request) are
        // withdrawn: an answer now would reach other code.
        for (id, request) in std::mem::take(&mut self.server_requests) {
            self.audit_result(&id, &request, CallOutcome::EpochTransition);
            self.reply(message::notification(
                "notifications/cancelled",
                Some(json!({"requestId": id.value(), "reason": forwarded_text})),
            ));
        }
        // A decision now would be about code that is gone.
        let unanswered = Unsent::EpochEnded {
            text: unsent_text.clone(),
            detail: unsent.clone(),
        };
        self.abandon_authorizing(Withdrawn::EpochEnded, &unanswered);
        for msg in self.requests.take_held() {
            if let Kind::Request { id, method } = &msg.kind {
                self.reply(not_made(id, method, &unsent_text, unsent.clone()));
            }
        }
    }

    pub(super) fn on_artifacts_changed(
        &mut self,
        observed: ExecutionRecord,
        _changed: Vec<PathBuf>,
    ) {
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

    pub(super) fn count_crash(&mut self, crashed: bool) {
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

    pub(in crate::session) fn on_backoff_over(&mut self) {
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
