//! The installer commands' errors (setup, uninstall, self-update): what went wrong, what caused
//! it, the fix, and the exit code. [`InstallError::report`] prints one in uv's shape: `error:`,
//! each `Caused by:`, then `hint:`.
//!
//! A message names what and where; it never contains a secret, only [`crate::secret::mask`] of
//! one. Errors that are only shown inside a ✓/✗ line are not made here.

use std::path::PathBuf;
use std::process::ExitStatus;

use crate::fsutil::FsError;
use crate::output::{self, ExitCode};
use crate::secret::KeyProblem;

#[derive(Debug, thiserror::Error)]
pub(crate) enum InstallError {
    #[error("coogle {command} {asks} and needs a terminal")]
    NeedsTerminal {
        command: &'static str,
        asks: &'static str,
    },

    // share and unshare
    #[error("coogle {command} needs to know which servers: none was named")]
    NeedsSelection { command: &'static str },
    #[error("no {what} named {names}; there are: {found}")]
    NothingNamed {
        what: &'static str,
        names: String,
        found: String,
    },

    // setup: the Google OAuth client
    #[error("--client-id and --client-secret-env go together")]
    CredentialFlagsApart,
    #[error("--client-secret-env names {var}, but {var} is not set")]
    SecretEnvUnset { var: String },
    #[error("--credentials-source manual needs --client-id and --client-secret-env")]
    ManualNeedsFlags,
    #[error("a client id needs its secret")]
    SecretMissing,
    #[error(
        "no mcpServers entry with GOOGLE_OAUTH_CLIENT_ID and GOOGLE_OAUTH_CLIENT_SECRET in {}",
        claude_json.display()
    )]
    NoClientInClaudeJson { claude_json: PathBuf },
    #[error(
        "no Google OAuth client found in config.json, {} or the environment",
        claude_json.display()
    )]
    NoClientFound { claude_json: PathBuf },

    // setup: the search server's Gemini API key
    #[error("--api-key-env names {var}, but {var} is not set")]
    ApiKeyEnvUnset { var: String },
    #[error(
        "--search needs a Gemini API key: GOOGLE_API_KEY, GEMINI_API_KEY, a .env file, or --api-key-env VAR"
    )]
    SearchNeedsKey,
    #[error("{0}; the search server needs a real Gemini API key")]
    SearchNeedsRealKey(KeyProblem),
    #[error(transparent)]
    BadApiKey(KeyProblem),

    // setup and uninstall: files
    #[error(transparent)]
    WriteConfig(FsError),
    #[error(transparent)]
    ReadState(FsError),
    #[error("coogle uninstall does not stop a daemon that {count} agent session{} use{}; nothing changed", if *count == 1 { "" } else { "s" }, if *count == 1 { "s" } else { "" })]
    SessionsOpen { count: usize },
    /// The record of what coogle changes could not be written: nothing was changed. (The
    /// cause is in the message: FsError's own message already names its source.)
    #[error("could not record the change, so nothing was changed: {0}")]
    WriteState(FsError),
    /// Boxed: its type is setup's, and nothing here may depend on setup.
    #[error("the test daemon did not work")]
    TestDaemon(#[source] Box<dyn std::error::Error + Send + Sync>),

    // self-update
    #[error("{} is managed by {manager}; coogle self-update does not replace it", exe.display())]
    ManagedBy {
        exe: PathBuf,
        manager: &'static str,
        how: &'static str,
    },
    #[error("could not find this executable")]
    CurrentExe(#[source] std::io::Error),
    #[error("could not list coogle's releases from {api}")]
    ListReleases {
        api: String,
        #[source]
        source: self_update::errors::Error,
    },
    #[error("no release {version} with a build for {target}")]
    NoSuchRelease { version: String, target: String },
    #[error("no release has a build for {target}")]
    NoBuild { target: String },
    #[error("replacing {} needs confirmation", exe.display())]
    NeedsConfirmation { exe: PathBuf },
    #[error("could not create {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not download {url}")]
    Download {
        url: String,
        #[source]
        source: self_update::errors::Error,
    },
    #[error(
        "release {version} publishes no SHA256SUMS, so its archive cannot be verified; nothing was replaced"
    )]
    NoSums { version: String },
    #[error("SHA256SUMS of release {version} has no SHA-256 for {asset}; nothing was replaced")]
    NoChecksum { version: String, asset: String },
    #[error(
        "checksum mismatch for {asset}: SHA256SUMS says {expected}, the download is {actual}; nothing was replaced"
    )]
    ChecksumMismatch {
        asset: String,
        expected: String,
        actual: String,
    },
    #[error("could not unpack {asset}")]
    Unpack {
        asset: String,
        #[source]
        source: self_update::errors::Error,
    },
    #[error("{asset} holds no `coogle` binary; nothing was replaced")]
    NoBinary { asset: String },
    #[error("the downloaded binary does not run; nothing was replaced")]
    NewBinaryDoesNotRun(#[source] std::io::Error),
    #[error("the downloaded binary did not answer --version; nothing was replaced")]
    NewBinarySilent,
    #[error("the downloaded binary failed --version ({0}); nothing was replaced")]
    NewBinaryFailed(ExitStatus),
    #[error("the downloaded binary says {said:?}, not coogle {version}; nothing was replaced")]
    NewBinaryWrongVersion { said: String, version: String },
    #[error("could not replace {}; the old binary is unchanged", exe.display())]
    Swap {
        exe: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl InstallError {
    /// The fix, when there is one to give.
    pub fn hint(&self) -> Option<String> {
        use InstallError::*;
        let text = match self {
            NeedsTerminal {
                command: "setup", ..
            } => {
                "run `coogle setup --yes` with flags for scripts and CI (see `coogle setup --help`)"
            }
            NeedsTerminal { command, .. } => return Some(format!("run `coogle {command} --yes`")),
            NeedsSelection { command } => {
                return Some(format!(
                    "pass server names (`coogle {command} NAME...`), --all, or --yes for all of them"
                ));
            }
            CredentialFlagsApart
            | SecretEnvUnset { .. }
            | ManualNeedsFlags
            | SecretMissing
            | NoClientInClaudeJson { .. }
            | NoClientFound { .. } => {
                "pass --client-id ID --client-secret-env VAR, or --credentials-source env|none"
            }
            ApiKeyEnvUnset { .. } | SearchNeedsKey | SearchNeedsRealKey(_) | BadApiKey(_) => {
                "pass --api-key-env VAR with the key in VAR, or --no-search"
            }
            WriteConfig(_) => "fix or move the file aside, then run setup again",
            ReadState(_) => "move the file aside to uninstall without it",
            SessionsOpen { .. } => {
                "end those sessions (the list above) and run it again, or pass --force to end their coogle connections"
            }
            WriteState(_) => "make room on that disk (or fix its permissions), then run it again",
            TestDaemon(_) => {
                "see the messages above; `coogle serve --log-stderr` shows the daemon's log; --skip-test skips this step"
            }
            ManagedBy { how, .. } => return Some(format!("run `{how}`")),
            ListReleases { .. } => "check the network; set GH_TOKEN if GitHub's rate limit was hit",
            NoBuild { .. } => {
                "build from source: cargo install --git https://github.com/coogle-dev/coogle"
            }
            NeedsConfirmation { .. } => "run `coogle self-update --yes`",
            ChecksumMismatch { .. } => "try again later; if it persists, report it",
            Swap { .. } => "check that you can write to that directory",
            _ => return None,
        };
        Some(text.to_owned())
    }

    /// 2 for what the person can fix in how they ran it (flags, terminal, environment), 1 for
    /// an operation that failed.
    pub fn exit_code(&self) -> ExitCode {
        use InstallError::*;
        match self {
            NeedsTerminal { .. }
            | NeedsSelection { .. }
            | NothingNamed { .. }
            | CredentialFlagsApart
            | SecretEnvUnset { .. }
            | ManualNeedsFlags
            | SecretMissing
            | NoClientInClaudeJson { .. }
            | NoClientFound { .. }
            | ApiKeyEnvUnset { .. }
            | SearchNeedsKey
            | SearchNeedsRealKey(_)
            | BadApiKey(_)
            | ManagedBy { .. }
            | CurrentExe(_)
            | SessionsOpen { .. }
            | NeedsConfirmation { .. } => ExitCode::Usage,
            _ => ExitCode::Failure,
        }
    }

    /// Print it (uv's shape) and return its exit code.
    pub fn report(&self) -> ExitCode {
        output::error(self, self.hint().as_deref());
        self.exit_code()
    }
}
