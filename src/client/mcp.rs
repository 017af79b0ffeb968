//! An mcp-mode connection to the daemon: the hello and its answer (the version rule), and the
//! rmcp client session the CLI's `tools` and `call` run over it. rmcp's types stay in here.

use std::path::Path;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::{ClientError, Started, Starter, connect, connect_or_start};
use crate::wire::{self, Hello, HelloReply, Line, WireError};

/// An mcp-mode connection after a successful hello.
pub struct McpConnection {
    pub reader: BufReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
}

/// Say hello on a fresh connection; an `ok: false` answer is an error.
pub async fn hello(stream: UnixStream, hello: &Hello) -> Result<McpConnection, ClientError> {
    let (r, mut w) = stream.into_split();
    w.write_all(&wire::to_line(hello)).await?;
    let mut reader = BufReader::new(r);
    let mut buf = Vec::new();
    match wire::read_line_capped(&mut reader, &mut buf, 64 * 1024).await? {
        Line::Complete => {}
        _ => return Err(ClientError::Closed),
    }
    check_hello_reply(&buf)?;
    Ok(McpConnection { reader, writer: w })
}

/// Read the daemon's answer to a hello: `ok: false` is an error, and a daemon of another
/// version is worth a warning (restarting it picks up the new binary).
pub fn check_hello_reply(line: &[u8]) -> Result<HelloReply, ClientError> {
    let reply: HelloReply =
        serde_json::from_slice(line).map_err(|e| ClientError::Protocol(e.to_string()))?;
    if !reply.ok {
        return Err(ClientError::Remote(reply.error.unwrap_or_else(|| {
            WireError::new(wire::ErrorCode::Internal, "hello refused without a reason")
        })));
    }
    if let Some(v) = &reply.version
        && v != wire::VERSION
    {
        tracing::warn!(daemon = %v, client = wire::VERSION, "the daemon runs another coogle version; restart it with `coogle stop` when convenient");
    }
    Ok(reply)
}

/// An rmcp client session through the daemon, as `coogle tools` and `coogle call` use it,
/// and the daemon it started to get one, if it did.
pub async fn rmcp_session(
    socket: &Path,
    starter: Option<&Starter>,
    server: Option<String>,
    client_name: &str,
) -> Result<(RunningService<RoleClient, ClientConfig>, Option<Started>), ClientError> {
    let (stream, started) = match starter {
        Some(s) => connect_or_start(socket, s).await?,
        None => (connect(socket).await?, None),
    };
    let mut h = Hello::mcp(server);
    h.client = Some(client_name.to_string());
    let conn = hello(stream, &h).await?;
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(client_name, wire::VERSION),
    );
    let session = info
        .serve((conn.reader, conn.writer))
        .await
        .map_err(|e| ClientError::Mcp(e.to_string()))?;
    Ok((session, started))
}

/// An rmcp error as the person reads it: a server's JSON-RPC error by its own message (rmcp
/// says `Mcp error: -32602: …`), anything else as rmcp words it.
pub fn mcp_error(e: rmcp::ServiceError) -> ClientError {
    match e {
        rmcp::ServiceError::McpError(d) => ClientError::Mcp(format!(
            "the server answered with an error: {} (JSON-RPC {})",
            d.message, d.code.0
        )),
        other => ClientError::Mcp(other.to_string()),
    }
}
