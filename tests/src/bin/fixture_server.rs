//! A small stdio MCP server of Postern's own, for the scenarios real servers cannot
//! produce on command: slow calls, crashes mid-call, garbage on stdout, answers to ids
//! nobody asked for, oversized answers, and server-to-client requests.
//!
//! Raw newline-delimited JSON-RPC on purpose: it must be able to misbehave.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

type Out = Arc<Mutex<std::io::Stdout>>;
type Waiters = Arc<Mutex<HashMap<String, Sender<Value>>>>;

fn main() {
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let waiters: Waiters = Arc::default();
    eprintln!("fixture server ready (pid {})", std::process::id());
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg.get("method").is_none() {
            // A response to one of our requests.
            if let Some(tx) = msg
                .get("id")
                .and_then(|id| waiters.lock().ok()?.remove(&id.to_string()))
            {
                let _ = tx.send(msg);
            }
            continue;
        }
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let method = msg["method"].as_str().unwrap_or_default().to_owned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let (out, waiters) = (Arc::clone(&out), Arc::clone(&waiters));
        // Each request on its own thread: a slow call never blocks the next.
        std::thread::spawn(move || handle(&out, &waiters, id, &method, &params));
    }
}

fn handle(out: &Out, waiters: &Waiters, id: Value, method: &str, params: &Value) {
    let result = match method {
        "initialize" => json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-11-25"),
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "postern-fixture", "version": "1.0.0"},
            "instructions": "A fixture for Postern's tests."
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools()}),
        "tools/call" => call(out, waiters, &id, params),
        _ => {
            let err = json!({"code": -32601, "message": format!("no method {method}")});
            return send(out, &json!({"jsonrpc": "2.0", "id": id, "error": err}));
        }
    };
    send(out, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
}

fn call(out: &Out, waiters: &Waiters, id: &Value, params: &Value) -> Value {
    let args = &params["arguments"];
    let text = match params["name"].as_str().unwrap_or_default() {
        "echo" => args["text"].as_str().unwrap_or_default().to_owned(),
        "sleep" => {
            let ms = args["ms"].as_u64().unwrap_or(1000);
            std::thread::sleep(Duration::from_millis(ms));
            format!("slept {ms} ms")
        }
        "crash" => {
            eprintln!("fixture server crashing on purpose");
            std::process::exit(args["code"].as_i64().unwrap_or(3) as i32);
        }
        "garbage" => {
            write_raw(out, "this is not json at all");
            write_raw(out, "[1,2,3]");
            send(
                out,
                &json!({"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}),
            );
            "garbage sent".to_owned()
        }
        "big" => "x".repeat(args["bytes"].as_u64().unwrap_or(0) as usize),
        "roots" => {
            let (tx, rx) = channel();
            let request_id = json!(format!("fixture-roots-{id}"));
            if let Ok(mut w) = waiters.lock() {
                w.insert(request_id.to_string(), tx);
            }
            send(
                out,
                &json!({"jsonrpc": "2.0", "id": request_id, "method": "roots/list"}),
            );
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(answer) => answer["result"]["roots"].to_string(),
                Err(_) => "no answer to roots/list".to_owned(),
            }
        }
        "pid" => std::process::id().to_string(),
        "env" => std::env::var(args["name"].as_str().unwrap_or_default())
            .unwrap_or_else(|_| "<unset>".to_owned()),
        other => {
            return json!({"content": [{"type": "text", "text": format!("unknown tool {other}")}], "isError": true});
        }
    };
    json!({"content": [{"type": "text", "text": text}]})
}

fn tools() -> Value {
    let tool = |name: &str, description: &str, properties: Value| {
        json!({"name": name, "description": description,
               "inputSchema": {"type": "object", "properties": properties},
               "annotations": {"readOnlyHint": name != "crash"}})
    };
    json!([
        tool(
            "echo",
            "Returns its text.",
            json!({"text": {"type": "string"}})
        ),
        tool(
            "sleep",
            "Sleeps, then answers.",
            json!({"ms": {"type": "integer"}})
        ),
        tool(
            "crash",
            "Exits the server mid-call.",
            json!({"code": {"type": "integer"}})
        ),
        tool(
            "garbage",
            "Writes garbage and a stray response to stdout, then answers.",
            json!({})
        ),
        tool(
            "big",
            "Answers with a text of the given size.",
            json!({"bytes": {"type": "integer"}})
        ),
        tool(
            "roots",
            "Asks the client for its roots and returns them.",
            json!({})
        ),
        tool("pid", "Returns the server's process id.", json!({})),
        tool(
            "env",
            "Returns an environment variable of the server.",
            json!({"name": {"type": "string"}})
        ),
    ])
}

fn send(out: &Out, msg: &Value) {
    write_raw(out, &msg.to_string());
}

fn write_raw(out: &Out, line: &str) {
    if let Ok(mut out) = out.lock() {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}
