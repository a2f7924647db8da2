//! What the gate does with each JSON-RPC method (docs/refresh-contract.md §10): which
//! requests it answers itself, which are harmless discovery, which it decides like a tool
//! call, and which it refuses because it does not know them.

use serde_json::{Map, Value};

/// How the gate routes an agent's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Answered by the gate itself: `initialize`, `ping`, `server/discover`, and `tools/list`
    /// (from the catalog the gate fetched and checked).
    Answered,
    /// Harmless discovery: `resources/list`, `resources/templates/list`, `prompts/list`,
    /// `tasks/list`, forwarded without a decision.
    Discovery,
    /// `tools/call`: the decision ladder, perhaps a human.
    Call,
    /// Any other method a server serves: decided like a call (the vault, the caller,
    /// admission), its intent durable before it is forwarded, journaled in Activity.
    Operation,
    /// A method the gate does not know: refused (-32601) unless the server's configuration
    /// passes it by name, and then decided as an [`Route::Operation`].
    Unknown,
}

/// The discovery requests MCP defines besides `tools/list`: they describe, act on nothing and
/// read no data. Any other `*/list` is a method the gate does not know.
const DISCOVERY: &[&str] = &[
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "tasks/list",
];

/// Requests other than tool calls that MCP defines and servers serve (2025-06-18 and
/// 2025-11-25): decided as operations.
const OPERATIONS: &[&str] = &[
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
];

/// The requests a server may send the agent: forwarded (journaled, and refused while the
/// vault is locked, except `ping`); any other is refused to the server with -32601.
pub const SERVER_REQUESTS: &[&str] = &[
    "ping",
    "roots/list",
    "sampling/createMessage",
    "elicitation/create",
];

/// The route of an agent request with this method.
pub fn route(method: &str) -> Route {
    match method {
        "initialize" | "ping" | "server/discover" | "tools/list" => Route::Answered,
        "tools/call" => Route::Call,
        _ if OPERATIONS.contains(&method) => Route::Operation,
        _ if DISCOVERY.contains(&method) => Route::Discovery,
        _ => Route::Unknown,
    }
}

/// Checks a method a server's configuration may pass (`--pass-method`): a name of printable
/// characters without spaces that the gate does not route already. The error says why, in a
/// sentence.
pub fn passable(method: &str) -> Result<(), String> {
    if method.is_empty() || method.len() > 128 {
        return Err("a method name has 1 to 128 characters".into());
    }
    if method.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{method:?} holds spaces or control characters"));
    }
    if method.starts_with("notifications/") {
        return Err(format!(
            "{method} is a notification: the protocol's notifications pass already, others never do"
        ));
    }
    match route(method) {
        Route::Unknown => Ok(()),
        known => Err(format!(
            "Postern already knows {method} ({}); only unknown methods need passing",
            match known {
                Route::Answered => "it answers it itself",
                Route::Discovery => "it passes it as discovery",
                Route::Call => "it decides tool calls",
                Route::Operation | Route::Unknown => "it decides it like resources/read",
            }
        )),
    }
}

/// The notifications a client sends a server (2025-06-18 and 2025-11-25): the only ones an
/// agent's are forwarded as.
const CLIENT_NOTIFICATIONS: &[&str] = &[
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "notifications/tasks/status",
];

/// Whether an agent notification goes on to the server: only those a client sends a server.
/// Anything else without an id (a `tools/call` sent as a notification, a server's own
/// notification echoed back) would reach a server with no decision, so it is dropped.
pub fn forwards_notification(method: &str) -> bool {
    CLIENT_NOTIFICATIONS.contains(&method)
}

/// What an operation's intent records as its arguments: its params without `_meta` (the
/// resource URI, the prompt's name and arguments, the task id, ...).
pub fn operation_arguments(params: Option<&Value>) -> Value {
    match params {
        Some(Value::Object(params)) => {
            let kept: Map<String, Value> = params
                .iter()
                .filter(|(key, _)| key.as_str() != "_meta")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            Value::Object(kept)
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_method_has_its_route() {
        for (method, expected) in [
            ("initialize", Route::Answered),
            ("tools/list", Route::Answered),
            ("tools/call", Route::Call),
            ("resources/list", Route::Discovery),
            ("resources/templates/list", Route::Discovery),
            ("prompts/list", Route::Discovery),
            ("tasks/list", Route::Discovery),
            ("resources/read", Route::Operation),
            ("prompts/get", Route::Operation),
            ("completion/complete", Route::Operation),
            ("tasks/result", Route::Operation),
            ("logging/setLevel", Route::Operation),
            ("vendor/frobnicate", Route::Unknown),
            ("secrets/list", Route::Unknown),
            ("notifications/list", Route::Unknown),
            ("tools/call ", Route::Unknown),
        ] {
            assert_eq!(route(method), expected, "{method}");
        }
    }

    #[test]
    fn only_unknown_methods_can_be_passed() {
        assert_eq!(passable("vendor/search"), Ok(()));
        for refused in [
            "",
            "a b",
            "tools/call",
            "resources/read",
            "prompts/list",
            "notifications/x",
        ] {
            assert!(passable(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn only_protocol_notifications_are_forwarded() {
        assert!(forwards_notification("notifications/cancelled"));
        assert!(forwards_notification("notifications/roots/list_changed"));
        assert!(!forwards_notification("tools/call"));
        assert!(!forwards_notification("resources/read"));
        assert!(!forwards_notification("notifications/tools/list_changed"));
        assert!(!forwards_notification("notifications/"));
    }

    #[test]
    fn an_operation_records_its_params_without_meta() {
        assert_eq!(
            operation_arguments(Some(
                &json!({"uri": "file:///a", "_meta": {"progressToken": 1}})
            )),
            json!({"uri": "file:///a"})
        );
        assert_eq!(operation_arguments(None), Value::Null);
    }
}
