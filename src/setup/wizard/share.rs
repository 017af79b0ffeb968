//! Step 7: the chosen clients' other stdio MCP servers, moved behind the daemon as `coogle
//! share` does. The wizard offers them as `coogle share` does, every one checked (space
//! unchecks one, Esc cancels); `--yes` leaves them alone unless `--share-all` is given.

use super::super::share::{self, Select, ShareOptions};
use super::Wizard;

impl Wizard<'_> {
    pub(super) fn share_others(&mut self) {
        let ui = self.ui;
        if self.clients.is_empty() {
            ui.warn("skipped (no client config chosen)");
            return;
        }
        let select = if self.args.share_all {
            Select::All
        } else if ui.interactive {
            Select::Ask { checked: true }
        } else {
            ui.ok("skipped (--share-all shares them; `coogle share` does it any time)");
            return;
        };
        let files: Vec<_> = self
            .clients
            .iter()
            .filter(|(_, p)| !self.failed_files.contains(p))
            .cloned()
            .collect();
        if files.is_empty() {
            ui.info("skipped (step 6 could not change the chosen client configs)");
            return;
        }
        let opts = ShareOptions {
            select,
            dry_run: false,
            files,
            use_cli: !self.args.no_claude_cli && self.args.files.claude_json.is_none(),
        };
        match share::run(&ui, self.paths, &opts) {
            Ok(outcome) => {
                self.summary.extend(outcome.summary);
                self.failed |= outcome.failed;
            }
            Err(e) => {
                ui.fail(&e.to_string());
                self.failed = true;
            }
        }
    }
}
