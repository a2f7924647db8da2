//! A scripted stand-in for the model APIs real agents call, on loopback: the Anthropic
//! Messages API (Claude Code, through `ANTHROPIC_BASE_URL`) and the OpenAI Responses API
//! (Codex, through a custom model provider's `base_url`). The test is the model: each model
//! turn waits for the test to say what it is ([`Model::turn`]): call a tool with arguments, or
//! end the run with a sentence. What the agent sent back for each tool call (the tool's
//! result, or the gate's refusal, as the model would read it) is handed to the test
//! ([`Model::result`]). Between the two, the test can rebuild a server, answer an approval or
//! let a timeout pass, exactly as it happens to a real agent mid-run.
//!
//! The stand-in speaks just enough HTTP/1.1: one request per connection (`connection:
//! close`), a `content-length` body, a server-sent-events answer (or, for a request with
//! `"stream": false`, the message as JSON). Requests it does not know get an empty JSON object.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc};

/// What the model does on its next turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Call the tool whose name ends with `tool` (agents prefix MCP tools with their server:
    /// `mcp__label__tool` in Claude Code) with `arguments`.
    Call {
        /// The tool's own name.
        tool: String,
        /// Its arguments.
        arguments: Value,
    },
    /// End the run, saying `text`.
    Say(String),
}

impl Turn {
    /// A call of `tool` with `arguments`.
    pub fn call(tool: &str, arguments: Value) -> Turn {
        Turn::Call {
            tool: tool.into(),
            arguments,
        }
    }
}

/// What the agent sent the model after a tool call.
#[derive(Debug, Clone)]
pub struct ToolResult {
    /// The text of the result's content, joined.
    pub text: String,
    /// Whether the agent marked it an error.
    pub is_error: bool,
}

/// The running stand-in.
#[derive(Debug)]
pub struct Model {
    port: u16,
    turns: mpsc::UnboundedSender<Turn>,
    results: Mutex<mpsc::UnboundedReceiver<ToolResult>>,
}

struct Shared {
    turns: Mutex<mpsc::UnboundedReceiver<Turn>>,
    results: mpsc::UnboundedSender<ToolResult>,
    /// The tool-call ids already reported (agents resend the whole conversation).
    reported: std::sync::Mutex<std::collections::HashSet<String>>,
    counter: std::sync::atomic::AtomicU64,
}

impl Model {
    /// Listens on a free loopback port.
    pub async fn start() -> Result<Model> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (turns_tx, turns_rx) = mpsc::unbounded_channel();
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            turns: Mutex::new(turns_rx),
            results: results_tx,
            reported: Default::default(),
            counter: Default::default(),
        });
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, &shared).await {
                        eprintln!("model stand-in: {e:#}");
                    }
                });
            }
        });
        Ok(Model {
            port,
            turns: turns_tx,
            results: Mutex::new(results_rx),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Queues the model's next turn.
    pub fn turn(&self, turn: Turn) {
        let _ = self.turns.send(turn);
    }

    /// The next tool result the agent sent back, waiting up to `limit`.
    pub async fn result(&self, limit: Duration) -> Result<ToolResult> {
        let mut results = self.results.lock().await;
        match tokio::time::timeout(limit, results.recv()).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => bail!("the model stand-in stopped"),
            Err(_) => bail!("no tool result reached the model within {limit:?}"),
        }
    }
}

async fn serve(stream: TcpStream, shared: &Shared) -> Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or_default().to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    );
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await? == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().context("content-length")?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let mut stream = reader.into_inner();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if method != "POST" || !request.is_object() {
        return answer_json(&mut stream, &json!({})).await;
    }
    let anthropic = path.starts_with("/v1/messages");
    let responses = path.ends_with("/responses");
    if !anthropic && !responses {
        return answer_json(&mut stream, &json!({})).await;
    }
    if anthropic {
        report_anthropic_results(&request, shared);
    } else {
        report_responses_results(&request, shared);
    }
    // Side requests (a title, a token count) are not turns of the run: only a request that
    // offers tools is.
    let offers_tools = request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let turn = if offers_tools {
        shared
            .turns
            .lock()
            .await
            .recv()
            .await
            .unwrap_or_else(|| Turn::Say("the script ended".into()))
    } else {
        Turn::Say("ok".into())
    };
    let n = shared
        .counter
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // An application asking without streaming (the SDK clients' agents) gets the message whole.
    if anthropic && request["stream"] == false {
        return answer_json(&mut stream, &anthropic_message(&request, &turn, n)?).await;
    }
    let events = if anthropic {
        anthropic_events(&request, &turn, n)?
    } else {
        responses_events(&request, &turn, n)?
    };
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        )
        .await?;
    for (name, data) in events {
        stream
            .write_all(format!("event: {name}\ndata: {data}\n\n").as_bytes())
            .await?;
    }
    stream.flush().await?;
    stream.shutdown().await?;
    Ok(())
}

async fn answer_json(stream: &mut TcpStream, value: &Value) -> Result<()> {
    let body = value.to_string();
    stream
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await?;
    stream.shutdown().await?;
    Ok(())
}

/// Every tool the agent offered, as (namespace, name): Claude Code offers MCP tools flat
/// (`mcp__label__tool`), Codex in a namespace (`mcp__label` holding `tool`).
fn offered(request: &Value) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for tool in request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        if tool["type"] == "namespace" {
            for inner in tool["tools"].as_array().into_iter().flatten() {
                if let Some(inner) = inner.get("name").and_then(Value::as_str) {
                    out.push((Some(name.to_owned()), inner.to_owned()));
                }
            }
        } else if !name.is_empty() {
            out.push((None, name.to_owned()));
        }
    }
    out
}

/// The offered tool whose name is `tool` or ends with `__tool`, with its namespace.
fn tool_name(request: &Value, tool: &str) -> Result<(Option<String>, String)> {
    let offered = offered(request);
    offered
        .iter()
        .find(|(_, name)| name == tool || name.ends_with(&format!("__{tool}")))
        .cloned()
        .with_context(|| format!("the agent offered no tool '{tool}': {offered:?}"))
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn report(shared: &Shared, id: &str, result: ToolResult) {
    let fresh = shared
        .reported
        .lock()
        .map(|mut seen| seen.insert(id.to_owned()))
        .unwrap_or(false);
    if fresh {
        let _ = shared.results.send(result);
    }
}

fn report_anthropic_results(request: &Value, shared: &Shared) {
    let Some(last) = request["messages"].as_array().and_then(|m| m.last()) else {
        return;
    };
    for block in last["content"].as_array().into_iter().flatten() {
        if block["type"] == "tool_result" {
            report(
                shared,
                block["tool_use_id"].as_str().unwrap_or_default(),
                ToolResult {
                    text: text_of(&block["content"]),
                    is_error: block["is_error"].as_bool().unwrap_or(false),
                },
            );
        }
    }
}

fn report_responses_results(request: &Value, shared: &Shared) {
    for item in request["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call_output" {
            let output = &item["output"];
            let text = match output {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("content")
                    .map(text_of)
                    .unwrap_or_else(|| output.to_string()),
                other => text_of(other),
            };
            let is_error = output
                .get("success")
                .and_then(Value::as_bool)
                .is_some_and(|ok| !ok);
            report(
                shared,
                item["call_id"].as_str().unwrap_or_default(),
                ToolResult { text, is_error },
            );
        }
    }
}

type Events = Vec<(String, String)>;

fn anthropic_message(request: &Value, turn: &Turn, n: u64) -> Result<Value> {
    let (content, stop) = match turn {
        Turn::Call { tool, arguments } => {
            let (_, name) = tool_name(request, tool)?;
            (
                json!([{"type": "tool_use", "id": format!("toolu_{n}"), "name": name,
                        "input": arguments}]),
                "tool_use",
            )
        }
        Turn::Say(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
    };
    Ok(json!({
        "id": format!("msg_{n}"), "type": "message", "role": "assistant",
        "model": request["model"], "content": content, "stop_reason": stop,
        "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}))
}

fn anthropic_events(request: &Value, turn: &Turn, n: u64) -> Result<Events> {
    let model = request["model"].as_str().unwrap_or("claude-stand-in");
    let event = |name: &str, data: Value| (name.to_owned(), data.to_string());
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    )];
    let stop = match turn {
        Turn::Call { tool, arguments } => {
            let (_, name) = tool_name(request, tool)?;
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": {}}}),
            ));
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {
                    "type": "input_json_delta", "partial_json": arguments.to_string()}}),
            ));
            "tool_use"
        }
        Turn::Say(text) => {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}}),
            ));
            "end_turn"
        }
    };
    events.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    Ok(events)
}

fn responses_events(request: &Value, turn: &Turn, n: u64) -> Result<Events> {
    let event = |data: Value| {
        (
            data["type"].as_str().unwrap_or_default().to_owned(),
            data.to_string(),
        )
    };
    let id = format!("resp_{n}");
    let item = match turn {
        Turn::Call { tool, arguments } => {
            let (namespace, name) = tool_name(request, tool)?;
            let mut item = json!({
                "type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                "name": name, "arguments": arguments.to_string()});
            if let Some(namespace) = namespace {
                item["namespace"] = Value::String(namespace);
            }
            item
        }
        Turn::Say(text) => json!({
            "type": "message", "role": "assistant", "id": format!("msg_{n}"),
            "content": [{"type": "output_text", "text": text}]}),
    };
    Ok(vec![
        event(json!({"type": "response.created", "response": {"id": id}})),
        event(json!({"type": "response.output_item.done", "item": item})),
        event(
            json!({"type": "response.completed", "response": {"id": id, "usage": {
            "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
            "output_tokens_details": null, "total_tokens": 2}}}),
        ),
    ])
}
