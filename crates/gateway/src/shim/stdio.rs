//! The shim's stdin and stdout as streams the runtime's reactor waits on.
//!
//! `tokio::io::stdin()` and `stdout()` read and write on the blocking pool: each line in and
//! each flush out is a hand-off to another thread and back. An agent gives its server pipes
//! (Codex, the Python SDK) or a socket pair (Node's libuv), which can be polled. On Linux the
//! shim polls them without changing the descriptors it was given (others may share them: a
//! wrapper shell, stderr on the same socket): an anonymous pipe is opened anew through
//! `/proc/self/fd/N`, a description of the shim's own in non-blocking mode; a socket is read
//! and written with `MSG_DONTWAIT`. Anything else (a terminal, a file, a named FIFO,
//! `/dev/null`), and every other platform, keeps tokio's stdio.

use tokio::io::{AsyncRead, AsyncWrite};

/// The agent's lines to the shim.
pub type Input = Box<dyn AsyncRead + Unpin + Send>;
/// The shim's lines to the agent.
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// The process's stdin and stdout; must be called inside a runtime.
pub fn take() -> (Input, Output) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        let input = polled::reader(std::io::stdin().as_fd());
        let output = polled::writer(std::io::stdout().as_fd());
        (
            input.unwrap_or_else(|| Box::new(tokio::io::stdin())),
            output.unwrap_or_else(|| Box::new(tokio::io::stdout())),
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
    }
}

/// The agent's stdin and stdout as descriptors of the shim's own, for handing to the engine
/// (`crate::handoff`): an anonymous pipe opened anew (non-blocking), a socket copied. `None`
/// when either is something else (a terminal, a file): the shim carries the lines itself then.
#[cfg(target_os = "linux")]
pub fn handoff() -> Option<[std::os::fd::OwnedFd; 2]> {
    use std::os::fd::AsFd;
    handoff_of(std::io::stdin().as_fd(), std::io::stdout().as_fd())
}

/// [`handoff`] for the given stdin and stdout.
#[cfg(target_os = "linux")]
pub(crate) fn handoff_of(
    input: std::os::fd::BorrowedFd<'_>,
    output: std::os::fd::BorrowedFd<'_>,
) -> Option<[std::os::fd::OwnedFd; 2]> {
    let input = polled::own(input, nix::fcntl::OFlag::O_RDONLY)?;
    let output = polled::own(output, nix::fcntl::OFlag::O_WRONLY)?;
    Some([input, output])
}

/// Whether `input` and `output` are what [`adopt`] takes (an anonymous pipe, a Unix stream
/// socket), asked of their names: nothing touches the files themselves.
#[cfg(target_os = "linux")]
pub fn servable(
    input: &std::os::fd::OwnedFd,
    output: &std::os::fd::OwnedFd,
) -> std::io::Result<()> {
    polled::stream_kind(input)?;
    polled::stream_kind(output)?;
    Ok(())
}

/// An agent's stdin and stdout as a shim handed them over, polled by the engine's reactor.
/// Each must be a pipe or a socket open the right way; anything else is refused.
#[cfg(target_os = "linux")]
pub fn adopt(
    input: std::os::fd::OwnedFd,
    output: std::os::fd::OwnedFd,
) -> std::io::Result<(Input, Output)> {
    Ok((polled::adopt_reader(input)?, polled::adopt_writer(output)?))
}

/// Reads from a stream socket without waiting (`MSG_DONTWAIT`). Descriptors a peer attached
/// to the bytes are received rather than left to the kernel, which would close them in this
/// thread when the bytes are read (a socket set to linger can make that close wait for
/// minutes), and closed on a blocking thread. Must be called inside a runtime.
#[cfg(target_os = "linux")]
pub(crate) fn recv_closing_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    use std::mem::MaybeUninit;

    use rustix::net::{RecvAncillaryBuffer, RecvFlags, recvmsg};
    // As many as one message may carry (SCM_MAX_FD).
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(253))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = recvmsg(
        socket,
        &mut [std::io::IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    );
    let fds = received_fds(&mut control);
    if !fds.is_empty() {
        tokio::task::spawn_blocking(move || drop(fds));
    }
    Ok(received?.bytes)
}

/// The descriptors a `recvmsg` received, now the caller's.
#[cfg(target_os = "linux")]
pub(crate) fn received_fds(
    control: &mut rustix::net::RecvAncillaryBuffer<'_>,
) -> Vec<std::os::fd::OwnedFd> {
    control
        .drain()
        .filter_map(|m| match m {
            rustix::net::RecvAncillaryMessage::ScmRights(fds) => Some(fds),
            _ => None,
        })
        .flatten()
        .collect()
}

#[cfg(target_os = "linux")]
mod polled {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use nix::sys::stat::{SFlag, fstat};
    use rustix::net::{SendFlags, send};
    use tokio::io::unix::AsyncFd;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::unix::pipe;

    use super::{Input, Output, recv_closing_fds};

    /// `fd` as a polled reader, when it is a pipe or a socket open for reading.
    pub(super) fn reader(fd: BorrowedFd<'_>) -> Option<Input> {
        adopt_reader(own(fd, OFlag::O_RDONLY)?).ok()
    }

    /// `fd` as a polled writer, when it is a pipe or a socket open for writing.
    pub(super) fn writer(fd: BorrowedFd<'_>) -> Option<Output> {
        adopt_writer(own(fd, OFlag::O_WRONLY)?).ok()
    }

    /// A descriptor of the shim's own for `fd`, a pipe or a socket open for `access`: an
    /// anonymous pipe opened anew, non-blocking (the description `fd` shares keeps its mode); a
    /// socket copied (it is only ever read and written with `MSG_DONTWAIT`).
    pub(super) fn own(fd: BorrowedFd<'_>, access: OFlag) -> Option<OwnedFd> {
        match kind(fd, access)? {
            Kind::Pipe(path) => {
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .read(access == OFlag::O_RDONLY)
                    .write(access == OFlag::O_WRONLY)
                    .custom_flags((OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
                    .open(path)
                    .ok()
                    .map(OwnedFd::from)
            }
            Kind::Socket(fd) => Some(fd),
        }
    }

    /// An anonymous pipe open for reading (set non-blocking) or a local stream socket, polled.
    pub(super) fn adopt_reader(fd: OwnedFd) -> io::Result<Input> {
        Ok(match stream_kind(&fd)? {
            Stream::Socket => Box::new(Socket::new(fd)?),
            Stream::Pipe => Box::new(pipe::Receiver::from_owned_fd(fd)?),
        })
    }

    /// An anonymous pipe open for writing (set non-blocking) or a local stream socket, polled.
    pub(super) fn adopt_writer(fd: OwnedFd) -> io::Result<Output> {
        Ok(match stream_kind(&fd)? {
            Stream::Socket => Box::new(Socket::new(fd)?),
            Stream::Pipe => Box::new(pipe::Sender::from_owned_fd(fd)?),
        })
    }

    pub(super) enum Stream {
        Pipe,
        Socket,
    }

    /// Whether `fd` is an anonymous pipe or a Unix stream socket, asked of the descriptor's
    /// name (`/proc/self/fd`) before anything touches the file itself: a descriptor from
    /// another process may be a file on a FUSE mount whose server never answers a `stat`, or
    /// a TCP socket set to linger on close; those, and everything else, are refused.
    pub(super) fn stream_kind(fd: &OwnedFd) -> io::Result<Stream> {
        let name = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        let name = name.as_os_str().as_encoded_bytes();
        if name.starts_with(b"pipe:[") {
            return Ok(Stream::Pipe);
        }
        if name.starts_with(b"socket:[")
            && rustix::net::sockopt::socket_domain(fd)? == rustix::net::AddressFamily::UNIX
            && rustix::net::sockopt::socket_type(fd)? == rustix::net::SocketType::STREAM
        {
            return Ok(Stream::Socket);
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither an anonymous pipe nor a Unix stream socket",
        ))
    }

    enum Kind {
        /// A pipe, by the path that opens it anew.
        Pipe(String),
        /// A socket, by a copy of its descriptor.
        Socket(OwnedFd),
    }

    /// What `fd` is, when it is a pipe or a socket open for `access` (or for both ways).
    fn kind(fd: BorrowedFd<'_>, access: OFlag) -> Option<Kind> {
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).ok()?);
        let mode = flags & OFlag::O_ACCMODE;
        if mode != access && mode != OFlag::O_RDWR {
            return None;
        }
        let file_type = SFlag::from_bits_truncate(fstat(fd).ok()?.st_mode) & SFlag::S_IFMT;
        if file_type == SFlag::S_IFIFO {
            // Only an anonymous pipe (`pipe:[inode]`): a named FIFO opened anew, non-blocking,
            // after its writer left would never report the hang-up, and the shim would wait
            // for ever instead of reading the end of its input.
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let anonymous = std::fs::read_link(&path)
                .is_ok_and(|target| target.as_os_str().as_encoded_bytes().starts_with(b"pipe:["));
            anonymous.then_some(Kind::Pipe(path))
        } else if file_type == SFlag::S_IFSOCK {
            Some(Kind::Socket(fd.try_clone_to_owned().ok()?))
        } else {
            None
        }
    }

    /// A stream socket read and written with `MSG_DONTWAIT`: never blocking, whatever mode its
    /// description is in; shutting it down leaves the socket to its other holders.
    pub(super) struct Socket(AsyncFd<OwnedFd>);

    impl Socket {
        #[allow(
            deprecated,
            reason = "AsyncFd::new is deprecated for descriptors a caller could close or replace \
                      under it (tokio#8587); this one is an OwnedFd that the AsyncFd owns until \
                      it drops, the case that is sound (the replacement, register, is unsafe)"
        )]
        fn new(fd: OwnedFd) -> io::Result<Socket> {
            AsyncFd::new(fd).map(Socket)
        }
    }

    impl AsyncRead for Socket {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            loop {
                let mut ready = ready!(self.0.poll_read_ready(cx))?;
                let unfilled = buf.initialize_unfilled();
                let read = ready.try_io(|fd| recv_closing_fds(fd.get_ref().as_fd(), unfilled));
                if let Ok(read) = read {
                    buf.advance(read?);
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }

    impl AsyncWrite for Socket {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            loop {
                let mut ready = ready!(self.0.poll_write_ready(cx))?;
                let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
                if let Ok(written) =
                    ready.try_io(|fd| send(fd.get_ref(), buf, flags).map_err(io::Error::from))
                {
                    return Poll::Ready(written);
                }
            }
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[cfg(test)]
    mod tests {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        use std::os::unix::net::UnixStream as StdStream;

        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        use super::*;

        fn nonblocking(fd: impl AsFd) -> bool {
            let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
            flags.contains(OFlag::O_NONBLOCK)
        }

        #[tokio::test]
        async fn a_pipe_is_polled_through_a_description_of_its_own() {
            let (stdin_read, mut stdin_write) = io::pipe().unwrap();
            let (mut stdout_read, stdout_write) = io::pipe().unwrap();
            let mut input = reader(stdin_read.as_fd()).expect("a pipe is polled");
            let mut output = writer(stdout_write.as_fd()).expect("a pipe is polled");

            stdin_write.write_all(b"{}\n").unwrap();
            let mut line = [0; 3];
            input.read_exact(&mut line).await.unwrap();
            assert_eq!(&line, b"{}\n");
            output.write_all(b"[]\n").await.unwrap();
            output.flush().await.unwrap();
            stdout_read.read_exact(&mut line).unwrap();
            assert_eq!(&line, b"[]\n");
            // The descriptors the shim was given keep their mode (a shell may share them).
            assert!(!nonblocking(&stdin_read) && !nonblocking(&stdout_write));
        }

        #[tokio::test]
        async fn one_socket_for_stdin_stdout_and_stderr_is_polled_without_changing_its_mode() {
            let (agent, shim) = StdStream::pair().unwrap();
            let mut input = reader(shim.as_fd()).expect("a socket is polled");
            let mut output = writer(shim.as_fd()).expect("a socket too");

            (&agent).write_all(b"{}\n").unwrap();
            let mut line = [0; 3];
            input.read_exact(&mut line).await.unwrap();
            assert_eq!(&line, b"{}\n");
            // More than the socket's buffer, toward an agent that reads it late: the shim
            // waits, then writes it all (no EAGAIN lost on the way).
            let big = vec![b'x'; 4 << 20];
            let reading = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let mut all = Vec::new();
                (&agent).take(4 << 20).read_to_end(&mut all).unwrap();
                (all.len(), agent)
            });
            output.write_all(&big).await.unwrap();
            let (len, agent) = reading.join().unwrap();
            assert_eq!(len, 4 << 20);
            // Blocking writers of the same socket (stderr) are untouched, and shutting the
            // output down leaves the socket open to them.
            assert!(!nonblocking(&shim));
            output.shutdown().await.unwrap();
            (&shim).write_all(b"log\n").unwrap();
            let mut log = [0; 4];
            (&agent).read_exact(&mut log).unwrap();
            assert_eq!(&log, b"log\n");
        }

        #[test]
        fn a_file_a_named_fifo_or_a_wrong_way_pipe_keeps_blocking_stdio() {
            let file = tempfile::tempfile().unwrap();
            assert!(kind(file.as_fd(), OFlag::O_RDONLY).is_none());
            let dir = tempfile::tempdir().unwrap();
            let fifo = dir.path().join("fifo");
            nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
            // Read and write, so that opening it does not wait for a writer.
            let named = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&fifo)
                .unwrap();
            assert!(kind(named.as_fd(), OFlag::O_RDONLY).is_none());
            let (read, write) = io::pipe().unwrap();
            assert!(kind(read.as_fd(), OFlag::O_WRONLY).is_none());
            assert!(kind(write.as_fd(), OFlag::O_RDONLY).is_none());
        }
    }
}
