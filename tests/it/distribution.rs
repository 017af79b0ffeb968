//! Distribution inputs, checked on Linux: every shell script passes shellcheck; the Homebrew
//! formula parses (`ruby -c`), has its `service` and `test` blocks, and every coogle command
//! and flag it uses exists; the macOS packaging script's `--dry-run` validates its inputs (and
//! fails on a broken distribution.xml); `scripts/release.sh` packs an archive whose checksums
//! verify and points the formula at the source tarball; completions and the man page.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A tool these checks need, through the tests' one gate: skipped with a message on a
/// developer's machine without it, a failure where every test must run (.ci/run installs both).
fn required(program: &str) -> Option<PathBuf> {
    support::require_program(program)
}

fn shell_scripts() -> Vec<PathBuf> {
    let mut v = vec![
        root().join(".ci/run"),
        root().join("packaging/macos/build-pkg.sh"),
        root().join("packaging/macos/scripts/postinstall"),
    ];
    // `*.sh`, and the extensionless helpers (zig-cc, check-macos) by their shebang.
    for e in fs::read_dir(root().join("scripts")).unwrap().flatten() {
        let p = e.path();
        let shebang = fs::read_to_string(&p)
            .is_ok_and(|t| t.starts_with("#!/bin/sh") || t.starts_with("#!/usr/bin/env bash"));
        if p.extension().is_some_and(|x| x == "sh") || (p.extension().is_none() && shebang) {
            v.push(p);
        }
    }
    v
}

#[test]
fn every_script_passes_shellcheck() {
    let Some(shellcheck) = required("shellcheck") else {
        return;
    };
    let scripts = shell_scripts();
    assert!(scripts.len() >= 8, "{scripts:?}");
    let (code, out, err) = run(Command::new(shellcheck).args(&scripts));
    assert_eq!(code, 0, "shellcheck:\n{out}{err}");
}

#[test]
fn the_formula_parses_and_matches_the_cli() {
    let formula = fs::read_to_string(root().join("homebrew/coogle.rb")).unwrap();
    if let Some(ruby) = required("ruby") {
        let (code, out, err) = run(Command::new(ruby)
            .arg("-c")
            .arg(root().join("homebrew/coogle.rb")));
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("Syntax OK"), "{out}");
    }
    for needle in [
        "depends_on \"rust\" => :build",
        "system \"cargo\", \"install\", *std_cargo_args",
        "generate_completions_from_executable(bin/\"coogle\", \"completions\")",
        "man1/\"coogle.1\"",
        "service do",
        "run [opt_bin/\"coogle\", \"serve\"]",
        "keep_alive successful_exit: false",
        "log_path var/\"log/coogle.log\"",
        "test do",
        "coogle setup",
    ] {
        assert!(formula.contains(needle), "the formula lacks {needle:?}");
    }
    // Every `coogle <command> ... --flag` the formula runs exists in this CLI.
    let mut checked = 0;
    for line in formula.lines().filter(|l| !l.trim_start().starts_with('{')) {
        let words: Vec<String> = line
            .split(|c: char| {
                c.is_whitespace()
                    || c == ','
                    || c == '"'
                    || c == '('
                    || c == ')'
                    || c == '['
                    || c == ']'
            })
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        let Some(at) = words
            .iter()
            .position(|w| w.ends_with("/coogle") || w.ends_with("bin/"))
        else {
            continue;
        };
        let rest: Vec<&String> = words[at + 1..]
            .iter()
            .skip_while(|w| *w == "coogle")
            .collect();
        let Some(sub) = rest
            .iter()
            .find(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-'))
        else {
            continue;
        };
        let help = run(Command::new(support::COOGLE).args([sub.as_str(), "--help"]));
        assert_eq!(
            help.0, 0,
            "`coogle {sub}` (formula line {line:?}) is not a command: {}",
            help.2
        );
        for flag in rest.iter().filter(|w| w.starts_with("--")) {
            let flag = flag.split('=').next().unwrap();
            if flag == "--version" {
                continue;
            }
            assert!(
                help.1.contains(flag),
                "`coogle {sub}` has no {flag} (formula line {line:?})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} flags found in the formula");
}

/// The formula's own `test do` block, run against this build with Homebrew's few helpers
/// stood in (tests/it/support/brew_formula_harness.rb): the version, a daemon on a temporary
/// socket with a trivial upstream, `coogle status` and `coogle tools`. And its `service do`
/// block runs `coogle serve` from the stable opt path, restarted only after a failure, logging
/// under var/log.
#[test]
fn the_formula_test_and_service_blocks_work_against_this_build() {
    let Some(ruby) = required("ruby") else {
        return;
    };
    let bin_dir = Path::new(support::COOGLE).parent().unwrap();
    let mut child = Command::new(ruby)
        .arg(root().join("tests/it/support/brew_formula_harness.rb"))
        .arg(root().join("homebrew/coogle.rb"))
        .arg(bin_dir)
        .arg(env!("CARGO_PKG_VERSION"))
        .env_remove("COOGLE_SOCKET")
        .env_remove("COOGLE_CONFIG")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("test block passed"), "{stdout}{stderr}");
    let service: serde_json::Value = serde_json::from_str(
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("service "))
            .expect("the service settings"),
    )
    .unwrap();
    assert_eq!(
        service["run"],
        serde_json::json!([bin_dir.join("coogle"), "serve"])
    );
    assert_eq!(
        service["keep_alive"],
        serde_json::json!({"successful_exit": false})
    );
    for log in ["log_path", "error_log_path"] {
        assert!(
            service[log]
                .as_str()
                .is_some_and(|p| p.ends_with("/var/log/coogle.log")),
            "{service}"
        );
    }
}

#[test]
fn the_pkg_script_dry_run_validates_its_inputs() {
    let script = root().join("packaging/macos/build-pkg.sh");
    let (code, out, err) = run(Command::new("sh")
        .arg(&script)
        .arg("--dry-run")
        .env_remove("COOGLE_SIGN_APP")
        .env_remove("COOGLE_SIGN_INSTALLER"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("inputs valid"), "{out}");
    assert!(out.contains("UNSIGNED"), "{out}");
    assert!(out.contains("would run: lipo -create"), "{out}");
    assert!(out.contains("--identifier dev.coogle.pkg"), "{out}");

    // With identities: hardened runtime, timestamps, installer signature, notarization, staple.
    let (code, out, err) = run(Command::new("sh")
        .arg(&script)
        .args(["--dry-run", "--version", "1.2.3"])
        .env("COOGLE_SIGN_APP", "Developer ID Application: Test (TEAM)")
        .env(
            "COOGLE_SIGN_INSTALLER",
            "Developer ID Installer: Test (TEAM)",
        )
        .env("COOGLE_NOTARY_PROFILE", "coogle-notary"));
    assert_eq!(code, 0, "{out}{err}");
    for needle in [
        "codesign --force --options runtime --timestamp --sign Developer ID Application: Test (TEAM)",
        "productsign --timestamp --sign Developer ID Installer: Test (TEAM)",
        "xcrun notarytool submit",
        "--keychain-profile coogle-notary --wait",
        "xcrun stapler staple",
        "coogle-1.2.3.pkg",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }

    // A broken distribution.xml fails the dry run.
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("packaging/macos");
    copy_dir(&root().join("packaging/macos"), &copy);
    fs::copy(root().join("Cargo.toml"), tmp.path().join("Cargo.toml")).unwrap();
    fs::write(
        copy.join("distribution.xml"),
        "<installer-gui-script><title>x</installer-gui-script>",
    )
    .unwrap();
    let (code, out, err) = run(Command::new("sh")
        .arg(copy.join("build-pkg.sh"))
        .arg("--dry-run"));
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("not well-formed"), "{err}");
}

#[test]
fn the_postinstall_never_runs_setup_as_root() {
    let text = fs::read_to_string(root().join("packaging/macos/scripts/postinstall")).unwrap();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with("echo") {
            continue;
        }
        assert!(
            !line.contains("coogle setup"),
            "postinstall runs setup: {line}"
        );
    }
    assert!(
        text.contains("coogle setup"),
        "it tells the user to run coogle setup"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn release_script_packs_verifiable_artifacts_and_updates_the_formula() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let formula = tmp.path().join("coogle.rb");
    fs::copy(root().join("homebrew/coogle.rb"), &formula).unwrap();
    let (code, out, err) = run(Command::new("sh")
        .arg(root().join("scripts/release.sh"))
        .arg("--out")
        .arg(&out_dir)
        .arg("--binary")
        .arg(support::COOGLE)
        .arg("--formula")
        .arg(&formula));
    assert_eq!(code, 0, "{out}{err}");
    let host = support::fake_github::target();
    let name = format!("coogle-0.1.0-{host}");
    assert!(out_dir.join(format!("{name}.tar.gz")).is_file(), "{out}");
    // Every checksum verifies (macOS has `shasum -a 256`, not coreutils' sha256sum).
    let mut check = if cfg!(target_os = "macos") {
        let mut c = Command::new("shasum");
        c.args(["-a", "256"]);
        c
    } else {
        Command::new("sha256sum")
    };
    let (code, sums, err) = run(check.arg("-c").arg("SHA256SUMS").current_dir(&out_dir));
    assert_eq!(code, 0, "{sums}{err}");
    assert!(
        sums.contains(&format!("{name}.tar.gz: OK")) && sums.contains("coogle-0.1.0.tar.gz: OK"),
        "{sums}"
    );
    // The archive's layout: the binaries (coogle runs), docs, completions, man page.
    let unpacked = tmp.path().join("unpacked");
    fs::create_dir_all(&unpacked).unwrap();
    let (code, _, err) = run(Command::new("tar")
        .arg("-xzf")
        .arg(out_dir.join(format!("{name}.tar.gz")))
        .arg("-C")
        .arg(&unpacked));
    assert_eq!(code, 0, "{err}");
    let dir = unpacked.join(&name);
    for f in [
        "coogle",
        "coogle-mcp",
        "README.md",
        "LICENSE",
        "coogle.1",
        "completions/coogle.bash",
        "completions/coogle.zsh",
        "completions/coogle.fish",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing from the archive");
    }
    let (code, version, _) = run(Command::new(dir.join("coogle")).arg("--version"));
    assert_eq!(code, 0);
    assert!(version.starts_with("coogle 0.1.0"), "{version}");
    let (code, _, err) = run(Command::new("bash")
        .arg("-n")
        .arg(dir.join("completions/coogle.bash")));
    assert_eq!(code, 0, "{err}");
    let bash = fs::read_to_string(dir.join("completions/coogle.bash")).unwrap();
    assert!(
        bash.contains("self-update") && bash.contains("search-server"),
        "subcommands missing"
    );
    // The formula now names the source tarball and its checksum.
    let rb = fs::read_to_string(&formula).unwrap();
    let src_line = sums.lines().next().unwrap_or_default();
    let all = fs::read_to_string(out_dir.join("SHA256SUMS")).unwrap();
    let src_sha = all
        .lines()
        .find(|l| l.ends_with("  coogle-0.1.0.tar.gz"))
        .unwrap()[..64]
        .to_owned();
    assert!(rb.contains("  url \"https://github.com/coogle-dev/coogle/releases/download/v0.1.0/coogle-0.1.0.tar.gz\""), "{rb}");
    assert!(
        rb.contains(&format!("  sha256 \"{src_sha}\"")),
        "{rb}\n{src_line}"
    );
    if let Some(ruby) = required("ruby") {
        let (code, out, err) = run(Command::new(ruby).arg("-c").arg(&formula));
        assert_eq!(code, 0, "{out}{err}");
    }
}

/// `coogle --version` names the git revision it was built from (this checkout's HEAD).
#[test]
fn version_names_the_git_revision() {
    let (code, version, _) = run(Command::new(support::COOGLE).arg("--version"));
    assert_eq!(code, 0);
    assert!(version.starts_with("coogle 0.1.0"), "{version}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .current_dir(root())
        .output();
    match head {
        Ok(h) if h.status.success() => {
            let rev = String::from_utf8_lossy(&h.stdout).trim().to_owned();
            assert!(
                version.contains(&format!("({rev}")),
                "{version} lacks {rev}"
            );
        }
        _ => assert_eq!(
            version.trim(),
            "coogle 0.1.0",
            "no git here, so no revision"
        ),
    }
}

/// `coogle completions <shell>` for each shell clap_complete knows names the real subcommands
/// and global flags; bash accepts the bash script (`bash -n`); `--man` is a roff page; an
/// unknown shell is a usage error.
#[test]
fn completions_for_every_shell_and_the_man_page() {
    let tmp = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F _coogle"),
        ("zsh", "#compdef coogle"),
        ("fish", "complete -c coogle"),
        ("elvish", "edit:completion:arg-completer[coogle]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let (code, out, err) = run(Command::new(support::COOGLE).args(["completions", shell]));
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains(marker), "{shell} lacks {marker:?}");
        for word in [
            "serve",
            "mcp",
            "status",
            "self-update",
            "completions",
            "search-server",
            // The global flags (fish spells them `-l socket`).
            "socket",
            "config",
        ] {
            assert!(out.contains(word), "{shell} completion lacks {word}");
        }
        if shell == "bash" {
            let file = tmp.path().join("coogle.bash");
            fs::write(&file, &out).unwrap();
            let (code, _, err) = run(Command::new("bash").arg("-n").arg(&file));
            assert_eq!(code, 0, "bash -n: {err}");
        }
    }
    let (code, man, err) = run(Command::new(support::COOGLE).args(["completions", "--man"]));
    assert_eq!(code, 0, "{err}");
    assert!(man.contains(".TH coogle 1"), "{man}");
    assert!(man.contains("self\\-update"), "{man}");
    let (code, _, err) = run(Command::new(support::COOGLE).args(["completions", "tcsh"]));
    assert_eq!(code, 2, "{err}");
}
