//! Asking a human: the question a card puts ([`Ask`]), the grant ends it offers, the
//! reply, and what an answer (or its absence) comes to ([`Ask::settle`], [`Ask::grant`]).

use serde::{Deserialize, Serialize};

use super::{Denial, SettingTarget};
use crate::grant::{Grant, GrantEnd, GrantId, Request, ToolScope};

/// A question for a human.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    /// What the human decides.
    pub what: AskFor,
    /// The every-use settings that require a decision on this call (empty: none).
    pub every_use: Vec<SettingTarget>,
    /// The grant ends offered for the call (empty when only the session is asked about).
    pub choices: Vec<GrantChoice>,
}

/// What a card decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AskFor {
    /// Admit this agent run for this server (a grant already covers the call).
    Session,
    /// This call (the session is admitted).
    Call,
    /// Admit the session and allow this call, on one card.
    SessionAndCall,
}

/// How long an approved call's grant lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum GrantChoice {
    /// This call only (`--once`).
    ThisCall,
    /// N minutes (`--minutes N`).
    ForMinutes {
        /// N.
        minutes: u32,
    },
    /// Until the agent run ends (`--run`).
    UntilRunEnds,
}

impl GrantChoice {
    /// The choice's short name, every surface's (the app's lifetime buttons, the CLI's
    /// answer): "this call", "15 min", "2 hours", "this agent run".
    pub fn label(self) -> String {
        match self {
            GrantChoice::ThisCall => "this call".into(),
            GrantChoice::ForMinutes { minutes } if minutes % 60 == 0 => {
                let hours = minutes / 60;
                format!("{hours} hour{}", if hours == 1 { "" } else { "s" })
            }
            GrantChoice::ForMinutes { minutes } => format!("{minutes} min"),
            GrantChoice::UntilRunEnds => "this agent run".into(),
        }
    }

    /// The `postern approve` option that picks it.
    pub fn flag(self) -> &'static str {
        match self {
            GrantChoice::ThisCall => "--once",
            GrantChoice::ForMinutes { .. } => "--minutes N",
            GrantChoice::UntilRunEnds => "--run",
        }
    }
}

/// A human's reply to a card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "reply",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Reply {
    /// Approve, with a grant end when the card asks about the call.
    Approve {
        /// The end chosen (`None` for a session-only card).
        choice: Option<GrantChoice>,
    },
    /// Deny.
    Deny,
}

/// Whether an open card still describes the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CardState {
    /// Nothing it shows has changed.
    Open,
    /// A lock or unlock, a new epoch or a new catalog since it was shown.
    Invalidated,
}

/// What an answer (or its absence) comes to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "settled",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Settlement {
    /// Still waiting.
    Pending,
    /// The reply does not answer the card (no end, or one not offered); still waiting.
    Unacceptable,
    /// Approved: admit the session if asked, record a grant if one was chosen, and run
    /// the ladder again.
    Approved {
        /// Admit the session.
        admit_session: bool,
        /// The grant end chosen for the call.
        grant: Option<GrantChoice>,
    },
    /// Refused.
    Refused(Denial),
}

impl Ask {
    /// Whether the card admits the session.
    pub fn admits_session(&self) -> bool {
        matches!(self.what, AskFor::Session | AskFor::SessionAndCall)
    }

    /// Whether the card decides the call.
    pub fn decides_call(&self) -> bool {
        matches!(self.what, AskFor::Call | AskFor::SessionAndCall)
    }

    /// What a reply (or none yet) comes to at `now`, for a card shown at `asked_at` with a
    /// timeout of `timeout_ms`. An invalidated card and a late reply are refused, whatever
    /// the reply says.
    pub fn settle(
        &self,
        reply: Option<Reply>,
        asked_at: u64,
        now: u64,
        timeout_ms: u64,
        card: CardState,
    ) -> Settlement {
        if card == CardState::Invalidated {
            return Settlement::Refused(Denial::approval_expired());
        }
        if now >= asked_at.saturating_add(timeout_ms) {
            return Settlement::Refused(Denial::approval_timeout());
        }
        match reply {
            None => Settlement::Pending,
            Some(Reply::Deny) => Settlement::Refused(Denial::approval_denied()),
            Some(Reply::Approve { choice }) => {
                let acceptable = match choice {
                    None => !self.decides_call(),
                    Some(c) => self.decides_call() && self.choices.contains(&c),
                };
                if acceptable {
                    Settlement::Approved {
                        admit_session: self.admits_session(),
                        grant: choice,
                    }
                } else {
                    Settlement::Unacceptable
                }
            }
        }
    }

    /// The grant an approval with `choice` records for `request`: this run, server, epoch,
    /// tool and the credential scopes the call would use. `None` when the choice was not
    /// offered or the caller is unidentified.
    pub fn grant(
        &self,
        choice: GrantChoice,
        id: GrantId,
        request: &Request,
        now: u64,
    ) -> Option<Grant> {
        if !self.decides_call() || !self.choices.contains(&choice) {
            return None;
        }
        let end = match choice {
            GrantChoice::ThisCall => GrantEnd::ThisCallOnly { call: request.call },
            GrantChoice::ForMinutes { minutes } => GrantEnd::Until {
                unix_ms: now.saturating_add(u64::from(minutes) * 60_000),
            },
            GrantChoice::UntilRunEnds => GrantEnd::UntilRunEnds,
        };
        Some(Grant {
            id,
            agent_run: request.run()?,
            server_label: request.server.clone(),
            execution_epoch: request.epoch,
            tool_scope: ToolScope::Tools([request.tool.clone()].into()),
            credential_scope: request.credentials.clone(),
            issued_at: now,
            end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lifetime_has_one_name_for_every_surface() {
        let named = |c: GrantChoice| (c.label(), c.flag());
        assert_eq!(named(GrantChoice::ThisCall), ("this call".into(), "--once"));
        assert_eq!(
            named(GrantChoice::ForMinutes { minutes: 5 }),
            ("5 min".into(), "--minutes N")
        );
        assert_eq!(GrantChoice::ForMinutes { minutes: 60 }.label(), "1 hour");
        assert_eq!(GrantChoice::ForMinutes { minutes: 120 }.label(), "2 hours");
        assert_eq!(
            named(GrantChoice::UntilRunEnds),
            ("this agent run".into(), "--run")
        );
    }
}
