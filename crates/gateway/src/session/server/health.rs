//! Deadlines on the gate's own requests to a server: a catalog fetch that gets no answer ends
//! with what it has, and a server that stops answering pings is reported in status and the
//! log (it keeps running: a long call may still answer).

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::Upstream;
use crate::message::{self, Id, Message, code};
use crate::session::{Event, Session, now_ms};

/// How long the server has to list its tools, every page of the gate's `tools/list`.
pub(super) const FETCH_DEADLINE: Duration = Duration::from_secs(30);

/// How often a running server is pinged; a ping unanswered at the next round marks the server
/// as not answering.
pub(super) const PING_EVERY: Duration = Duration::from_secs(15);

impl Session {
    /// Starts the clock on the fetch whose first request is `id`: not done after
    /// [`FETCH_DEADLINE`], it ends with the pages it has, and the requests it holds are
    /// released.
    pub(super) fn fetch_deadline(&self, id: Id) {
        let (events, generation) = (self.events.clone(), self.generation);
        tokio::spawn(async move {
            tokio::time::sleep(FETCH_DEADLINE).await;
            let _ = events.send(Event::FetchDeadline { generation, id });
        });
    }

    pub(super) fn on_fetch_deadline(&mut self, id: &Id) {
        let Upstream::Running(running) = &self.upstream else {
            return;
        };
        let Some(page) = running
            .catalog
            .fetch()
            .filter(|f| f.origin == *id)
            .map(|f| f.id.clone())
        else {
            return;
        };
        let reason = format!(
            "the server did not list its tools within {}s",
            FETCH_DEADLINE.as_secs()
        );
        self.fail_fetch(&page, &reason);
    }

    /// Ends the fetch `id` as if the server had refused it (`reason` goes to the log).
    pub(super) fn fail_fetch(&mut self, id: &Id, reason: &str) {
        tracing::warn!(session = self.info.id, server = %self.info.server, "{reason}; the catalog fetch ends there");
        let mut refused = Map::new();
        refused.insert("jsonrpc".into(), json!("2.0"));
        refused.insert("id".into(), id.value().clone());
        refused.insert(
            "error".into(),
            json!({"code": code::INTERNAL_ERROR, "message": reason}),
        );
        if let Ok(msg) = Message::from_body(refused) {
            self.on_fetch_response(msg);
        }
    }

    /// A health round: a ping still unanswered from the last round marks the server as not
    /// answering; otherwise a new ping goes out, under an id no agent can predict.
    pub(super) fn on_health_check(&mut self) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        if let Some((_, sent)) = &running.ping {
            if self.info.unresponsive_since_ms.is_none() {
                let waited = sent.elapsed();
                tracing::warn!(session = self.info.id, server = %self.info.server, epoch = %running.record.epoch, waited_s = waited.as_secs(), "the server does not answer pings");
                self.info.unresponsive_since_ms = Some(now_ms() - waited.as_millis() as i64);
                self.publish();
            }
            return;
        }
        let id_value = json!(format!("postern-ping-{}", ulid::Ulid::new()));
        let Some(id) = Id::from_value(&id_value) else {
            return;
        };
        running.ping = Some((id, Instant::now()));
        running.send(message::request(
            &id_value,
            "ping",
            Value::Object(Map::new()),
        ));
    }

    /// The server answered the gate's ping (a result or an error: either way it answers).
    pub(super) fn on_pong(&mut self) {
        if let Upstream::Running(running) = &mut self.upstream {
            running.ping = None;
        }
        if self.info.unresponsive_since_ms.take().is_some() {
            tracing::info!(session = self.info.id, server = %self.info.server, "the server answers pings again");
            self.publish();
        }
    }
}
