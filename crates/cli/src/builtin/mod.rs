//! Postern's built-in MCP server, `postern builtin http`: what an agent reaches as
//! `postern mcp postern`. The engine launches it like any configured server (it is identified
//! by the `postern` executable, gets an execution epoch, is supervised, gated and audited), so
//! nothing here decides authority: a call arrives only once the gate allowed it.
//!
//! It speaks MCP over stdio (newline-delimited JSON-RPC: `initialize`, `ping`, `tools/list`,
//! `tools/call`) and offers one tool, `http_request`. A call that the gate allowed with a
//! credential carries the header values in `params._meta["postern/inject"]`, put there by the
//! gateway for this server only; they are taken out before anything else reads the call,
//! checked against the URL's host, sent as headers, redacted from the answer, and never
//! logged. Calls run on a thread each, so a slow request never holds up another.

mod fetch;
mod target;
mod tool;

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use clap::Subcommand;
use postern_domain::{PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use postern_gateway::authorize::INJECT_META;
use serde_json::{Map, Value, json};

use fetch::Client;
use tool::{HttpCall, Injected, Redactor, ToolError};

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
        BuiltinCommand::Http => serve(std::io::stdin().lock(), std::io::stdout()),
    }
}

/// Serves MCP on `input` / `output` until `input` ends.
fn serve(input: impl BufRead, output: impl Write + Send + 'static) -> Result<()> {
    let server = Server {
        out: Arc::new(Mutex::new(Box::new(output))),
        client: Client::new(),
        running: Arc::new(AtomicUsize::new(0)),
    };
    let mut calls = Vec::new();
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(Value::Object(msg)) => calls.extend(server.handle(msg)),
            _ => server.write(&json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "not a JSON-RPC message"}})),
        }
        calls.retain(|c: &std::thread::JoinHandle<()>| !c.is_finished());
    }
    // The session is over; answers still owed go to a closed pipe, so wait only for them to
    // notice.
    for call in calls {
        let _ = call.join();
    }
    Ok(())
}

type Output = Arc<Mutex<Box<dyn Write + Send>>>;

struct Server {
    out: Output,
    client: Client,
    running: Arc<AtomicUsize>,
}

impl Server {
    /// Answers one message; a `tools/call` runs on its own thread, returned.
    fn handle(&self, mut msg: Map<String, Value>) -> Option<std::thread::JoinHandle<()>> {
        let method = msg.get("method").and_then(Value::as_str)?.to_owned();
        let id = msg.get("id").cloned()?; // notifications need no answer
        let params = msg.remove("params").unwrap_or(Value::Null);
        let result = match method.as_str() {
            "initialize" => initialize(&params),
            "ping" => json!({}),
            "tools/list" => json!({"tools": [tool::definition()]}),
            "tools/call" => return self.call(id, params),
            _ => {
                self.write(&json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("method '{method}' is not supported")}}));
                return None;
            }
        };
        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
        None
    }

    fn call(&self, id: Value, mut params: Value) -> Option<std::thread::JoinHandle<()>> {
        // Taken out first: nothing below ever sees the values in the call's params.
        let injection = params
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove(INJECT_META));
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        if name != tool::NAME {
            self.write(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32602, "message": format!("unknown tool '{name}'")}}));
            return None;
        }
        if self.running.fetch_add(1, Ordering::SeqCst) >= MAX_CONCURRENT {
            self.running.fetch_sub(1, Ordering::SeqCst);
            let busy = ToolError::new(
                "busy",
                format!("{MAX_CONCURRENT} requests are already running; try again when one ends"),
            );
            self.answer(&id, busy.to_result(&Redactor::none()));
            return None;
        }
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        let (client, out, running) = (
            self.client.clone(),
            Arc::clone(&self.out),
            Arc::clone(&self.running),
        );
        let handle = std::thread::spawn(move || {
            let result = http_request(&client, &arguments, injection.as_ref());
            write_line(&out, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
            running.fetch_sub(1, Ordering::SeqCst);
        });
        Some(handle)
    }

    fn answer(&self, id: &Value, result: Value) {
        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn write(&self, msg: &Value) {
        write_line(&self.out, msg);
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

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {
            "name": "postern",
            "title": "Postern built-in tools",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": "http_request makes one HTTP request. Credentials a human bound to Postern are added \
            by Postern for their own hosts; you never see them. A redirect of a request carrying one is \
            returned to you, not followed.",
    })
}

fn write_line(out: &Output, msg: &Value) {
    let Ok(mut line) = serde_json::to_vec(msg) else {
        return;
    };
    line.push(b'\n');
    let mut out = out.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // A closed pipe means the session ended: nothing is left to tell.
    let _ = out.write_all(&line).and_then(|()| out.flush());
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn session(lines: &[Value]) -> Vec<Value> {
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let sink = Sink::default();
        serve(Cursor::new(input), sink.clone()).expect("serve");
        let bytes = sink.0.lock().expect("sink").clone();
        String::from_utf8(bytes)
            .expect("utf8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect()
    }

    #[test]
    fn speaks_mcp_and_offers_http_request() {
        let answers = session(&[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}),
        ]);
        assert_eq!(answers.len(), 5, "{answers:?}");
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(
            answers[0]["result"]["capabilities"]["tools"]["listChanged"],
            false
        );
        let tools = answers[1]["result"]["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0]["name"], "http_request");
        assert_eq!(tools[0]["annotations"]["openWorldHint"], true);
        assert_eq!(tools[0]["annotations"]["destructiveHint"], true);
        assert_eq!(tools[0]["inputSchema"]["required"], json!(["url"]));
        assert_eq!(answers[2], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
        assert_eq!(answers[3]["error"]["code"], -32601);
        assert_eq!(answers[4]["error"]["code"], -32602);
    }

    #[test]
    fn refusals_are_tool_errors_with_codes_and_never_show_an_injected_value() {
        let answers = session(&[
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
                "name": "http_request",
                "arguments": {"url": "http://api.example.com/"},
                "_meta": {"postern/inject": [{"header": "Authorization", "value": "Bearer tok-secret-1", "hosts": ["api.example.com"]}]}
            }}),
        ]);
        assert_eq!(answers.len(), 1);
        let result = &answers[0]["result"];
        assert_eq!(result["isError"], true);
        assert_eq!(result["structuredContent"]["error"], "https_required");
        assert!(!answers[0].to_string().contains("tok-secret-1"));
    }

    #[test]
    fn a_credential_for_another_host_is_refused_before_anything_is_sent() {
        let answers = session(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "http_request",
                "arguments": {"url": "https://127.0.0.1:9/"},
                "_meta": {"postern/inject": [{"header": "Authorization", "value": "Bearer tok-secret-2", "hosts": ["localhost"]}]}
            }}),
        ]);
        assert_eq!(
            answers[0]["result"]["structuredContent"]["error"],
            "credential_host_mismatch"
        );
        assert!(!answers[0].to_string().contains("tok-secret-2"));
    }
}
