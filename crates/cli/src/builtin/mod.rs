//! Postern's built-in MCP server, `postern builtin http`: what an agent reaches as
//! `postern mcp postern`. The engine launches it like any configured server (it is identified
//! by the `postern` executable, gets an execution epoch, is supervised, gated and audited), so
//! nothing here decides authority: a call arrives only once the gate allowed it.
//!
//! It speaks MCP over stdio through the loop of [`crate::mcp_server`] and offers one tool,
//! `http_request`. A call that the gate allowed with a credential carries the header values
//! in `params._meta["postern/inject"]`, put there by the gateway for this server only; the
//! tool takes them out before it reads anything else of the call (the loop reads only the
//! tool's name), checks them against the URL's host, sends them as headers, redacts them from
//! the answer, and never logs them. Calls run on a thread each, so a slow request never holds
//! up another.

mod fetch;
mod target;
mod tool;

use anyhow::Result;
use clap::Subcommand;
use postern_gateway::authorize::INJECT_META;
use serde_json::Value;

use crate::mcp_server::{self, Calls, Tools};
use fetch::Client;
use tool::{HttpCall, Injected, Redactor};

/// Calls running at once; more are refused with `busy` until one ends.
const MAX_CONCURRENT: usize = 16;

/// `postern builtin …`: the built-in servers the engine launches (not for people).
#[derive(Debug, Subcommand)]
pub enum BuiltinCommand {
    /// The `http_request` tool, over MCP on stdio.
    Http,
}

/// Runs a built-in server until stdin closes.
pub fn run(command: BuiltinCommand) -> Result<()> {
    match command {
        BuiltinCommand::Http => mcp_server::serve(HttpServer {
            client: Client::new(),
        }),
    }
}

/// The server of `http_request`: one HTTP client for every call.
struct HttpServer {
    client: Client,
}

impl Tools for HttpServer {
    fn info(&self) -> (&str, &str) {
        ("postern", env!("CARGO_PKG_VERSION"))
    }

    fn title(&self) -> Option<&str> {
        Some("Postern built-in tools")
    }

    fn instructions(&self) -> Option<&str> {
        Some(
            "http_request makes one HTTP request. Credentials a human bound to Postern are added \
            by Postern for their own hosts; you never see them. A redirect of a request carrying one is \
            returned to you, not followed.",
        )
    }

    fn list(&self) -> Vec<Value> {
        vec![tool::definition()]
    }

    fn calls(&self) -> Calls {
        Calls::Concurrent {
            max: MAX_CONCURRENT,
        }
    }

    fn call(&self, _name: &str, mut params: Value) -> Value {
        // Taken out first: nothing below ever sees the values in the call's params.
        let injection = params
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove(INJECT_META));
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        http_request(&self.client, arguments, injection.as_ref())
    }
}

/// Runs one `http_request` and renders its result (a tool error for any failure).
fn http_request(client: &Client, arguments: &Value, injection: Option<&Value>) -> Value {
    let injected = match injection.map(Injected::parse_all).transpose() {
        Ok(injected) => injected.unwrap_or_default(),
        Err(e) => return e.to_result(&Redactor::none()),
    };
    let redactor = Redactor::new(&injected);
    let outcome = HttpCall::parse(arguments).and_then(|call| client.send(call, &injected));
    match outcome {
        Ok(reply) => reply.to_result(&redactor),
        Err(e) => e.to_result(&redactor),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn server() -> HttpServer {
        HttpServer {
            client: Client::new(),
        }
    }

    #[test]
    fn offers_http_request_concurrently() {
        let server = server();
        assert_eq!(server.info().0, "postern");
        assert!(
            server
                .instructions()
                .is_some_and(|i| i.contains("http_request"))
        );
        let tools = server.list();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0]["name"], "http_request");
        assert_eq!(tools[0]["annotations"]["openWorldHint"], true);
        assert_eq!(tools[0]["annotations"]["destructiveHint"], true);
        assert_eq!(tools[0]["inputSchema"]["required"], json!(["url"]));
        assert_eq!(server.calls(), Calls::Concurrent { max: 16 });
    }

    #[test]
    fn refusals_are_tool_errors_with_codes_and_never_show_an_injected_value() {
        let result = server().call(
            "http_request",
            json!({
                "name": "http_request",
                "arguments": {"url": "http://api.example.com/"},
                "_meta": {"postern/inject": [{"header": "Authorization", "value": "Bearer tok-secret-1", "hosts": ["api.example.com"]}]}
            }),
        );
        assert_eq!(result["isError"], true);
        assert_eq!(result["structuredContent"]["error"], "https_required");
        assert!(!result.to_string().contains("tok-secret-1"));
    }

    #[test]
    fn a_credential_for_another_host_is_refused_before_anything_is_sent() {
        let result = server().call(
            "http_request",
            json!({
                "name": "http_request",
                "arguments": {"url": "https://127.0.0.1:9/"},
                "_meta": {"postern/inject": [{"header": "Authorization", "value": "Bearer tok-secret-2", "hosts": ["localhost"]}]}
            }),
        );
        assert_eq!(
            result["structuredContent"]["error"],
            "credential_host_mismatch"
        );
        assert!(!result.to_string().contains("tok-secret-2"));
    }
}
