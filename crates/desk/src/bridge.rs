//! The bridge between the app's two processes: the resident one (`postern-desk`: the engine,
//! the tray, notifications; it never links WebKit) and the window process (`postern-app`:
//! Tauri's webviews, running only while a window is open). They speak newline-delimited JSON
//! over a Unix socket pair that the process starting the other hands it as its standard
//! input, never over a path in the filesystem: no other process can reach the bridge, and
//! each side takes its end off fd 0 at once ([`take_stdin`]) so that none of its own children
//! inherits it.
//!
//! The window process asks ([`ToDesk::Call`]: a window's IPC call, as it came) and the desk
//! answers in any order ([`ToWindows::Reply`]); the desk tells it about changes
//! ([`ToWindows::Emit`]) and which windows to open and close ([`ToWindows::Show`],
//! [`ToWindows::CloseApprovals`]). When the window process's last window closes it says so
//! ([`ToDesk::Idle`]) and exits only once the desk releases it ([`ToWindows::Release`]), which
//! the desk does only when no window it asked for is still on its way: a request arriving as
//! the last window closes gets a window either way.

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The argument that tells a process its standard input is the bridge.
pub const BRIDGE_ARG: &str = "--bridge-stdin";

/// The resident process's program.
pub const RESIDENT_PROGRAM: &str = "postern-desk";

/// The window process's program.
pub const WINDOW_PROGRAM: &str = "postern-app";

/// The argument that has the resident show the status window at start.
pub const SHOW_ARG: &str = "--show";

/// The app's other program: `program` in this program's directory (where the build and the
/// installers put both), or found on `PATH` when this one's path is unknown.
pub fn beside_this_program(program: &str) -> std::path::PathBuf {
    std::env::current_exe()
        .map(|exe| exe.with_file_name(program))
        .unwrap_or_else(|_| program.into())
}

/// The longest line either side reads: the largest message is a journal page or a timeline
/// (a few MiB at most).
pub const MAX_LINE: u64 = 64 << 20;

/// What the window process says to the desk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToDesk {
    /// A window's IPC call, as Tauri handed it over (after its capability check).
    Call {
        /// Echoed in the reply.
        id: u64,
        /// The calling window's label.
        window: String,
        /// The command.
        command: String,
        /// Its arguments object.
        args: Value,
    },
    /// The last window closed; `seen` is how many [`ToWindows::Show`] orders it had taken.
    Idle {
        /// Show orders taken so far.
        seen: u64,
    },
}

/// What the desk says to the window process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToWindows {
    /// The answer to call `id`: the command's result, or its refusal (a `CommandError`).
    Reply {
        /// The call's id.
        id: u64,
        /// The answer.
        result: Result<Value, Value>,
    },
    /// An event for the window labelled `to`, or for every window.
    Emit {
        /// The event's name.
        event: String,
        /// The window, or all.
        to: Option<String>,
        /// Its payload.
        payload: Value,
    },
    /// Open (or show) a window: the `seq`th order of this process.
    Show {
        /// Orders so far, this one included.
        seq: u64,
        /// Which window.
        window: Show,
    },
    /// Close the approval window, if it is open.
    CloseApprovals,
    /// The process may exit: it said it was idle and no order is on its way.
    Release,
    /// The app quits.
    Quit,
}

/// A window to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "window", rename_all = "snake_case")]
pub enum Show {
    /// The status window, shown, unminimized and focused.
    Main,
    /// The approval window; it takes the focus only when a human asked for it.
    Approvals {
        /// Whether it takes the keyboard focus.
        focus: bool,
    },
}

/// Reads the next message; `None` at the end of the stream. A line that is not a message is
/// an error (the peer is this app's other process: it does not send any).
pub async fn read<T: DeserializeOwned>(
    reader: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> io::Result<Option<T>> {
    line.clear();
    let read = (&mut *reader)
        .take(MAX_LINE)
        .read_until(b'\n', line)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a bridge message longer than its limit, or cut off",
        ));
    }
    serde_json::from_slice(line)
        .map(Some)
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

/// The longest message a window process on standby reads: it waits for a show order (the
/// resident tells it nothing else, and it would have no window to tell).
const STANDBY_LINE: usize = 4096;

/// Waits, blocking, for the first show order on `bridge`: what a window process on standby
/// does before it starts anything of its toolkit. Any other order before it has no window to
/// act on and is passed over; `None` when the resident says to quit or release, or goes.
/// Reads a byte at a time, so that nothing after the order is taken from the socket.
pub fn wait_for_show(mut bridge: &UnixStream) -> io::Result<Option<(u64, Show)>> {
    let mut line = Vec::new();
    let mut byte = [0u8];
    loop {
        if bridge.read(&mut byte)? == 0 {
            return Ok(None);
        }
        if byte[0] != b'\n' {
            if line.len() == STANDBY_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a message to a window process on standby longer than its limit",
                ));
            }
            line.push(byte[0]);
            continue;
        }
        match serde_json::from_slice(&line)
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))?
        {
            ToWindows::Show { seq, window } => return Ok(Some((seq, window))),
            ToWindows::Release | ToWindows::Quit => return Ok(None),
            ToWindows::Reply { .. } | ToWindows::Emit { .. } | ToWindows::CloseApprovals => {}
        }
        line.clear();
    }
}

/// Writes one message as a line.
pub async fn write<T: Serialize>(
    writer: &mut (impl AsyncWrite + Unpin),
    message: &T,
) -> io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
    line.push(b'\n');
    writer.write_all(&line).await
}

/// Takes this process's standard input as the bridge, and leaves `/dev/null` in its place so
/// that no child of this process (a server, a web process) inherits the bridge. Fails when
/// standard input is not a socket.
pub fn take_stdin() -> io::Result<UnixStream> {
    let stdin = io::stdin();
    let stat = rustix::fs::fstat(stdin.as_fd())?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{BRIDGE_ARG}: standard input is not a socket"),
        ));
    }
    // A copy with close-on-exec set, then fd 0 pointed elsewhere.
    let bridge = stdin.as_fd().try_clone_to_owned()?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(UnixStream::from(bridge))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_of_json_each() {
        let call = ToDesk::Call {
            id: 7,
            window: "main".into(),
            command: "status".into(),
            args: serde_json::json!({"a": "line\nbreak"}),
        };
        let text = serde_json::to_string(&call).unwrap();
        assert!(!text.contains('\n'), "{text}");
        assert_eq!(
            serde_json::to_value(ToWindows::Show {
                seq: 1,
                window: Show::Approvals { focus: true }
            })
            .unwrap(),
            serde_json::json!({"kind": "show", "seq": 1, "window": {"window": "approvals", "focus": true}})
        );
    }

    #[test]
    fn on_standby_only_a_show_order_counts_and_quit_or_the_end_is_none() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let write = |text: &str| io::Write::write_all(&mut &ours, text.as_bytes());
        let after = "{\"kind\":\"emit\",\"event\":\"after\",\"to\":null,\"payload\":{}}\n";
        write(concat!(
            r#"{"kind":"close_approvals"}"#,
            "\n",
            r#"{"kind":"emit","event":"status-changed","to":null,"payload":{}}"#,
            "\n",
            r#"{"kind":"show","seq":1,"window":{"window":"main"}}"#,
            "\n",
        ))
        .unwrap();
        write(after).unwrap();
        assert_eq!(wait_for_show(&theirs).unwrap(), Some((1, Show::Main)));
        // What came after the order stays on the socket for the window process to read.
        let mut rest = vec![0u8; after.len()];
        Read::read_exact(&mut &theirs, &mut rest).unwrap();
        assert_eq!(rest, after.as_bytes());

        write("{\"kind\":\"quit\"}\n").unwrap();
        assert_eq!(wait_for_show(&theirs).unwrap(), None);
        write(&"x".repeat(STANDBY_LINE + 1)).unwrap();
        assert!(wait_for_show(&theirs).is_err(), "past the limit");
        drop(ours);
        let (ours, theirs) = UnixStream::pair().unwrap();
        drop(ours);
        assert_eq!(wait_for_show(&theirs).unwrap(), None, "the resident gone");
    }

    #[tokio::test]
    async fn a_line_past_the_limit_or_not_a_message_is_an_error_and_the_end_is_none() {
        let mut line = Vec::new();
        let mut input: &[u8] = b"{\"kind\":\"idle\",\"seen\":2}\nnot json\n{\"kind\":\"idle\"";
        let mut reader = tokio::io::BufReader::new(&mut input);
        assert_eq!(
            read::<ToDesk>(&mut reader, &mut line).await.unwrap(),
            Some(ToDesk::Idle { seen: 2 })
        );
        assert!(read::<ToDesk>(&mut reader, &mut line).await.is_err());
        assert!(
            read::<ToDesk>(&mut reader, &mut line).await.is_err(),
            "cut off"
        );
        assert_eq!(read::<ToDesk>(&mut reader, &mut line).await.unwrap(), None);
    }
}
