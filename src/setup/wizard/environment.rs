//! Step 1: what this machine has. coogle's own stable path, and `uvx`, `node` and `npx` with
//! their versions; a missing program is a warning with the command that installs it, never a
//! failure (not every upstream needs them).

use std::path::PathBuf;
use std::time::Duration;

use super::super::ui::Ui;
use crate::installed::stable_exe;
use crate::process::run_bounded;
use crate::wire;

/// The programs upstreams commonly run, and how to get each.
const PROGRAMS: [(&str, &str); 3] = [
    (
        "uvx",
        "install uv (it provides uvx): `curl -LsSf https://astral.sh/uv/install.sh | sh` or `brew install uv`",
    ),
    (
        "node",
        "only needed for npm-based MCP servers: install Node.js (`brew install node`)",
    ),
    ("npx", "comes with Node.js"),
];

/// Show the environment; returns the path client entries will run.
pub(super) fn check(ui: &Ui) -> PathBuf {
    let stable = stable_exe();
    let exe = stable.path;
    if stable.homebrew_opt {
        ui.ok(&format!(
            "coogle {} at {} (Homebrew's stable opt link)",
            wire::VERSION,
            exe.display()
        ));
    } else {
        ui.ok(&format!("coogle {} at {}", wire::VERSION, exe.display()));
    }
    for (program, hint) in PROGRAMS {
        match which::which(program) {
            Ok(path) => {
                let version = run_bounded(&path, &["--version"], Duration::from_secs(15))
                    .ok()
                    .and_then(|v| v.lines().next().map(|l| bare_version(program, l)))
                    .unwrap_or_else(|| "version unknown".into());
                ui.ok(&format!("{program} {version} at {}", path.display()));
            }
            Err(_) => {
                ui.warn(&format!("{program} not found on PATH"));
                ui.info(&format!("hint: {hint}"));
            }
        }
    }
    ui.ok(&format!(
        "platform {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    exe
}

/// A `--version` line without the program's own name in front (`uvx 0.13.9` → `0.13.9`), so
/// the line reads "uvx 0.13.9", not "uvx uvx 0.13.9".
fn bare_version(program: &str, line: &str) -> String {
    let line = line.trim();
    line.strip_prefix(program)
        .filter(|rest| rest.starts_with(' '))
        .map_or(line, str::trim_start)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::bare_version;

    #[test]
    fn the_program_is_named_once() {
        assert_eq!(bare_version("uvx", "uvx 0.13.9"), "0.13.9");
        assert_eq!(bare_version("node", "v22.11.0"), "v22.11.0");
        assert_eq!(bare_version("npx", "10.9.0\n"), "10.9.0");
        assert_eq!(bare_version("uvx", "uvxtra 1"), "uvxtra 1");
    }
}
