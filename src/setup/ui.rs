//! What setup, doctor and uninstall show a person: step headers, ✓/✗ lines, spinners and the
//! dialoguer prompts. The installer commands' output goes to stdout through [`crate::output`]
//! (it is their result); prompts and spinners use stderr. `coogle mcp` never reaches this
//! module.
//!
//! Prompts only run when [`Ui::interactive`] is true, which needs a terminal on stdin and
//! stderr; everything else must take its answer from flags. Every prompt says its keys, marks
//! the current row with `❯` (not colour alone), and cancels the command on Esc or Ctrl-C with
//! the terminal given back ([`crate::terminal`]).

use std::io::IsTerminal;
use std::time::Duration;

use console::{Key, Term};
use dialoguer::theme::{ColorfulTheme, Theme as _};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{output, terminal};

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

    /// A yes/no question; without a terminal the default is the answer. Esc cancels setup.
    pub fn confirm(&self, prompt: &str, default: bool) -> bool {
        if !self.interactive {
            return default;
        }
        terminal::guard();
        match dialoguer::Confirm::with_theme(&Theme::default())
            .with_prompt(prompt)
            .default(default)
            .interact_opt()
        {
            Ok(Some(answer)) => answer,
            Ok(None) | Err(_) => terminal::cancel(),
        }
    }

    /// A line of text (`None`: no terminal). Esc cancels.
    pub fn input(&self, prompt: &str) -> Option<String> {
        self.interactive
            .then(|| read_line(prompt, false).trim().to_owned())
    }

    /// A secret, not echoed. Esc cancels.
    pub fn password(&self, prompt: &str) -> Option<String> {
        self.interactive
            .then(|| read_line(prompt, true).trim().to_owned())
    }

    /// Pick any of `items`; `defaults` says which start checked. Esc cancels.
    pub fn multi_select(&self, prompt: &str, items: &[String], defaults: &[bool]) -> Vec<usize> {
        if !self.interactive {
            return (0..items.len()).filter(|&i| defaults[i]).collect();
        }
        terminal::guard();
        match dialoguer::MultiSelect::with_theme(&Theme::default())
            .with_prompt(prompt)
            .items(items)
            .defaults(defaults)
            .interact_opt()
        {
            Ok(Some(picked)) => picked,
            // Esc, or a terminal that failed: never go on with answers nobody gave.
            Ok(None) | Err(_) => terminal::cancel(),
        }
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

/// The keys a list prompt takes, said under its question.
const LIST_KEYS: &str = "↑/↓ move · space toggles · a toggles all · enter confirms · esc cancels";
/// The keys a text prompt takes.
const TEXT_KEYS: &str = "enter confirms · esc cancels";

/// dialoguer's colourful theme, with the current row of a list marked by `❯` as well as by
/// colour (readable without colour, and by a screen reader) and the keys under each question.
#[derive(Default)]
struct Theme(ColorfulTheme);

impl dialoguer::theme::Theme for Theme {
    fn format_prompt(&self, f: &mut dyn std::fmt::Write, prompt: &str) -> std::fmt::Result {
        self.0.format_prompt(f, prompt)
    }

    fn format_error(&self, f: &mut dyn std::fmt::Write, err: &str) -> std::fmt::Result {
        self.0.format_error(f, err)
    }

    fn format_confirm_prompt(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        default: Option<bool>,
    ) -> std::fmt::Result {
        // `[Y/n]` says the keys; Esc is the one it does not say.
        self.0
            .format_confirm_prompt(f, &format!("{prompt} (esc cancels)"), default)
    }

    fn format_confirm_prompt_selection(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        selection: Option<bool>,
    ) -> std::fmt::Result {
        self.0.format_confirm_prompt_selection(f, prompt, selection)
    }

    fn format_input_prompt(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        default: Option<&str>,
    ) -> std::fmt::Result {
        self.0.format_input_prompt(f, prompt, default)
    }

    fn format_input_prompt_selection(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        sel: &str,
    ) -> std::fmt::Result {
        self.0.format_input_prompt_selection(f, prompt, sel)
    }

    fn format_password_prompt(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
    ) -> std::fmt::Result {
        self.0.format_password_prompt(f, prompt)
    }

    fn format_password_prompt_selection(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
    ) -> std::fmt::Result {
        self.0.format_password_prompt_selection(f, prompt)
    }

    fn format_multi_select_prompt(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
    ) -> std::fmt::Result {
        self.0.format_multi_select_prompt(f, prompt)?;
        write!(f, "\n  {}", self.0.hint_style.apply_to(LIST_KEYS))
    }

    fn format_multi_select_prompt_selection(
        &self,
        f: &mut dyn std::fmt::Write,
        prompt: &str,
        selections: &[&str],
    ) -> std::fmt::Result {
        self.0
            .format_multi_select_prompt_selection(f, prompt, selections)
    }

    fn format_multi_select_prompt_item(
        &self,
        f: &mut dyn std::fmt::Write,
        text: &str,
        checked: bool,
        active: bool,
    ) -> std::fmt::Result {
        let marker = if active {
            &self.0.active_item_prefix
        } else {
            &self.0.inactive_item_prefix
        };
        write!(f, "{marker} ")?;
        self.0
            .format_multi_select_prompt_item(f, text, checked, active)
    }
}

/// A line typed at the terminal (echoed, or not for a secret), with the theme's prompt and
/// its keys. Esc cancels the command; Ctrl-C too ([`terminal::guard`]). dialoguer's own text
/// prompts ignore Esc, hence this.
fn read_line(prompt: &str, secret: bool) -> String {
    terminal::guard();
    let term = Term::stderr();
    let theme = Theme::default();
    let mut shown = String::new();
    let question = format!("{prompt} ({TEXT_KEYS})");
    let _ = if secret {
        theme.format_password_prompt(&mut shown, &question)
    } else {
        theme.format_input_prompt(&mut shown, &question, None)
    };
    let _ = term.write_str(&shown);
    let _ = term.flush();
    let mut line = String::new();
    loop {
        let key = match term.read_key() {
            Ok(k) => k,
            Err(_) => terminal::cancel(),
        };
        match key {
            Key::Enter => break,
            Key::Escape => terminal::cancel(),
            Key::Backspace if !line.is_empty() => {
                line.pop();
                if !secret {
                    let _ = term.clear_chars(1);
                }
            }
            Key::Char(c) if !c.is_control() => {
                line.push(c);
                if !secret {
                    let _ = term.write_str(c.encode_utf8(&mut [0; 4]));
                }
            }
            _ => {}
        }
    }
    // The question again, answered (a secret by its mask only), in place of the typing.
    let _ = term.clear_line();
    let mut answered = String::new();
    let _ = if secret {
        theme.format_password_prompt_selection(&mut answered, prompt)
    } else {
        theme.format_input_prompt_selection(&mut answered, prompt, &line)
    };
    let _ = term.write_line(&answered);
    line
}
