//! The server's catalog: fetching `tools/list` (every page), installing what came
//! back, noting what the agent was shown, and refetching after `list_changed`.

use std::sync::Arc;
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::decision::Denial;
use postern_domain::{AuditEvent, ExecutionEpoch};
use serde_json::{Value, json};

use super::{CatalogStage, Fetch, Upstream};
use crate::authorize::Withdrawn;
use crate::message::{self, Id, Message, code};
use crate::session::{Event, Session, Unsent};

/// The most pages of one catalog fetch, and the most bytes: past either, the catalog is what
/// came so far.
const MAX_PAGES: usize = 100;
const MAX_CATALOG_BYTES: usize = 16 << 20;

/// Bursts of `tools/list_changed` are collected this long before the catalog is fetched.
const REFETCH_DEBOUNCE: Duration = Duration::from_millis(250);

impl Session {
    pub(super) fn begin_fetch(&mut self, announce: bool) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        running.fetches += 1;
        let id_value = fetch_id();
        let Some(id) = Id::from_value(&id_value) else {
            return;
        };
        let announce = announce || running.catalog.fetch().is_some_and(|f| f.announce);
        let fetch = Fetch {
            id: id.clone(),
            origin: id.clone(),
            pages: Vec::new(),
            bytes: 0,
            cursors: Default::default(),
            announce,
        };
        let stage = std::mem::replace(&mut running.catalog, CatalogStage::Ready);
        running.catalog = stage.begin(fetch);
        let _ = running
            .stdin
            .send(message::request(&id_value, "tools/list", json!({})));
        self.fetch_deadline(id);
        self.publish();
    }

    pub(super) fn on_fetch_response(&mut self, mut msg: Message) {
        let Upstream::Running(running) = &mut self.upstream else {
            return;
        };
        let Some(fetch) = running.catalog.fetch_mut() else {
            return;
        };
        let size = msg.line.len();
        match msg.body.remove("result") {
            Some(page) => {
                let cursor = page
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                fetch.pages.push(page);
                fetch.bytes += size;
                let more = match cursor {
                    Some(_)
                        if fetch.pages.len() >= MAX_PAGES || fetch.bytes > MAX_CATALOG_BYTES =>
                    {
                        tracing::warn!(session = self.info.id, server = %self.info.server, pages = fetch.pages.len(), bytes = fetch.bytes, "the server's tools/list goes on past Postern's limits ({MAX_PAGES} pages, {} MiB); the catalog is what came so far", MAX_CATALOG_BYTES >> 20);
                        None
                    }
                    Some(cursor) if !fetch.cursors.insert(cursor.clone()) => {
                        tracing::warn!(session = self.info.id, server = %self.info.server, "the server's tools/list repeats a cursor; the catalog is what came so far");
                        None
                    }
                    cursor => cursor,
                };
                if let Some(cursor) = more {
                    running.fetches += 1;
                    let id_value = fetch_id();
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
        let stage = std::mem::replace(&mut running.catalog, CatalogStage::Ready);
        let (Some(fetch), ready) = stage.finish() else {
            return;
        };
        running.catalog = ready;
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
        // The agent is told whenever what it was shown is not this epoch's catalog: another
        // revision, or the same one listed by code that is gone (a rebuild that kept its
        // catalog is news too: its calls are decided against the new code).
        let differs_from_shown = self.info.presented.as_ref().is_some_and(|shown| {
            shown.digest() != catalog.digest() || self.info.presented_epoch != Some(epoch)
        });
        self.info.catalog = Some(catalog);
        if changed {
            // A decision being made about the old definitions would be about something else.
            let expired = Unsent::Refused(Denial::approval_expired());
            self.abandon_authorizing(Withdrawn::CatalogChanged, &expired);
        }
        self.publish();
        if announce && differs_from_shown {
            self.reply(message::tools_list_changed());
        }
        for msg in self.requests.take_held() {
            self.toward_server(msg);
        }
    }

    /// Answers the agent's `tools/list` from the catalog the gate fetched, digested and
    /// checked: the agent sees exactly what cards, diffs and the ladder see, every tool as the
    /// server defined it, on one page. The server never hears the agent's request.
    pub(super) fn answer_tools_list(&mut self, msg: &Message, id: &Id) {
        if msg
            .params()
            .and_then(|p| p.get("cursor"))
            .is_some_and(|c| !c.is_null())
        {
            // Postern hands out no cursors: every tool is on the first page.
            return self.reply(message::error(
                Some(id),
                code::INVALID_PARAMS,
                "invalid cursor: Postern lists every tool on one page and gives no cursors",
                None,
            ));
        }
        let Upstream::Running(running) = &self.upstream else {
            return;
        };
        let epoch = running.record.epoch;
        let catalog = self
            .info
            .catalog
            .clone()
            .unwrap_or_else(|| Arc::new(unreachable_empty()));
        let tools: Vec<Value> = catalog
            .tools()
            .iter()
            .map(|tool| Value::Object(tool.definition().clone()))
            .collect();
        self.reply(message::result(id, json!({ "tools": tools })));
        self.ctx.audit.record(AuditEvent::CatalogPresented {
            session: self.info.id,
            server: self.info.server.clone(),
            epoch,
            revision: catalog.digest(),
        });
        self.info.presented = Some(catalog);
        self.info.presented_epoch = Some(epoch);
        self.publish();
    }

    pub(super) fn schedule_refetch(&mut self) {
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
}

/// The id of one of the gate's own `tools/list` requests: a ULID (80 random bits), so no agent can
/// predict it (an agent's request with the id of a fetch in progress is refused as a reuse).
fn fetch_id() -> Value {
    json!(format!("postern-catalog-{}", ulid::Ulid::new()))
}

pub(super) fn unreachable_empty() -> Catalog {
    // An empty page list with plain values cannot fail to build.
    Catalog::new(Vec::new(), None, json!({}))
        .unwrap_or_else(|_| panic!("an empty catalog is always valid"))
}
