//! The server's catalog: fetching `tools/list` (every page), installing what came
//! back, noting what the agent was shown, and refetching after `list_changed`.

use std::sync::Arc;
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::decision::Denial;
use postern_domain::{AuditEvent, ExecutionEpoch};
use serde_json::{Value, json};

use super::{Fetch, Upstream};
use crate::authorize::Withdrawn;
use crate::message::{self, Id, Message};
use crate::registry::Phase;
use crate::session::{Event, Session, Unsent};

/// Bursts of `tools/list_changed` are collected this long before the catalog is fetched.
const REFETCH_DEBOUNCE: Duration = Duration::from_millis(250);

impl Session {
    pub(super) fn begin_fetch(&mut self, announce: bool) {
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

    pub(super) fn on_fetch_response(&mut self, mut msg: Message) {
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
            let expired = Unsent::Refused(Denial::approval_expired());
            self.abandon_authorizing(Withdrawn::CatalogChanged, &expired);
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

    /// The agent was shown the catalog through a forwarded `tools/list` answer.
    pub(super) fn note_listing_answered(&mut self, id: &Id) {
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

pub(super) fn unreachable_empty() -> Catalog {
    // An empty page list with plain values cannot fail to build.
    Catalog::new(Vec::new(), None, json!({}))
        .unwrap_or_else(|_| panic!("an empty catalog is always valid"))
}
