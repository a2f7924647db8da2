//! Approval requests: the queue of open cards (oldest first), a human's answer to one, and
//! the timeout of an unanswered one. An approved answer may admit the session, release a
//! withheld credential (the call then goes to a relaunch, see `credentials`) and grant; the
//! call is then decided again. The vault's lock (`lock`) and a withdrawn call (the
//! `Authorizer` impl in `authority.rs`) end open requests too.

use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::decision::{
    ApprovalCard, Ask, CardInputs, CardState, Denial, GrantChoice, Reply, Settlement,
};
use postern_domain::{
    AnswerChannel, ApprovalId, AuditEvent, ExecutionRecord, GrantEnd, GrantId, ServerLabel,
};
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::{CallToAuthorize, Decided, Verdict};

use super::release::Carry;
use super::{Authority, Pending, State, random};

/// Which answer is being carried out: the request, where the person gave it, and when.
#[derive(Debug, Clone, Copy)]
struct Answered {
    id: ApprovalId,
    by: AnswerChannel,
    now: u64,
}

/// The longest "for N minutes" a human may choose (a day).
const MAX_MINUTES: u32 = 24 * 60;

/// Why a human's answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No open request has that id: answered, timed out, withdrawn, or never asked. A late
    /// decision is ignored.
    #[error("no open approval request {0}: it was answered, timed out or withdrawn")]
    NotOpen(String),
    /// The answer does not fit the card.
    #[error("{0}")]
    Unacceptable(String),
    /// An approval came without a person's proof of presence.
    #[error("{0}")]
    Presence(#[from] super::PresenceError),
}

/// The launch and catalog a human last approved a call of a server under: what the next
/// card for that server is compared with. Cached in the state, kept in the store.
#[derive(Debug, Clone)]
pub(super) struct Baseline {
    record: ExecutionRecord,
    catalog: Arc<Catalog>,
}

/// How many approval requests one session may have waiting for a human at once: an agent
/// that raises more gets `approval_queue_full`, so a flood cannot bury a request among
/// hundreds.
pub const MAX_OPEN_PER_SESSION: usize = 8;

impl Authority {
    /// Open approval requests, oldest first.
    pub fn approvals(&self) -> Vec<ApprovalCard> {
        let mut cards: Vec<ApprovalCard> = self
            .state()
            .pending
            .values()
            .map(|p| ApprovalCard {
                agent_stopped_waiting: !p.waiting,
                ..p.card.clone()
            })
            .collect();
        cards.sort_by_key(|c| (c.asked_at, c.id));
        cards
    }

    /// A human's answer to an open request, given `by` way of the window, the tray or a
    /// terminal (the audit log keeps where). Takes effect at once: the waiting call is
    /// forwarded or refused. An approval needs a proof of presence ([`Authority::prove`]);
    /// a denial does not.
    pub fn answer(
        &self,
        id: ApprovalId,
        reply: Reply,
        proven: Option<&super::Proven>,
        by: AnswerChannel,
    ) -> Result<(), AnswerError> {
        if matches!(reply, Reply::Approve { .. }) && proven.is_none() {
            return Err(super::PresenceError::Required {
                what: "approve a request".into(),
            }
            .into());
        }
        let now = self.now();
        let mut state = self.state();
        state.last_activity = now;
        let Some(mut pending) = state.pending.remove(&id) else {
            return Err(AnswerError::NotOpen(id.to_string()));
        };
        if now >= pending.card.expires_at {
            // Its timer has not fired yet (a machine that slept): the answer is late all
            // the same.
            drop(state);
            self.expire(id, pending);
            return Err(AnswerError::NotOpen(id.to_string()));
        }
        // Any "for N minutes" is fine where the card offers minutes at all.
        if let Reply::Approve {
            choice: Some(choice @ GrantChoice::ForMinutes { minutes }),
        } = reply
        {
            let offers_minutes = pending
                .ask
                .choices
                .iter()
                .any(|c| matches!(c, GrantChoice::ForMinutes { .. }));
            if offers_minutes && !(1..=MAX_MINUTES).contains(&minutes) {
                state.pending.insert(id, pending);
                return Err(AnswerError::Unacceptable(format!(
                    "minutes must be between 1 and {MAX_MINUTES}"
                )));
            }
            if offers_minutes && !pending.ask.choices.contains(&choice) {
                pending.ask.choices.push(choice);
            }
        }
        let settlement = pending.ask.settle(
            Some(reply),
            pending.card.asked_at,
            now,
            state.settings.approval_timeout_ms,
            CardState::Open,
        );
        match settlement {
            Settlement::Pending | Settlement::Unacceptable => {
                let offered = describe_choices(&pending.ask.choices);
                state.pending.insert(id, pending);
                Err(AnswerError::Unacceptable(format!(
                    "this request asks about {}; answer with one of: {offered}",
                    if offered == "none" {
                        "the session only"
                    } else {
                        "the call"
                    }
                )))
            }
            Settlement::Refused(denial) => {
                self.settle_refused(&mut state, Answered { id, by, now }, pending, denial);
                Ok(())
            }
            Settlement::Approved {
                admit_session,
                grant,
            } => {
                self.settle_approved(
                    state,
                    Answered { id, by, now },
                    pending,
                    admit_session,
                    grant,
                );
                Ok(())
            }
        }
    }

    /// A request settled as refused (a person's denial, or its time ran out as they
    /// answered): audited, kept for the agent's retry when nothing waits for it any more, and
    /// the waiting call refused.
    fn settle_refused(
        &self,
        state: &mut State,
        answered: Answered,
        pending: Pending,
        denial: Denial,
    ) {
        let (session, code) = (pending.call.session, denial.code);
        let event = if code == postern_domain::decision::DenyCode::ApprovalDenied {
            AuditEvent::ApprovalDenied {
                approval: answered.id,
                session,
                by: Some(answered.by),
            }
        } else {
            expired_event(answered.id, session, &denial, "no answer in time")
        };
        self.inner.audit.record(event);
        if !pending.waiting {
            self.keep_for_retry(
                state,
                &pending.call,
                super::retry::LaterDecision::Deny(denial.clone()),
                answered.now,
            );
        }
        (pending.done)(Verdict::Deny(denial));
        self.changed();
    }

    /// A request settled as approved: the session admitted when the card asked about it, the
    /// withheld credentials it covers released, then either the call carried to a relaunch
    /// that holds them, or the grant given (or kept for the agent's retry) and the call
    /// decided again. Takes the state's lock to release it before the call is told.
    fn settle_approved(
        &self,
        mut state: MutexGuard<'_, State>,
        answered: Answered,
        pending: Pending,
        admit_session: bool,
        choice: Option<GrantChoice>,
    ) {
        let Answered { id, by, now } = answered;
        let call = &pending.call;
        if admit_session && let Some(run) = call.request.run() {
            self.admit(&mut state, call, run, "human");
        }
        Self::approve_release(&mut state, call);
        if call
            .withheld
            .iter()
            .any(|w| call.request.credentials.contains(w))
        {
            // This launch lacks what was just released: the call goes to a relaunch of the same
            // code, and its grant with it.
            state.carries.push(Carry {
                approval: id,
                session: call.session,
                identity: call.record.identity_digest(),
                tool: call.request.tool.clone(),
                arguments: call.arguments.clone(),
                choice,
                by,
                until_ms: now.saturating_add(super::retry::RETRY_WINDOW_MS),
                relaunched: pending.waiting,
            });
            self.note_approved(&mut state, call);
            drop(state);
            (pending.done)(Verdict::Relaunch);
            self.changed();
            return;
        }
        let grant = choice.and_then(|choice| {
            pending
                .ask
                .grant(choice, GrantId::new(now, random()), &call.request, now)
        });
        // Nothing waits (the agent gave up): a grant for this call only is kept for the
        // identical retry; any other grant covers it by itself.
        let kept = !pending.waiting
            && grant
                .as_ref()
                .is_some_and(|g| matches!(g.end, GrantEnd::ThisCallOnly { .. }));
        if let Some(grant) = &grant {
            if kept {
                self.keep_for_retry(
                    &mut state,
                    call,
                    super::retry::LaterDecision::Allow(grant.id),
                    now,
                );
            } else {
                state.grants.push(grant.clone());
            }
        }
        self.inner.audit.record(AuditEvent::ApprovalGranted {
            approval: id,
            session: call.session,
            admitted_session: admit_session,
            grant: grant.map(Box::new),
            by: Some(by),
        });
        self.note_approved(&mut state, call);
        if pending.waiting {
            self.decide_locked(&mut state, pending.call, pending.done, now);
        }
        self.changed();
    }

    /// The catalog of `server` that a human last approved a call under, if any (also one
    /// an earlier engine kept).
    pub fn last_approved_catalog(&self, server: &ServerLabel) -> Option<Arc<Catalog>> {
        let mut state = self.state();
        self.baseline(&mut state, server).map(|b| b.catalog)
    }

    /// Makes `call`'s launch and catalog its server's baseline, in the state and the store
    /// (a store that cannot take it costs the comparison after a restart, nothing else).
    fn note_approved(&self, state: &mut State, call: &CallToAuthorize) {
        let server = &call.request.server;
        let stored = self
            .inner
            .store
            .lock()
            .map_err(|_| "poisoned".to_owned())
            .and_then(|store| {
                store
                    .set_approved_baseline(server, &call.record, &call.catalog, self.now())
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = stored {
            tracing::warn!(%server, "cannot keep the approved launch for later cards: {e}");
        }
        // The baseline is under the seal: the row the person's approval wrote is vouched for.
        if let Some(vouched) = &mut state.baselines {
            vouched.retain(|(s, _)| s != server.as_str());
            let row = self.inner.store.lock().ok().and_then(|store| {
                store
                    .baseline_digests()
                    .ok()?
                    .into_iter()
                    .find(|(s, _)| s == server.as_str())
            });
            vouched.extend(row);
        }
        self.reseal(state);
        state.last_approved.insert(
            server.clone(),
            Baseline {
                record: ExecutionRecord::clone(&call.record),
                catalog: Arc::clone(&call.catalog),
            },
        );
    }

    /// `server`'s baseline: from the state, else from the store (an earlier engine's).
    fn baseline(&self, state: &mut State, server: &ServerLabel) -> Option<Baseline> {
        if let Some(baseline) = state.last_approved.get(server) {
            return Some(baseline.clone());
        }
        if !self.baseline_vouched(state, server) {
            return None;
        }
        let loaded = match self.inner.store.lock() {
            Ok(store) => store.approved_baseline(server),
            Err(_) => return None,
        };
        let (record, catalog) = loaded
            .inspect_err(|e| tracing::warn!(%server, "cannot read the approved launch: {e}"))
            .ok()??;
        let baseline = Baseline {
            record,
            catalog: Arc::new(catalog),
        };
        state.last_approved.insert(server.clone(), baseline.clone());
        Some(baseline)
    }

    pub(super) fn open_card(
        &self,
        state: &mut State,
        call: CallToAuthorize,
        ask: Ask,
        done: Decided,
        now: u64,
    ) {
        let Some(agent) = call.agent.clone() else {
            done(Verdict::Deny(Denial::session_unidentifiable(
                "the calling process could not be identified",
            )));
            return;
        };
        // The identical retry of a call its agent stopped waiting for joins that call's card.
        if let Some(key) = super::retry::RetryKey::of(&call)
            && let Some(pending) = state
                .pending
                .values_mut()
                .find(|p| !p.waiting && super::retry::RetryKey::of(&p.call).as_ref() == Some(&key))
        {
            tracing::info!(approval = %pending.card.id, "the identical retry joins the request still open for it");
            pending.call = call;
            pending.done = done;
            pending.waiting = true;
            return;
        }
        let waiting = state
            .pending
            .values()
            .filter(|p| p.call.session == call.session)
            .count();
        if waiting >= MAX_OPEN_PER_SESSION {
            tracing::warn!(session = call.session, waiting, tool = %call.request.tool, "approval request refused: the session already has its share waiting");
            done(Verdict::Deny(Denial::approval_queue_full(waiting)));
            return;
        }
        let id = ApprovalId::new(now, random());
        let timeout_ms = state.settings.approval_timeout_ms;
        let baseline = self.baseline(state, &call.request.server);
        let (last_record, last_catalog) = match &baseline {
            Some(b) => (Some(&b.record), Some(b.catalog.as_ref())),
            None => (None, None),
        };
        let mut card = ApprovalCard::new(&CardInputs {
            id,
            asked_at: now,
            timeout_ms,
            ask: &ask,
            agent: &agent,
            client: call.client.as_deref(),
            request: &call.request,
            record: &call.record,
            last_approved_record: last_record,
            catalog: &call.catalog,
            last_approved_catalog: last_catalog,
            arguments: &call.arguments,
            withheld: &call.withheld,
        });
        card.epoch.launch = crate::launches::numbered(
            &self.inner.store,
            &self.inner.audit.status().state,
            [(&call.request.server, call.request.epoch)],
        )
        .get(&call.request.epoch)
        .copied();
        self.inner.audit.record(AuditEvent::ApprovalRequested {
            approval: id,
            session: call.session,
            server: call.request.server.clone(),
            agent_run: call.request.run(),
            epoch: call.request.epoch,
            tool: call.request.tool.clone(),
            credentials: call.request.credentials.clone(),
            what: ask.what,
            every_use: ask.every_use.clone(),
            choices: ask.choices.clone(),
            expires_at: card.expires_at,
        });
        tracing::info!(approval = %id, server = %call.request.server, tool = %call.request.tool, agent = %agent.chain_text(), "approval requested");
        state.pending.insert(
            id,
            Pending {
                card,
                ask,
                call,
                done,
                waiting: true,
            },
        );
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
            if let Some(inner) = weak.upgrade() {
                Authority { inner }.time_out(id);
            }
        });
        self.changed();
    }

    fn time_out(&self, id: ApprovalId) {
        let pending = self.state().pending.remove(&id);
        if let Some(pending) = pending {
            self.expire(id, pending);
        }
    }

    /// A request nobody answered in time: the call is refused with `approval_timeout`.
    fn expire(&self, id: ApprovalId, pending: Pending) {
        let denial = Denial::approval_timeout();
        let waited = pending
            .card
            .expires_at
            .saturating_sub(pending.card.asked_at)
            / 1000;
        self.inner.audit.record(expired_event(
            id,
            pending.call.session,
            &denial,
            &format!("no answer within {waited} s"),
        ));
        tracing::info!(approval = %id, "approval request timed out");
        (pending.done)(Verdict::Deny(denial));
        self.changed();
    }
}

pub(super) fn expired_event(
    id: ApprovalId,
    session: u64,
    denial: &Denial,
    reason: &str,
) -> AuditEvent {
    AuditEvent::ApprovalExpired {
        approval: id,
        session,
        code: denial.code.as_str().into(),
        reason: reason.into(),
    }
}

fn describe_choices(choices: &[GrantChoice]) -> String {
    if choices.is_empty() {
        return "none".into();
    }
    let mut out: Vec<String> = Vec::new();
    for choice in choices {
        let text = choice.flag().to_owned();
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out.join(", ")
}
