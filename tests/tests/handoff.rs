//! The shim hands the agent's stdio to the engine (crates/gateway/src/handoff.rs): the engine
//! reads the agent's requests from its pipe and writes the answers to its pipe, with no third
//! process on the way; the shim holds the session and takes the pipes back if the engine goes.
//! Played against the real binary, with an agent's pipes as every MCP client gives them, and
//! against a same-user process that hands the engine what is not an agent's stdio.

use std::io::{BufRead, BufReader, IoSlice, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use nix::unistd::Pid;
use postern_e2e::raw::{RawAgent, initialize_params};
use postern_e2e::{Gate, servers, within};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);

async fn connect(gate: &Gate) -> Result<RawAgent> {
    let mut agent = RawAgent::launch(gate.bin(), gate.home(), "fixture")?;
    agent
        .initialize(json!(0), initialize_params("raw-agent", json!({})))
        .await?;
    Ok(agent)
}

fn echoed(answer: &Value) -> Option<&str> {
    answer["result"]["content"][0]["text"].as_str()
}

fn signal(pid: Option<u32>, signal: Signal) -> Result<()> {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        bail!("the process is gone");
    };
    kill(Pid::from_raw(pid), signal)?;
    Ok(())
}

/// Every process with a descriptor named `name` (`pipe:[N]`).
fn holders_of(name: &str) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|p| p.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok).any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == name)
                })
            })
        })
        .collect()
}

/// How many agent sessions the engine serves now.
async fn sessions(gate: &Gate) -> Result<usize> {
    Ok(gate.status().await?["sessions"]
        .as_array()
        .map_or(0, Vec::len))
}

#[tokio::test]
async fn calls_go_on_while_the_shim_is_stopped_and_its_end_ends_the_session() -> Result<()> {
    within(LIMIT, async {
        let gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
        let mut agent = connect(&gate).await?;
        let first = agent.call(1, "echo", json!({"text": "one"})).await?;
        assert_eq!(echoed(&first), Some("one"), "{first}");

        // The shim is on no message's way: stopped, it cannot carry a line, and calls go on.
        signal(agent.pid(), Signal::SIGSTOP)?;
        for n in 2..12 {
            let answer = agent
                .call(n, "echo", json!({"text": n.to_string()}))
                .await?;
            assert_eq!(echoed(&answer), Some(n.to_string().as_str()), "{answer}");
        }
        signal(agent.pid(), Signal::SIGCONT)?;
        assert_eq!(sessions(&gate).await?, 1);

        // The agent's pipes are held by the agent, its shim and the engine, and by no other
        // process: the server (and its sandbox) inherited nothing of them.
        let engine = gate.daemon_pid().unwrap_or_default();
        let mut allowed = vec![std::process::id(), engine];
        allowed.extend(agent.pid());
        for pipe in agent.pipes()? {
            let holders = holders_of(&pipe);
            let others: Vec<&u32> = holders.iter().filter(|p| !allowed.contains(p)).collect();
            assert!(others.is_empty(), "{pipe} is held by {others:?} too");
            assert!(
                holders.contains(&engine),
                "the engine serves {pipe}: {holders:?}"
            );
        }

        // The agent ends its shim: the engine ends the session (and stops its server), though
        // the agent's pipes are still open.
        agent.kill().await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while sessions(&gate).await? != 0 {
            if tokio::time::Instant::now() > deadline {
                bail!("the session outlived its shim: {}", gate.status().await?);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    })
    .await
}

/// Node's agents (Claude Code) give their servers a Unix socket for stdio, not pipes: it is
/// handed over the same way, and served with the shim stopped.
#[tokio::test]
async fn a_socket_for_stdio_is_handed_over_too() -> Result<()> {
    within(LIMIT, async {
        let gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
        let (ours, theirs) = UnixStream::pair()?;
        let theirs = std::os::fd::OwnedFd::from(theirs);
        let mut shim = tokio::process::Command::new(gate.bin())
            .arg("--home")
            .arg(gate.home())
            .args(["mcp", "fixture"])
            .stdin(std::process::Stdio::from(theirs.try_clone()?))
            .stdout(std::process::Stdio::from(theirs))
            .kill_on_drop(true)
            .spawn()?;
        ours.set_nonblocking(true)?;
        let mut agent = SocketAgent::new(tokio::net::UnixStream::from_std(ours)?);
        let params = initialize_params("socket-agent", json!({}));
        agent
            .ask(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}))
            .await?;
        agent
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        let call = |id: i64, text: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": text}}})
        };
        assert_eq!(echoed(&agent.ask(call(1, "a")).await?), Some("a"));
        signal(shim.id(), Signal::SIGSTOP)?;
        let second =
            tokio::time::timeout(Duration::from_secs(20), agent.ask(call(2, "b"))).await??;
        assert_eq!(echoed(&second), Some("b"), "{second}");
        signal(shim.id(), Signal::SIGCONT)?;
        shim.kill().await?;
        Ok(())
    })
    .await
}

/// An agent on a Unix socket, line by line.
struct SocketAgent {
    write: tokio::net::unix::OwnedWriteHalf,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>>,
}

impl SocketAgent {
    fn new(stream: tokio::net::UnixStream) -> SocketAgent {
        use tokio::io::AsyncBufReadExt;
        let (read, write) = stream.into_split();
        let lines = tokio::io::BufReader::new(read).lines();
        SocketAgent { write, lines }
    }

    async fn send(&mut self, message: Value) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        self.write
            .write_all(format!("{message}\n").as_bytes())
            .await?;
        Ok(())
    }

    /// Sends a request and returns its answer.
    async fn ask(&mut self, request: Value) -> Result<Value> {
        let id = request["id"].clone();
        self.send(request).await?;
        loop {
            let Some(line) = self.lines.next_line().await? else {
                bail!("the shim's stdout ended");
            };
            let answer: Value = serde_json::from_str(&line)?;
            if answer["id"] == id {
                return Ok(answer);
            }
        }
    }
}

/// Sends a call (id "slow") the server works on for 30 s, and returns once the engine has
/// read it (it answered a ping sent after it).
async fn slow_call(agent: &mut RawAgent) -> Result<()> {
    agent
        .send(
            &json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                      "params": {"name": "sleep", "arguments": {"ms": 30000}}}),
        )
        .await?;
    let pong = agent.request(json!("p"), "ping", json!({})).await?;
    assert_eq!(pong["result"], json!({}), "{pong}");
    Ok(())
}

#[tokio::test]
async fn when_the_engine_dies_the_shim_takes_the_pipes_back_and_resumes_with_the_next() -> Result<()>
{
    within(LIMIT, async {
        let mut gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
        let mut agent = connect(&gate).await?;
        let answer = agent.call(1, "echo", json!({"text": "before"})).await?;
        assert_eq!(echoed(&answer), Some("before"), "{answer}");
        // A call the server works on when the engine is killed: only the engine read it.
        slow_call(&mut agent).await?;

        // Killed: nothing of the engine answers any more; the shim does, clearly, and first
        // what the engine owed (from the ledger the engine kept for it).
        signal(gate.daemon_pid(), Signal::SIGKILL)?;
        gate.stop_daemon();
        let owed = agent.response(&json!("slow")).await?;
        assert_eq!(
            owed["error"]["data"]["error"], "engine_unavailable",
            "{owed}"
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut id = 2;
        loop {
            let answer = agent.call(id, "echo", json!({"text": "x"})).await?;
            id += 1;
            if answer["error"]["data"]["error"] == "engine_unavailable" {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("still answered by a dead engine: {answer}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pong = agent.request(json!("p"), "ping", json!({})).await?;
        assert_eq!(pong["result"], json!({}), "{pong}");

        // A new engine: the shim connects with the agent's own `initialize` (which only the
        // engine saw) and tells the agent to list tools again; the agent does not initialize
        // again, and its calls reach the new engine (locked after a start, so it says so).
        gate.restart_daemon().await?;
        agent.wait_list_changed().await?;
        let answer = agent.call(id, "echo", json!({"text": "after"})).await?;
        let text = answer.to_string();
        assert!(
            !text.contains("engine_unavailable") && !text.contains("send initialize"),
            "{answer}"
        );
        // And the new engine serves the agent's pipes itself: the shim handed them over again.
        answered_with_the_shim_stopped(&mut agent, id + 1).await
    })
    .await
}

/// A call is answered, by the engine, while the agent's shim is stopped (so the engine serves
/// the agent's pipes itself).
async fn answered_with_the_shim_stopped(agent: &mut RawAgent, id: i64) -> Result<()> {
    signal(agent.pid(), Signal::SIGSTOP)?;
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        agent.call(id, "echo", json!({"text": "direct"})),
    )
    .await;
    signal(agent.pid(), Signal::SIGCONT)?;
    let answer = answer.map_err(|_| anyhow::anyhow!("no answer with the shim stopped"))??;
    // The engine's (locked after its start, it may refuse the call), in a session it resumed.
    let text = answer.to_string();
    assert!(
        !text.contains("engine_unavailable") && !text.contains("send initialize"),
        "{answer}"
    );
    Ok(())
}

/// A gate whose engine is stopped, and an agent whose shim started without it (the shim
/// answered its `initialize`).
async fn agent_without_an_engine() -> Result<(Gate, RawAgent)> {
    let mut gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
    gate.stop_daemon();
    let agent = connect(&gate).await?;
    Ok((gate, agent))
}

/// The engine returns while the agent is in the middle of a line: the shim waits for the line
/// to end before it hands the stdio over (the engine reads from the pipe), and the line is
/// answered whole, once; then the engine serves the agent's pipes.
#[tokio::test]
async fn a_line_half_written_when_the_engine_returns_is_answered_whole() -> Result<()> {
    within(LIMIT, async {
        let (mut gate, mut agent) = agent_without_an_engine().await?;
        let line = br#"{"jsonrpc":"2.0","id":"half","method":"ping"}"#;
        agent.send_bytes(&line[..20]).await?;
        gate.restart_daemon().await?;
        // Several looks at the engine find the line half read.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        agent.send_bytes(&line[20..]).await?;
        agent.send_bytes(b"\n").await?;
        let pong = agent.response(&json!("half")).await?;
        assert_eq!(pong["result"], json!({}), "{pong}");
        agent.wait_list_changed().await?;
        answered_with_the_shim_stopped(&mut agent, 2).await?;
        let later = agent.read_until_quiet(Duration::from_millis(300)).await;
        assert!(
            !later.iter().any(|m| m["id"] == "half"),
            "answered twice: {later:?}"
        );
        Ok(())
    })
    .await
}

/// A shim started while no engine runs answers the agent itself (`initialize` too), and hands
/// the agent's pipes to the engine once it runs, resuming the agent's session there.
#[tokio::test]
async fn a_shim_started_before_the_engine_hands_over_once_it_runs() -> Result<()> {
    within(LIMIT, async {
        let (mut gate, mut agent) = agent_without_an_engine().await?;
        let answer = agent.call(1, "echo", json!({"text": "x"})).await?;
        assert_eq!(
            answer["error"]["data"]["error"], "engine_unavailable",
            "{answer}"
        );

        gate.restart_daemon().await?;
        agent.wait_list_changed().await?;
        let answer = agent.call(2, "echo", json!({"text": "after"})).await?;
        assert!(!answer.to_string().contains("send initialize"), "{answer}");
        assert_eq!(sessions(&gate).await?, 1);
        answered_with_the_shim_stopped(&mut agent, 3).await
    })
    .await
}

#[tokio::test]
async fn an_engine_that_stops_answers_the_calls_it_owes_before_the_shim_takes_over() -> Result<()> {
    within(LIMIT, async {
        let mut gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
        let mut agent = connect(&gate).await?;
        slow_call(&mut agent).await?;
        gate.stop_daemon();
        let owed = agent.response(&json!("slow")).await?;
        assert_eq!(
            owed["error"]["data"]["error"], "engine_unavailable",
            "{owed}"
        );
        // The next line is whole and the shim's: the engine's last write ended where its line
        // did.
        let answer = agent.call(7, "echo", json!({"text": "x"})).await?;
        assert_eq!(
            answer["error"]["message"], "Postern is not running: start the app or `postern daemon`",
            "{answer}"
        );
        // Answered once: the engine cleared its ledger, so the shim did not answer it again.
        let mut later = agent.take_backlog();
        later.extend(agent.read_until_quiet(Duration::from_millis(500)).await);
        assert!(
            !later.iter().any(|m| m["id"] == "slow"),
            "a second answer: {later:?}"
        );
        Ok(())
    })
    .await
}

/// A same-user process (an agent, a server) connects to the engine's socket and hands it what
/// is not an agent's stdio: a file, a named FIFO, a UDP or datagram socket, a pipe the wrong
/// way, a file for the ledger, four descriptors, none. Each is refused in words and closed; the engine launches
/// nothing for it and serves a real agent as before.
#[tokio::test]
async fn the_engine_refuses_to_serve_what_is_not_an_agents_stdio() -> Result<()> {
    within(LIMIT, async {
        let gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
        let file = tempfile::tempfile()?;
        let (pipe_read, pipe_write) = std::io::pipe()?;
        let dir = tempfile::tempdir()?;
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU)?;
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)?;
        let udp = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let datagram = std::os::unix::net::UnixDatagram::unbound()?;
        let out = pipe_write.as_raw_fd();
        let attempts: Vec<(&str, Vec<i32>)> = vec![
            ("a file for stdin", vec![file.as_raw_fd(), out]),
            ("a named FIFO", vec![fifo.as_raw_fd(), out]),
            ("a UDP socket", vec![udp.as_raw_fd(), out]),
            ("a datagram socket", vec![datagram.as_raw_fd(), out]),
            ("a pipe the wrong way", vec![out, pipe_read.as_raw_fd()]),
            (
                "a file for the ledger",
                vec![pipe_read.as_raw_fd(), out, file.as_raw_fd()],
            ),
            (
                "four descriptors",
                vec![
                    pipe_read.as_raw_fd(),
                    out,
                    file.as_raw_fd(),
                    file.as_raw_fd(),
                ],
            ),
            ("no descriptor", vec![]),
        ];
        for (what, fds) in attempts {
            let socket = gate.socket();
            let note = tokio::task::spawn_blocking(move || hand_over(&socket, &fds)).await??;
            assert_eq!(note["handoff"], "refused", "{what}: {note}");
            let error = note["error"].as_str().unwrap_or_default();
            assert!(!error.is_empty(), "{what}: {note}");
            if what.contains("ledger") {
                assert!(error.contains("ledger"), "{what}: {note}");
            }
        }
        assert_eq!(sessions(&gate).await?, 0, "{}", gate.status().await?);
        // The engine kept nothing it was sent: with the test's own end closed, the pipe ends.
        drop(pipe_write);
        let ended = tokio::task::spawn_blocking(move || {
            let mut rest = Vec::new();
            std::io::Read::read_to_end(&mut &pipe_read, &mut rest).map(|_| rest.len())
        });
        assert_eq!(ended.await??, 0, "the pipe ended with nothing in it");
        let mut agent = connect(&gate).await?;
        let answer = agent.call(1, "echo", json!({"text": "still"})).await?;
        assert_eq!(echoed(&answer), Some("still"), "{answer}");
        Ok(())
    })
    .await
}

/// A same-user process hands the engine sockets whose last close waits (TCP, unsent data,
/// `SO_LINGER` of ten minutes), more of them than the engine has async threads, and closes its
/// own copies: the engine refuses each and closes it where waiting harms nothing, and a real
/// agent's calls are answered at once.
#[tokio::test]
async fn descriptors_whose_close_waits_never_stall_the_engine() -> Result<()> {
    within(LIMIT, async {
        let gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
        let mut agent = connect(&gate).await?;
        // Accepts nothing: connections complete in its backlog and their data is never read.
        let sink = std::net::TcpListener::bind("127.0.0.1:0")?;
        let (_pipe_read, pipe_write) = std::io::pipe()?;
        for _ in 0..4 {
            let lingering = lingering_socket(&sink)?;
            let fds = [lingering.as_raw_fd(), pipe_write.as_raw_fd()];
            let socket = gate.socket();
            // Closed as soon as it is sent, so the engine's copy is usually the last reference.
            // (Not always: an engine that refused and closed first leaves the last close, and
            // its wait, to the test, which closes on a thread it does not wait for.)
            let note =
                tokio::task::spawn_blocking(move || hand_over_closing(&socket, &fds, lingering))
                    .await??;
            assert_eq!(note["handoff"], "refused", "{note}");
        }
        for n in 1..4 {
            let answer = tokio::time::timeout(
                Duration::from_secs(10),
                agent.call(n, "echo", json!({"text": "prompt"})),
            )
            .await??;
            assert_eq!(echoed(&answer), Some("prompt"), "{answer}");
        }
        Ok(())
    })
    .await
}

/// A TCP connection to `sink` with data it can never send and a ten-minute linger: its last
/// close waits.
fn lingering_socket(sink: &std::net::TcpListener) -> Result<std::net::TcpStream> {
    let stream = std::net::TcpStream::connect(sink.local_addr()?)?;
    stream.set_nonblocking(true)?;
    let chunk = [0u8; 65536];
    while (&stream).write(&chunk).is_ok() {}
    let linger = nix::libc::linger {
        l_onoff: 1,
        l_linger: 600,
    };
    nix::sys::socket::setsockopt(&stream, nix::sys::socket::sockopt::Linger, &linger)?;
    Ok(stream)
}

/// Speaks the shim's side of the hand-over by hand with `fds`; returns the engine's note.
fn hand_over(socket: &std::path::Path, fds: &[i32]) -> Result<Value> {
    hand_over_closing(socket, fds, ())
}

/// [`hand_over`], dropping `sent` (what holds the descriptors) once they are sent, on a
/// thread of its own (its close may be the last, and wait).
fn hand_over_closing<T: Send + 'static>(
    socket: &std::path::Path,
    fds: &[i32],
    sent: T,
) -> Result<Value> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    (&stream).write_all(b"{\"postern\":1,\"server\":\"fixture\",\"handoff\":true}\n")?;
    let mut lines = BufReader::new(stream.try_clone()?);
    let mut welcome = String::new();
    lines.read_line(&mut welcome)?;
    let welcome: Value = serde_json::from_str(&welcome)?;
    assert_eq!(welcome["status"], "accepted", "{welcome}");
    let rights = [ControlMessage::ScmRights(fds)];
    let control: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
    sendmsg::<()>(
        stream.as_fd().as_raw_fd(),
        &[IoSlice::new(b"\n")],
        control,
        MsgFlags::empty(),
        None,
    )?;
    std::thread::spawn(move || drop(sent));
    let mut note = String::new();
    lines.read_line(&mut note)?;
    Ok(serde_json::from_str(&note)?)
}
