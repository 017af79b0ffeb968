//! Step 2, second half: whether to set up the ask_google search server, and with which Gemini
//! API key. A key from `--api-key-env`, the environment, config.json or a `.env` file is used
//! (shown masked and checked); otherwise the wizard offers to take one. Under `--yes` the
//! search server is set up when a key is found or `--search` is given (then a key must be).
//!
//! The key is never shown, only its length; it goes into config.json (mode 0600) and nowhere
//! else.

use std::path::Path;

use super::super::args::SetupArgs;
use super::super::ui::Ui;
use crate::error::InstallError;
use crate::secret::{check_key, find_key_here, mask};

/// The key to set the search server up with; `None` leaves it out.
pub(super) fn choose(
    ui: &Ui,
    args: &SetupArgs,
    cfg_path: &Path,
) -> Result<Option<String>, InstallError> {
    if args.no_search {
        return Ok(None);
    }
    ui.line("  Search server (ask_google: answers grounded in Google Search, through Gemini)");
    let found = match &args.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Some((v.trim().to_owned(), format!("${var}"))),
            _ => return Err(InstallError::ApiKeyEnvUnset { var: var.clone() }),
        },
        None => find_key_here(cfg_path).map(|f| (f.key, f.source.to_string())),
    };
    match found {
        Some((key, from)) => use_found(ui, args, key, &from),
        None if args.search && !ui.interactive => Err(InstallError::SearchNeedsKey),
        None if !ui.interactive => {
            ui.info("no Gemini API key found; not set up (`coogle setup --search --api-key-env VAR` adds it)");
            Ok(None)
        }
        None => ask(ui, args),
    }
}

/// A key was found: check it and, when asking, confirm it.
fn use_found(
    ui: &Ui,
    args: &SetupArgs,
    key: String,
    from: &str,
) -> Result<Option<String>, InstallError> {
    ui.ok(&format!("Gemini API key {} ({from})", mask(&key)));
    if let Err(e) = check_key(&key) {
        ui.warn(&e.to_string());
        if args.search && !ui.interactive {
            return Err(InstallError::SearchNeedsRealKey(e));
        }
        if !ui.interactive {
            ui.info("the search server is not set up (`coogle setup --search --api-key-env VAR` with a real key adds it)");
            return Ok(None);
        }
    }
    if !ui.confirm("Set up the ask_google search server with this key?", true) {
        return Ok(None);
    }
    Ok(Some(key))
}

/// No key found: offer to take one.
fn ask(ui: &Ui, args: &SetupArgs) -> Result<Option<String>, InstallError> {
    if !ui.confirm(
        "Set up the ask_google search server? (needs a Gemini API key from https://aistudio.google.com/apikey)",
        args.search,
    ) {
        return Ok(None);
    }
    let key = ui.password("Gemini API key").unwrap_or_default();
    if key.trim().is_empty() {
        ui.warn("no key entered; the search server is not set up");
        return Ok(None);
    }
    check_key(&key).map_err(InstallError::BadApiKey)?;
    ui.ok(&format!("Gemini API key {} (entered)", mask(&key)));
    Ok(Some(key.trim().to_owned()))
}
