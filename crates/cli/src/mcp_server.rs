//! The one MCP server loop of Postern's own servers (the built-in `http_request`, the demo
//! server), over stdio with the gateway's framing and message parsing: one JSON-RPC message
//! a line, a line over the size cap refused without being buffered. It answers `initialize`
//! (the client's protocol version when Postern speaks it, else Postern's), `ping`,
//! `tools/list` and `tools/call`; notifications and responses get no answer; a malformed line,
//! an unknown method or an unknown tool gets a JSON-RPC error, and the server reads on. The
//! tools are the caller's, and so is whether their calls run one at a time or side by side
//! ([`Calls`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use postern_gateway::framing::{self, LineReader, Outbound, Pressure, write_lines};
use postern_gateway::message::{self, Id, Kind, Message, code};
use postern_gateway::negotiate;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// A server's tools.
pub trait Tools: Send + Sync + 'static {
    /// The server's name and version for `initialize`.
    fn info(&self) -> (&str, &str);

    /// The server's human-readable title for `initialize`, if it has one.
    fn title(&self) -> Option<&str> {
        None
    }

    /// The `instructions` of `initialize`, if any.
    fn instructions(&self) -> Option<&str> {
        None
    }

    /// The `tools` array of `tools/list`.
    fn list(&self) -> Vec<Value>;

    /// How the calls run.
    fn calls(&self) -> Calls {
        Calls::InOrder
    }

    /// The result of `tools/call` (a `CallToolResult`), given the name of one of the tools
    /// [`Tools::list`] offers and the whole `params` object (the tool's to take apart).
    fn call(&self, name: &str, params: Value) -> Value;
}

/// How a server's `tools/call`s run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// One at a time: a call is answered before the next line is read.
    InOrder,
    /// Each on a thread of its own while the loop reads on (so a slow call never holds up
    /// another, nor a `ping`), at most `max` at once: a call beyond that gets a `busy` tool
    /// error until one ends.
    Concurrent {
        /// The most calls running at once.
        max: usize,
    },
}

impl Calls {
    /// The most calls running at once.
    pub fn max(self) -> usize {
        match self {
            Calls::InOrder => 1,
            Calls::Concurrent { max } => max,
        }
    }
}

/// Serves `tools` on stdin/stdout until stdin closes.
pub fn serve(tools: impl Tools) -> Result<()> {
    crate::runtime()?.block_on(serve_on(tools, tokio::io::stdin(), tokio::io::stdout()))?;
    Ok(())
}

/// Serves `tools` on `input` / `output` until `input` ends or `output` breaks (the client is
/// gone), then waits for the calls still running (their answers are owed) and returns.
pub async fn serve_on(
    tools: impl Tools,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (to_client, answers) = framing::outbound(Pressure::default());
    let writer = tokio::spawn(write_lines(output, answers));
    let calls = tools.calls();
    let mut server = Server {
        slots: Arc::new(Semaphore::new(calls.max())),
        calls,
        tools: Arc::new(tools),
        to_client,
        running: JoinSet::new(),
    };
    let mut lines = LineReader::new(BufReader::new(input));
    let read = loop {
        match lines.next().await {
            Ok(Some(line)) => match Message::from_line(line) {
                Ok(msg) => server.message(msg).await,
                Err(rejected) => server.send(rejected.answer()),
            },
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
        while server.running.try_join_next().is_some() {}
        // A client that stops reading its answers stops being read.
        server.to_client.pressure().drained().await;
        if server.to_client.is_closed() {
            break Ok(());
        }
    };
    while server.running.join_next().await.is_some() {}
    drop(server);
    // The writer ends once every answer is written (or the output broke).
    let _ = writer.await;
    read
}

/// A tool result with one text block (and `isError` when `error`).
pub fn text_result(text: &str, structured: Option<Value>, error: bool) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    if let Some(structured) = structured {
        result["structuredContent"] = structured;
    }
    result["isError"] = Value::Bool(error);
    result
}

/// A tool error with a stable code: `isError`, the reason and the detail as text, the detail
/// (`{"error": code, "reason": reason}`) as structured content.
pub fn error_result(code: &str, reason: &str) -> Value {
    let detail = json!({"error": code, "reason": reason});
    text_result(&format!("{reason}\n{detail}"), Some(detail), true)
}

/// The loop's state: the tools, the queue of answers, the calls running.
struct Server<T> {
    tools: Arc<T>,
    calls: Calls,
    /// One permit a running call.
    slots: Arc<Semaphore>,
    to_client: Outbound,
    running: JoinSet<()>,
}

impl<T: Tools> Server<T> {
    /// Answers one message, if it is a request.
    async fn message(&mut self, mut msg: Message) {
        // Notifications need no answer; responses answer nothing these servers ask.
        let Kind::Request { id, method } = msg.kind.clone() else {
            return;
        };
        let params = msg.body.remove("params").unwrap_or(Value::Null);
        let result = match method.as_str() {
            "initialize" => self.initialize(&params),
            "ping" => json!({}),
            "tools/list" => json!({"tools": self.tools.list()}),
            "tools/call" => return self.call(id, params).await,
            other => {
                let reason = format!("method not found: {other}");
                return self.refuse(&id, code::METHOD_NOT_FOUND, &reason);
            }
        };
        self.send(message::result(&id, result));
    }

    fn initialize(&self, params: &Value) -> Value {
        let (name, version) = self.tools.info();
        let mut server_info = json!({"name": name});
        if let Some(title) = self.tools.title() {
            server_info["title"] = json!(title);
        }
        server_info["version"] = json!(version);
        let mut result = json!({
            "protocolVersion": negotiate(params),
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": server_info,
        });
        if let Some(instructions) = self.tools.instructions() {
            result["instructions"] = json!(instructions);
        }
        result
    }

    /// Starts a `tools/call` (and, [`Calls::InOrder`], waits for it).
    async fn call(&mut self, id: Id, params: Value) {
        let Some(name) = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return self.refuse(&id, code::INVALID_PARAMS, "tools/call needs a tool name");
        };
        if !self.tools.list().iter().any(|tool| tool["name"] == name) {
            return self.refuse(&id, code::INVALID_PARAMS, &format!("unknown tool '{name}'"));
        }
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            let busy = error_result(
                "busy",
                &format!(
                    "{} requests are already running; try again when one ends",
                    self.calls.max()
                ),
            );
            return self.send(message::result(&id, busy));
        };
        let (tools, to_client) = (Arc::clone(&self.tools), self.to_client.clone());
        self.running.spawn_blocking(move || {
            let answer = match catch_unwind(AssertUnwindSafe(|| tools.call(&name, params))) {
                Ok(result) => message::result(&id, result),
                Err(_) => message::error(
                    Some(&id),
                    code::INTERNAL_ERROR,
                    &format!("the tool '{name}' failed"),
                    None,
                ),
            };
            // Free before the answer goes out: a client that got it may call again at once.
            drop(slot);
            // A closed queue means the session ended: nothing is left to tell.
            let _ = to_client.send(answer);
        });
        if self.calls == Calls::InOrder {
            self.running.join_next().await;
        }
    }

    fn refuse(&self, id: &Id, code: i64, reason: &str) {
        self.send(message::error(Some(id), code, reason, None));
    }

    fn send(&self, line: Bytes) {
        // A closed queue means the output broke; the loop notices and ends.
        let _ = self.to_client.send(line);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, DuplexStream, Lines};
    use tokio::task::JoinHandle;

    use super::*;

    /// How long a test waits for one answer before it fails.
    const ANSWER: Duration = Duration::from_secs(10);

    /// A server with an `echo` tool and a `wait` tool that returns when the test says so.
    struct Echo {
        calls: Calls,
        release: Mutex<std_mpsc::Receiver<()>>,
    }

    impl Tools for Echo {
        fn info(&self) -> (&str, &str) {
            ("echo", "1")
        }

        fn instructions(&self) -> Option<&str> {
            Some("Echoes.")
        }

        fn list(&self) -> Vec<Value> {
            ["echo", "wait", "panic"]
                .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                .to_vec()
        }

        fn calls(&self) -> Calls {
            self.calls
        }

        fn call(&self, name: &str, params: Value) -> Value {
            match name {
                "wait" => {
                    let released = self.release.lock().expect("release").recv_timeout(ANSWER);
                    text_result("released", None, released.is_err())
                }
                "panic" => panic!("the tool broke"),
                _ => text_result(&format!("{name} {}", params["arguments"]), None, false),
            }
        }
    }

    /// A client on the other end of a running loop.
    struct Client {
        input: DuplexStream,
        answers: Lines<BufReader<DuplexStream>>,
        server: JoinHandle<std::io::Result<()>>,
        release: std_mpsc::Sender<()>,
    }

    impl Client {
        fn start(calls: Calls) -> Client {
            let (release, wait) = std_mpsc::channel();
            let tools = Echo {
                calls,
                release: Mutex::new(wait),
            };
            let (input, server_input) = tokio::io::duplex(1 << 16);
            let (server_output, output) = tokio::io::duplex(1 << 16);
            Client {
                input,
                answers: BufReader::new(output).lines(),
                server: tokio::spawn(serve_on(tools, server_input, server_output)),
                release,
            }
        }

        async fn send(&mut self, line: impl AsRef<[u8]>) {
            self.input.write_all(line.as_ref()).await.expect("send");
            self.input.write_all(b"\n").await.expect("send");
        }

        async fn answer(&mut self) -> Value {
            let line = tokio::time::timeout(ANSWER, self.answers.next_line())
                .await
                .expect("an answer in time")
                .expect("read")
                .expect("a line");
            serde_json::from_str(&line).expect("json")
        }

        /// Sends `line` and reads its answer.
        async fn ask(&mut self, line: impl AsRef<[u8]>) -> Value {
            self.send(line).await;
            self.answer().await
        }

        /// Closes the input; the server's result.
        async fn close(self) -> std::io::Result<()> {
            drop(self.input);
            tokio::time::timeout(ANSWER, self.server)
                .await
                .expect("the server ends")
                .expect("join")
        }
    }

    fn ping(id: u32) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
    }

    fn call(id: u32, tool: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}"}}}}"#
        )
    }

    #[tokio::test]
    async fn answers_requests_and_ignores_notifications_and_responses() {
        let mut client = Client::start(Calls::InOrder);
        let init = client.ask(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#).await;
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(
            init["result"]["serverInfo"],
            json!({"name": "echo", "version": "1"})
        );
        assert_eq!(
            init["result"]["capabilities"],
            json!({"tools": {"listChanged": false}})
        );
        assert_eq!(init["result"]["instructions"], "Echoes.");
        let init = client.ask(r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#).await;
        assert_eq!(
            init["result"]["protocolVersion"],
            postern_domain::PROTOCOL_VERSION,
            "a version Postern does not speak gets Postern's"
        );
        client
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        client.send(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).await;
        let list = client
            .ask(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#)
            .await;
        assert_eq!(
            list["id"], 3,
            "the notification and the response got no answer"
        );
        assert_eq!(list["result"]["tools"][0]["name"], "echo");
        let call = client.ask(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}"#).await;
        assert_eq!(call["id"], "a");
        assert_eq!(call["result"]["content"][0]["text"], r#"echo {"x":1}"#);
        assert_eq!(call["result"]["isError"], false);
        assert_eq!(
            client.ask(ping(4)).await,
            json!({"jsonrpc": "2.0", "id": 4, "result": {}})
        );
        client.close().await.expect("served");
    }

    #[tokio::test]
    async fn a_malformed_line_or_an_unknown_method_gets_an_error_and_the_server_reads_on() {
        let mut client = Client::start(Calls::InOrder);
        let refusals: [(&[u8], Value, i64); 8] = [
            (b"{not json", Value::Null, code::PARSE_ERROR),
            // Not UTF-8, and still answered under its id (review 11, F4).
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffng\"}",
                json!(1),
                code::PARSE_ERROR,
            ),
            (b"[1, 2]", Value::Null, code::INVALID_REQUEST),
            (
                br#"{"jsonrpc":"2.0","id":2}"#,
                json!(2),
                code::INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":3,"method":7}"#,
                json!(3),
                code::INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#,
                json!(4),
                code::METHOD_NOT_FOUND,
            ),
            (
                br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#,
                json!(5),
                code::INVALID_PARAMS,
            ),
            (
                br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope"}}"#,
                json!(6),
                code::INVALID_PARAMS,
            ),
        ];
        for (line, id, code) in refusals {
            let answer = client.ask(line).await;
            let shown = String::from_utf8_lossy(line);
            assert_eq!(answer["id"], id, "{shown}: {answer}");
            assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
            assert!(
                answer["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{answer}"
            );
            assert_eq!(
                client.ask(ping(9)).await["result"],
                json!({}),
                "answers on after {shown}"
            );
        }
        client.close().await.expect("served");
    }

    #[tokio::test]
    async fn a_tool_that_panics_gets_an_internal_error_and_the_server_reads_on() {
        let mut client = Client::start(Calls::InOrder);
        let answer = client.ask(call(1, "panic")).await;
        assert_eq!(answer["error"]["code"], code::INTERNAL_ERROR, "{answer}");
        assert_eq!(client.ask(ping(2)).await["result"], json!({}));
        client.close().await.expect("served");
    }

    #[tokio::test]
    async fn concurrent_calls_run_beside_the_loop_up_to_the_limit() {
        let mut client = Client::start(Calls::Concurrent { max: 1 });
        client.send(call(1, "wait")).await;
        // The call is running: the loop still answers, and a second call is refused.
        assert_eq!(client.ask(ping(2)).await["id"], 2);
        let busy = client.ask(call(3, "echo")).await;
        assert_eq!(busy["id"], 3);
        assert_eq!(busy["result"]["isError"], true, "{busy}");
        assert_eq!(
            busy["result"]["structuredContent"]["error"], "busy",
            "{busy}"
        );
        client.release.send(()).expect("release");
        let first = client.answer().await;
        assert_eq!(first["id"], 1);
        assert_eq!(first["result"]["content"][0]["text"], "released");
        assert_eq!(first["result"]["isError"], false);
        // Its slot is free again.
        let again = client.ask(call(4, "echo")).await;
        assert_eq!(again["result"]["isError"], false, "{again}");
        client.close().await.expect("served");
    }

    #[tokio::test]
    async fn an_answer_still_owed_when_the_input_ends_is_written() {
        let mut client = Client::start(Calls::Concurrent { max: 4 });
        client.send(call(1, "wait")).await;
        assert_eq!(client.ask(ping(2)).await["id"], 2, "the call is running");
        let Client {
            input,
            mut answers,
            server,
            release,
        } = client;
        drop(input);
        // Time for the loop to read the end (were it too short, the test would pass anyway).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!server.is_finished(), "the server waits for the call");
        release.send(()).expect("release");
        let line = tokio::time::timeout(ANSWER, answers.next_line())
            .await
            .expect("in time")
            .expect("read")
            .expect("the owed answer");
        let owed: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(owed["id"], 1);
        server.await.expect("join").expect("served");
    }

    #[tokio::test]
    async fn the_server_ends_when_its_output_breaks() {
        let mut client = Client::start(Calls::InOrder);
        assert_eq!(client.ask(ping(1)).await["id"], 1);
        let Client {
            mut input,
            answers,
            server,
            ..
        } = client;
        drop(answers);
        // The input stays open: the server ends because nobody reads its answers.
        let ended = async {
            while !server.is_finished() {
                let _ = input.write_all(format!("{}\n", ping(2)).as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(ANSWER, ended)
            .await
            .expect("the server ends");
        server.await.expect("join").expect("served");
    }
}
