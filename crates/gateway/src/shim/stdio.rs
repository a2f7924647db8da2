//! The shim's stdin and stdout as streams the runtime's reactor waits on.
//!
//! `tokio::io::stdin()` and `stdout()` read and write on the blocking pool: each line in and
//! each flush out is a hand-off to another thread and back. An agent gives its server pipes
//! (Codex, the Python SDK) or a socket pair (Node's libuv), which can be polled: those are put
//! in non-blocking mode, polled directly, and put back as they were when the shim ends. A
//! terminal or a file keeps tokio's stdio, as does a stdout that is also the shim's stderr
//! (the log's writes would meet a full pipe's `EAGAIN` and be lost).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// The agent's lines to the shim.
pub type Input = Box<dyn AsyncRead + Unpin + Send>;
/// The shim's lines to the agent.
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// The process's stdin and stdout, and what puts them back in the mode they were found in
/// (when dropped); must be called inside a runtime.
pub fn take() -> (Input, Output, Restore) {
    let mut restore = Restore(Vec::new());
    let input =
        reader(io::stdin().as_fd(), &mut restore).unwrap_or_else(|| Box::new(tokio::io::stdin()));
    let output = writer(io::stdout().as_fd(), io::stderr().as_fd(), &mut restore)
        .unwrap_or_else(|| Box::new(tokio::io::stdout()));
    (input, output, restore)
}

/// `fd` as a polled reader, when it is a pipe or a socket open for reading.
fn reader(fd: BorrowedFd<'_>, restore: &mut Restore) -> Option<Input> {
    match polled(fd, Direction::Read, restore)? {
        Polled::Pipe(fd) => pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|r| Box::new(r) as Input),
        Polled::Socket(fd) => socket(fd).ok().map(|s| Box::new(s) as Input),
    }
}

/// `fd` as a polled writer, when it is a pipe or a socket open for writing and not `log`.
fn writer(fd: BorrowedFd<'_>, log: BorrowedFd<'_>, restore: &mut Restore) -> Option<Output> {
    if same_file(fd, log) {
        return None;
    }
    match polled(fd, Direction::Write, restore)? {
        Polled::Pipe(fd) => pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|w| Box::new(w) as Output),
        Polled::Socket(fd) => socket(fd).ok().map(|s| Box::new(s) as Output),
    }
}

/// Descriptors whose mode the shim changed, with the flags they had: they are shared with
/// whoever else holds the same open pipe or socket, and get those flags back when this drops.
#[derive(Debug)]
pub struct Restore(Vec<(OwnedFd, OFlag)>);

impl Drop for Restore {
    fn drop(&mut self) {
        // Last changed, first put back: stdin and stdout may be one socket, whose second entry
        // holds the mode the first change made.
        for (fd, flags) in self.0.drain(..).rev() {
            let _ = fcntl(&fd, FcntlArg::F_SETFL(flags));
        }
    }
}

enum Direction {
    Read,
    Write,
}

enum Polled {
    Pipe(OwnedFd),
    Socket(OwnedFd),
}

/// A copy of `fd` the reactor can poll, when it is a pipe or a socket open for `direction`;
/// its original flags are pushed onto `restore`.
fn polled(fd: BorrowedFd<'_>, direction: Direction, restore: &mut Restore) -> Option<Polled> {
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).ok()?);
    let access = flags & OFlag::O_ACCMODE;
    let usable = match direction {
        Direction::Read => access == OFlag::O_RDONLY || access == OFlag::O_RDWR,
        Direction::Write => access == OFlag::O_WRONLY || access == OFlag::O_RDWR,
    };
    if !usable {
        return None;
    }
    let kind = File::from(fd.try_clone_to_owned().ok()?)
        .metadata()
        .ok()?
        .file_type();
    let polled = if kind.is_fifo() {
        Polled::Pipe(fd.try_clone_to_owned().ok()?)
    } else if kind.is_socket() {
        Polled::Socket(fd.try_clone_to_owned().ok()?)
    } else {
        return None;
    };
    restore.0.push((fd.try_clone_to_owned().ok()?, flags));
    Some(polled)
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

/// Whether two descriptors are the same pipe, socket or file.
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    let id = |fd: BorrowedFd<'_>| {
        let meta = File::from(fd.try_clone_to_owned().ok()?).metadata().ok()?;
        Some((meta.dev(), meta.ino()))
    };
    matches!((id(a), id(b)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream as StdStream;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn nonblocking(fd: impl AsFd) -> bool {
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
        flags.contains(OFlag::O_NONBLOCK)
    }

    #[tokio::test]
    async fn a_pipe_is_polled_and_its_mode_put_back() {
        let (stdin_read, mut stdin_write) = io::pipe().unwrap();
        let (mut stdout_read, stdout_write) = io::pipe().unwrap();
        let (_, log) = io::pipe().unwrap();
        let mut restore = Restore(Vec::new());
        let mut input = reader(stdin_read.as_fd(), &mut restore).expect("a pipe is polled");
        let mut output =
            writer(stdout_write.as_fd(), log.as_fd(), &mut restore).expect("a pipe is polled");
        assert!(nonblocking(&stdin_read) && nonblocking(&stdout_write));

        stdin_write.write_all(b"{}\n").unwrap();
        let mut line = [0; 3];
        input.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"{}\n");
        output.write_all(b"[]\n").await.unwrap();
        output.flush().await.unwrap();
        stdout_read.read_exact(&mut line).unwrap();
        assert_eq!(&line, b"[]\n");

        drop((input, output, restore));
        assert!(!nonblocking(&stdin_read) && !nonblocking(&stdout_write));
    }

    #[tokio::test]
    async fn a_socket_pair_is_polled_and_its_mode_put_back() {
        let (agent, shim) = StdStream::pair().unwrap();
        let (_, log) = io::pipe().unwrap();
        let mut restore = Restore(Vec::new());
        let mut input = reader(shim.as_fd(), &mut restore).expect("a socket is polled");
        let mut output = writer(shim.as_fd(), log.as_fd(), &mut restore).expect("a socket too");

        (&agent).write_all(b"{}\n").unwrap();
        let mut line = [0; 3];
        input.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"{}\n");
        output.write_all(b"[]\n").await.unwrap();
        (&agent).read_exact(&mut line).unwrap();
        assert_eq!(&line, b"[]\n");

        assert!(nonblocking(&shim));
        drop((input, output, restore));
        assert!(!nonblocking(&shim));
    }

    #[tokio::test]
    async fn a_file_or_a_stdout_shared_with_the_log_keeps_blocking_stdio() {
        let file = tempfile::tempfile().unwrap();
        let (_, out) = io::pipe().unwrap();
        let mut restore = Restore(Vec::new());
        assert!(reader(file.as_fd(), &mut restore).is_none());
        assert!(writer(out.as_fd(), out.as_fd(), &mut restore).is_none());
        // A pipe's read end is not a way out.
        let (read, _write) = io::pipe().unwrap();
        let (_, log) = io::pipe().unwrap();
        assert!(writer(read.as_fd(), log.as_fd(), &mut restore).is_none());
        assert!(restore.0.is_empty());
        assert!(!nonblocking(&out) && !nonblocking(&file));
    }
}
