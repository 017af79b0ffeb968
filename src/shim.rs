//! `coogle mcp`: the thin pump between an agent's stdio and the daemon's socket.
//!
//! It says hello, then copies lines both ways as they are, reading only each message's `id` and
//! `method` so that, when the daemon goes away, it can fail exactly the requests that were in
//! flight, reconnect (starting a daemon), replay the client's `initialize`, and tell the client
//! the tool list may have changed. The agent never has to be restarted.
//!
//! stdout is the MCP channel: nothing but MCP messages is ever written there. All state worth
//! keeping lives in the daemon; this process must stay small.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::client::{self, ClientError, McpConnection, REPLY_LINE_CAP, Starter};
use crate::wire::{self, Hello, Kind, Line, Message, raw, rpc_code};

/// Lines from the client buffered while the daemon is away; past this, requests are refused.
const MAX_BUFFERED: usize = 1000;

pub struct Options {
    pub socket: PathBuf,
    pub server: Option<String>,
    pub starter: Starter,
    pub max_line_bytes: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("writing to stdout failed: {0}")]
    Stdout(std::io::Error),
}

enum Input {
    Line(Vec<u8>),
    TooLong,
}

struct InFlight {
    id: Box<RawValue>,
    is_call: bool,
}

struct Pump {
    stdout: tokio::io::Stdout,
    /// The client's initialize request, replayed on reconnect.
    initialize: Option<Vec<u8>>,
    initialized: bool,
    in_flight: HashMap<String, InFlight>,
    /// The id of a replayed initialize whose answer the client must not see.
    swallow: Option<String>,
    reconnects: u64,
}

fn id_key(id: &RawValue) -> String {
    serde_json::from_str::<serde_json::Value>(id.get())
        .map(|v| v.to_string())
        .unwrap_or_else(|_| id.get().to_string())
}

impl Pump {
    async fn write_client(&mut self, line: &[u8]) -> Result<(), ShimError> {
        self.stdout
            .write_all(line)
            .await
            .map_err(ShimError::Stdout)?;
        if line.last() != Some(&b'\n') {
            self.stdout
                .write_all(b"\n")
                .await
                .map_err(ShimError::Stdout)?;
        }
        self.stdout.flush().await.map_err(ShimError::Stdout)
    }

    /// Note what a client line is before it goes to the daemon.
    fn observe_client(&mut self, line: &[u8]) {
        let Ok(msg) = Message::parse(line) else {
            return;
        };
        match msg.kind() {
            Kind::Request => {
                let method = msg.method().unwrap_or_default();
                if method == "initialize" {
                    self.initialize = Some(line.to_vec());
                }
                if let Some(id) = msg.id() {
                    self.in_flight.insert(
                        id_key(id),
                        InFlight {
                            id: id.to_owned(),
                            is_call: method == "tools/call",
                        },
                    );
                }
            }
            Kind::Notification => {
                if msg.method().as_deref() == Some("notifications/initialized") {
                    self.initialized = true;
                } else if msg.method().as_deref() == Some("notifications/cancelled")
                    && let Some(req) = msg.params_field("requestId")
                {
                    self.in_flight.remove(&id_key(&req));
                }
            }
            Kind::Response => {}
        }
    }

    /// Note a daemon line; false when the client must not see it.
    fn observe_daemon(&mut self, line: &[u8]) -> bool {
        // Only responses matter here, and they always carry "result" or "error": skip parsing
        // the (possibly large) notifications cheaply.
        let Ok(msg) = Message::parse(line) else {
            return true;
        };
        if msg.kind() != Kind::Response {
            return true;
        }
        let Some(key) = msg.id().map(id_key) else {
            return true;
        };
        if self.swallow.as_deref() == Some(key.as_str()) {
            self.swallow = None;
            return false;
        }
        self.in_flight.remove(&key);
        true
    }

    async fn fail_in_flight(&mut self) -> Result<(), ShimError> {
        let pending: Vec<InFlight> = self.in_flight.drain().map(|(_, v)| v).collect();
        for p in pending {
            let text =
                "coogle: the daemon went away during this request; it is being restarted, so retry";
            let line = if p.is_call {
                wire::response_line(&p.id, &raw(&wire::tool_error_result(text)))
            } else {
                wire::error_line(Some(&p.id), rpc_code::UPSTREAM_UNAVAILABLE, text)
            };
            self.write_client(&line).await?;
        }
        Ok(())
    }
}

fn spawn_stdin(cap: usize) -> mpsc::Receiver<Input> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut r = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
        let mut buf = Vec::new();
        loop {
            match wire::read_line_capped(&mut r, &mut buf, cap).await {
                Ok(Line::Complete) => {
                    if wire::is_blank(&buf) {
                        buf.clear();
                        continue;
                    }
                    if tx
                        .send(Input::Line(std::mem::take(&mut buf)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(Line::Eof) => {
                    if !wire::is_blank(&buf) {
                        let _ = tx.send(Input::Line(std::mem::take(&mut buf))).await;
                    }
                    return;
                }
                Ok(Line::TooLong) => {
                    buf.clear();
                    if tx.send(Input::TooLong).await.is_err() || skip_line(&mut r).await {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    rx
}

/// Discard the rest of an oversized line; true at EOF.
async fn skip_line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> bool {
    use tokio::io::AsyncBufReadExt;
    loop {
        let Ok(buf) = r.fill_buf().await else {
            return true;
        };
        if buf.is_empty() {
            return true;
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(p) => {
                r.consume(p + 1);
                return false;
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

async fn open(opts: &Options) -> Result<McpConnection, ClientError> {
    let stream = client::connect_or_start(&opts.socket, &opts.starter).await?;
    let conn = client::hello(stream, &Hello::mcp(opts.server.clone())).await?;
    if let Some(v) = &conn.reply.version
        && v != wire::VERSION
    {
        tracing::warn!(daemon = %v, shim = wire::VERSION, "the daemon runs another coogle version; restart it with `coogle stop` when convenient");
    }
    Ok(conn)
}

/// Run the pump until stdin closes.
pub async fn run(opts: Options) -> Result<(), ShimError> {
    let mut stdin = spawn_stdin(opts.max_line_bytes);
    let mut pump = Pump {
        stdout: tokio::io::stdout(),
        initialize: None,
        initialized: false,
        in_flight: HashMap::new(),
        swallow: None,
        reconnects: 0,
    };
    let mut conn = open(&opts).await?;
    let mut buf = Vec::new();
    loop {
        // Connected: copy both ways until the daemon goes away or stdin closes.
        let lost = loop {
            tokio::select! {
                input = stdin.recv() => match input {
                    None => {
                        let _ = conn.writer.shutdown().await;
                        return Ok(());
                    }
                    Some(Input::TooLong) => {
                        let text = format!("line exceeds the {}-byte limit; it was dropped", opts.max_line_bytes);
                        pump.write_client(&wire::error_line(None, rpc_code::INVALID_REQUEST, &text)).await?;
                    }
                    Some(Input::Line(mut line)) => {
                        pump.observe_client(&line);
                        line.push(b'\n');
                        if conn.writer.write_all(&line).await.is_err() {
                            break true;
                        }
                    }
                },
                read = wire::read_line_capped(&mut conn.reader, &mut buf, REPLY_LINE_CAP) => match read {
                    Ok(Line::Complete) => {
                        if pump.observe_daemon(&buf) {
                            buf.push(b'\n');
                            pump.write_client(&buf).await?;
                        }
                        buf.clear();
                    }
                    _ => break true,
                },
            }
        };
        debug_assert!(lost);
        tracing::warn!("lost the coogle daemon; reconnecting");
        pump.fail_in_flight().await?;
        conn = reconnect(&opts, &mut pump, &mut stdin).await?;
        buf.clear();
    }
}

/// Reconnect with backoff while still serving stdin (buffering its lines), then replay the
/// client's handshake and deliver what was buffered.
async fn reconnect(
    opts: &Options,
    pump: &mut Pump,
    stdin: &mut mpsc::Receiver<Input>,
) -> Result<McpConnection, ShimError> {
    let mut buffered: Vec<Vec<u8>> = Vec::new();
    let mut delay = Duration::from_millis(50);
    let mut conn = loop {
        let attempt = open(opts);
        tokio::pin!(attempt);
        let result = loop {
            tokio::select! {
                r = &mut attempt => break r,
                input = stdin.recv() => match input {
                    None => return Err(ShimError::Client(ClientError::Closed)),
                    Some(Input::TooLong) => {}
                    Some(Input::Line(line)) => {
                        if buffered.len() < MAX_BUFFERED {
                            pump.observe_client(&line);
                            buffered.push(line);
                        } else if let Ok(m) = Message::parse(&line)
                            && let Some(id) = m.id()
                        {
                            let text = "coogle: the daemon is restarting and too much is waiting; retry shortly";
                            pump.write_client(&wire::error_line(Some(id), rpc_code::UPSTREAM_UNAVAILABLE, text)).await?;
                        }
                    }
                },
            }
        };
        match result {
            Ok(c) => break c,
            Err(e) => {
                tracing::warn!("reconnecting to the daemon failed: {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    };
    pump.reconnects += 1;
    if let Some(init) = pump.initialize.clone()
        && let Ok(mut msg) = Message::parse(&init)
    {
        let id = format!("coogle-reinit-{}", pump.reconnects);
        pump.swallow = Some(id_key(&raw(&id)));
        msg.set_id(raw(&id));
        // A replayed initialize is not in flight from the client's point of view.
        conn.writer
            .write_all(&msg.to_line())
            .await
            .map_err(ClientError::Io)?;
        if pump.initialized {
            conn.writer
                .write_all(&wire::notification_line("notifications/initialized", None))
                .await
                .map_err(ClientError::Io)?;
        }
    }
    for mut line in buffered {
        line.push(b'\n');
        conn.writer
            .write_all(&line)
            .await
            .map_err(ClientError::Io)?;
    }
    if pump.initialized {
        pump.write_client(&wire::notification_line(
            "notifications/tools/list_changed",
            None,
        ))
        .await?;
    }
    tracing::info!("reconnected to the coogle daemon");
    Ok(conn)
}
