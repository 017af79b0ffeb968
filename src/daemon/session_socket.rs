//! An mcp session's socket once its hello is answered, registered with the runtime for
//! reading only.
//!
//! A socket registered the usual way (readable and writable, edge-triggered) wakes the daemon
//! each time the peer reads: a Unix socket signals "writable" whenever its reader takes bytes.
//! The shim reads every answer, so on each call the daemon woke once for nothing (measured:
//! about 0.8 wake-ups per call that only said "writable", against 2 that carried work). The
//! daemon writes a session's lines straight into the kernel buffer (see `outbox`), so it needs
//! to hear "writable" only when that buffer was full: then, and only then, the writer
//! registers a second descriptor of the socket for writing, waits, and lets go of it.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, BufReader, Interest, ReadBuf};

use super::outbox::TryWriter;

/// What the session's lines are read from: the bytes read with its hello and not yet handed
/// on, then the socket.
pub(crate) type SessionLines = BufReader<tokio::io::Chain<io::Cursor<Vec<u8>>, SessionReader>>;

/// The session's socket, read when the runtime says it is readable (and only then woken).
pub(crate) struct SessionReader {
    fd: AsyncFd<Arc<UnixStream>>,
}

/// The session's socket (the same descriptor as the reader's: a session costs one), written
/// without waiting; told when it is writable only after a write found its buffer full.
/// Dropped, it shuts the socket's write side: the peer sees EOF.
pub(crate) struct SessionWriter {
    stream: Arc<UnixStream>,
}

/// Take a session's socket from the runtime's usual registration (once its hello is answered,
/// with `read` what the hello's reader had buffered past it) and register it for reading only.
pub(crate) fn split(
    read: BufReader<tokio::net::unix::OwnedReadHalf>,
    write: tokio::net::unix::OwnedWriteHalf,
) -> io::Result<(SessionLines, SessionWriter)> {
    let pending = read.buffer().to_vec();
    let stream = read
        .into_inner()
        .reunite(write)
        .map_err(|_| io::Error::other("the halves of two sockets"))?
        .into_std()?;
    // `into_std` leaves it non-blocking.
    let stream = Arc::new(stream);
    let writer = SessionWriter {
        stream: stream.clone(),
    };
    let reader = SessionReader {
        fd: crate::os::register_socket(stream, Interest::READABLE)?,
    };
    let lines = BufReader::new(tokio::io::AsyncReadExt::chain(
        io::Cursor::new(pending),
        reader,
    ));
    Ok((lines, writer))
}

impl AsyncRead for SessionReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let room = unfilled.len();
            match guard.try_io(|fd| (&**fd.get_ref()).read(unfilled)) {
                Ok(Ok(n)) => {
                    // Edge-triggered (epoll, kqueue): a read that left room took all there
                    // was, so the next one would only say EAGAIN, a system call more on every
                    // line (tokio does the same for its own sockets, on the same systems).
                    // Bytes that arrived since are a new edge, which this does not clear.
                    if cfg!(any(
                        target_os = "linux",
                        target_os = "android",
                        target_os = "macos",
                        target_os = "ios",
                        target_os = "freebsd",
                        target_os = "netbsd",
                        target_os = "openbsd",
                        target_os = "dragonfly"
                    )) && n > 0
                        && n < room
                    {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Read to the end of what was there: wait for the next edge.
                Err(_would_block) => continue,
            }
        }
    }
}

impl TryWriter for SessionWriter {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        // A peer gone says EPIPE: the process ignores SIGPIPE (Rust's runtime sets that).
        (&*self.stream).write(buf)
    }

    /// A second descriptor of the socket, registered for writing only while this waits (the
    /// reader's registration is for reading, and one descriptor has one): a socket that has
    /// room again says so once (registering checks it at once, so no edge is missed), and
    /// afterwards the peer's reads wake nobody. Called only after a write found the buffer full.
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
        let dup = self.stream.try_clone();
        async move {
            let fd = crate::os::register_socket(Arc::new(dup?), Interest::WRITABLE)?;
            let _ready = fd.writable().await?;
            Ok(())
        }
    }
}

impl Drop for SessionWriter {
    fn drop(&mut self) {
        // The reader holds the socket too: closing this descriptor alone would not end it.
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::outbox::Outbox;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

    async fn pair() -> (SessionLines, SessionWriter, tokio::net::UnixStream) {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (r, w) = ours.into_split();
        let (lines, writer) = split(BufReader::new(r), w).unwrap();
        (lines, writer, theirs)
    }

    #[tokio::test]
    async fn lines_are_read_and_written_and_the_writer_ends_with_eof() {
        let (mut lines, writer, mut peer) = pair().await;
        peer.write_all(b"one\ntwo\n").await.unwrap();
        assert_eq!(next_lines(&mut lines, 2).await, ["one\n", "two\n"]);
        let (out, task) = Outbox::new(writer);
        out.send(b"answer\n".to_vec()).unwrap();
        drop(out);
        task.await.unwrap();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"answer\n", "the writer's drop shuts the write side");
    }

    /// A peer that reads slowly fills the buffer: the writer waits to be told it is writable
    /// (registered only then), and every byte arrives in order.
    #[tokio::test]
    async fn a_full_buffer_is_waited_for() {
        let (_lines, writer, peer) = pair().await;
        let pause = std::time::Duration::from_micros(50);
        crate::daemon::outbox::tests::assert_a_full_buffer_drains(writer, peer, pause).await;
    }

    /// What the hello's reader had read past the hello is read first.
    #[tokio::test]
    async fn bytes_read_with_the_hello_come_first() {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
        theirs.write_all(b"hello\nfirst\n").await.unwrap();
        let (r, w) = ours.into_split();
        let mut r = BufReader::new(r);
        let mut hello = String::new();
        r.read_line(&mut hello).await.unwrap();
        let (mut lines, _writer) = split(r, w).unwrap();
        theirs.write_all(b"second\n").await.unwrap();
        assert_eq!(next_lines(&mut lines, 2).await, ["first\n", "second\n"]);
    }

    /// A read that left room in the buffer took all there was: readiness is cleared then, so
    /// the next line's read waits for the runtime instead of first trying the socket for an
    /// EAGAIN (a system call more on every line). A line that arrives afterwards is read.
    #[tokio::test]
    async fn a_short_read_waits_for_the_next_edge() {
        let (mut lines, _writer, mut peer) = pair().await;
        peer.write_all(b"one\n").await.unwrap();
        assert_eq!(next_lines(&mut lines, 1).await, ["one\n"]);
        {
            let socket = &lines.get_ref().get_ref().1.fd;
            let mut ready = std::pin::pin!(socket.readable());
            let polled = ready
                .as_mut()
                .poll(&mut Context::from_waker(std::task::Waker::noop()));
            assert!(
                polled.is_pending(),
                "still marked readable after a short read"
            );
        }
        peer.write_all(b"two\n").await.unwrap();
        assert_eq!(next_lines(&mut lines, 1).await, ["two\n"]);
    }

    /// The next `n` lines `lines` reads, each with its newline.
    async fn next_lines(lines: &mut (impl AsyncBufReadExt + Unpin), n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            let mut line = String::new();
            lines.read_line(&mut line).await.unwrap();
            out.push(line);
        }
        out
    }
}
