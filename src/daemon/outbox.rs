//! Writing lines to a child's stdin or a session's socket without a task hop on the hot path.
//!
//! The actor writes a line straight into the kernel buffer with `try_write`; only when the
//! buffer is full (or earlier lines are still waiting) does the line go to a writer task that
//! waits for the peer. Lines keep their order: the actor writes directly only when nothing is
//! queued. This must never block the actor: a peer that stops reading only grows the queue,
//! which the owner bounds (`queued`).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::unix::OwnedWriteHalf;
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A non-blocking writer the outbox can use from the actor and from its task.
pub trait TryWriter: Send + Sync + 'static {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send;
}

impl TryWriter for pipe::Sender {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        pipe::Sender::try_write(self, buf)
    }
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
        pipe::Sender::writable(self)
    }
}

impl TryWriter for OwnedWriteHalf {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        OwnedWriteHalf::try_write(self, buf)
    }
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
        OwnedWriteHalf::writable(self)
    }
}

/// The peer is gone; nothing more can be written.
#[derive(Debug)]
pub struct Closed;

pub struct Outbox<W: TryWriter> {
    writer: Arc<W>,
    queued: Arc<AtomicUsize>,
    queued_bytes: Arc<AtomicUsize>,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    /// Dropped with the outbox: tells whoever holds the receiver that no more lines will come.
    _closed: Option<tokio::sync::oneshot::Sender<()>>,
}

impl<W: TryWriter> Outbox<W> {
    /// The outbox and its writer task, which ends (dropping the writer) once the outbox is
    /// dropped and its queue is written, or when the peer goes away.
    pub fn new(writer: W) -> (Self, JoinHandle<()>) {
        let writer = Arc::new(writer);
        let queued = Arc::new(AtomicUsize::new(0));
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let (w, q, qb) = (writer.clone(), queued.clone(), queued_bytes.clone());
        let task = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                let ok = write_all(&*w, &line).await.is_ok();
                q.fetch_sub(1, Ordering::AcqRel);
                qb.fetch_sub(line.len(), Ordering::AcqRel);
                if !ok {
                    break;
                }
            }
        });
        let outbox = Outbox {
            writer,
            queued,
            queued_bytes,
            tx,
            _closed: None,
        };
        (outbox, task)
    }

    /// [`Outbox::new`], plus a receiver that resolves once the outbox is dropped (its owner is
    /// done with the peer: what is queued is the last that will be written).
    pub fn with_close_signal(
        writer: W,
    ) -> (Self, JoinHandle<()>, tokio::sync::oneshot::Receiver<()>) {
        let (mut outbox, task) = Outbox::new(writer);
        let (tx, rx) = tokio::sync::oneshot::channel();
        outbox._closed = Some(tx);
        (outbox, task, rx)
    }

    /// Write `line` now if the kernel takes it, else queue it behind what is waiting.
    pub fn send(&self, line: Vec<u8>) -> Result<(), Closed> {
        let mut rest = line;
        if self.queued.load(Ordering::Acquire) == 0 {
            match self.writer.try_write(&rest) {
                Ok(n) if n == rest.len() => return Ok(()),
                Ok(n) => {
                    rest.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Err(Closed),
            }
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.queued_bytes.fetch_add(rest.len(), Ordering::AcqRel);
        self.tx.send(rest).map_err(|_| Closed)
    }

    /// The writer back, once what is queued is written (`task`: the writer task [`Outbox::new`]
    /// gave); `None` if the peer went away meanwhile, or the task is not this outbox's.
    pub async fn into_writer(self, task: JoinHandle<()>) -> Option<W> {
        let Outbox { writer, tx, .. } = self;
        drop(tx);
        task.await.ok()?;
        Arc::try_unwrap(writer).ok()
    }

    /// Lines waiting for the peer to read.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Bytes waiting for the peer to read.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Acquire)
    }
}

/// Write first, and wait for the peer only when its buffer is full: a queue that drains as fast
/// as it is written never waits (for a session's socket, waiting costs a registration; see
/// `session_socket`).
async fn write_all<W: TryWriter>(w: &W, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match w.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => w.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;
    use tokio::io::AsyncReadExt;

    /// A peer whose buffer is full until it is waited for once, then always has room; it
    /// counts the waits.
    #[derive(Default)]
    struct FullOnce {
        roomy: AtomicBool,
        waits: AtomicUsize,
        got: Mutex<Vec<u8>>,
    }

    impl TryWriter for Arc<FullOnce> {
        fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
            if !self.roomy.load(Ordering::Acquire) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.got.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
            self.waits.fetch_add(1, Ordering::AcqRel);
            self.roomy.store(true, Ordering::Release);
            std::future::ready(Ok(()))
        }
    }

    /// Regression (review of the read-only session socket): the writer task waited for
    /// "writable" before every queued line, which for a session's socket is a registration
    /// each: a drained backlog of 20,000 answers cost 39,000 `epoll_ctl`. It writes first and
    /// waits only when the peer's buffer is full.
    #[tokio::test]
    async fn a_backlog_is_written_without_waiting_while_there_is_room() {
        let peer = Arc::new(FullOnce::default());
        let (outbox, task) = Outbox::new(peer.clone());
        for i in 0..100 {
            outbox.send(format!("{i}\n").into_bytes()).unwrap();
        }
        drop(outbox);
        task.await.unwrap();
        assert_eq!(
            peer.got.lock().unwrap().len(),
            (0..100).map(|i: i32| format!("{i}\n").len()).sum::<usize>()
        );
        assert_eq!(
            peer.waits.load(Ordering::Acquire),
            1,
            "waited for room it had"
        );
    }

    /// Through an outbox over `writer`, queue far more than a socket buffer holds, then read
    /// it all back from `peer`, sleeping `pause` before each read (a slow reader): the queue
    /// filled, and every byte arrived, in order.
    pub(crate) async fn assert_a_full_buffer_drains<W: TryWriter>(
        writer: W,
        mut peer: tokio::net::UnixStream,
        pause: std::time::Duration,
    ) {
        let (outbox, task) = Outbox::new(writer);
        let mut expected = Vec::new();
        for i in 0..2000 {
            let line = format!("{i:06}-{}\n", "x".repeat(1000)).into_bytes();
            expected.extend_from_slice(&line);
            outbox.send(line).unwrap();
        }
        assert!(outbox.queued() > 0, "the buffer should have filled");
        assert!(outbox.queued_bytes() >= outbox.queued() * 1000);
        drop(outbox);
        let mut got = Vec::new();
        let reader = async {
            let mut buf = vec![0; 4096];
            loop {
                tokio::time::sleep(pause).await;
                let n = peer.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        };
        let (_, joined) = tokio::join!(reader, task);
        joined.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "bytes arrived out of order");
    }

    #[tokio::test]
    async fn lines_arrive_whole_and_in_order_even_when_the_buffer_fills() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (_ar, aw) = a.into_split();
        assert_a_full_buffer_drains(aw, b, std::time::Duration::ZERO).await;
    }
}
