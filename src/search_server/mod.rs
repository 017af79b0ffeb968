//! `coogle search-server`: coogle's own stdio MCP server with one tool, `ask_google`, which
//! answers a question with Gemini grounded in Google Search (the way ask-google-mcp did). The
//! daemon runs it as the `search` upstream like any other child, so every session shares it.
//!
//! stdout is the MCP channel (rmcp over stdio); logs go to stderr, which the daemon drains into
//! its log. The API key is never logged or echoed: it travels only in a request header. Every
//! failure a caller can act on is a tool result with `isError: true` and a categorized prefix
//! (`[AUTH_ERROR]`, `[QUOTA_ERROR]`, `[TIMEOUT_ERROR]`, `[API_ERROR]`); JSON-RPC errors are left
//! for unknown tools.

pub mod answer;
pub mod gemini;
mod output_file;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use crate::config::{Config, SearchConfig};
use crate::date::utc_date;
use crate::output::{self, ExitCode};
use crate::secret as api_key;
use answer::Parsed;
use gemini::{Category, Failure, Gemini};

/// The tool's name.
pub const TOOL: &str = "ask_google";
/// The longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 10_000;
/// The system instruction, shipped inside the binary and read once; `{{CURRENT_DATE}}` is
/// replaced per request.
const SYSTEM_INSTRUCTION: &str = include_str!("system_instruction.md");
const MODELS: [&str; 3] = ["pro", "flash", "flash-lite"];

const DESCRIPTION: &str = "Ask Google: a current, sourced answer from Gemini grounded in Google \
Search. Use it for anything that may have changed since your training data: current versions \
and release notes, library and API documentation, error messages, prices, news, people and \
dates. Ask one precise, self-contained question (include versions, platforms, names). The \
answer is terse and ends with its numbered sources and the searches performed. model: pro \
(default; best for hard or multi-part questions), flash (faster), flash-lite (fastest, \
simple facts). output_file: also write the answer to this file, given as an absolute path (the \
server is shared by every session, so a relative path is refused); an existing file is only \
replaced with overwrite: true, and a symbolic link is never written through.";

/// Serve `ask_google` on stdio until the client goes away.
pub async fn run(config_path: Option<PathBuf>) -> ExitCode {
    crate::logging::init_stderr("coogle=info,rmcp=warn");
    let config = match Config::load(config_path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            output::error(&e, Some("fix the config file, or run `coogle setup`"));
            return ExitCode::Usage;
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let server = SearchServer::new(config.search, &cwd, &crate::paths::home());
    if let Some(why) = &server.key_problem {
        tracing::warn!("{why}; Gemini will likely refuse it ([AUTH_ERROR])");
    }
    match server.key_source.as_deref() {
        Some(from) => tracing::info!("ask_google ready; Gemini API key from {from}"),
        None => tracing::warn!(
            "no Gemini API key (GOOGLE_API_KEY, GEMINI_API_KEY, config.json search.apiKey or .env): every call will fail with [AUTH_ERROR]"
        ),
    }
    let service = match server.serve(rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("the MCP session did not start: {e}");
            return ExitCode::Failure;
        }
    };
    match service.waiting().await {
        Ok(_) => ExitCode::Success,
        Err(e) => {
            tracing::error!("the MCP session ended with an error: {e}");
            ExitCode::Failure
        }
    }
}

/// The server: settings, the Gemini client (when a key was found) and the tool definition.
#[derive(Clone)]
pub struct SearchServer {
    config: Arc<SearchConfig>,
    gemini: Option<Arc<Gemini>>,
    key_source: Option<String>,
    /// Why the key does not look like a Google API key (placeholder, too short), if it does not.
    key_problem: Option<String>,
    init_error: Option<String>,
}

impl SearchServer {
    /// Find the key (environment, config, `.env` in `cwd` then `home`) and build the client.
    pub fn new(config: SearchConfig, cwd: &Path, home: &Path) -> SearchServer {
        let config_value = config
            .api_key
            .as_ref()
            .map(|k| json!({"search": {"apiKey": k}}));
        let found = api_key::find_key(&|v| std::env::var(v).ok(), config_value.as_ref(), cwd, home);
        let key_source = found.as_ref().map(|f| f.source.to_string());
        let key_problem = found
            .as_ref()
            .and_then(|f| api_key::check_key(&f.key).err())
            .map(|e| e.to_string());
        let (gemini, init_error) = match found {
            None => (None, None),
            Some(f) => match Gemini::new(
                &config.api_base_url,
                f.key,
                config.timeout,
                config.retry_base,
                config.max_retries,
            ) {
                Ok(g) => (Some(Arc::new(g)), None),
                Err(e) => (None, Some(e)),
            },
        };
        SearchServer {
            config: Arc::new(config),
            gemini,
            key_source,
            key_problem,
            init_error,
        }
    }

    /// The tool as `tools/list` shows it.
    pub fn tool() -> Tool {
        let schema = json!({
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUESTION_CHARS,
                    "description": "The question, self-contained and specific (versions, platforms, names)."
                },
                "model": {
                    "type": "string",
                    "enum": MODELS,
                    "default": "pro",
                    "description": "pro (default, best), flash (faster) or flash-lite (fastest)."
                },
                "output_file": {
                    "type": "string",
                    "description": "Optional: also write the answer to this file, an absolute path (parents are created; an existing file is kept unless overwrite is true)."
                },
                "overwrite": {
                    "type": "boolean",
                    "default": false,
                    "description": "With output_file: replace the file if it exists (never through a symbolic link)."
                }
            },
            "required": ["question"],
            "additionalProperties": false
        });
        let Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        Tool::new(TOOL, DESCRIPTION, Arc::new(schema))
    }

    /// Answer one call: validate, ask, format, write `output_file`.
    pub async fn ask_google(&self, arguments: Option<&Map<String, Value>>) -> CallToolResult {
        let request = match validate(arguments) {
            Ok(r) => r,
            Err(message) => return error_result(format!("Invalid input: {message}")),
        };
        let Some(gemini) = &self.gemini else {
            return error_result(match &self.init_error {
                Some(e) => format!("{} {e}", Category::Api.prefix()),
                None => format!(
                    "{} no Gemini API key: set GOOGLE_API_KEY (or GEMINI_API_KEY) for the daemon, put it in config.json as search.apiKey, or run `coogle setup --search`",
                    Category::Auth.prefix()
                ),
            });
        };
        let model = match request.model {
            "flash" => &self.config.model_flash,
            "flash-lite" => &self.config.model_flash_lite,
            _ => &self.config.model_pro,
        };
        let system = SYSTEM_INSTRUCTION.replace("{{CURRENT_DATE}}", &utc_date());
        let body = match gemini.ask(model, &system, &request.question).await {
            Ok(body) => body,
            Err(f) => return error_result(f.to_string()),
        };
        let text = match answer::format_response(&body) {
            Parsed::Answer(text) => text,
            Parsed::Empty(why) => {
                return error_result(
                    Failure {
                        category: Category::Api,
                        message: why,
                        transient: false,
                    }
                    .to_string(),
                );
            }
        };
        let text = match &request.output_file {
            None => text,
            Some(path) => {
                let note = write_answer(path, &text, request.overwrite);
                format!("{text}\n\n{note}")
            }
        };
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A validated call.
#[derive(Debug, PartialEq)]
pub struct AskRequest {
    pub question: String,
    pub model: &'static str,
    pub output_file: Option<PathBuf>,
    /// Replace `output_file` if it exists.
    pub overwrite: bool,
}

/// Check the arguments by hand (clients may not validate against the schema), with one clear
/// message per problem.
pub fn validate(arguments: Option<&Map<String, Value>>) -> Result<AskRequest, String> {
    let empty = Map::new();
    let args = arguments.unwrap_or(&empty);
    let question = match args.get("question") {
        None | Some(Value::Null) => {
            return Err(
                "question is required: pass the question to search for, as a string".into(),
            );
        }
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(format!(
                "question must be a string, not {}",
                json_type(other)
            ));
        }
    };
    if question.trim().is_empty() {
        return Err("question is empty or only whitespace: ask something".into());
    }
    let chars = question.chars().count();
    if chars > MAX_QUESTION_CHARS {
        return Err(format!(
            "question is {chars} characters long; the limit is {MAX_QUESTION_CHARS}"
        ));
    }
    let model = match args.get("model") {
        None | Some(Value::Null) => "pro",
        Some(Value::String(m)) => MODELS
            .iter()
            .find(|known| **known == m.trim())
            .copied()
            .ok_or_else(|| {
                format!("unknown model {m:?}: use pro (the default), flash or flash-lite")
            })?,
        Some(other) => {
            return Err(format!(
                "model must be a string (pro, flash or flash-lite), not {}",
                json_type(other)
            ));
        }
    };
    let output_file = match args.get("output_file") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) if !p.trim().is_empty() => {
            let path = PathBuf::from(p.trim());
            output_file::check_path(&path)?;
            Some(path)
        }
        Some(Value::String(_)) => {
            return Err("output_file is empty: give a file path or leave it out".into());
        }
        Some(other) => {
            return Err(format!(
                "output_file must be a string path, not {}",
                json_type(other)
            ));
        }
    };
    let overwrite = match args.get("overwrite") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(format!(
                "overwrite must be true or false, not {}",
                json_type(other)
            ));
        }
    };
    if let Some(unknown) = args
        .keys()
        .find(|k| !["question", "model", "output_file", "overwrite"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown argument {unknown:?}: the arguments are question, model, output_file and overwrite"
        ));
    }
    Ok(AskRequest {
        question: question.trim().to_owned(),
        model,
        output_file,
        overwrite,
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Write the answer to `path` (see [`output_file`]). Returns the line appended to the answer:
/// where it was saved, or why not (the answer itself is never lost to a write error).
fn write_answer(path: &Path, text: &str, overwrite: bool) -> String {
    match output_file::write(path, text, overwrite) {
        Ok(target) => {
            tracing::info!(path = %target.display(), "wrote the answer to output_file");
            if target == path {
                format!("[saved to {}]", target.display())
            } else {
                // Through a symbolic link to a directory, or `..`: say where it really went.
                format!(
                    "[saved to {}, the real path of {}]",
                    target.display(),
                    path.display()
                )
            }
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), "output_file not written: {e}");
            format!("[output_file error] {e}")
        }
    }
}

impl rmcp::ServerHandler for SearchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("coogle-search", crate::wire::VERSION))
            .with_instructions(
                "ask_google answers questions about current facts (versions, docs, news) with \
                 Google Search grounding and cites its sources.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(ListToolsResult {
            tools: vec![Self::tool()],
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        if request.name != TOOL {
            return Err(rmcp::ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: this server has only {TOOL}",
                    request.name
                ),
                None,
            ));
        }
        // rmcp does not abort a handler on `notifications/cancelled`; it only fires the token.
        // Stop here so a cancelled question makes no further requests or retries (each costs).
        let result = tokio::select! {
            r = self.ask_google(request.arguments.as_ref()) => r,
            () = context.ct.cancelled() => {
                tracing::info!("ask_google cancelled by the client");
                error_result(format!("{} cancelled by the client", Category::Api.prefix()))
            }
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        let Value::Object(m) = v else { panic!() };
        m
    }

    #[test]
    fn every_validation_message() {
        let err = |v: Value| validate(Some(&args(v))).unwrap_err();
        assert!(
            validate(None)
                .unwrap_err()
                .starts_with("question is required")
        );
        assert!(err(json!({"question": null})).starts_with("question is required"));
        assert_eq!(
            err(json!({"question": 5})),
            "question must be a string, not a number"
        );
        assert!(err(json!({"question": " \n\t"})).starts_with("question is empty"));
        let long = "é".repeat(MAX_QUESTION_CHARS + 1);
        assert_eq!(
            err(json!({"question": long})),
            "question is 10001 characters long; the limit is 10000"
        );
        assert!(
            validate(Some(&args(
                json!({"question": "é".repeat(MAX_QUESTION_CHARS)})
            )))
            .is_ok()
        );
        assert_eq!(
            err(json!({"question": "q", "model": "ultra"})),
            "unknown model \"ultra\": use pro (the default), flash or flash-lite"
        );
        assert!(err(json!({"question": "q", "model": 1})).starts_with("model must be a string"));
        assert!(
            err(json!({"question": "q", "output_file": ""})).starts_with("output_file is empty")
        );
        assert!(
            err(json!({"question": "q", "output_file": []}))
                .starts_with("output_file must be a string")
        );
        assert!(
            err(json!({"question": "q", "extra": 1})).starts_with("unknown argument \"extra\"")
        );
        assert!(
            err(json!({"question": "q", "output_file": "a/b.md"}))
                .starts_with("output_file must be an absolute path")
        );
        assert_eq!(
            err(json!({"question": "q", "output_file": "/a.md", "overwrite": "yes"})),
            "overwrite must be true or false, not a string"
        );
        assert_eq!(
            validate(Some(&args(
                json!({"question": " why? ", "model": "flash-lite", "output_file": "/a/b.md", "overwrite": true})
            )))
            .unwrap(),
            AskRequest {
                question: "why?".into(),
                model: "flash-lite",
                output_file: Some("/a/b.md".into()),
                overwrite: true
            }
        );
    }

    #[test]
    fn the_system_instruction_has_the_date_slot() {
        assert!(SYSTEM_INSTRUCTION.contains("{{CURRENT_DATE}}"));
        assert!(SYSTEM_INSTRUCTION.contains("Do not add your own \"Sources\""));
    }
}
