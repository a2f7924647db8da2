//! A minimal MCP server over stdio (one JSON-RPC message per line) for Postern's own servers:
//! `initialize`, `ping`, `tools/list` and `tools/call`, notifications ignored, anything else
//! refused with "method not found". The tools are the caller's.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// A server's tools.
pub trait Tools {
    /// The server's name and version for `initialize`.
    fn info(&self) -> (&str, &str);

    /// The `tools` array of `tools/list`.
    fn list(&self) -> Vec<Value>;

    /// The result of `tools/call` (a `CallToolResult`), given the tool's name and the whole
    /// `params` object.
    fn call(&mut self, name: &str, params: &Value) -> Value;
}

/// Serves `tools` on stdin/stdout until stdin closes.
pub fn serve(tools: &mut impl Tools) -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let Some(answer) = answer(tools, &line) else {
            continue;
        };
        serde_json::to_writer(&mut out, &answer)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}

/// The answer to one line, if it is a request.
fn answer(tools: &mut impl Tools, line: &str) -> Option<Value> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(msg) => msg,
        Err(e) => {
            return Some(error(&Value::Null, -32700, &format!("parse error: {e}")));
        }
    };
    let id = msg.get("id")?.clone();
    let method = msg
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
    let result = match method {
        "initialize" => {
            let (name, version) = tools.info();
            let protocol = params
                .get("protocolVersion")
                .cloned()
                .unwrap_or_else(|| json!(postern_domain::PROTOCOL_VERSION));
            json!({
                "protocolVersion": protocol,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": name, "version": version},
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools.list()}),
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Some(error(&id, -32602, "tools/call needs a tool name"));
            };
            tools.call(name, &params)
        }
        other => return Some(error(&id, -32601, &format!("method not found: {other}"))),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A tool result with one text block (and `isError` when `error`).
pub fn text_result(text: &str, structured: Option<Value>, error: bool) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": error});
    if let Some(structured) = structured {
        result["structuredContent"] = structured;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    impl Tools for Echo {
        fn info(&self) -> (&str, &str) {
            ("echo", "1")
        }

        fn list(&self) -> Vec<Value> {
            vec![json!({"name": "echo", "inputSchema": {"type": "object"}})]
        }

        fn call(&mut self, name: &str, params: &Value) -> Value {
            text_result(&format!("{name} {}", params["arguments"]), None, false)
        }
    }

    #[test]
    fn answers_requests_and_ignores_notifications() {
        let init = answer(&mut Echo, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
            .expect("answered");
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(init["result"]["serverInfo"]["name"], "echo");
        assert!(
            answer(
                &mut Echo,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .is_none()
        );
        let list = answer(
            &mut Echo,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        )
        .expect("list");
        assert_eq!(list["result"]["tools"][0]["name"], "echo");
        let call = answer(&mut Echo, r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}"#)
            .expect("call");
        assert_eq!(call["id"], "a");
        assert_eq!(call["result"]["content"][0]["text"], r#"echo {"x":1}"#);
        let unknown = answer(
            &mut Echo,
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#,
        )
        .expect("error");
        assert_eq!(unknown["error"]["code"], -32601);
        let bad = answer(&mut Echo, "{not json").expect("parse error");
        assert_eq!(bad["error"]["code"], -32700);
    }
}
