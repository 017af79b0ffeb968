//! coogle's own config.json as setup and share write it: mode 0600 with a backup first,
//! untouched when the change gives the same document back, and never a document coogle would
//! not load (the daemon reads it at start and on `reload`; a broken one would cut sessions off).

use std::path::Path;

use serde_json::Value;

use crate::config::Config;
use crate::fsutil::{self, FsError, Mode, Written};

/// Apply `change` to the document (`None`: no file yet) and write the result.
pub(super) fn update_config(
    path: &Path,
    mut change: impl FnMut(Option<&Value>) -> Value,
) -> Result<Written, FsError> {
    let target = fsutil::resolve(path);
    fsutil::update_json(path, Mode::Exactly(0o600), fsutil::Lock::None, |doc| {
        let new = change(doc);
        if doc == Some(&new) {
            return Ok(None);
        }
        Config::from_value(new.clone(), Some(target.clone())).map_err(|e| FsError::Refused {
            path: target.clone(),
            detail: format!("the new config would not load: {e}"),
        })?;
        Ok(Some(new))
    })
}
