//! Launching a session's server: starting it off the loop, wiring its stdin, stdout
//! and exit, the watchers that notice rebuilt artifacts and replaced workers, and the
//! agent's `initialize` answered once the server is up (or could not start).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use postern_domain::{AuditEvent, ExecutionRecord, ServerConfig};
use postern_supervisor::{ArtifactWatch, DigestCache, ProcessGroupSample};
use serde_json::json;
use tokio::sync::mpsc;

use super::{CatalogStage, Running, Upstream, Watchers};
use crate::framing;
use crate::handshake::initialize_result;
use crate::message::{self, Kind, code};
use crate::registry::Credentials;
use crate::session::{Event, Session};
use crate::upstream::{self, StartError, Started};

/// How often a running server's process group is sampled for replaced workers.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

impl Session {
    pub(in crate::session) fn start_upstream(&mut self) {
        self.generation += 1;
        let generation = self.generation;
        self.upstream = Upstream::Starting;
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

    pub(super) fn on_started(&mut self, outcome: Result<Box<Started>, StartError>) {
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
            watch,
        } = started;
        let generation = self.generation;
        let (stdin_tx, stdin_rx) = framing::outbound(self.upstream_pressure.clone());
        // Lines and their newlines in one write, several at once while more are queued.
        tokio::spawn(framing::write_lines(stdin, stdin_rx));
        tokio::spawn(framing::read_lines(
            stdout,
            self.server_lines.clone(),
            move |line| Event::Server { generation, line },
            Some(Event::ServerStdoutClosed { generation }),
            vec![self.to_agent.pressure().clone()],
        ));
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
                watch,
            )),
            tokio::spawn(sample_workers(
                config.clone(),
                Arc::clone(&self.ctx.cache),
                record.clone(),
                generation,
                self.events.clone(),
            )),
            tokio::spawn(ping_rounds(generation, self.events.clone())),
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
        if let Some(egress) = &credentials.egress {
            egress.started(record.epoch);
        }
        self.info.credentials = Credentials {
            released: credentials.released,
            brokered: credentials.brokered,
            withheld: credentials.withheld,
            reason: credentials.reason,
        };
        self.info.record = Some(record.clone());
        self.info.artifacts_newer.clear();
        self.info.last_exit = None;
        self.info.unresponsive_since_ms = None;
        self.upstream = Upstream::Running(Box::new(Running {
            stdin: stdin_tx,
            handle,
            record: Arc::new(record),
            config,
            init,
            started: Instant::now(),
            stdout_closed: false,
            exit: None,
            catalog: CatalogStage::Fetching(None),
            fetches: 0,
            refetch_scheduled: false,
            ping: None,
            outbox: super::Outbox::new(self.upstream_pressure.clone()),
            _watchers: watchers,
            egress: credentials.egress,
        }));
        self.publish();
        self.answer_init();
        // A lock or a credential's change that came while the launch was under way (it may
        // have released what they take back) is carried out now that the server runs; the
        // requests held for it then start the next launch, which asks the authority anew.
        for command in std::mem::take(&mut self.commands_while_starting) {
            self.on_command(command);
        }

        let held = self.requests.take_held();
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
        // Nothing runs that they could concern.
        self.commands_while_starting.clear();
        let reason = error.reason().to_owned();
        tracing::warn!(session = self.info.id, server = %self.info.server, "{reason}");
        self.upstream = Upstream::Down;
        self.info.last_exit = Some(reason.clone());
        self.count_crash(matches!(error, StartError::Crashed(_)));
        self.answer_init();
        let data = json!({"error": "server_unavailable", "server": self.info.server.as_str()});
        for msg in self.requests.take_held() {
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

    /// Answers the agent's `initialize`, then refuses any repeat of it sent meanwhile.
    fn answer_init(&mut self) {
        if let Some((id, repeats)) = self.requests.take_initialize() {
            let params = self.client_init.clone().unwrap_or_else(|| json!({}));
            let upstream = match &self.upstream {
                Upstream::Running(running) => Some(&running.init),
                _ => None,
            };
            self.reply(message::result(
                &id,
                initialize_result(self.info.server.as_str(), &params, upstream),
            ));
            for _ in 0..repeats {
                self.reply(message::error(
                    Some(&id),
                    code::INVALID_REQUEST,
                    "already initialized",
                    None,
                ));
            }
        }
    }
}

/// Asks for a health round every [`super::health::PING_EVERY`] while the process runs.
async fn ping_rounds(generation: u64, events: mpsc::UnboundedSender<Event>) {
    loop {
        tokio::time::sleep(super::health::PING_EVERY).await;
        if events.send(Event::HealthCheck { generation }).is_err() {
            return;
        }
    }
}

/// Watches the running epoch's artifacts and reports what is on disk now, with the watch the
/// launch began before its record was checked (so a build that landed while the server
/// started is queued in it), or, without one, a new watch and a first look at once.
async fn watch_artifacts(
    config: ServerConfig,
    cache: Arc<DigestCache>,
    record: ExecutionRecord,
    generation: u64,
    events: mpsc::UnboundedSender<Event>,
    launched: Option<ArtifactWatch>,
) {
    // The launch's own watch has run since before the record was checked: any change since is
    // queued in it. A new one starts late, so the files are looked at once first.
    let (mut watch, mut first) = match launched {
        Some(watch) => (watch, false),
        None => {
            let paths: Vec<PathBuf> = record.artifacts().map(|a| a.path.clone()).collect();
            match ArtifactWatch::new(&paths) {
                Ok(watch) => (watch, true),
                Err(e) => {
                    tracing::warn!(server = %config.label, "cannot watch the server's files ({e}); rebuilds will not be noticed");
                    return;
                }
            }
        }
    };
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
