//! The agent's end: `postern mcp <label>` hands the agent's stdio to the engine (Linux,
//! `crate::handoff`) or carries it to the engine's socket, forwarding bytes untouched. While
//! no engine is there, the shim keeps the agent's session alive: it answers `initialize` and
//! `ping` itself, answers every other request with a clear error, and hands over or
//! reconnects when the engine appears (then the agent is told to list tools again).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::framing::{
    self, Line, LineReader, Outbound, Pressure, READ_AHEAD, read_lines, read_lines_until,
    write_lines,
};
use crate::handshake::initialize_result;
use crate::hello::{Hello, SOCKET_PROTOCOL, Welcome};
use crate::message::{self, Id, Kind, Message, Rejected, code};

pub mod stdio;

/// How often the shim looks for the engine while it is away.
const RECONNECT_EVERY: Duration = Duration::from_millis(500);

/// The error every call gets while no engine is reachable.
pub const NOT_RUNNING: &str = "Postern is not running: start the app or `postern daemon`";

/// The answer to a request the engine stopped before answering (`engine_unavailable`).
pub(crate) fn engine_stopped(id: &Id) -> Bytes {
    message::error(
        Some(id),
        code::INTERNAL_ERROR,
        "the Postern engine stopped before answering",
        Some(json!({"error": "engine_unavailable"})),
    )
}

/// Runs the shim on the process's stdin and stdout until the agent closes its stdin.
pub async fn run_on_stdio(socket: PathBuf, label: String) {
    #[cfg(target_os = "linux")]
    let Some(lost) = serve_by_hand_over(&socket, &label).await else {
        return;
    };
    #[cfg(not(target_os = "linux"))]
    let lost = Lost::default();
    let (input, output) = stdio::take();
    relay(socket, label, input, output, lost, false).await;
}

/// The engine serves the agent's pipes itself whenever it can (`crate::handoff`): the shim
/// hands them over, carries the lines itself only while no engine runs, and hands them over
/// again once one is back (after a restart, or when the shim started first). `None` once the
/// agent is gone; otherwise the stdio cannot be handed over (a terminal, a file) or the engine
/// would not take it, and the shim carries the lines from here, starting with what is left.
#[cfg(target_os = "linux")]
async fn serve_by_hand_over(socket: &Path, label: &str) -> Option<Lost> {
    use crate::handoff::{Handed, hand_over};
    let mut lost = Lost::default();
    loop {
        // Only with an engine there and no line half read (the engine reads from the pipe).
        let engine = if lost.unread.is_empty() {
            UnixStream::connect(socket).await.ok()
        } else {
            None
        };
        // None for a terminal or a file: the shim carries those lines itself, always.
        let Some(fds) = stdio::handoff() else {
            return Some(lost);
        };
        if let Some(stream) = engine {
            match hand_over(stream, label, fds, lost.init.clone()).await {
                Handed::Ended => return None,
                Handed::Lost {
                    init,
                    cut,
                    unread,
                    owed,
                } => {
                    tracing::warn!(
                        "lost the Postern engine; answering calls locally until it is back"
                    );
                    let owed = owed.into_iter().map(|o| (o.id, o.initialize)).collect();
                    let init = init.or(lost.init.take());
                    lost = Lost {
                        init,
                        cut,
                        owed,
                        unread,
                    };
                }
                Handed::NotTaken => return Some(lost),
            }
        }
        let (input, output) = stdio::take();
        let relayed = relay(
            socket.to_owned(),
            label.to_owned(),
            input,
            output,
            std::mem::take(&mut lost),
            true,
        )
        .await;
        match relayed {
            Relayed::AgentClosed => return None,
            Relayed::EngineBack { init, unread } => {
                lost.init = init;
                lost.unread = unread;
            }
        }
    }
}

/// What an engine that went away while it served the agent's stdio left the shim.
#[derive(Default)]
struct Lost {
    /// The agent's `initialize` params, if it initialized.
    init: Option<Value>,
    /// The engine's last line to the agent may have been cut short (the shim ends it first).
    cut: bool,
    /// The requests it left unanswered, each with whether it is the agent's `initialize`.
    owed: Vec<(Id, bool)>,
    /// The start of the agent's next line, read by the engine (or by the shim before it
    /// stopped to hand over): the shim's reader starts with it.
    unread: Vec<u8>,
}

/// How a relay ended.
enum Relayed {
    /// The agent closed its stdin.
    AgentClosed,
    /// An engine is back (with `hand_back`): the shim stopped reading, answered every line it
    /// had read and wrote out every answer. (The engine that takes the stdio tells the agent to
    /// list tools again.)
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "hand_back is Linux's")
    )]
    EngineBack {
        init: Option<Value>,
        /// The start of the agent's next line, read before the shim stopped.
        unread: Vec<u8>,
    },
}

/// Runs the shim until the agent closes its stdin.
pub async fn run<I, O>(socket: PathBuf, label: String, stdin: I, stdout: O)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    relay(socket, label, stdin, stdout, Lost::default(), false).await;
}

/// Carries the agent's lines to the engine and back, first answering what an engine that
/// went away left (`lost`). With `hand_back`, it connects to no engine: once one is there it
/// stops, for the caller to hand the stdio over.
async fn relay<I, O>(
    socket: PathBuf,
    label: String,
    stdin: I,
    stdout: O,
    lost: Lost,
    hand_back: bool,
) -> Relayed
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    // Bounded, like every queue on the data path: each reader waits while the queue its lines
    // go to is congested (an agent that stops reading its stdout stops the engine's lines
    // here, and so, through the socket, its session's server).
    let (events, mut rx) = mpsc::channel(2 * READ_AHEAD);
    let (to_agent, agent_rx) = framing::outbound(Pressure::default());
    let to_engine = Pressure::default();
    let writer = tokio::spawn(write_lines(stdout, agent_rx));
    let (lines_tx, mut lines) = mpsc::channel(READ_AHEAD);
    let (stop_reading, stop) = tokio::sync::oneshot::channel::<()>();
    let reading = tokio::spawn(read_lines_until(
        LineReader::resuming(BufReader::new(stdin), &lost.unread),
        lines_tx,
        vec![to_agent.pressure().clone(), to_engine.clone()],
        async {
            let _ = stop.await;
        },
    ));

    let mut shim = Shim {
        socket,
        label,
        events,
        to_agent,
        to_engine,
        engine: None,
        generation: 0,
        init: lost.init,
        in_flight: HashMap::new(),
        offline_reason: NOT_RUNNING.to_owned(),
    };
    // A line a stopping engine may have left cut short is ended first. (A killed engine cannot
    // say; it leaves a line cut only if killed inside a write of a line too long for one pipe
    // write, or into a full pipe: a blank line after every kill would cost strict clients more.)
    if lost.cut {
        shim.reply(Bytes::new());
    }
    for (id, initialize) in lost.owed {
        if initialize {
            // Answered here, so the agent counts as initialized: the next engine resumes it
            // (with the params the engine passed on, if they came before it died).
            shim.init.get_or_insert_with(|| json!({}));
            shim.answer_offline(&id, "initialize");
        } else {
            shim.reply(engine_stopped(&id));
        }
    }
    if !hand_back && shim.connect().await && shim.init.is_some() {
        shim.reply(message::tools_list_changed());
    }
    // Handing back waits a period before its first look: it follows an engine that just went
    // away, or a look that found the agent in the middle of a line.
    let first = tokio::time::Instant::now()
        + if hand_back {
            RECONNECT_EVERY
        } else {
            Duration::ZERO
        };
    let mut retry = tokio::time::interval_at(first, RECONNECT_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let engine_back = loop {
        tokio::select! {
            line = lines.recv() => match line {
                Some(line) => shim.on_agent(line),
                None => break false,
            },
            Some(event) = rx.recv() => shim.on_event(event),
            _ = retry.tick(), if shim.engine.is_none() => {
                // The look is only a look: the hand-over connects anew once the shim is done
                // (an agent slow to read its last answers must not outlast the engine's wait
                // for a hello).
                if hand_back {
                    if UnixStream::connect(&shim.socket).await.is_ok() {
                        break true;
                    }
                } else if shim.connect().await && shim.init.is_some() {
                    shim.reply(message::tools_list_changed());
                }
            }
        }
    };
    if !engine_back {
        drop(shim);
        let _ = writer.await;
        return Relayed::AgentClosed;
    }
    // The reader stops at a line's end; the lines it held are answered here (no engine is
    // connected), and everything the shim wrote reaches the agent before the engine writes.
    drop(stop_reading);
    while let Some(line) = lines.recv().await {
        shim.on_agent(line);
    }
    let unread = reading.await.unwrap_or_default();
    let init = shim.init.clone();
    drop(shim);
    let _ = writer.await;
    Relayed::EngineBack { init, unread }
}

struct Shim {
    socket: PathBuf,
    label: String,
    events: mpsc::Sender<Event>,
    to_agent: Outbound,
    /// What is queued toward the engine, across connections.
    to_engine: Pressure,
    /// Lines to the engine, while connected.
    engine: Option<Outbound>,
    generation: u64,
    /// The agent's `initialize` params once it initialized.
    init: Option<Value>,
    /// Agent requests the engine has not answered, by id: how many (an agent may reuse an
    /// open request's id; the engine refuses the second, and the first is still owed).
    in_flight: HashMap<Id, u32>,
    offline_reason: String,
}

enum Event {
    Engine(u64, Line),
    EngineClosed(u64),
}

/// How long the shim waits for the engine's welcome.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest welcome the shim reads.
const MAX_WELCOME: usize = 64 * 1024;

/// Connects to the engine at `socket`, says `hello` and reads the engine's welcome, byte by
/// byte: whatever follows it (the engine may speak at once) stays in the socket for the caller.
/// `None` when no engine answers as one.
pub(crate) async fn greet(socket: &Path, hello: &Hello) -> Option<(UnixStream, Welcome)> {
    let stream = UnixStream::connect(socket).await.ok()?;
    greet_on(stream, hello).await
}

/// [`greet`] on a connection already made.
pub(crate) async fn greet_on(
    mut stream: UnixStream,
    hello: &Hello,
) -> Option<(UnixStream, Welcome)> {
    let mut line = serde_json::to_vec(hello).ok()?;
    line.push(b'\n');
    stream.write_all(&line).await.ok()?;
    let read = async {
        let mut welcome = Vec::new();
        loop {
            let byte = stream.read_u8().await.ok()?;
            if byte == b'\n' {
                return serde_json::from_slice::<Welcome>(&welcome).ok();
            }
            if welcome.len() == MAX_WELCOME {
                return None;
            }
            welcome.push(byte);
        }
    };
    let welcome = tokio::time::timeout(WELCOME_TIMEOUT, read).await.ok()??;
    Some((stream, welcome))
}

impl Shim {
    /// Tries to reach the engine; true when connected.
    async fn connect(&mut self) -> bool {
        let hello = Hello {
            postern: SOCKET_PROTOCOL,
            server: self.label.clone(),
            resume: self.init.clone(),
            handoff: false,
        };
        let Some((stream, welcome)) = greet(&self.socket, &hello).await else {
            return false;
        };
        match welcome {
            Welcome::Accepted { .. } => {}
            Welcome::Refused { error } => {
                tracing::error!("the Postern engine refused this session: {error}");
                self.offline_reason = format!("Postern refused this session: {error}");
                return false;
            }
        }
        let (read, write) = stream.into_split();
        let reader = LineReader::new(BufReader::new(read));
        self.generation += 1;
        let generation = self.generation;
        let (tx, rx) = framing::outbound(self.to_engine.clone());
        tokio::spawn(write_lines(write, rx));
        tokio::spawn(read_lines(
            reader,
            self.events.clone(),
            move |l| Event::Engine(generation, l),
            Some(Event::EngineClosed(generation)),
            vec![self.to_agent.pressure().clone()],
        ));
        self.engine = Some(tx);
        self.offline_reason = NOT_RUNNING.to_owned();
        tracing::info!(server = %self.label, "connected to the Postern engine");
        true
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Engine(generation, Line::Frame(raw)) if generation == self.generation => {
                if let Ok(Message {
                    kind: Kind::Response { id },
                    ..
                }) = Message::parse(raw.clone())
                    && let Some(open) = self.in_flight.get_mut(&id)
                {
                    *open -= 1;
                    if *open == 0 {
                        self.in_flight.remove(&id);
                    }
                }
                self.reply(raw);
            }
            Event::EngineClosed(generation) if generation == self.generation => {
                tracing::warn!("lost the Postern engine; answering calls locally until it is back");
                self.engine = None;
                for (id, open) in std::mem::take(&mut self.in_flight) {
                    for _ in 0..open {
                        self.reply(engine_stopped(&id));
                    }
                }
            }
            Event::Engine(..) | Event::EngineClosed(_) => {}
        }
    }

    fn on_agent(&mut self, line: Line) {
        let parsed = match &line {
            Line::Frame(raw) => Message::parse(raw.clone()).ok(),
            Line::Oversize { .. } => None,
        };
        if let Some(msg) = &parsed
            && let Kind::Request { id, method } = &msg.kind
        {
            if method == "initialize" && self.init.is_none() {
                self.init = Some(msg.params().cloned().unwrap_or_else(|| json!({})));
            }
            if self.engine.is_none() {
                return self.answer_offline(id, method);
            }
            *self.in_flight.entry(id.clone()).or_default() += 1;
        }
        // Everything else, malformed lines included, is the engine's to judge.
        match (&self.engine, line) {
            (Some(engine), Line::Frame(raw)) => {
                let _ = engine.send(raw);
            }
            (_, Line::Oversize { len, id }) => {
                // Never forwarded: the engine would refuse it anyway, and it is large.
                self.reply(Rejected::oversize(len, id.as_ref()).answer());
            }
            (None, Line::Frame(raw)) => {
                if let Err(rejected) = Message::parse(raw) {
                    self.reply(rejected.answer());
                }
            }
        }
    }

    fn answer_offline(&self, id: &Id, method: &str) {
        let reply = match method {
            "initialize" => {
                let params = self.init.clone().unwrap_or_else(|| json!({}));
                message::result(id, initialize_result(&self.label, &params, None))
            }
            "ping" => message::result(id, json!({})),
            _ => message::error(
                Some(id),
                code::INTERNAL_ERROR,
                &self.offline_reason,
                Some(json!({"error": "engine_unavailable"})),
            ),
        };
        self.reply(reply);
    }

    fn reply(&self, line: Bytes) {
        let _ = self.to_agent.send(line);
    }
}
