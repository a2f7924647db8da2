//! The engine's local socket: a private directory, a 0600 socket, one session per
//! connection.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use postern_domain::{AgentIdentity, ServerLabel};
use postern_supervisor::{DigestCache, LiveProcess};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{broadcast, watch};

use crate::audit::{AuditSink, NoAudit};
use crate::authorize::{AllowAll, Authorizer};
use crate::control::ControlHandler;
use crate::framing::{self, Line, LineReader, write_lines};
use crate::hello::{HandoffNote, Opening, SOCKET_PROTOCOL, Welcome};
use crate::registry::Sessions;
use crate::session::{self, Command, Context};
use crate::upstream::ServerDirectory;

/// How long a new connection has to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What the gateway serves agents with; cloning shares it.
#[derive(Clone)]
pub struct Gateway {
    /// Where server configurations come from.
    pub directory: Arc<dyn ServerDirectory>,
    /// The live session list.
    pub sessions: Sessions,
    /// Digests of launched artifacts, shared by every launch.
    pub cache: Arc<DigestCache>,
    /// Commands to every session (restarts).
    pub commands: broadcast::Sender<Command>,
    /// Answers management requests on the socket.
    pub control: Option<Arc<dyn ControlHandler>>,
    /// Where decisions and transitions are recorded.
    pub audit: Arc<dyn AuditSink>,
    /// Decides every tool call.
    pub authorizer: Arc<dyn Authorizer>,
}

impl Gateway {
    /// A gateway over `directory` with an empty session list.
    pub fn new(directory: Arc<dyn ServerDirectory>) -> Self {
        Self {
            directory,
            sessions: Sessions::new(),
            cache: Arc::new(DigestCache::new()),
            commands: broadcast::channel(64).0,
            control: None,
            audit: Arc::new(NoAudit),
            authorizer: Arc::new(AllowAll),
        }
    }
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

/// Creates the socket's directory (0700) and binds the socket (0600). A stale socket
/// file is replaced: the caller must hold the home's single-owner lock.
pub fn bind(socket: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = socket.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// How many agent sessions one engine serves at once (each owns a server process); more are
/// refused with a sentence the shim passes on to the agent.
pub const MAX_SESSIONS: usize = 256;

/// Accepts agent connections until `shutdown` turns true.
pub async fn serve(listener: UnixListener, gateway: Gateway, mut shutdown: watch::Receiver<bool>) {
    let ctx = Context {
        directory: gateway.directory,
        sessions: gateway.sessions,
        cache: gateway.cache,
        commands: gateway.commands,
        control: gateway.control,
        audit: gateway.audit,
        authorizer: gateway.authorizer,
        shutdown: shutdown.clone(),
    };
    let next_id = Arc::new(AtomicU64::new(1));
    let active = Arc::new(AtomicUsize::new(0));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let ctx = ctx.clone();
                    let active = Arc::clone(&active);
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(async move {
                        let peer = stream.peer_cred();
                        let (read, mut write) = stream.into_split();
                        let peer = match check_peer(peer) {
                            Ok(peer) => peer,
                            Err(error) => {
                                tracing::warn!(connection = id, "{error}");
                                let _ = write_json(&mut write, &Welcome::Refused { error }).await;
                                return;
                            }
                        };
                        connection(ctx, id, peer, LineReader::new(BufReader::new(read)), write, active).await;
                    });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    // No new connection waits in the backlog for an engine that will not serve it (a shim
    // whose stdio the engine served connects again at once).
    drop(listener);
    // Every session ends now (each saw the shutdown): wait for their last lines to reach
    // their agents, within reason, and leave the rest to end on their own.
    let ended = tokio::time::timeout(SESSIONS_END, async {
        while connections.join_next().await.is_some() {}
    });
    if ended.await.is_err() {
        tracing::warn!(
            left = connections.len(),
            "sessions still closing at shutdown"
        );
        connections.detach_all();
    }
}

/// How long a stopping engine waits for its sessions to end: longer than the longest a session
/// takes to end on its own (its reader 1 s, its server 2.5 s, its last lines 3 x 2 s).
const SESSIONS_END: Duration = Duration::from_secs(10);

/// Only processes of the engine's own user may connect; anyone else is refused.
fn check_peer(peer: std::io::Result<tokio::net::unix::UCred>) -> Result<Option<u32>, String> {
    let peer =
        peer.map_err(|e| format!("cannot read the connecting process's credentials: {e}"))?;
    let ours = nix::unistd::getuid().as_raw();
    if peer.uid() != ours {
        return Err(format!(
            "a process of another user (uid {}) tried to connect; refused",
            peer.uid()
        ));
    }
    Ok(peer.pid().and_then(|pid| u32::try_from(pid).ok()))
}

async fn connection(
    ctx: Context,
    id: u64,
    peer_pid: Option<u32>,
    mut reader: LineReader<BufReader<tokio::net::unix::OwnedReadHalf>>,
    mut write: OwnedWriteHalf,
    active: Arc<AtomicUsize>,
) {
    let Some(hello) =
        unless_stopping(&ctx, tokio::time::timeout(HELLO_TIMEOUT, reader.next())).await
    else {
        return;
    };
    let opening = match hello {
        Ok(Ok(Some(Line::Frame(line)))) => {
            serde_json::from_slice::<Opening>(&line).map_err(|e| format!("bad hello: {e}"))
        }
        Ok(Ok(Some(Line::Oversize { .. }))) => Err("bad hello: too large".to_owned()),
        Ok(Ok(None) | Err(_)) => return,
        Err(_) => Err("no hello within 10s".to_owned()),
    };
    let hello = match opening {
        Ok(Opening::Control(request)) => {
            let answer = match (&ctx.control, request.postern == SOCKET_PROTOCOL) {
                (Some(control), true) => {
                    // The handler may block (the keychain, argon2): off the async threads.
                    let control = Arc::clone(control);
                    tokio::task::spawn_blocking(move || {
                        control.handle(request.control, request.proof, peer_pid)
                    })
                    .await
                    .unwrap_or_else(|_| serde_json::json!({"error": "the engine failed"}))
                }
                (None, _) => {
                    serde_json::json!({"error": "this engine takes no management requests"})
                }
                (_, false) => {
                    serde_json::json!({"error": "socket protocol mismatch: update Postern"})
                }
            };
            let _ = write_json(&mut write, &answer).await;
            return;
        }
        Ok(Opening::Session(hello)) => Ok(hello),
        Err(e) => Err(e),
    };
    // A place among the sessions is taken here, before anything slow, and given back when
    // the session ends: the cap holds however many agents connect at once.
    let seat = hello.is_ok().then(|| Seat::take(&active)).flatten();
    let accepted = hello.and_then(|h| {
        if seat.is_none() {
            return Err(format!(
                "this engine already serves {MAX_SESSIONS} agent sessions, its limit; close some agents and retry"
            ));
        }
        if h.postern != SOCKET_PROTOCOL {
            return Err(format!(
                "this engine speaks socket protocol {SOCKET_PROTOCOL}, the shim {}: update Postern",
                h.postern
            ));
        }
        let label: ServerLabel = h.server.parse().map_err(|e| format!("{e}"))?;
        Ok((label, h.resume, h.handoff))
    });
    let welcome = match &accepted {
        Ok(_) => Welcome::Accepted {
            session: id,
            resumes: true,
        },
        Err(error) => Welcome::Refused {
            error: error.clone(),
        },
    };
    if write_json(&mut write, &welcome).await.is_err() {
        return;
    }
    let Ok((label, resume, handoff)) = accepted else {
        tracing::warn!(connection = id, ?welcome, "connection refused");
        return;
    };
    tracing::info!(session = id, server = %label, resumed = resume.is_some(), handoff, "agent session started");
    if handoff {
        #[cfg(target_os = "linux")]
        return served_directly(ctx, id, peer_pid, label, resume, reader, write).await;
        #[cfg(not(target_os = "linux"))]
        {
            let error = "this engine serves no agent's stdio itself".to_owned();
            let _ = write_json(&mut write, &HandoffNote::Refused { error }).await;
            return;
        }
    }
    let (to_agent, rx) = framing::outbound(framing::Pressure::default());
    tokio::spawn(write_lines(write, rx));
    let agent = identify(&ctx, peer_pid).await;
    let side = session::AgentSide {
        from: reader,
        to: to_agent,
        shim: None,
    };
    session::run(ctx, id, label, resume, agent, side).await;
}

/// How long a session's last lines may take to reach an agent whose stdio the engine serves,
/// before the shim takes the stdio back.
#[cfg(target_os = "linux")]
const LAST_LINES: Duration = Duration::from_secs(2);

/// A session whose agent stdio the shim handed over (`crate::handoff`): the engine reads and
/// writes the agent's pipes itself, and the connection carries only notes to the shim.
#[cfg(target_os = "linux")]
async fn served_directly(
    ctx: Context,
    id: u64,
    peer_pid: Option<u32>,
    label: ServerLabel,
    resume: Option<serde_json::Value>,
    reader: LineReader<BufReader<tokio::net::unix::OwnedReadHalf>>,
    mut write: OwnedWriteHalf,
) {
    let taken = if reader.get_ref().buffer().is_empty() {
        let socket = reader.get_ref().get_ref().as_ref();
        unless_stopping(&ctx, crate::handoff::take(socket))
            .await
            .unwrap_or_else(|| Err("the engine is stopping".to_owned()))
    } else {
        Err("the shim wrote before handing over the agent's stdio".to_owned())
    };
    let crate::handoff::Taken {
        input,
        output,
        ledger,
    } = match taken {
        Ok(taken) => taken,
        Err(error) => {
            tracing::warn!(session = id, "{error}");
            let _ = write_json(&mut write, &HandoffNote::Refused { error }).await;
            return;
        }
    };
    if write_json(&mut write, &HandoffNote::Taken).await.is_err() {
        return;
    }
    let (to_agent, rx) = framing::outbound(framing::Pressure::default());
    // A session the shim carried while no engine ran: the agent lists tools again, from here
    // (the shim may no longer write, and the agent's request must reach this engine).
    if resume.is_some() {
        let _ = to_agent.send(crate::message::tools_list_changed());
    }
    let agent_writer = tokio::spawn(write_lines(output, rx));
    // The shim's socket stays open until the agent's last lines are out: its closing tells
    // the shim it may write to the agent's stdout itself.
    let (notes, mut notes_rx) = framing::outbound(framing::Pressure::default());
    let shim_writer = tokio::spawn(async move {
        while let Some(line) = notes_rx.recv().await {
            let written =
                write.write_all(&line).await.is_ok() && write.write_all(b"\n").await.is_ok();
            notes_rx.done(&line);
            if !written {
                break;
            }
        }
        write
    });
    let (gone_tx, gone) = tokio::sync::oneshot::channel();
    let watcher = tokio::spawn(async move {
        // The shim writes nothing more: the socket ends when the shim does.
        crate::handoff::until_closed(reader.get_ref().get_ref().as_ref()).await;
        let _ = gone_tx.send(());
    });
    let agent = identify(&ctx, peer_pid).await;
    let side = session::AgentSide {
        from: LineReader::new(BufReader::new(input)),
        to: to_agent,
        shim: Some(session::ShimLink {
            notes,
            gone,
            ledger,
        }),
    };
    session::run(ctx, id, label, resume, agent, side).await;
    // The agent's last lines go out before the shim may write to the same stdout. An agent
    // that does not read them in time may have its last line cut: the shim is told, and ends
    // it before its own.
    let mut agent_writer = agent_writer;
    let cut = tokio::time::timeout(LAST_LINES, &mut agent_writer)
        .await
        .is_err();
    if cut {
        agent_writer.abort();
        let _ = agent_writer.await;
    }
    watcher.abort();
    let mut shim_writer = shim_writer;
    let write = match tokio::time::timeout(LAST_LINES, &mut shim_writer).await {
        Ok(Ok(write)) => Some(write),
        _ => {
            shim_writer.abort();
            None
        }
    };
    if let (true, Some(mut write)) = (cut, write) {
        let _ = tokio::time::timeout(LAST_LINES, write_json(&mut write, &HandoffNote::Cut)).await;
    }
}

/// `work`, or `None` once the engine is stopping.
async fn unless_stopping<T>(ctx: &Context, work: impl Future<Output = T>) -> Option<T> {
    let mut shutdown = ctx.shutdown.clone();
    tokio::select! {
        done = work => Some(done),
        _ = shutdown.wait_for(|stopping| *stopping) => None,
    }
}

/// The agent is whoever launched the shim, as the process table says; it is held from here
/// on, to ask before each call whether it still runs.
async fn identify(ctx: &Context, peer_pid: Option<u32>) -> Option<(AgentIdentity, LiveProcess)> {
    match peer_pid {
        Some(pid) => {
            let cache = Arc::clone(&ctx.cache);
            tokio::task::spawn_blocking(move || {
                let agent = postern_supervisor::identify_agent(pid, &cache)?;
                let held = LiveProcess::hold(agent.pid, agent.start_time);
                Some((agent, held))
            })
            .await
            .ok()
            .flatten()
        }
        None => None,
    }
}

/// One of the engine's [`MAX_SESSIONS`] places, held while a session runs.
struct Seat(Arc<AtomicUsize>);

impl Seat {
    fn take(active: &Arc<AtomicUsize>) -> Option<Seat> {
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_SESSIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Seat(Arc::clone(active)))
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn write_json(
    write: &mut OwnedWriteHalf,
    value: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}
