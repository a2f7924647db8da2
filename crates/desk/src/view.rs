//! What the window is told about the engine: running (with its status) or why not.
//!
//! This wraps [`postern_engine::Status`] for shells that host the engine and may fail to.

use postern_engine::{EngineError, HomeError, Status};
use serde::Serialize;
use ts_rs::TS;

/// The engine as this app sees it. Serialized with a `state` tag, so the UI can `switch` on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum EngineView {
    /// The engine is starting for this home.
    Starting {
        /// The home directory.
        home: String,
    },
    /// This app runs the engine; here is its status.
    Running {
        /// The engine's snapshot.
        status: Box<Status>,
    },
    /// The engine could not start in this app.
    Unavailable {
        /// The home directory, when one could be chosen.
        home: Option<String>,
        /// Why, as a stable code.
        reason: Unavailable,
        /// The error, for people.
        message: String,
    },
    /// The engine was shut down (the app is quitting).
    Stopped {
        /// The home directory.
        home: String,
    },
}

/// Why the engine is not available here. Stable codes the UI relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// Another engine (`postern daemon` or another app) owns this home.
    AlreadyRunning,
    /// No home could be chosen (no `POSTERN_HOME` and no platform data directory).
    NoHome,
    /// The engine failed to start for another reason; see the message.
    StartFailed,
    /// The engine runs but its status could not be read (the next refresh tries again).
    StatusFailed,
}

impl EngineView {
    /// The view for an engine that failed to start.
    pub fn start_failed(home: Option<String>, err: &EngineError) -> Self {
        let reason = match err {
            EngineError::AlreadyRunning { .. } => Unavailable::AlreadyRunning,
            EngineError::Home(HomeError::NoDefault) => Unavailable::NoHome,
            _ => Unavailable::StartFailed,
        };
        Self::Unavailable {
            home,
            reason,
            message: err.to_string(),
        }
    }

    /// The view for a running engine: its status, or why it could not be read.
    pub fn running(home: &str, status: Result<Status, EngineError>) -> Self {
        match status {
            Ok(status) => Self::Running {
                status: Box::new(status),
            },
            Err(err) => Self::Unavailable {
                home: Some(home.to_owned()),
                reason: Unavailable::StatusFailed,
                message: err.to_string(),
            },
        }
    }

    /// The view when no home could be resolved at all.
    pub fn no_home(err: &HomeError) -> Self {
        let reason = match err {
            HomeError::NoDefault => Unavailable::NoHome,
            _ => Unavailable::StartFailed,
        };
        Self::Unavailable {
            home: None,
            reason,
            message: err.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn already_running_has_a_stable_code_and_the_engine_message() {
        let err = EngineError::AlreadyRunning { home: "/h".into() };
        let view = EngineView::start_failed(Some("/h".into()), &err);
        assert_eq!(
            serde_json::to_value(&view).unwrap(),
            json!({
                "state": "unavailable",
                "home": "/h",
                "reason": "already_running",
                "message": err.to_string(),
            })
        );
    }

    #[test]
    fn no_home_is_its_own_reason() {
        let view = EngineView::no_home(&HomeError::NoDefault);
        assert!(matches!(
            view,
            EngineView::Unavailable {
                reason: Unavailable::NoHome,
                home: None,
                ..
            }
        ));
    }

    #[test]
    fn running_nests_the_engine_status() {
        let status = Status {
            home: "/h".into(),
            socket: "/h/run/engine.sock".into(),
            servers: vec![],
            sessions: vec![],
            audit: postern_engine::AuditStatus {
                state: postern_engine::AuditState::Ready,
                head: None,
                anchored: None,
                anchor_error: None,
                failed_batches: 0,
                dropped: 0,
            },
            gate: postern_engine::GateStatus {
                vault: postern_engine::authority::VaultState::Ready,
                approvals: 0,
                grants: 0,
                settings: postern_engine::Settings::default(),
                passphrase_set: true,
                clicks_until_ms: None,
                config_warning: None,
                leaks: Vec::new(),
                socket_proof: None,
            },
            system_auth: None,
        };
        let value = serde_json::to_value(EngineView::Running {
            status: Box::new(status),
        })
        .unwrap();
        assert_eq!(value["state"], "running");
        assert_eq!(value["status"]["socket"], "/h/run/engine.sock");
    }
}
