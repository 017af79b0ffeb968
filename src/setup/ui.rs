//! What setup, doctor and uninstall show a person: step headers, ✓/✗ lines, spinners and the
//! dialoguer prompts. The installer commands' output goes to stdout through [`crate::output`]
//! (it is their result); prompts and spinners use stderr. `coogle mcp` never reaches this
//! module.
//!
//! Prompts only run when [`Ui::interactive`] is true, which needs a terminal on stdin and
//! stderr; everything else must take its answer from flags.

use std::io::IsTerminal;
use std::time::Duration;

use dialoguer::theme::ColorfulTheme;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::output;

/// Both the terminal test and the prompts look at stdin and stderr.
pub fn has_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

#[derive(Debug, Clone, Copy)]
pub struct Ui {
    pub interactive: bool,
}

impl Ui {
    pub fn step(&self, n: u32, total: u32, title: &str) {
        output::out(&format!("\n[{n}/{total}] {title}"));
    }

    pub fn ok(&self, text: &str) {
        output::out(&format!("  ✓ {text}"));
    }

    pub fn warn(&self, text: &str) {
        output::out(&format!("  ! {text}"));
    }

    pub fn fail(&self, text: &str) {
        output::out(&format!("  ✗ {text}"));
    }

    pub fn info(&self, text: &str) {
        output::out(&format!("    {text}"));
    }

    pub fn line(&self, text: &str) {
        output::out(text);
    }

    /// A yes/no question; without a terminal the default is the answer.
    pub fn confirm(&self, prompt: &str, default: bool) -> bool {
        if !self.interactive {
            return default;
        }
        dialoguer::Confirm::with_theme(&ColorfulTheme::default())
            .with_prompt(prompt)
            .default(default)
            .interact()
            .unwrap_or(default)
    }

    /// A line of text (`None`: no terminal, or the prompt was aborted).
    pub fn input(&self, prompt: &str) -> Option<String> {
        if !self.interactive {
            return None;
        }
        dialoguer::Input::<String>::with_theme(&ColorfulTheme::default())
            .with_prompt(prompt)
            .allow_empty(true)
            .interact_text()
            .ok()
            .map(|s| s.trim().to_owned())
    }

    /// A secret, not echoed.
    pub fn password(&self, prompt: &str) -> Option<String> {
        if !self.interactive {
            return None;
        }
        dialoguer::Password::with_theme(&ColorfulTheme::default())
            .with_prompt(prompt)
            .allow_empty_password(true)
            .interact()
            .ok()
            .map(|s| s.trim().to_owned())
    }

    /// Pick any of `items`; `defaults` says which start checked.
    pub fn multi_select(&self, prompt: &str, items: &[String], defaults: &[bool]) -> Vec<usize> {
        if !self.interactive {
            return (0..items.len()).filter(|&i| defaults[i]).collect();
        }
        dialoguer::MultiSelect::with_theme(&ColorfulTheme::default())
            .with_prompt(prompt)
            .items(items)
            .defaults(defaults)
            .interact()
            .unwrap_or_else(|_| (0..items.len()).filter(|&i| defaults[i]).collect())
    }

    /// A spinner on stderr, hidden when stderr is not a terminal.
    pub fn spinner(&self, message: &str) -> ProgressBar {
        let pb = if std::io::stderr().is_terminal() {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        if let Ok(style) = ProgressStyle::with_template("  {spinner} {msg} ({elapsed})") {
            pb.set_style(style);
        }
        pb.set_message(message.to_owned());
        pb.enable_steady_tick(Duration::from_millis(100));
        pb
    }
}
