//! Grants and the ladder that matches them: a call's decision under the state lock (a grant
//! an approval carried across a relaunch is picked up, a this-call grant is used up by its
//! call), session admissions, grant expiry and revocation.

use postern_domain::decision::{
    Ask, AskFor, Authority as DecisionAuthority, Decision, Denial, Inputs, SessionMode,
    SessionStatus, VaultState, decide, decide_operation,
};
use postern_domain::{AgentRun, AuditEvent, Grant, GrantEnd, GrantId};
use postern_gateway::audit::AuditSink;
use postern_gateway::authorize::{
    CallToAuthorize, Decided, Direction, OperationToAuthorize, Verdict,
};

use super::retry::LaterDecision;
use super::{Authority, State};

impl Authority {
    /// Live grants.
    pub fn grants(&self) -> Vec<Grant> {
        let now = self.now();
        let mut state = self.state();
        self.expire_grants(&mut state, now);
        state.grants.clone()
    }

    /// Ends a grant before its time. Returns whether it was live.
    pub fn revoke(&self, id: GrantId) -> bool {
        !self.revoke_where(|g| g.id == id).is_empty()
    }

    /// Ends every grant of an agent run before its time ("revoke all for this agent"), each
    /// recorded as [`Authority::revoke`] records one. Returns the grants that were live.
    /// The run's admissions stay: they let it be asked about calls, not make them.
    pub fn revoke_run(&self, run: AgentRun) -> Vec<GrantId> {
        self.revoke_where(|g| g.agent_run == run)
    }

    /// Ends the live grants `which` picks, a human's doing; returns them.
    fn revoke_where(&self, which: impl Fn(&Grant) -> bool) -> Vec<GrantId> {
        let mut state = self.state();
        let mut revoked = Vec::new();
        state.grants.retain(|g| {
            let ends = which(g);
            if ends {
                revoked.push(g.id);
            }
            !ends
        });
        for &grant in &revoked {
            self.inner.audit.record(AuditEvent::GrantEnded {
                grant,
                reason: "revoked by a human".into(),
            });
        }
        drop(state);
        if !revoked.is_empty() {
            self.changed();
        }
        revoked
    }

    /// Decides a request other than a tool call (`decide_operation`): a request from the agent
    /// counts as activity, like a call; a server's request to the agent needs only a ready
    /// vault.
    pub(super) fn decide_operation(
        &self,
        state: &mut State,
        operation: &OperationToAuthorize,
        now: u64,
    ) -> Verdict {
        let vault = self.effective(state.vault);
        let decided = match operation.direction {
            Direction::ToAgent => match vault {
                VaultState::Ready => Ok(DecisionAuthority::Observed),
                VaultState::Quarantined => Err(Denial::audit_quarantined()),
                VaultState::Locked | VaultState::Unlocking => Err(Denial::vault_locked()),
            },
            Direction::ToServer => {
                state.last_activity = now;
                let admitted = match &operation.caller {
                    postern_domain::Caller::Identified { run } => {
                        state.admitted.contains(&(*run, operation.server.clone()))
                    }
                    postern_domain::Caller::Unidentifiable { .. } => false,
                };
                let session = if admitted {
                    SessionStatus::Approved
                } else {
                    SessionStatus::NotApproved
                };
                decide_operation(
                    vault,
                    state.settings.session_mode,
                    session,
                    &operation.caller,
                    &operation.server,
                    &operation.method,
                )
                .and_then(|authority| {
                    let set = postern_domain::decision::every_use_on_operation(
                        &state.every_use,
                        &operation.server,
                        &operation.method,
                        &operation.credentials,
                    );
                    if set.is_empty() {
                        Ok(authority)
                    } else {
                        Err(Denial::every_use_tools_only(
                            &operation.server,
                            &operation.method,
                            &set,
                        ))
                    }
                })
            }
        };
        match decided {
            Ok(authority) => Verdict::Allow(authority),
            Err(denial) => Verdict::Deny(denial),
        }
    }

    /// Runs the ladder for `call` and acts on the decision: answer now, or open a card.
    pub(super) fn decide_locked(
        &self,
        state: &mut State,
        call: CallToAuthorize,
        done: Decided,
        now: u64,
    ) {
        self.expire_grants(state, now);
        if let Some((approval, grant, by)) = Self::take_carry(state, &call, now) {
            self.inner.audit.record(AuditEvent::ApprovalGranted {
                approval,
                session: call.session,
                admitted_session: false,
                grant: Some(Box::new(grant.clone())),
                by: Some(by),
            });
            state.grants.push(grant);
        } else if Self::relaunch_for_carry(state, &call, now) {
            // Approved after its agent stopped waiting: its retry makes the relaunch, where
            // the approval waits for it.
            return done(Verdict::Relaunch);
        }
        let session = match call.request.run() {
            Some(run) if state.admitted.contains(&(run, call.request.server.clone())) => {
                SessionStatus::Approved
            }
            _ => SessionStatus::NotApproved,
        };
        let decision = decide(&Inputs {
            vault: self.effective(state.vault),
            mode: state.settings.session_mode,
            session,
            every_use: &state.every_use,
            grants: &state.grants,
            request: &call.request,
            now,
        });
        // A credential this launch was not given is released only by a human, whatever
        // let the call through otherwise (observe mode included).
        let decision = match decision {
            Decision::Allow {
                authority: postern_domain::decision::Authority::Observed,
            } if call
                .withheld
                .iter()
                .any(|w| call.request.credentials.contains(w)) =>
            {
                Decision::AskHuman(Ask {
                    what: AskFor::Call,
                    every_use: Vec::new(),
                    choices: postern_domain::decision::all_choices(),
                })
            }
            decision => decision,
        };
        match decision {
            Decision::Allow { authority } => {
                if let postern_domain::decision::Authority::Grant(id) = authority
                    && let Some(i) = state.grants.iter().position(|g| g.id == id)
                    && matches!(state.grants[i].end, GrantEnd::ThisCallOnly { .. })
                {
                    state.grants.remove(i);
                    self.inner.audit.record(AuditEvent::GrantEnded {
                        grant: id,
                        reason: "used by its call".into(),
                    });
                }
                if state.settings.session_mode == SessionMode::Observe
                    && session == SessionStatus::NotApproved
                    && let Some(run) = call.request.run()
                {
                    self.admit(state, &call, run, "observe");
                }
                done(Verdict::Allow(authority));
            }
            Decision::Deny(denial) => done(Verdict::Deny(denial)),
            Decision::AskHuman(ask) => match self.take_later(state, &call, now) {
                // The person already answered this call after its agent stopped waiting.
                Some(LaterDecision::Allow(grant)) => done(Verdict::Allow(
                    postern_domain::decision::Authority::Grant(grant),
                )),
                Some(LaterDecision::Deny(denial)) => done(Verdict::Deny(denial)),
                None => self.open_card(state, call, ask, done, now),
            },
        }
    }

    /// Admits `run` for the call's server; `by` is `human` or `observe`.
    pub(super) fn admit(&self, state: &mut State, call: &CallToAuthorize, run: AgentRun, by: &str) {
        state.admitted.insert((run, call.request.server.clone()));
        self.inner.audit.record(AuditEvent::SessionApproved {
            session: call.session,
            server: call.request.server.clone(),
            agent_run: run,
            by: by.into(),
        });
    }

    pub(super) fn expire_grants(&self, state: &mut State, now: u64) {
        let mut expired = Vec::new();
        state.grants.retain(|g| match g.end {
            GrantEnd::Until { unix_ms } if unix_ms <= now => {
                expired.push(g.id);
                false
            }
            _ => true,
        });
        for id in expired {
            self.inner.audit.record(AuditEvent::GrantEnded {
                grant: id,
                reason: "its time ran out".into(),
            });
        }
    }
}

/// Whether the agent process of `run` still runs (the same process: pid and start time).
pub(super) fn run_alive(run: AgentRun) -> bool {
    postern_supervisor::process_start_time(run.pid) == Some(run.start_time)
}
