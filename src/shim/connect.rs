//! Reaching the daemon: connect (starting one when none answers) and say hello within one
//! deadline; after a lost connection, reconnect with backoff on a short-lived thread while
//! the pump serves the client, then replay the handshake.

use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::client::{self, ClientError};
use crate::os::Want;
use crate::wire::{self, Hello, Line, Message, id_key, raw};

use super::pump::{FromDaemon, Polled, Pump};
use super::state::write_some;
use super::{Options, is_permanent, refusal_text};

/// A connection to the daemon after its hello: the write side and the read side.
pub(super) type Conn = (UnixStream, FromDaemon);

/// What [`open`] gives back: the connection, or why there is none; and the daemon process if
/// it had to start one, whether or not its hello then went well: this shim reaps it.
type Opened = (Result<Conn, ClientError>, Option<std::process::Child>);

/// How long a daemon that accepted the connection has to take the hello and answer it: one
/// that is stopped or wedged is tried again, with the backoff, rather than waited on for ever.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Connect, starting a daemon when none answers, then say hello. The socket is non-blocking
/// when it is returned.
pub(super) fn open(opts: &Options) -> Opened {
    match client::connect_or_start_blocking(&opts.socket, &opts.starter) {
        Ok((stream, started)) => (
            say_hello(stream, opts),
            started.and_then(client::Started::into_child),
        ),
        Err(e) => (Err(e), None),
    }
}

/// The hello and its reply, within [`HELLO_TIMEOUT`]. The socket is non-blocking from here
/// on, and each wait is a `poll` with what is left of the time: a hello carries the session's
/// environment, which may be more than the socket holds at once, and a time limit on each
/// system call would let a daemon that takes a little at a time keep the shim for ever.
fn say_hello(stream: UnixStream, opts: &Options) -> Result<Conn, ClientError> {
    let deadline = std::time::Instant::now() + HELLO_TIMEOUT;
    stream.set_nonblocking(true)?;
    let mut writer = stream.try_clone()?;
    let hello = wire::to_line(&Hello::mcp(opts.server.clone()));
    let mut rest = &hello[..];
    loop {
        rest = &rest[write_some(&mut writer, rest)?..];
        if rest.is_empty() {
            break;
        }
        wait_within(
            &writer,
            Want {
                read: false,
                write: true,
            },
            deadline,
        )?;
    }
    let mut reader = Polled::new(stream);
    let mut buf = Vec::new();
    loop {
        match wire::read_line_capped_blocking(&mut reader, &mut buf, 64 * 1024) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_within(&reader.inner, Want::READ, deadline)?;
                reader.ready = true;
            }
            Ok(Line::Complete) => break,
            Ok(_) => return Err(ClientError::Closed),
            Err(e) => return Err(e.into()),
        }
    }
    client::check_hello_reply(&buf)?;
    Ok((writer, reader))
}

/// Wait until `socket` is ready for `want`, or say the daemon did not answer in time.
fn wait_within(
    socket: &UnixStream,
    want: Want,
    deadline: std::time::Instant,
) -> Result<(), ClientError> {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    match crate::os::wait_for([(Some(socket.as_fd()), want)], Some(left))? {
        Some(_) => Ok(()),
        None => Err(ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the coogle daemon did not answer within {} s",
                HELLO_TIMEOUT.as_secs()
            ),
        ))),
    }
}

impl Pump {
    /// [`open`] on a short-lived thread, while this one serves the client: starting a daemon
    /// takes up to its start timeout, and meanwhile the client's requests are buffered (or
    /// refused with why) and the end of its stdin is noticed. The thread's end (its side of a
    /// socket pair closing) wakes this one's `poll`, so nothing is polled on a timer meanwhile.
    fn open_serving_client(&mut self, opts: &Options) -> Opened {
        let Ok((done_tx, done_rx)) = UnixStream::pair() else {
            return open(opts);
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let o = opts.clone();
        let spawned = std::thread::Builder::new()
            .name("connect".into())
            .spawn(move || {
                let _ = tx.send(open(&o));
                drop(done_tx);
            });
        if spawned.is_err() {
            return open(opts);
        }
        loop {
            match rx.try_recv() {
                Ok(opened) => return opened,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    self.serve_client(None, Some(&done_rx))
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    return (Err(ClientError::Closed), None);
                }
            }
        }
    }

    /// Reconnect with backoff, serving the client meanwhile (its requests are buffered for the
    /// next daemon, or refused with why); replay the client's handshake, check whether the
    /// tools changed, and deliver what was buffered.
    pub(super) fn reconnect(&mut self, opts: &Options) {
        let mut delay = Duration::from_millis(50);
        loop {
            self.reap();
            let (opened, started) = self.open_serving_client(opts);
            self.daemons.extend(started);
            match opened {
                Ok((writer, reader)) => {
                    let st = &mut self.state;
                    st.reconnects += 1;
                    let mut replay = Vec::new();
                    if let Some(init) = &st.initialize
                        && let Ok(mut msg) = Message::parse(init)
                    {
                        let id = format!("coogle-reinit-{}", st.reconnects);
                        st.swallow = Some(id_key(&raw(&id)));
                        msg.set_id(raw(&id));
                        replay.extend_from_slice(&msg.to_line());
                        if st.initialized {
                            replay.extend_from_slice(&wire::notification_line(
                                "notifications/initialized",
                                None,
                            ));
                        }
                    }
                    // Ask for the tools the client was shown; `list_changed` only if they differ.
                    if st.initialized && st.last_tools.is_some() {
                        let id = format!("coogle-tools-{}", st.reconnects);
                        st.probe = Some(id_key(&raw(&id)));
                        replay.extend_from_slice(&wire::request_line(
                            &raw(&id),
                            "tools/list",
                            &serde_json::json!({}),
                        ));
                    }
                    for line in std::mem::take(&mut st.buffered) {
                        replay.extend_from_slice(&line);
                    }
                    st.writer = Some(writer);
                    st.refusing = None;
                    self.failing_since = None;
                    // Everything buffered goes out with the replay, written as any line is:
                    // what the socket does not take now waits in `out` while answers flow.
                    // Should this connection fail too, its requests are answered (or sent
                    // again after a hand-over) as any connection's are, never replayed in a
                    // loop.
                    for p in st.in_flight.values_mut() {
                        p.sent = true;
                    }
                    st.send(&replay);
                    tracing::info!("reconnected to the coogle daemon");
                    self.daemon = reader;
                    return;
                }
                Err(e) => {
                    let text = refusal_text(&e, opts.server.as_deref());
                    self.give_up_if_client_gone(&text);
                    tracing::warn!(
                        "reconnecting to the daemon failed: {text}; retrying in {delay:?}"
                    );
                    let cap = if is_permanent(&e) {
                        let st = &mut self.state;
                        st.refuse_buffered(&text);
                        st.refusing = Some(text);
                        st.exit_if_done();
                        // Each try starts a daemon that fails the same way: try less often.
                        Duration::from_secs(30)
                    } else {
                        Duration::from_secs(5)
                    };
                    self.serve_client_for(delay);
                    delay = (delay * 2).min(cap);
                }
            }
        }
    }
}
