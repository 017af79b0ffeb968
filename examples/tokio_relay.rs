//! The shape of coogle's daemon with none of its work: a reference hop for `scripts/bench.sh`.
//!
//! ```text
//! tokio_relay SOCKET -- CMD ARGS…
//! ```
//! Listens on SOCKET; each connection gets a fresh CMD (as `socat UNIX-LISTEN:…,fork EXEC:…,pipes`
//! does) and the daemon's task shape on the same runtime: a current-thread tokio runtime, a
//! task reading the connection's lines and one reading the child's, each handing its lines over
//! a bounded channel to one task that writes them on with `try_write` (the daemon's actor and
//! outbox). Nothing reads the lines. Measured beside one `socat` hop and the daemon alone, it
//! tells what the runtime and the task shape cost from what coogle's own work per line costs.
//! For serial calls only (see `relay`).
#![allow(clippy::print_stderr)]

use std::io;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

enum Line {
    FromClient(Vec<u8>),
    FromChild(Vec<u8>),
    ClientGone,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(socket), Some(cmd)) = (args.first(), args.get(2).filter(|_| args[1] == "--")) else {
        eprintln!("usage: tokio_relay SOCKET -- CMD ARGS…");
        std::process::exit(2);
    };
    let argv = args[3..].to_vec();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let result = runtime.block_on(async {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        loop {
            let (stream, _) = listener.accept().await?;
            let (cmd, argv) = (cmd.clone(), argv.clone());
            tokio::spawn(async move {
                if let Err(e) = relay(stream, &cmd, &argv).await {
                    eprintln!("tokio_relay: {e}");
                }
            });
        }
    });
    if let Err::<(), io::Error>(e) = result {
        eprintln!("tokio_relay: {e}");
        std::process::exit(1);
    }
}

async fn relay(stream: UnixStream, cmd: &str, argv: &[String]) -> io::Result<()> {
    let mut child = tokio::process::Command::new(cmd)
        .args(argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = pipe::Sender::from_owned_fd(child.stdin.take().expect("piped").into_owned_fd()?)?;
    let stdout = child.stdout.take().expect("piped");
    let (from_client, to_client) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Line>(64);
    let from_child = tx.clone();
    let client_reader = tokio::spawn(async move {
        let mut r = BufReader::new(from_client);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await {
                Ok(n) if n > 0 && tx.send(Line::FromClient(line)).await.is_ok() => {}
                _ => break,
            }
        }
        let _ = tx.send(Line::ClientGone).await;
    });
    let child_reader = tokio::spawn(async move {
        let mut r = BufReader::with_capacity(64 * 1024, stdout);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await {
                Ok(n) if n > 0 && from_child.send(Line::FromChild(line)).await.is_ok() => {}
                _ => break,
            }
        }
    });
    let (mut stdin, mut to_client) = (stdin, to_client);
    // Ends when the client's connection closes, and takes the child with it (`kill_on_drop`).
    // One task writes both ways and waits when a peer's buffer is full: enough for serial
    // calls, what it is for; pipelined load could jam it (the daemon's outbox never waits).
    let written = async {
        while let Some(line) = rx.recv().await {
            match line {
                Line::FromClient(line) => write(&mut stdin, &line).await?,
                Line::FromChild(line) => write(&mut to_client, &line).await?,
                Line::ClientGone => break,
            }
        }
        Ok(())
    }
    .await;
    client_reader.abort();
    child_reader.abort();
    written
}

/// Straight into the kernel's buffer when it takes it (the daemon's outbox), else waiting.
async fn write<W: AsyncWriteExt + TryWrite + Unpin>(w: &mut W, line: &[u8]) -> io::Result<()> {
    match w.try_write_now(line) {
        Ok(n) if n == line.len() => Ok(()),
        Ok(n) => w.write_all(&line[n..]).await,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => w.write_all(line).await,
        Err(e) => Err(e),
    }
}

trait TryWrite {
    fn try_write_now(&self, buf: &[u8]) -> io::Result<usize>;
}

impl TryWrite for pipe::Sender {
    fn try_write_now(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }
}

impl TryWrite for tokio::net::unix::OwnedWriteHalf {
    fn try_write_now(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }
}
