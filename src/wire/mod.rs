//! The wire between the daemon and its clients: one JSON object per line on a Unix socket.
//!
//! This module owns every type both ends speak: the hello that opens an mcp-mode connection,
//! control requests and responses (`control.rs`), the closed set of error codes, the capped
//! line reader, and the minimal JSON-RPC envelope the router reads. It must never interpret MCP
//! beyond what routing needs: a message is parsed into its top-level fields as raw JSON, and
//! what the router does not touch is written out byte for byte as it came in.

use std::fmt;

pub mod answer;
#[cfg(test)]
mod arb;
mod check;
mod control;
mod envelope;
mod head;
mod object;
mod scan;
mod status;
mod top_fields;

pub use control::*;
pub use envelope::*;
pub use head::Head;
pub use object::{Json, KeyLook, Object, string_text};
pub use status::*;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Version of the wire itself (the `coogle` key of a hello).
pub const WIRE_VERSION: u32 = 1;

/// This binary's version, carried in every hello and answer.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// True when version `a` is newer than `b` (`major.minor.patch`, numerically; anything after a
/// `-` or `+` is ignored). Unparsable versions are never newer.
pub fn version_newer(a: &str, b: &str) -> bool {
    fn parts(v: &str) -> Option<Vec<u64>> {
        let core = v.split(['-', '+']).next()?;
        core.split('.').map(|p| p.parse().ok()).collect()
    }
    match (parts(a), parts(b)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

/// The hello line a client sends first to open an mcp-mode connection. Its `Debug` shows
/// the names of `env`, never the values.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    pub coogle: u32,
    pub mode: HelloMode,
    /// Which upstream; `None` means the only one, or `google`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Claude Code's session id, for the log: it grants nothing (it is in the shim's
    /// environment, where any local process may read it), and `status` does not show it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude_session_id: Option<String>,
    /// The shim process's secret (see [`SessionToken`]); absent from older shims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<SessionToken>,
    /// What the client is, when it is not an agent's shim (`cli`, `setup`, `bench`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The agent's project (`CLAUDE_PROJECT_DIR`, else the shim's working directory), for
    /// servers shared per project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<std::path::PathBuf>,
    /// The client's environment, from which the daemon takes only what a server's `passEnv`
    /// names (the rest is dropped on arrival: it must never reach a child).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
}

impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hello")
            .field("coogle", &self.coogle)
            .field("mode", &self.mode)
            .field("server", &self.server)
            .field("version", &self.version)
            .field("pid", &self.pid)
            .field("claude_session_id", &self.claude_session_id)
            .field("client", &self.client)
            .field("project_dir", &self.project_dir)
            .field(
                "env",
                &self.env.as_ref().map(|e| e.keys().collect::<Vec<_>>()),
            )
            .finish()
    }
}

impl Hello {
    pub fn mcp(server: Option<String>) -> Self {
        Hello {
            coogle: WIRE_VERSION,
            mode: HelloMode::Mcp,
            server,
            version: VERSION.to_string(),
            pid: Some(std::process::id()),
            claude_session_id: std::env::var("CLAUDE_CODE_SESSION_ID")
                .ok()
                .filter(|s| !s.is_empty()),
            session_token: Some(SessionToken::of_this_process().clone()),
            client: None,
            project_dir: own_project_dir(),
            env: Some(own_env()),
        }
    }
}

/// This process's project, as a client names it to the daemon: `CLAUDE_PROJECT_DIR` (what
/// Claude Code sets), else the working directory (where every client runs a project's servers).
pub fn own_project_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| std::env::current_dir().ok())
}

/// This process's environment as a client sends it (for servers' `passEnv`); variables that
/// are not Unicode are left out.
pub fn own_env() -> std::collections::BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// A secret a client makes up once per process and sends in every hello it says, the first and
/// each reconnect's: what the daemon keeps the session's own state by (its background
/// operations) across a reconnect. Nothing shows it, in `status`, a log line or `Debug`, so
/// holding it means being that process; unlike `CLAUDE_CODE_SESSION_ID`, which any local
/// process can read from the shim's environment.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionToken(String);

impl SessionToken {
    /// The shortest and longest tokens taken: long enough not to be guessed, short enough to
    /// cost nothing.
    pub const MIN_LEN: usize = 32;
    pub const MAX_LEN: usize = 128;

    pub fn new(token: &str) -> Result<SessionToken, String> {
        let ok_len = (Self::MIN_LEN..=Self::MAX_LEN).contains(&token.len());
        let ok_chars = token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok_len && ok_chars {
            Ok(SessionToken(token.to_owned()))
        } else {
            Err(format!(
                "sessionToken must be {} to {} characters of A-Z, a-z, 0-9, - and _",
                Self::MIN_LEN,
                Self::MAX_LEN
            ))
        }
    }

    /// The token itself, for keys and digests only: never to be shown.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// This process's token, made once (122 random bits from the OS) and the same for every
    /// hello it says.
    pub fn of_this_process() -> &'static SessionToken {
        static TOKEN: std::sync::OnceLock<SessionToken> = std::sync::OnceLock::new();
        TOKEN.get_or_init(|| SessionToken(uuid::Uuid::new_v4().simple().to_string()))
    }
}

impl TryFrom<String> for SessionToken {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        SessionToken::new(&s)
    }
}

impl From<SessionToken> for String {
    fn from(t: SessionToken) -> String {
        t.0
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionToken(…)")
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HelloMode {
    Mcp,
}

/// The daemon's answer to a hello.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HelloReply {
    pub coogle: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The upstream this connection was bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
}

impl HelloReply {
    pub fn ok(server: &str) -> Self {
        HelloReply {
            coogle: WIRE_VERSION,
            ok: true,
            version: Some(VERSION.to_string()),
            server: Some(server.to_string()),
            error: None,
        }
    }
    pub fn err(error: WireError) -> Self {
        HelloReply {
            coogle: WIRE_VERSION,
            ok: false,
            version: Some(VERSION.to_string()),
            server: None,
            error: Some(error),
        }
    }
}

/// The closed set of error codes of control mode and the hello. Documented in the README.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request was not understood (bad JSON, unknown method, missing params, line too long).
    InvalidRequest,
    /// No upstream, tool or session by that name.
    NotFound,
    /// The call did not finish within its timeout.
    Timeout,
    /// The upstream child is not running and could not be started.
    UpstreamUnavailable,
    /// The upstream answered with a JSON-RPC error.
    UpstreamError,
    /// The call was cancelled (its session went away, or a restart).
    Cancelled,
    /// The daemon is shutting down.
    ShuttingDown,
    /// The daemon's config file did not load (`reload`); nothing was changed.
    InvalidConfig,
    /// `restart_daemon`: the binary on disk cannot take over (older, not coogle, or it did
    /// not prove it can serve); the daemon serves on as it was.
    HandOverRefused,
    /// A bug in coogle.
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Timeout => "timeout",
            ErrorCode::UpstreamUnavailable => "upstream_unavailable",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::HandOverRefused => "hand_over_refused",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            message: message.into(),
        }
    }
}

/// Serialize any wire value as one line (with its trailing newline).
pub fn to_line<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing our own plain data types cannot fail.
    let mut v = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    v.push(b'\n');
    v
}

/// What reading one line produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its newline, in the caller's buffer.
    Complete,
    /// The peer closed the connection (any partial line without a newline is in the buffer).
    Eof,
    /// The line exceeded the cap; the connection should be closed after an error.
    TooLong,
}

/// Read one `\n`-terminated line, appending it to `buf`, refusing lines over `cap` bytes
/// without ever buffering more than `cap` bytes of them.
///
/// Cancel-safe: bytes taken from the reader are already in `buf`, so a call dropped inside
/// `select!` loses nothing and the next call continues the line. The caller clears `buf` after
/// using a complete line.
pub async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    loop {
        let available = reader.fill_buf().await?;
        let (consumed, done) = line_step(buf, available, cap);
        reader.consume(consumed);
        if let Some(line) = done {
            return Ok(line);
        }
    }
}

/// [`read_line_capped`] for readers with `std::io::BufRead` (the shim's: a reader with nothing
/// for now returns `WouldBlock`, and the half-read line stays in `buf` for the next call).
pub fn read_line_capped_blocking<R: std::io::BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    loop {
        let available = reader.fill_buf()?;
        let (consumed, done) = line_step(buf, available, cap);
        reader.consume(consumed);
        if let Some(line) = done {
            return Ok(line);
        }
    }
}

/// One step over what the reader has buffered: the bytes to consume, and the outcome once the
/// line is complete, too long, or the input ended (`available` empty).
fn line_step(buf: &mut Vec<u8>, available: &[u8], cap: usize) -> (usize, Option<Line>) {
    if available.is_empty() {
        return (0, Some(Line::Eof));
    }
    // memchr's vector search: a byte at a time was a tenth of the shim's work per call.
    match memchr::memchr(b'\n', available) {
        Some(pos) => {
            if buf.len() + pos > cap {
                return (0, Some(Line::TooLong));
            }
            buf.extend_from_slice(&available[..pos]);
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            (pos + 1, Some(Line::Complete))
        }
        None => {
            if buf.len() + available.len() > cap {
                return (0, Some(Line::TooLong));
            }
            buf.extend_from_slice(available);
            (available.len(), None)
        }
    }
}

/// True when a line holds nothing but whitespace (such lines are skipped, as MCP stdio does).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// How the first line of a connection is to be taken.
#[derive(Debug)]
pub enum FirstLine {
    Hello(Hello),
    Control(ControlRequest),
}

/// Decide what a connection's first line is: a hello (has `coogle`) or a control request.
pub fn parse_first_line(line: &[u8]) -> Result<FirstLine, Refusal> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
        WireError::new(
            ErrorCode::InvalidRequest,
            format!("the first line is not JSON: {e}"),
        )
    })?;
    let obj = value.as_object().ok_or_else(|| {
        WireError::new(
            ErrorCode::InvalidRequest,
            "the first line must be a JSON object",
        )
    })?;
    if obj.contains_key("coogle") {
        let hello: Hello = serde_json::from_value(value)
            .map_err(|e| WireError::new(ErrorCode::InvalidRequest, format!("bad hello: {e}")))?;
        if hello.coogle != WIRE_VERSION {
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "wire version {} is not supported (this daemon speaks {WIRE_VERSION})",
                    hello.coogle
                ),
            )
            .into());
        }
        Ok(FirstLine::Hello(hello))
    } else {
        parse_control(line).map(FirstLine::Control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    /// A read that times out in the middle of a line (the shim's quiet timer) keeps what it
    /// read: the next call completes the same line.
    #[test]
    fn a_blocking_read_resumes_a_line_after_an_error() {
        struct Stalls(Vec<std::io::Result<&'static [u8]>>);
        impl std::io::Read for Stalls {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                match self.0.pop() {
                    None => Ok(0),
                    Some(Err(e)) => Err(e),
                    Some(Ok(b)) => {
                        out[..b.len()].copy_from_slice(b);
                        Ok(b.len())
                    }
                }
            }
        }
        let quiet = || std::io::Error::from(std::io::ErrorKind::WouldBlock);
        let mut r = std::io::BufReader::new(Stalls(vec![Ok(b"def\n"), Err(quiet()), Ok(b"abc")]));
        let mut buf = Vec::new();
        let stalled = read_line_capped_blocking(&mut r, &mut buf, 100).unwrap_err();
        assert_eq!(stalled.kind(), std::io::ErrorKind::WouldBlock);
        assert_eq!(buf, b"abc");
        assert!(matches!(
            read_line_capped_blocking(&mut r, &mut buf, 100),
            Ok(Line::Complete)
        ));
        assert_eq!(buf, b"abcdef");
    }

    #[test]
    fn first_line_distinguishes_hello_and_control() {
        let hello = to_line(&Hello::mcp(Some("google".into())));
        match parse_first_line(hello.trim_ascii_end()).unwrap() {
            FirstLine::Hello(h) => assert_eq!(h.server.as_deref(), Some("google")),
            other => panic!("expected hello, got {other:?}"),
        }
        match parse_first_line(br#"{"id":"1","method":"status"}"#).unwrap() {
            FirstLine::Control(c) => assert_eq!(c.request, Request::Status),
            other => panic!("expected control, got {other:?}"),
        }
        let e = parse_first_line(br#"{"coogle":9,"mode":"mcp","version":"x"}"#)
            .unwrap_err()
            .error;
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(parse_first_line(b"garbage").is_err());
    }

    /// Every hello of a process carries the same token (a reconnect's too); it never shows in
    /// `Debug`; an older hello without one still reads, and a weak or malformed one is refused
    /// without being echoed.
    #[test]
    fn the_session_token_is_per_process_and_never_shown() {
        let first = Hello::mcp(None);
        let again = Hello::mcp(Some("google".into()));
        let token = first.session_token.clone().unwrap();
        assert_eq!(again.session_token.as_ref(), Some(&token));
        let secret: String = token.clone().into();
        assert_eq!(secret.len(), SessionToken::MIN_LEN);
        assert!(!format!("{first:?}").contains(&secret));
        let line = to_line(&first);
        assert!(String::from_utf8_lossy(&line).contains(&format!("\"sessionToken\":\"{secret}\"")));
        match parse_first_line(line.trim_ascii_end()).unwrap() {
            FirstLine::Hello(h) => assert_eq!(h.session_token, Some(token)),
            other => panic!("expected hello, got {other:?}"),
        }
        match parse_first_line(br#"{"coogle":1,"mode":"mcp","version":"0.0.1"}"#).unwrap() {
            FirstLine::Hello(h) => assert_eq!(h.session_token, None),
            other => panic!("expected hello, got {other:?}"),
        }
        for bad in [
            "short-secret",
            &"x".repeat(129),
            &format!("{}!", "a".repeat(40)),
        ] {
            let line =
                format!(r#"{{"coogle":1,"mode":"mcp","version":"0.1.0","sessionToken":"{bad}"}}"#);
            let e = parse_first_line(line.as_bytes()).unwrap_err().error;
            assert_eq!(e.code, ErrorCode::InvalidRequest);
            assert!(e.message.contains("sessionToken must be"), "{e}");
            assert!(!e.message.contains(bad), "{e}");
        }
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(version_newer("0.10.0", "0.9.9"));
        assert!(version_newer("1.0.0", "0.99.0"));
        assert!(!version_newer("0.1.0", "0.1.0"));
        assert!(!version_newer("0.1.0-rc1", "0.1.0"));
        assert!(!version_newer("garbage", "0.1.0"));
        assert!(!version_newer("0.1.0", "0.2.0"));
    }

    #[tokio::test]
    async fn capped_reader_refuses_long_lines_and_keeps_short_ones() {
        let data = b"short\r\n0123456789abcdef\nlast".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 10).await.unwrap(),
            Line::Complete
        );
        assert_eq!(buf, b"short");
        buf.clear();
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 10).await.unwrap(),
            Line::TooLong
        );
        assert!(buf.len() <= 10);
        buf.clear();
        let mut r = BufReader::new(&b"tail-without-newline"[..]);
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 100).await.unwrap(),
            Line::Eof
        );
        assert_eq!(buf, b"tail-without-newline");
    }
}
