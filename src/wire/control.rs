//! Control mode's protocol, typed once for the daemon that answers it and every client that
//! asks (the CLI, setup, doctor, self-update): a [`Request`] per method with its own params,
//! and a typed answer per method ([`Response`]). Nobody builds or reads these lines by hand.
//!
//! The lines are a documented interface (README, "From any shell with `nc`"): scripts send
//! `{"id":"1","method":"status"}` and read `{"id":"1","ok":true,"result":{…}}`. Their shape
//! must never change under a script or an older coogle (tests/it/control_wire.rs pins it):
//! a method without params ignores whatever `params` it is given, an unknown field in params is
//! ignored, and every answer keeps its field names. Readers take what they need of an answer
//! and default the rest, as [`super::status`] does, so a client reads any daemon's answer.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::{ErrorCode, Info, Status, VERSION, WireError};

/// The control methods. They are never tool names: an unknown method is `invalid_request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlMethod {
    Ping,
    Info,
    Status,
    ListTools,
    Call,
    StartChild,
    RestartChild,
    Reload,
    Shutdown,
    RestartDaemon,
}

impl ControlMethod {
    pub const ALL: [ControlMethod; 10] = [
        ControlMethod::Ping,
        ControlMethod::Info,
        ControlMethod::Status,
        ControlMethod::ListTools,
        ControlMethod::Call,
        ControlMethod::StartChild,
        ControlMethod::RestartChild,
        ControlMethod::Reload,
        ControlMethod::Shutdown,
        ControlMethod::RestartDaemon,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ControlMethod::Ping => "ping",
            ControlMethod::Info => "info",
            ControlMethod::Status => "status",
            ControlMethod::ListTools => "list_tools",
            ControlMethod::Call => "call",
            ControlMethod::StartChild => "start_child",
            ControlMethod::RestartChild => "restart_child",
            ControlMethod::Reload => "reload",
            ControlMethod::Shutdown => "shutdown",
            ControlMethod::RestartDaemon => "restart_daemon",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// What a control request asks, tagged by its method, with that method's params:
/// `{"method":"list_tools","params":{"server":"google"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "method", content = "params", rename_all = "snake_case")]
pub enum Request {
    Ping,
    Info,
    Status,
    /// Every page of a server's tool list.
    ListTools(Target),
    /// A one-shot tool call (handy with `nc`).
    Call(CallParams),
    /// Start a server's child unless it runs; answered once it is ready.
    StartChild(Target),
    RestartChild(Target),
    /// Read the config file again and serve the servers new in it.
    Reload,
    Shutdown,
    /// Become the binary on disk (this version or a newer one), keeping every child running:
    /// answered once it proved it can serve; the exec follows once no call is in flight.
    RestartDaemon,
}

impl Request {
    pub fn method(&self) -> ControlMethod {
        match self {
            Request::Ping => ControlMethod::Ping,
            Request::Info => ControlMethod::Info,
            Request::Status => ControlMethod::Status,
            Request::ListTools(_) => ControlMethod::ListTools,
            Request::Call(_) => ControlMethod::Call,
            Request::StartChild(_) => ControlMethod::StartChild,
            Request::RestartChild(_) => ControlMethod::RestartChild,
            Request::Reload => ControlMethod::Reload,
            Request::Shutdown => ControlMethod::Shutdown,
            Request::RestartDaemon => ControlMethod::RestartDaemon,
        }
    }

    /// A request from its method's name and its params as they came (`null` when absent). The
    /// errors are the ones `nc` users have always read: the unknown method with the list of
    /// methods, `call` without a tool, arguments that are not an object.
    pub fn from_parts(method: &str, params: Value) -> Result<Request, WireError> {
        let Some(m) = ControlMethod::parse(method) else {
            let known: Vec<&str> = ControlMethod::ALL.iter().map(|m| m.as_str()).collect();
            return Err(invalid(format!(
                "unknown control method {method:?}; the methods are {} (tool calls go through \"call\")",
                known.join(", ")
            )));
        };
        Ok(match m {
            ControlMethod::Ping => Request::Ping,
            ControlMethod::Info => Request::Info,
            ControlMethod::Status => Request::Status,
            ControlMethod::Reload => Request::Reload,
            ControlMethod::Shutdown => Request::Shutdown,
            ControlMethod::RestartDaemon => Request::RestartDaemon,
            ControlMethod::ListTools => Request::ListTools(Target::from_params(m, params)?),
            ControlMethod::StartChild => Request::StartChild(Target::from_params(m, params)?),
            ControlMethod::RestartChild => Request::RestartChild(Target::from_params(m, params)?),
            ControlMethod::Call => Request::Call(CallParams::from_params(params)?),
        })
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Parts {
            method: String,
            #[serde(default)]
            params: Value,
        }
        let p = Parts::deserialize(d)?;
        Request::from_parts(&p.method, p.params).map_err(serde::de::Error::custom)
    }
}

fn invalid(message: impl Into<String>) -> WireError {
    WireError::new(ErrorCode::InvalidRequest, message)
}

/// Which server, and which instance of it, a request is for: as a session's hello would
/// choose it. No server: the only one, or `google`. A per-project server's instance is the one
/// of `project`; `env` gives the values of a server's `passEnv`. Its `Debug` shows the names of
/// `env`, never the values.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

impl Target {
    /// A server by name (`None`: the only one, or `google`), its shared instance.
    pub fn server(server: Option<&str>) -> Target {
        Target {
            server: server.map(str::to_owned),
            ..Target::default()
        }
    }

    /// A server's instance as a session started in this process would get it: this process's
    /// project and environment pick it (a per-project server's child of this project, say).
    pub fn here(server: Option<&str>) -> Target {
        Target {
            server: server.map(str::to_owned),
            // A path that is not Unicode cannot travel in JSON: no project, as for a client
            // that has none.
            project: super::own_project_dir().filter(|p| p.to_str().is_some()),
            env: Some(super::own_env()),
        }
    }

    fn from_params(method: ControlMethod, params: Value) -> Result<Target, WireError> {
        if params.is_null() {
            return Ok(Target::default());
        }
        serde_json::from_value(params)
            .map_err(|e| invalid(format!("bad params for {}: {e}", method.as_str())))
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("server", &self.server)
            .field("project", &self.project)
            .field(
                "env",
                &self.env.as_ref().map(|e| e.keys().collect::<Vec<_>>()),
            )
            .finish()
    }
}

/// `call`'s params: `{server?, tool, arguments?}` (and `project`, `env` as for any [`Target`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallParams {
    #[serde(flatten)]
    pub target: Target,
    pub tool: String,
    pub arguments: Map<String, Value>,
}

impl CallParams {
    fn from_params(params: Value) -> Result<CallParams, WireError> {
        /// The fields as they came, so each mistake gets its own words.
        #[derive(Deserialize)]
        struct Loose {
            #[serde(flatten)]
            target: Target,
            #[serde(default)]
            tool: Value,
            #[serde(default)]
            arguments: Value,
        }
        let needs_tool = || {
            invalid(
                "call needs params.tool (the tool's name) and optional params.arguments (an object)",
            )
        };
        if !params.is_object() {
            return Err(needs_tool());
        }
        let loose: Loose = serde_json::from_value(params)
            .map_err(|e| invalid(format!("bad params for call: {e}")))?;
        let Value::String(tool) = loose.tool else {
            return Err(needs_tool());
        };
        let arguments = match loose.arguments {
            Value::Null => Map::new(),
            Value::Object(a) => a,
            _ => return Err(invalid("params.arguments must be a JSON object")),
        };
        Ok(CallParams {
            target: loose.target,
            tool,
            arguments,
        })
    }
}

/// `ping`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pong {
    pub pong: bool,
    /// The daemon's coogle version.
    pub version: String,
}

impl Pong {
    /// This daemon's answer.
    pub fn of_this_daemon() -> Pong {
        Pong {
            pong: true,
            version: VERSION.to_string(),
        }
    }
}

/// `list_tools`'s answer: every page of the server's tool list, each tool as the server
/// described it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolList {
    pub server: String,
    pub tools: Vec<Value>,
}

/// `start_child`'s and `restart_child`'s answer: the child that is ready now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChildReady {
    pub server: String,
    pub pid: Option<u32>,
}

/// What `reload` did: the servers new in the config file are served from now on; those that
/// changed or went stay as they run until the daemon's next start.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Reloaded {
    /// The file read (`None`: there was none, and the defaults apply).
    #[serde(default)]
    pub file: Option<PathBuf>,
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

/// `shutdown`'s answer, sent before the daemon goes. A client needs the pid, to wait for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopping {
    #[serde(default)]
    pub stopping: bool,
    pub pid: u32,
}

/// `restart_daemon`'s answer: the binary that proved it can serve, which the daemon becomes
/// (in its own process) once no call is in flight.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HandingOver {
    pub handing_over: bool,
    pub version: String,
    pub exe: PathBuf,
    /// It takes the running children over (a binary that cannot has them stopped first).
    pub carries: bool,
}

/// A daemon's answer, one variant per method, written as the bare result (the client knows
/// which method it asked, so the result needs no tag of its own).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Response {
    Pong(Pong),
    Info(Info),
    Status(Box<Status>),
    Tools(ToolList),
    /// `call`: the tool's result, as the server gave it.
    Called(Value),
    Child(ChildReady),
    Reloaded(Reloaded),
    Stopping(Stopping),
    HandingOver(HandingOver),
}

macro_rules! into_response {
    ($($inner:ty => $variant:expr),* $(,)?) => {
        $(impl From<$inner> for Response {
            fn from(answer: $inner) -> Self {
                $variant(answer)
            }
        })*
    };
}

into_response!(
    Pong => Response::Pong,
    Info => Response::Info,
    ToolList => Response::Tools,
    ChildReady => Response::Child,
    Reloaded => Response::Reloaded,
    Stopping => Response::Stopping,
    HandingOver => Response::HandingOver,
);

impl From<Status> for Response {
    fn from(status: Status) -> Self {
        Response::Status(Box::new(status))
    }
}

/// A control request line: `{"id":"1","method":"status","params":{...}}`. The id is the
/// client's, any JSON, echoed in the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlRequest {
    pub id: Value,
    pub request: Request,
}

impl Serialize for ControlRequest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Line<'a> {
            id: &'a Value,
            #[serde(flatten)]
            request: &'a Request,
        }
        Line {
            id: &self.id,
            request: &self.request,
        }
        .serialize(s)
    }
}

/// A control line the daemon could not take: why, and the id to answer under (`null` when
/// the line had none, or could not be read far enough to find it).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub id: Value,
    pub error: WireError,
}

impl From<WireError> for Refusal {
    fn from(error: WireError) -> Self {
        Refusal {
            id: Value::Null,
            error,
        }
    }
}

/// Parse one control request line: first the envelope (id, method, params), then the method's
/// own params, so a mistake in those is answered under the request's id.
pub fn parse_control(line: &[u8]) -> Result<ControlRequest, Refusal> {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(default)]
        id: Value,
        method: String,
        #[serde(default)]
        params: Value,
    }
    let envelope: Envelope = serde_json::from_slice(line).map_err(|e| {
        invalid(format!(
            "not a control request ({e}); expected {{\"id\":\"1\",\"method\":\"status\"}}"
        ))
    })?;
    match Request::from_parts(&envelope.method, envelope.params) {
        Ok(request) => Ok(ControlRequest {
            id: envelope.id,
            request,
        }),
        Err(error) => Err(Refusal {
            id: envelope.id,
            error,
        }),
    }
}

/// A control answer: `{"id":"1","ok":true,"result":{...}}` or
/// `{"id":"1","ok":false,"error":{...}}`. The daemon writes a [`Response`]; a client reads the
/// answer type of the method it asked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ControlResponse<R = Response> {
    pub id: Value,
    pub ok: bool,
    // Absent Options read as None; `default` here would ask `R: Default` of every answer type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
}

impl ControlResponse {
    pub fn ok(id: Value, result: Response) -> Self {
        ControlResponse {
            id,
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    pub fn err(id: Value, error: WireError) -> Self {
        ControlResponse {
            id,
            ok: false,
            result: None,
            error: Some(error),
        }
    }
}

impl<R> ControlResponse<R> {
    pub fn into_result(self) -> Result<R, WireError> {
        match (self.ok, self.result, self.error) {
            (true, Some(r), _) => Ok(r),
            (true, None, _) => Err(WireError::new(
                ErrorCode::Internal,
                "the daemon answered ok=true without a result",
            )),
            (false, _, Some(e)) => Err(e),
            (false, _, None) => Err(WireError::new(
                ErrorCode::Internal,
                "the daemon answered ok=false without an error",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::to_line;
    use serde_json::json;

    fn line(r: &ControlRequest) -> String {
        String::from_utf8(to_line(r)).unwrap()
    }

    #[test]
    fn control_methods_are_a_closed_set() {
        for m in ControlMethod::ALL {
            assert_eq!(ControlMethod::parse(m.as_str()), Some(m));
        }
        assert_eq!(ControlMethod::parse("search_gmail_messages"), None);
        assert_eq!(
            serde_json::to_string(&ErrorCode::UpstreamUnavailable).unwrap(),
            "\"upstream_unavailable\""
        );
    }

    /// What the clients write, as `nc` users write it too.
    #[test]
    fn requests_are_written_tagged_by_method() {
        let r = |request| ControlRequest {
            id: json!("1"),
            request,
        };
        assert_eq!(
            line(&r(Request::Status)),
            "{\"id\":\"1\",\"method\":\"status\"}\n"
        );
        assert_eq!(
            line(&r(Request::ListTools(Target::server(Some("google"))))),
            "{\"id\":\"1\",\"method\":\"list_tools\",\"params\":{\"server\":\"google\"}}\n"
        );
        let call = CallParams {
            target: Target::default(),
            tool: "echo".into(),
            arguments: json!({"text": "hi"}).as_object().unwrap().clone(),
        };
        assert_eq!(
            line(&r(Request::Call(call))),
            "{\"id\":\"1\",\"method\":\"call\",\"params\":{\"tool\":\"echo\",\"arguments\":{\"text\":\"hi\"}}}\n"
        );
    }

    /// Every request reads back as itself, through the daemon's parser.
    #[test]
    fn every_request_round_trips() {
        let target = Target {
            server: Some("s".into()),
            project: Some("/p".into()),
            env: Some(BTreeMap::from([("K".into(), "v".into())])),
        };
        let call = CallParams {
            target: target.clone(),
            tool: "t".into(),
            arguments: Map::new(),
        };
        for request in [
            Request::Ping,
            Request::Info,
            Request::Status,
            Request::ListTools(target.clone()),
            Request::Call(call),
            Request::StartChild(Target::default()),
            Request::RestartChild(target),
            Request::Reload,
            Request::Shutdown,
        ] {
            let sent = ControlRequest {
                id: json!(7),
                request,
            };
            let got = parse_control(line(&sent).trim_end().as_bytes()).unwrap();
            assert_eq!(got, sent);
            let again: Request =
                serde_json::from_str(&serde_json::to_string(&sent.request).unwrap()).unwrap();
            assert_eq!(again, sent.request);
        }
    }

    /// A mistake past the envelope is answered under the request's id; one in the envelope
    /// under null.
    #[test]
    fn refusals_carry_the_id_when_there_is_one() {
        let r = parse_control(br#"{"id":"u","method":"nope"}"#).unwrap_err();
        assert_eq!(r.id, json!("u"));
        assert!(
            r.error
                .message
                .starts_with("unknown control method \"nope\"")
        );
        let r = parse_control(br#"{"id":"b","method":"list_tools","params":{"server":5}}"#)
            .unwrap_err();
        assert_eq!(r.id, json!("b"));
        assert_eq!(r.error.code, ErrorCode::InvalidRequest);
        assert!(
            r.error.message.contains("bad params for list_tools"),
            "{r:?}"
        );
        let r = parse_control(br#"{"id":"c","method":"call","params":"echo"}"#).unwrap_err();
        assert!(
            r.error.message.starts_with("call needs params.tool"),
            "{r:?}"
        );
        let r = parse_control(br#"{"id":"m"}"#).unwrap_err();
        assert_eq!(r.id, Value::Null);
        assert!(r.error.message.starts_with("not a control request"));
    }

    /// Methods without params take any; unknown fields in params are ignored.
    #[test]
    fn params_are_read_leniently_where_they_always_were() {
        for params in ["{}", "[1]", "\"x\"", "null"] {
            let l = format!(r#"{{"id":1,"method":"status","params":{params}}}"#);
            assert_eq!(
                parse_control(l.as_bytes()).unwrap().request,
                Request::Status
            );
        }
        let r = parse_control(
            br#"{"id":1,"method":"restart_child","params":{"project":null,"future":true}}"#,
        )
        .unwrap();
        assert_eq!(r.request, Request::RestartChild(Target::default()));
    }

    #[test]
    fn target_debug_hides_env_values() {
        let t = Target {
            env: Some(BTreeMap::from([("TOKEN".into(), "s3cret".into())])),
            ..Target::default()
        };
        let shown = format!("{t:?}");
        assert!(
            shown.contains("TOKEN") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    /// The answers as the daemon writes them, and as clients read them back.
    #[test]
    fn answers_are_the_bare_result() {
        let ok = ControlResponse::ok(
            json!("1"),
            ChildReady {
                server: "g".into(),
                pid: None,
            }
            .into(),
        );
        let text = String::from_utf8(to_line(&ok)).unwrap();
        assert_eq!(
            text,
            "{\"id\":\"1\",\"ok\":true,\"result\":{\"server\":\"g\",\"pid\":null}}\n"
        );
        let back: ControlResponse<ChildReady> = serde_json::from_str(&text).unwrap();
        assert_eq!(back.into_result().unwrap().server, "g");
        let err = ControlResponse::err(json!(2), WireError::new(ErrorCode::NotFound, "x"));
        let text = String::from_utf8(to_line(&err)).unwrap();
        assert_eq!(
            text,
            "{\"id\":2,\"ok\":false,\"error\":{\"code\":\"not_found\",\"message\":\"x\"}}\n"
        );
        let back: ControlResponse<Pong> = serde_json::from_str(&text).unwrap();
        assert_eq!(back.into_result().unwrap_err().code, ErrorCode::NotFound);
        let empty: ControlResponse<Pong> = serde_json::from_str(r#"{"id":1,"ok":true}"#).unwrap();
        assert_eq!(empty.into_result().unwrap_err().code, ErrorCode::Internal);
    }
}
