//! Setup's last check: run the client entry it wrote exactly as a client would
//! (`<command> <args>` on stdio, through an rmcp client) and list the tools it serves. It only
//! runs the entry; whatever daemon that entry starts or reaches is the real one.

use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use serde_json::Value;

use super::test_daemon::TEST_TIMEOUT;
use super::ui::Ui;
use crate::wire;

/// Why running the entry did not list tools.
#[derive(Debug, thiserror::Error)]
pub(super) enum VerifyError {
    #[error("the entry has no command")]
    NoCommand,
    #[error("could not start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("could not start {command}: {error}")]
    Start {
        command: String,
        error: std::io::Error,
    },
    #[error("{0}")]
    Initialize(Box<rmcp::service::ClientInitializeError>),
    #[error("{0}")]
    List(rmcp::ServiceError),
    #[error("no answer within {} s", TEST_TIMEOUT.as_secs())]
    Timeout,
}

/// Run the client entry and count its tools (with a spinner).
pub(super) fn run(ui: &Ui, entry: &Value) -> Result<usize, VerifyError> {
    let command = entry["command"].as_str().ok_or(VerifyError::NoCommand)?;
    let args: Vec<String> = entry["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let spinner = ui.spinner("asking the client entry for its tools");
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(VerifyError::Runtime)
        .and_then(|rt| rt.block_on(list_tools(command, &args)));
    spinner.finish_and_clear();
    result
}

async fn list_tools(command: &str, args: &[String]) -> Result<usize, VerifyError> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_remove("CLAUDE_CODE_SESSION_ID");
    let transport = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .map(|(t, _)| t)
        .map_err(|error| VerifyError::Start {
            command: command.to_owned(),
            error,
        })?;
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("coogle-setup", wire::VERSION),
    );
    let work = async {
        let session = info
            .serve(transport)
            .await
            .map_err(|e| VerifyError::Initialize(Box::new(e)))?;
        let tools = session.list_all_tools().await.map_err(VerifyError::List)?;
        let _ = session.cancel().await;
        Ok(tools.len())
    };
    tokio::time::timeout(TEST_TIMEOUT, work)
        .await
        .map_err(|_| VerifyError::Timeout)?
}
