//! The shim hands the agent's stdio to the engine (Linux).
//!
//! A shim that carries each line itself is a third process on every message's way: the agent
//! writes, the shim wakes, reads, writes to the socket, the engine wakes, and again for the
//! answer. When the agent gave the shim pipes or a socket (every MCP client does), the shim
//! instead sends them to the engine over its socket (`SCM_RIGHTS`), and the engine reads the
//! agent's requests and writes its answers directly. The shim stays, holding the session:
//!
//! 1. shim: a [`Hello`] with `handoff: true`; engine: a [`Welcome`];
//! 2. shim: one byte with three descriptors (stdin, stdout: a pipe opened anew, a socket
//!    copied, see `shim::stdio::handoff`; and its ledger, a sealed memfd, see
//!    `crate::ledger`); engine: [`HandoffNote::Taken`], or `Refused` and the socket closes
//!    (the shim then connects again and carries the lines itself);
//! 3. engine: [`HandoffNote::Initialize`] when the agent initializes, [`HandoffNote::Ended`]
//!    when the agent closed its stdin (the shim exits); as it stops, [`HandoffNote::Unread`]
//!    (the start of the agent's next line, which it had read) and [`HandoffNote::Cut`] (its
//!    last line to the agent may be cut short).
//!
//! Either side's end ends the session: the shim's socket closing (the agent killed it) ends
//! the engine's session; the socket closing without `Ended` has the shim take the stdio back,
//! answering as it does while no engine runs, and hand it over again once an engine is back
//! (the [`Hello`] then resumes the agent's session with its `initialize` params). An engine
//! that stops first answers every request it owes or had read, and lets its last lines out;
//! one that is killed leaves in the ledger the requests it held open, and the shim answers
//! them (`engine_unavailable`).

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvFlags, ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, recvmsg, sendmsg,
};
use serde_json::Value;
use tokio::io::{BufReader, Interest};
use tokio::net::UnixStream;

use crate::framing::{Line, LineReader};
use crate::hello::{HandoffNote, Hello, SOCKET_PROTOCOL, Welcome};
use crate::ledger::{Ledger, Owed};
use crate::shim::greet_on;
use crate::shim::stdio::{Input, Output, adopt, servable};

/// How long either side waits for the other's next step of the hand-over.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// How a hand-over ended, for the shim.
#[derive(Debug)]
pub(crate) enum Handed {
    /// The agent closed its stdin and the engine ended the session: the shim is done.
    Ended,
    /// The engine went away mid-session: the shim carries the stdio itself from now on,
    /// resuming with the agent's `initialize` params if it sent them.
    Lost {
        /// The agent's `initialize` params, as the engine passed them on.
        init: Option<Value>,
        /// The engine's last line to the agent may have been cut short.
        cut: bool,
        /// The start of the agent's next line, which the engine had read: read it first.
        unread: Vec<u8>,
        /// The requests the engine left unanswered (it was killed): the shim answers them.
        owed: Vec<Owed>,
    },
    /// The engine did not take them (it refused, or did not answer as one): the shim carries
    /// the stdio itself.
    NotTaken,
}

/// The shim's side: offers `stdio` (the agent's stdin and stdout) to the engine on `stream`
/// (resuming the agent's session with its `initialize` params, if it initialized before) and
/// holds the session while the engine serves it.
pub(crate) async fn hand_over(
    stream: UnixStream,
    label: &str,
    stdio: [OwnedFd; 2],
    resume: Option<Value>,
) -> Handed {
    let hello = Hello {
        postern: SOCKET_PROTOCOL,
        server: label.to_owned(),
        resume,
        handoff: true,
    };
    let resuming = hello.resume.is_some();
    let Some((mut stream, Welcome::Accepted { resumes, .. })) = greet_on(stream, &hello).await
    else {
        return Handed::NotTaken;
    };
    if resuming && !resumes {
        // An older engine would serve the stdio as a session never initialized.
        return Handed::NotTaken;
    }
    // The page where the engine writes what it owes, read if it is killed.
    let ledger = crate::ledger::create();
    let mut fds = vec![stdio[0].as_fd(), stdio[1].as_fd()];
    fds.extend(ledger.as_ref().map(AsFd::as_fd));
    if send_fds(&stream, &fds).await.is_err() {
        return Handed::NotTaken;
    }
    // The engine holds its own copies now; the shim keeps only the descriptors it was given.
    drop(stdio);
    let owed = || ledger.as_ref().map(crate::ledger::read).unwrap_or_default();
    let (read, _write) = stream.split();
    let mut notes = LineReader::new(BufReader::new(read));
    match tokio::time::timeout(STEP_TIMEOUT, notes.next()).await {
        Ok(Ok(Some(Line::Frame(line)))) => match serde_json::from_slice(&line) {
            Ok(HandoffNote::Taken) => {}
            Ok(HandoffNote::Refused { error }) => {
                tracing::warn!("the Postern engine did not take the agent's stdio: {error}");
                return Handed::NotTaken;
            }
            _ => return Handed::NotTaken,
        },
        _ => return Handed::NotTaken,
    }
    tracing::info!(server = %label, "the Postern engine serves the agent's stdio");
    let (mut init, mut cut, mut unread) = (None, false, Vec::new());
    loop {
        match notes.next().await {
            Ok(Some(Line::Frame(line))) => match serde_json::from_slice(&line) {
                Ok(HandoffNote::Initialize { params }) => init = Some(params),
                Ok(HandoffNote::Ended) => return Handed::Ended,
                Ok(HandoffNote::Cut) => cut = true,
                Ok(HandoffNote::Unread { bytes }) => unread = bytes,
                _ => {}
            },
            Ok(Some(Line::Oversize { .. })) => {}
            Ok(None) | Err(_) => {
                return Handed::Lost {
                    init,
                    cut,
                    unread,
                    owed: owed(),
                };
            }
        }
    }
}

async fn send_fds(stream: &UnixStream, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    loop {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            control.push(SendAncillaryMessage::ScmRights(fds));
            sendmsg(
                stream,
                &[IoSlice::new(b"\n")],
                &mut control,
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            )
            .map_err(std::io::Error::from)
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// What the engine takes from a shim: the agent's stdin and stdout, polled, and the page where
/// it writes what it owes (`crate::ledger`; an older shim sends none).
pub(crate) struct Taken {
    pub input: Input,
    pub output: Output,
    pub ledger: Option<Ledger>,
}

/// The engine's side, after its [`Welcome`]: receives the agent's stdin and stdout (and the
/// shim's ledger) from the shim, or says why not.
pub(crate) async fn take(stream: &UnixStream) -> Result<Taken, String> {
    let (fds, truncated) = tokio::time::timeout(STEP_TIMEOUT, recv_fds(stream))
        .await
        .map_err(|_| "no descriptors within 10s".to_owned())?
        .map_err(|e| format!("cannot receive the agent's stdio: {e}"))?;
    // Checked, and any refused closed, off the async threads: closing what another process
    // sent may wait (a socket set to linger), and so may looking at it.
    tokio::task::spawn_blocking(move || {
        // Refused descriptors are closed on a thread of their own: the refusal does not wait.
        let refuse = |error: String, fds: Vec<OwnedFd>| {
            tokio::task::spawn_blocking(move || drop(fds));
            Err(error)
        };
        if truncated {
            return refuse(
                "more descriptors than stdin, stdout and a ledger".to_owned(),
                fds,
            );
        }
        let (stdio, ledger) = match <[OwnedFd; 3]>::try_from(fds) {
            Ok([input, output, ledger]) => ([input, output], Some(ledger)),
            Err(fds) => match <[OwnedFd; 2]>::try_from(fds) {
                Ok(stdio) => (stdio, None),
                Err(fds) => {
                    let error = "expected 2 or 3 descriptors (stdin, stdout, a ledger)";
                    return refuse(error.to_owned(), fds);
                }
            },
        };
        let [input, output] = stdio;
        if let Err(e) = servable(&input, &output) {
            let error = format!("the agent's stdio cannot be served: {e}");
            return refuse(error, [input, output].into_iter().chain(ledger).collect());
        }
        let ledger = match ledger.as_ref().map(Ledger::open).transpose() {
            Ok(mapped) => mapped,
            Err(e) => {
                let error = format!("the shim's ledger cannot be used: {e}");
                return refuse(error, [input, output].into_iter().chain(ledger).collect());
            }
        };
        let (input, output) =
            adopt(input, output).map_err(|e| format!("the agent's stdio cannot be served: {e}"))?;
        Ok(Taken {
            input,
            output,
            ledger,
        })
    })
    .await
    .map_err(|_| "the engine failed".to_owned())?
}

/// Reads what a shim sends after its hand-over (nothing, from an honest one) until its socket
/// closes: the shim is gone. Descriptors sent along are closed off the async threads.
pub(crate) async fn until_closed(stream: &UnixStream) {
    let mut buf = [0u8; 1024];
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        let read = stream.try_io(Interest::READABLE, || {
            crate::shim::stdio::recv_closing_fds(stream.as_fd(), &mut buf)
        });
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// The descriptors that came with the shim's one byte, and whether more came than fit.
async fn recv_fds(stream: &UnixStream) -> std::io::Result<(Vec<OwnedFd>, bool)> {
    loop {
        stream.readable().await?;
        let received = stream.try_io(Interest::READABLE, || {
            // Room for as many as one message may carry (SCM_MAX_FD): descriptors that do not
            // fit would be closed by the kernel here, on an async thread.
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(253))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut byte = [0u8; 1];
            // Close-on-exec from the start: a server the engine launches must never inherit
            // an agent's stdio.
            let msg = recvmsg(
                stream,
                &mut [IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
            )
            .map_err(std::io::Error::from)?;
            let fds = crate::shim::stdio::received_fds(&mut control);
            if msg.bytes == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            Ok((fds, msg.flags.contains(ReturnFlags::CTRUNC)))
        });
        match received {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, Write};
    use std::sync::Arc;

    use postern_domain::{ServerConfig, ServerLabel};
    use tokio::sync::watch;

    use super::*;
    use crate::shim::stdio::handoff_of;
    use crate::upstream::ServerDirectory;

    struct NoServers;

    impl ServerDirectory for NoServers {
        fn lookup(&self, _: &ServerLabel) -> Result<Option<ServerConfig>, String> {
            Ok(None)
        }
    }

    /// An engine serving agents on a socket in a fresh directory: the directory, the socket,
    /// the switch that stops it, and its task.
    fn engine() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/engine.sock");
        let listener = crate::bind(&socket).unwrap();
        let (stop, stopping) = watch::channel(false);
        let gateway = crate::Gateway::new(Arc::new(NoServers));
        let serving = tokio::spawn(crate::serve(listener, gateway, stopping));
        (dir, socket, stop, serving)
    }

    /// An agent's pipes as an MCP client gives them to its shim, and the shim handing them to
    /// the engine at `socket`: the shim's stdin, the agent's writing end of it, the agent's
    /// reading end of the shim's stdout, and the shim's hand-over.
    fn agent(
        socket: std::path::PathBuf,
    ) -> (
        std::io::PipeReader,
        std::io::PipeWriter,
        std::io::PipeReader,
        tokio::task::JoinHandle<Handed>,
    ) {
        let (shim_in, agent_out) = std::io::pipe().unwrap();
        let (agent_in, shim_out) = std::io::pipe().unwrap();
        let fds = handoff_of(shim_in.as_fd(), shim_out.as_fd()).expect("pipes are handed over");
        let shim = tokio::spawn(async move {
            let stream = UnixStream::connect(&socket).await.unwrap();
            hand_over(stream, "nothing", fds, None).await
        });
        (shim_in, agent_out, agent_in, shim)
    }

    /// One line from `from`, read on a blocking thread (at most 20 s).
    async fn line_from(from: std::io::PipeReader) -> (String, std::io::PipeReader) {
        let reading = tokio::task::spawn_blocking(move || {
            let mut lines = std::io::BufReader::new(from);
            let mut line = String::new();
            lines.read_line(&mut line).unwrap();
            assert!(lines.buffer().is_empty(), "one line at a time");
            (line, lines.into_inner())
        });
        tokio::time::timeout(Duration::from_secs(20), reading)
            .await
            .expect("a line within 20 s")
            .unwrap()
    }

    /// An engine that stops inside a process that goes on (the app's) leaves the agent's
    /// stdin to the shim: the agent's next line is the shim's to read, not taken by a reader
    /// the stopped session left behind.
    #[tokio::test]
    async fn a_stopping_engine_gives_the_agents_next_line_to_the_shim() {
        let (_dir, socket, stop, serving) = engine();

        let (shim_in, mut agent_out, agent_in, shim) = agent(socket);

        // Served by the engine: the shim reads none of it.
        agent_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .unwrap();
        let (answer, _agent_in) = line_from(agent_in).await;
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], 1, "{answer}");

        stop.send(true).unwrap();
        let handed = tokio::time::timeout(Duration::from_secs(20), shim)
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(&handed, Handed::Lost { cut: false, unread, .. } if unread.is_empty()),
            "{handed:?}"
        );
        serving.await.unwrap();

        agent_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .unwrap();
        let (line, _) = line_from(shim_in).await;
        assert!(line.contains("\"id\":2"), "{line}");
    }

    /// The engine stops while it holds the start of the agent's next line (one read took a
    /// whole line and part of the next): the shim gets those bytes back, and with the rest
    /// from the pipe the line is whole again.
    #[tokio::test]
    async fn a_line_the_engine_held_in_part_when_it_stopped_goes_back_to_the_shim_whole() {
        let (_dir, socket, stop, serving) = engine();
        let (shim_in, mut agent_out, agent_in, shim) = agent(socket);

        let second = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
        let mut written = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".to_vec();
        written.extend_from_slice(&second[..20]);
        agent_out.write_all(&written).unwrap();
        let (answer, _agent_in) = line_from(agent_in).await;
        assert!(answer.contains("\"id\":1"), "{answer}");

        stop.send(true).unwrap();
        let handed = tokio::time::timeout(Duration::from_secs(20), shim)
            .await
            .unwrap()
            .unwrap();
        serving.await.unwrap();
        let Handed::Lost { unread, .. } = handed else {
            panic!("{handed:?}");
        };
        assert_eq!(unread, &second[..20]);
        agent_out.write_all(&second[20..]).unwrap();
        let (rest, _) = line_from(shim_in).await;
        let mut line = unread;
        line.extend_from_slice(rest.as_bytes());
        assert_eq!(line, second);
    }
}
