//! The agent-facing `initialize` answer, shared by the engine and the shim's offline
//! mode, and the `initialize` Postern sends upstream on the agent's behalf.

use postern_domain::{PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use serde_json::{Map, Value, json};

/// The protocol version to answer an agent's `initialize` with: the one it asked for
/// when Postern speaks it, else Postern's own.
pub fn negotiate(agent_params: &Value) -> &'static str {
    let asked = agent_params.get("protocolVersion").and_then(Value::as_str);
    SUPPORTED_PROTOCOL_VERSIONS
        .into_iter()
        .find(|v| Some(*v) == asked)
        .unwrap_or(PROTOCOL_VERSION)
}

/// The result of the agent's `initialize`. With the upstream server's own result, its
/// protocol version (the one the server negotiated, which may differ from the agent's: the
/// agent then decides, as the spec says, whether it speaks it), its `serverInfo`, capabilities
/// and instructions are passed on, and `tools.listChanged` is always advertised: Postern tells
/// the agent when the catalog changes, even if the server would not. Without one (the shim
/// answering while no engine runs), Postern answers for itself.
pub fn initialize_result(
    label: &str,
    agent_params: &Value,
    upstream: Option<&Map<String, Value>>,
) -> Value {
    let mut capabilities = upstream
        .and_then(|u| u.get("capabilities"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let tools = capabilities.entry("tools").or_insert_with(|| json!({}));
    if !tools.is_object() {
        *tools = json!({});
    }
    tools["listChanged"] = Value::Bool(true);

    let version = upstream
        .and_then(|u| u.get("protocolVersion"))
        .and_then(Value::as_str)
        .and_then(|v| SUPPORTED_PROTOCOL_VERSIONS.into_iter().find(|s| *s == v))
        .unwrap_or_else(|| negotiate(agent_params));
    let server_info = upstream
        .and_then(|u| u.get("serverInfo"))
        .filter(|i| i.get("name").is_some_and(Value::is_string))
        .cloned()
        .unwrap_or_else(|| {
            json!({
                "name": "postern",
                "title": format!("{label} (via Postern)"),
                "version": env!("CARGO_PKG_VERSION"),
            })
        });
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info,
    });
    if let Some(instructions) = upstream
        .and_then(|u| u.get("instructions"))
        .filter(|i| i.is_string())
    {
        result["instructions"] = instructions.clone();
    }
    result
}

/// The params of the `initialize` Postern sends to the server: the agent's version,
/// capabilities and client info, so the server behaves as it would if configured
/// directly (server-everything, for one, registers tools by client capability).
pub fn upstream_initialize_params(agent_params: &Value) -> Value {
    json!({
        "protocolVersion": negotiate(agent_params),
        "capabilities": agent_params.get("capabilities").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({})),
        "clientInfo": agent_params.get("clientInfo").filter(|c| c.is_object()).cloned()
            .unwrap_or_else(|| json!({"name": "postern", "version": env!("CARGO_PKG_VERSION")})),
    })
}

/// "name version" from the agent's `clientInfo`, for display only (self-reported).
pub fn client_name(agent_params: &Value) -> Option<String> {
    let info = agent_params.get("clientInfo")?;
    let name = info.get("name")?.as_str()?;
    Some(match info.get("version").and_then(Value::as_str) {
        Some(version) => format!("{name} {version}"),
        None => name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_a_supported_version_and_falls_back_to_ours() {
        assert_eq!(
            negotiate(&json!({"protocolVersion": "2025-06-18"})),
            "2025-06-18"
        );
        assert_eq!(
            negotiate(&json!({"protocolVersion": "2099-01-01"})),
            PROTOCOL_VERSION
        );
        assert_eq!(negotiate(&json!({})), PROTOCOL_VERSION);
    }

    #[test]
    fn passes_upstream_capabilities_and_always_advertises_list_changed() {
        let upstream = json!({
            "capabilities": {"tools": {"listChanged": false}, "prompts": {"listChanged": true}, "logging": {}},
            "instructions": "Use get_current_time for clocks."
        });
        let result = initialize_result("time", &json!({}), upstream.as_object());
        assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
        assert_eq!(
            result["capabilities"]["prompts"],
            json!({"listChanged": true})
        );
        assert_eq!(result["capabilities"]["logging"], json!({}));
        assert_eq!(result["instructions"], "Use get_current_time for clocks.");
        assert_eq!(result["serverInfo"]["title"], "time (via Postern)");

        // The server's own word on its version and identity reaches the agent.
        let upstream = json!({
            "protocolVersion": "2025-06-18",
            "serverInfo": {"name": "mcp-time", "version": "1.9.4"},
            "capabilities": {},
        });
        let agent = json!({"protocolVersion": "2025-11-25"});
        let result = initialize_result("time", &agent, upstream.as_object());
        assert_eq!(result["protocolVersion"], "2025-06-18");
        assert_eq!(
            result["serverInfo"],
            json!({"name": "mcp-time", "version": "1.9.4"})
        );

        let offline = initialize_result("time", &json!({}), None);
        assert_eq!(
            offline["capabilities"],
            json!({"tools": {"listChanged": true}})
        );
    }

    #[test]
    fn upstream_gets_the_agents_capabilities() {
        let agent = json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {"listChanged": true}},
                           "clientInfo": {"name": "claude-code", "version": "2.1"}});
        let params = upstream_initialize_params(&agent);
        assert_eq!(
            params["capabilities"],
            json!({"roots": {"listChanged": true}})
        );
        assert_eq!(params["clientInfo"]["name"], "claude-code");
        assert_eq!(client_name(&agent).as_deref(), Some("claude-code 2.1"));
    }
}
