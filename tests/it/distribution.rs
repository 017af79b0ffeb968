//! Distribution inputs, checked on Linux: every shell script passes shellcheck; the Homebrew
//! formula parses (`ruby -c`), has its `service` and `test` blocks, and every coogle command
//! and flag it uses exists; the macOS packaging script's `--dry-run` validates its inputs (and
//! fails on a broken distribution.xml, or one that asks another minimum macOS) and, from the
//! macOS binaries scripts/check-macos linked, assembles and checks the pkg's payload;
//! `scripts/release.sh` packs the Linux and macOS archives, whose checksums verify and agree with
//! the formula, whose install and test blocks work against them; completions and the man page.

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

/// `scripts/pgo` needs llvm-profdata of this rustc's own LLVM (a distribution's is seldom the
/// same version). Without it, it says once what to install, before building anything.
#[test]
fn the_pgo_build_says_what_it_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let sysroot = tmp.path().join("sysroot");
    fs::create_dir_all(&sysroot).unwrap();
    // A rustc whose sysroot has no llvm-tools; `cargo` fails loudly if the script reaches it.
    let fake = tmp.path().join("bin");
    fs::create_dir_all(&fake).unwrap();
    let write = |name: &str, text: &str| support::write_executable(&fake.join(name), text);
    write(
        "rustc",
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  -vV) echo 'host: x86_64-unknown-linux-gnu' ;;\n  --print) echo '{}' ;;\nesac\n",
            sysroot.display()
        ),
    );
    write("cargo", "#!/bin/sh\necho 'cargo was run' >&2\nexit 3\n");
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (code, out, err) = run(Command::new(root().join("scripts/pgo"))
        .env("PATH", &path)
        .args([
            "--target-dir",
            &tmp.path().join("pgo").display().to_string(),
        ]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(!err.contains("cargo was run"), "{err}");
    assert_eq!(
        err.matches("rustup component add llvm-tools").count(),
        1,
        "{err}"
    );
    assert!(err.contains("no llvm-profdata for this rustc"), "{err}");

    // `--check` says the same, and is what `release.sh --pgo` asks before building anything.
    let (code, _, check_err) = run(Command::new(root().join("scripts/pgo"))
        .env("PATH", &path)
        .arg("--check"));
    assert_eq!(code, 1, "{check_err}");
    assert!(
        check_err.contains("rustup component add llvm-tools"),
        "{check_err}"
    );
    let (code, out, err) = run(Command::new(root().join("scripts/release.sh"))
        .env("PATH", &path)
        .args(["--pgo", "--no-macos", "--out"])
        .arg(tmp.path().join("out"))
        .arg("--formula")
        .arg(tmp.path().join("coogle.rb")));
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("--pgo cannot run here"), "{err}");
    assert!(!err.contains("cargo was run"), "{err}");

    // Without a word, the host's Linux archive is the PGO build: a release stops here rather
    // than ship the plain one quietly, and says how to ask for it.
    let release = |flags: &[&str]| {
        let mut c = Command::new(root().join("scripts/release.sh"));
        c.env("PATH", &path)
            .args(flags)
            .args([
                "--no-macos",
                "--target",
                "x86_64-unknown-linux-gnu",
                "--out",
            ])
            .arg(tmp.path().join("out"))
            .arg("--formula")
            .arg(tmp.path().join("coogle.rb"));
        run(&mut c)
    };
    let (code, out, err) = release(&[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("built with profile-guided optimization by default")
            && err.contains("--no-pgo builds it plain"),
        "{err}"
    );
    assert_eq!(
        err.matches("rustup component add llvm-tools").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("cargo was run"), "{err}");
    // `--no-pgo` asks nothing of llvm-tools and goes on to build (here, the stand-in cargo).
    let (_, out, err) = release(&["--no-pgo"]);
    assert!(
        out.contains("building x86_64-unknown-linux-gnu\n") && err.contains("cargo was run"),
        "{out}{err}"
    );
    assert!(!err.contains("llvm-tools"), "{err}");
    // The macOS binaries are linked after the Linux builds: what that needs is asked first, so
    // a release without zig stops before building anything, saying how to leave them out.
    let (code, out, err) = run(Command::new(root().join("scripts/release.sh"))
        .env("PATH", &path)
        .env("PYTHON", "false")
        .args(["--no-pgo", "--target", "x86_64-unknown-linux-gnu", "--out"])
        .arg(tmp.path().join("out"))
        .arg("--formula")
        .arg(tmp.path().join("coogle.rb")));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("zig is not installed; pip install ziglang")
            && err.contains("--no-macos leaves them out"),
        "{err}"
    );
    assert!(!err.contains("cargo was run"), "{err}");

    // On a Mac nothing of the release can be profiled: `--pgo` is refused there, in one line.
    let mac = tmp.path().join("mac");
    fs::create_dir_all(&mac).unwrap();
    support::write_executable(
        &mac.join("rustc"),
        "#!/bin/sh\n[ \"$1\" = -vV ] && echo 'host: aarch64-apple-darwin'\n",
    );
    let (code, out, err) = run(Command::new(root().join("scripts/release.sh"))
        .env("PATH", format!("{}:{path}", mac.display()))
        .args(["--pgo", "--no-macos", "--out"])
        .arg(tmp.path().join("out"))
        .arg("--formula")
        .arg(tmp.path().join("coogle.rb")));
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        err.trim(),
        "error: --pgo profiles a Linux host's build; aarch64-apple-darwin's binaries are built plain",
        "{err}"
    );

    let (code, out, _) = run(Command::new(root().join("scripts/pgo")).arg("--help"));
    assert_eq!(code, 0);
    assert!(out.contains("profile-guided optimization"), "{out}");
    let (code, _, err) = run(Command::new(root().join("scripts/pgo")).arg("--nope"));
    assert_eq!(code, 1);
    assert!(err.contains("unknown option --nope"), "{err}");
}

/// `release.sh --pgo` applies to the host's Linux build made there; where it would be ignored
/// (an already-built `--binary`, the host not among the targets) it is refused, before anything
/// is built.
#[test]
fn release_pgo_is_refused_where_it_would_not_apply() {
    let tmp = tempfile::tempdir().unwrap();
    // A formula of its own: were a refusal missing, the release would rewrite it, not the
    // repository's.
    let formula = tmp.path().join("coogle.rb");
    fs::copy(root().join("homebrew/coogle.rb"), &formula).unwrap();
    let release = || {
        let mut c = Command::new(root().join("scripts/release.sh"));
        c.args(["--pgo", "--no-macos", "--out"])
            .arg(tmp.path().join("out"))
            .arg("--formula")
            .arg(&formula);
        c
    };
    let (code, out, err) = run(release().args(["--binary", support::COOGLE]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("--pgo builds the host's coogle, --binary packs one already built"),
        "{err}"
    );
    let other = match std::env::consts::ARCH {
        "x86_64" => "aarch64-unknown-linux-gnu",
        _ => "x86_64-unknown-linux-gnu",
    };
    let (code, out, err) = run(release().args(["--target", other]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("which is not among the targets"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, out, err) = run(release().arg("--no-pgo"));
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        err.trim(),
        "error: --pgo and --no-pgo contradict each other",
        "{err}"
    );
    assert!(
        !tmp.path()
            .join("out")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
    assert_eq!(
        fs::read_to_string(&formula).unwrap(),
        fs::read_to_string(root().join("homebrew/coogle.rb")).unwrap()
    );
}

/// rustup's llvm-tools for this rustc (llvm-profdata, llvm-objcopy), through the tests' one gate.
fn llvm_tools() -> Option<PathBuf> {
    let (_, vv, _) = run(Command::new("rustc").arg("-vV"));
    let host = vv.lines().find_map(|l| l.strip_prefix("host: ")).unwrap();
    let (_, sysroot, _) = run(Command::new("rustc").args(["--print", "sysroot"]));
    let tools = Path::new(sysroot.trim()).join(format!("lib/rustlib/{host}/bin"));
    support::prerequisite(
        tools.join("llvm-profdata").is_file(),
        "rustup's llvm-tools are not installed (rustup component add llvm-tools, as .ci/run does)",
    )
    .then_some(tools)
}

/// `scripts/pgo-map` gives a profile made by one build the names of another build of the same
/// code whose crates hash differently (as another target's do), and the compiler then finds a
/// profile for every function of it; the profile as made finds none. The two builds here differ
/// by `-Cmetadata`, which is what changes the hashes between targets.
#[test]
fn a_profile_is_mapped_onto_another_builds_names() {
    let Some(tools) = llvm_tools() else {
        return;
    };
    let map = || {
        let mut c = Command::new(root().join("scripts/pgo-map"));
        c.arg("--llvm-profdata")
            .arg(tools.join("llvm-profdata"))
            .arg("--llvm-objcopy")
            .arg(tools.join("llvm-objcopy"));
        c
    };
    let (code, _, err) = run(map().arg("--check"));
    if !support::prerequisite(code == 0, &format!("scripts/pgo-map --check: {err}")) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(
        dir.join("probe.rs"),
        "#[inline(never)]\nfn pick<T: Copy + PartialOrd>(a: T, b: T) -> T { if a > b { a } else { b } }\n\
         #[inline(never)]\nfn count(n: u64) -> u64 {\n    let mut s = 0;\n    for i in 0..n {\n        \
         if i % 3 == 0 { s += pick(i, s) } else { s += pick(i as u32, 1) as u64 }\n    }\n    s\n}\n\
         fn main() { println!(\"{}\", count(std::env::args().count() as u64 * 1000)); }\n",
    )
    .unwrap();
    // One source, built as "here" (run, to make the profile) and as "there" (not run).
    let rustc = |metadata: &str, flags: &[String], out: &str| {
        let (code, _, err) = run(Command::new("rustc")
            .current_dir(dir)
            .args([
                "-O",
                "-Csymbol-mangling-version=v0",
                "--crate-name",
                "probe",
            ])
            .arg(format!("-Cmetadata={metadata}"))
            .args(flags)
            .args(["probe.rs", "-o", out]));
        assert_eq!(code, 0, "{err}");
        err
    };
    // The instrumented binary `name` run once, its profile merged into `name.profdata`.
    let profile_of = |name: &str| {
        let (code, _, err) = run(Command::new(dir.join(name))
            .env("LLVM_PROFILE_FILE", dir.join(format!("{name}.profraw"))));
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = run(Command::new(tools.join("llvm-profdata"))
            .current_dir(dir)
            .args(["merge", "-o"])
            .arg(format!("{name}.profdata"))
            .arg(format!("{name}.profraw")));
        assert_eq!(code, 0, "{err}");
    };
    let generate = [format!("-Cprofile-generate={}", dir.join("raw").display())];
    rustc("here", &generate, "here");
    rustc("there", &generate, "there");
    profile_of("here");

    let (code, out, err) = run(map().current_dir(dir).args([
        "--crate",
        "probe",
        "here.profdata",
        "there",
        "there.profdata",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("functions mapped, 100.00% of the workload's counts (100.00% of probe's own)"),
        "{err}"
    );

    // Built as "there" with each profile, the compiler says which functions found none.
    let with = |profile: &str| {
        rustc(
            "there",
            &[
                format!("-Cprofile-use={}", dir.join(profile).display()),
                "-Cllvm-args=-pgo-warn-missing-function=true".to_owned(),
            ],
            "used",
        )
    };
    let unmapped = with("here.profdata");
    assert!(
        unmapped.contains("no profile data available for function")
            && unmapped.contains("5probe5count"),
        "the profile as made should fit none of the other build's functions: {unmapped}"
    );
    let mapped = with("there.profdata");
    assert!(
        !mapped.contains("no profile data") && !mapped.contains("hash mismatch"),
        "{mapped}"
    );
    // And each function has its own counts: the two instances of `pick`, of one shape, are
    // called 334 and 666 times, and must not trade them.
    let text = |profile: &str| {
        let (code, out, err) = run(Command::new(tools.join("llvm-profdata"))
            .current_dir(dir)
            .args(["merge", "--text", "-o", "-", profile]));
        assert_eq!(code, 0, "{err}");
        out
    };
    let counts = |text: &str, instance: &str| -> String {
        let record = text
            .split("\n\n")
            .find(|r| r.lines().next().is_some_and(|n| n.ends_with(instance)))
            .unwrap_or_else(|| panic!("no {instance} in {text}"))
            .to_owned();
        record
            .split("# Counter Values:\n")
            .nth(1)
            .unwrap()
            .to_owned()
    };
    let (here, there) = (text("here.profdata"), text("there.profdata"));
    for instance in ["5probe4pickmEB2_", "5probe4pickyEB2_"] {
        assert_eq!(
            counts(&here, instance),
            counts(&there, instance),
            "{instance}"
        );
    }
    assert_ne!(
        counts(&here, "5probe4pickmEB2_"),
        counts(&here, "5probe4pickyEB2_")
    );

    // What it cannot map, it refuses, saying why once: a binary with no names, a profile
    // mangled the legacy way (whose generic instances share one name).
    let (code, _, err) = run(map()
        .current_dir(dir)
        .args(["here.profdata", "probe.rs", "x"]));
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert!(err.contains("has no function names"), "{err}");
    let (code, _, err) = run(Command::new("rustc")
        .current_dir(dir)
        .args(["-O", "--crate-name", "probe", "probe.rs", "-o", "legacy"])
        .arg(format!(
            "-Cprofile-generate={}",
            dir.join("legacy-raw").display()
        )));
    assert_eq!(code, 0, "{err}");
    profile_of("legacy");
    let (code, _, err) = run(map()
        .current_dir(dir)
        .args(["legacy.profdata", "there", "x"]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not mangled v0"), "{err}");
    assert!(!dir.join("x").exists());
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
    let (code, stdout, stderr) =
        formula_test_block(&ruby, &root().join("homebrew/coogle.rb"), bin_dir);
    assert_eq!(code, 0, "{stdout}{stderr}");
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

/// The formula's `test do` block (and its `service do` block, printed) against the coogle in
/// `bin_dir`, bounded: exit code, stdout, stderr.
fn formula_test_block(ruby: &Path, formula: &Path, bin_dir: &Path) -> (i32, String, String) {
    let mut child = Command::new(ruby)
        .arg(root().join("tests/it/support/brew_formula_harness.rb"))
        .arg(formula)
        .arg("test")
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
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
    // The universal binaries: lipo on a Mac, scripts/check-macos (cargo-zigbuild) elsewhere.
    if cfg!(target_os = "macos") {
        assert!(out.contains("would run: lipo -create"), "{out}");
    } else {
        assert!(
            out.contains("scripts/check-macos --no-clippy --profile release"),
            "{out}"
        );
    }
    assert!(out.contains("would check: the payload"), "{out}");
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

    // A broken distribution.xml fails the dry run; so does one that asks for another minimum
    // macOS than the binaries are built for.
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("packaging/macos");
    copy_dir(&root().join("packaging/macos"), &copy);
    fs::copy(root().join("Cargo.toml"), tmp.path().join("Cargo.toml")).unwrap();
    fs::create_dir_all(tmp.path().join("scripts")).unwrap();
    fs::copy(
        root().join("scripts/check-macos"),
        tmp.path().join("scripts/check-macos"),
    )
    .unwrap();
    let good = fs::read_to_string(copy.join("distribution.xml")).unwrap();
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
    fs::write(
        copy.join("distribution.xml"),
        good.replace("<os-version min=\"11.0\"/>", "<os-version min=\"12.0\"/>"),
    )
    .unwrap();
    let (code, out, err) = run(Command::new("sh")
        .arg(copy.join("build-pkg.sh"))
        .arg("--dry-run"));
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("distribution.xml requires macOS 12.0, but the binaries are built for 11.0"),
        "{err}"
    );
}

/// The pkg's payload, assembled and checked from Linux (`build-pkg.sh --payload-only`) from the
/// universal binaries scripts/check-macos linked: exactly usr/local/bin/coogle and coogle-mcp,
/// mode 0755, each passing scripts/macho-check; it stops before the steps that need a Mac and
/// names them. A Linux binary in their place is refused by the inspection (Linux only: that is
/// this test build).
#[cfg(target_os = "linux")]
#[test]
fn the_pkg_payload_is_assembled_and_checked_without_a_mac() {
    let Some(macos) = macos_binaries() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let script = root().join("packaging/macos/build-pkg.sh");
    let (code, out, err) = run(Command::new("sh")
        .arg(&script)
        .arg("--payload-only")
        .arg("--from")
        .arg(&macos)
        .arg("--out")
        .arg(tmp.path().join("pkg"))
        .env_remove("COOGLE_SIGN_APP")
        .env_remove("COOGLE_SIGN_PEM"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("payload checked:"), "{out}");
    assert!(
        out.contains("stopped before the steps that need a Mac: pkgbuild, productbuild, productsign, notarytool, stapler"),
        "{out}"
    );
    let bin = tmp.path().join("pkg/stage/root/usr/local/bin");
    for b in ["coogle", "coogle-mcp"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(bin.join(b)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "{b}");
        assert_eq!(
            fs::read(bin.join(b)).unwrap(),
            fs::read(macos.join(b)).unwrap(),
            "{b} is not the universal binary it was given"
        );
    }
    assert!(out.contains("arm64: minos 11.0"), "{out}");
    assert!(out.contains("x86_64: minos 11.0"), "{out}");

    // A Linux build where the universal binaries should be: the inspection refuses it.
    let wrong = tmp.path().join("wrong");
    fs::create_dir_all(&wrong).unwrap();
    support::copy_executable(Path::new(support::COOGLE), &wrong.join("coogle"));
    support::copy_executable(&macos.join("coogle-mcp"), &wrong.join("coogle-mcp"));
    let (code, out, err) = run(Command::new("sh")
        .arg(&script)
        .arg("--payload-only")
        .arg("--from")
        .arg(&wrong)
        .arg("--out")
        .arg(tmp.path().join("pkg2"))
        .env_remove("COOGLE_SIGN_APP")
        .env_remove("COOGLE_SIGN_PEM"));
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("not a 64-bit Mach-O file"), "{err}");
    assert!(err.contains("did not pass scripts/macho-check"), "{err}");
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

/// The Developer ID signing path, tried with a throwaway self-signed identity made by rcodesign
/// (crates.io `apple-codesign`): `build-pkg.sh --payload-only` with `COOGLE_SIGN_PEM` signs both
/// payload binaries (hardened runtime, no timestamp for a test identity), `rcodesign verify`
/// accepts them, and scripts/macho-check finds the CMS signature and every page hash matching;
/// the universal binaries it was given are left as they were. Runs where rcodesign is installed
/// (it takes minutes to compile, so CI does not install it; README.md says how to run it).
#[cfg(target_os = "linux")]
#[test]
fn developer_id_signing_works_with_a_throwaway_identity() {
    let Some(macos) = macos_binaries() else {
        return;
    };
    let Some(rcodesign) = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("rcodesign"))
            .find(|p| p.is_file())
    }) else {
        support::skipped(
            "the signing path: rcodesign is not installed (cargo install apple-codesign)",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let id = tmp.path().join("identity");
    let (code, out, err) = run(Command::new(&rcodesign)
        .args([
            "generate-self-signed-certificate",
            "--person-name",
            "coogle test",
        ])
        .arg("--pem-filename")
        .arg(&id));
    assert_eq!(code, 0, "{out}{err}");
    let pem = tmp.path().join("identity.pem");
    let mut both = fs::read(id.with_extension("crt")).unwrap();
    both.extend(fs::read(id.with_extension("key")).unwrap());
    fs::write(&pem, both).unwrap();
    let before: Vec<Vec<u8>> = ["coogle", "coogle-mcp"]
        .iter()
        .map(|b| fs::read(macos.join(b)).unwrap())
        .collect();

    let (code, out, err) = run(Command::new("sh")
        .arg(root().join("packaging/macos/build-pkg.sh"))
        .arg("--payload-only")
        .arg("--from")
        .arg(&macos)
        .arg("--out")
        .arg(tmp.path().join("pkg"))
        .env_remove("COOGLE_SIGN_APP")
        .env("COOGLE_SIGN_PEM", &pem)
        .env("COOGLE_TIMESTAMP_URL", "none"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("payload checked:"), "{out}{err}");
    assert_eq!(
        out.matches("signature hardened runtime/CMS signature present sha256")
            .count(),
        4,
        "both slices of both binaries: {out}"
    );
    for (b, was) in ["coogle", "coogle-mcp"].iter().zip(&before) {
        assert_eq!(&fs::read(macos.join(b)).unwrap(), was, "{b} was changed");
        assert_ne!(
            &fs::read(tmp.path().join("pkg/stage/root/usr/local/bin").join(b)).unwrap(),
            was,
            "{b} was not signed"
        );
    }
}

/// The macOS universal binaries scripts/check-macos linked and inspected (`target/macos/release`,
/// or `COOGLE_TEST_MACOS_DIR`), for the release test to pack. None on a machine that has not run
/// it (the release is then checked without macOS); in CI it must be there (.ci/run runs
/// scripts/check-macos before the tests).
#[cfg(target_os = "linux")]
fn macos_binaries() -> Option<PathBuf> {
    let dir = std::env::var_os("COOGLE_TEST_MACOS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/macos/release"));
    let present = dir.join("coogle").is_file() && dir.join("coogle-mcp").is_file();
    assert!(
        present || std::env::var_os("CI").is_none_or(|v| v.is_empty()),
        "no macOS binaries in {} but CI is set (.ci/run runs scripts/check-macos first)",
        dir.display()
    );
    if !present {
        support::skipped(&format!(
            "the macOS archives: no universal binaries in {} (run scripts/check-macos)",
            dir.display()
        ));
    }
    present.then_some(dir)
}

/// The formula's archives, as Homebrew's DSL evaluates them (the harness's `archives`).
#[cfg(target_os = "linux")]
fn formula_archives(ruby: &Path, formula: &Path) -> (String, Vec<serde_json::Value>) {
    let (code, out, err) = run(Command::new(ruby)
        .arg(root().join("tests/it/support/brew_formula_harness.rb"))
        .arg(formula)
        .arg("archives"));
    assert_eq!(code, 0, "{out}{err}");
    let version = out
        .lines()
        .find_map(|l| l.strip_prefix("version "))
        .unwrap_or_default()
        .to_owned();
    let archives = out
        .lines()
        .filter_map(|l| l.strip_prefix("archive "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    (version, archives)
}

/// `scripts/release.sh` from this build (and, where scripts/check-macos has run, the macOS
/// universal binaries): every artifact is in SHA256SUMS and every sum verifies; each archive
/// has the layout the installers expect, its binaries run (the host's) or pass
/// scripts/macho-check (macOS: the universal archive both architectures, each slice its own);
/// the formula names exactly the archives Homebrew installs, each with its real url and sha256;
/// its install block, run inside each of those archives, installs the binaries, completions and
/// man page; and its test block passes against what it installed from the host's archive.
///
/// Linux only: it packs this test build as the host's Linux archive.
#[cfg(target_os = "linux")]
#[test]
fn release_artifacts_checksums_and_the_formula_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let formula = tmp.path().join("coogle.rb");
    fs::copy(root().join("homebrew/coogle.rb"), &formula).unwrap();
    let macos = macos_binaries();
    let mut cmd = Command::new("sh");
    cmd.arg(root().join("scripts/release.sh"))
        .arg("--out")
        .arg(&out_dir)
        .arg("--binary")
        .arg(support::COOGLE)
        .arg("--formula")
        .arg(&formula);
    match &macos {
        Some(dir) => cmd.arg("--macos-dir").arg(dir),
        None => cmd.arg("--no-macos"),
    };
    let (code, out, err) = run(&mut cmd);
    assert_eq!(code, 0, "{out}{err}");

    let version = env!("CARGO_PKG_VERSION");
    let host = support::fake_github::target();
    let mut archives = vec![host.clone()];
    if macos.is_some() {
        archives.extend(
            [
                "universal-apple-darwin",
                "aarch64-apple-darwin",
                "x86_64-apple-darwin",
            ]
            .map(str::to_owned),
        );
    }
    let name = |t: &str| format!("coogle-{version}-{t}");

    // SHA256SUMS lists every artifact, nothing else, and every sum verifies.
    let sums = fs::read_to_string(out_dir.join("SHA256SUMS")).unwrap();
    let mut listed: Vec<String> = sums.lines().map(|l| l[66..].to_owned()).collect();
    listed.sort();
    let mut expected: Vec<String> = archives
        .iter()
        .map(|t| format!("{}.tar.gz", name(t)))
        .collect();
    expected.push(format!("coogle-{version}.tar.gz"));
    expected.sort();
    assert_eq!(listed, expected, "{sums}");
    let mut on_disk: Vec<String> = fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "SHA256SUMS")
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, expected, "stray or missing artifacts");
    let mut check = if cfg!(target_os = "macos") {
        let mut c = Command::new("shasum");
        c.args(["-a", "256"]);
        c
    } else {
        Command::new("sha256sum")
    };
    let (code, checked, err) = run(check.arg("-c").arg("SHA256SUMS").current_dir(&out_dir));
    assert_eq!(code, 0, "{checked}{err}");
    assert_eq!(checked.matches(": OK").count(), expected.len(), "{checked}");
    let sum_of = |file: &str| {
        sums.lines()
            .find(|l| l.ends_with(&format!("  {file}")))
            .map(|l| l[..64].to_owned())
            .unwrap_or_else(|| panic!("{file} is not in SHA256SUMS"))
    };

    // Each archive's layout; the host's binaries run; the macOS ones pass the inspection.
    let unpacked = tmp.path().join("unpacked");
    fs::create_dir_all(&unpacked).unwrap();
    for t in &archives {
        let (code, _, err) = run(Command::new("tar")
            .arg("-xzf")
            .arg(out_dir.join(format!("{}.tar.gz", name(t))))
            .arg("-C")
            .arg(&unpacked));
        assert_eq!(code, 0, "{err}");
        let dir = unpacked.join(name(t));
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
            assert!(dir.join(f).is_file(), "{f} missing from the {t} archive");
        }
        for b in ["coogle", "coogle-mcp"] {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join(b)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o755, "{t}: {b} has mode {mode:o}");
        }
        if *t == host {
            let (code, v, _) = run(Command::new(dir.join("coogle")).arg("--version"));
            assert_eq!(code, 0);
            assert!(v.starts_with(&format!("coogle {version}")), "{v}");
            let (code, _, err) = run(Command::new("bash")
                .arg("-n")
                .arg(dir.join("completions/coogle.bash")));
            assert_eq!(code, 0, "{err}");
        } else {
            let archs = match t.as_str() {
                "universal-apple-darwin" => "arm64,x86_64",
                "aarch64-apple-darwin" => "arm64",
                _ => "x86_64",
            };
            let (code, report, err) = run(Command::new("python3")
                .arg(root().join("scripts/macho-check"))
                .args(["--archs", archs])
                .arg(dir.join("coogle"))
                .arg(dir.join("coogle-mcp")));
            assert_eq!(code, 0, "{t}: {report}{err}");
        }
    }

    // The formula: parses, names exactly the archives Homebrew installs, each url and sha256
    // real; the install block lays each out; the test block passes on the installed host build.
    let Some(ruby) = required("ruby") else {
        return;
    };
    let (code, o, e) = run(Command::new(&ruby).arg("-c").arg(&formula));
    assert_eq!(code, 0, "{o}{e}");
    let (formula_version, entries) = formula_archives(&ruby, &formula);
    assert_eq!(formula_version, version);
    let mut want = vec![(
        "linux".to_owned(),
        Some(
            if host.starts_with("x86_64") {
                "x86_64"
            } else {
                "arm64"
            }
            .to_owned(),
        ),
        host.clone(),
    )];
    if macos.is_some() {
        want.push((
            "macos".to_owned(),
            None,
            "universal-apple-darwin".to_owned(),
        ));
    }
    assert_eq!(entries.len(), want.len(), "{entries:?}");
    for (os, arch, t) in &want {
        let file = format!("{}.tar.gz", name(t));
        let entry = entries
            .iter()
            .find(|e| e["os"] == os.as_str() && e["arch"].as_str() == arch.as_deref())
            .unwrap_or_else(|| panic!("the formula has no {os} {arch:?} archive: {entries:?}"));
        assert_eq!(
            entry["url"],
            format!("https://github.com/coogle-dev/coogle/releases/download/v{version}/{file}"),
            "{entry}"
        );
        assert_eq!(entry["sha256"], sum_of(&file), "{entry}");

        let prefix = tmp.path().join(format!("prefix-{t}"));
        let (code, installed, err) = run(Command::new(&ruby)
            .arg(root().join("tests/it/support/brew_formula_harness.rb"))
            .arg(&formula)
            .arg("install")
            .arg(unpacked.join(name(t)))
            .arg(&prefix));
        assert_eq!(code, 0, "{t}: {installed}{err}");
        let mut got: Vec<&str> = installed
            .lines()
            .filter_map(|l| l.strip_prefix("installed "))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                "bin/coogle 755",
                "bin/coogle-mcp 755",
                "etc/bash_completion.d/coogle 644",
                "share/fish/vendor_completions.d/coogle.fish 644",
                "share/man/man1/coogle.1 644",
                "share/zsh/site-functions/_coogle 644",
            ],
            "{t}: {installed}"
        );
        if *t == host {
            let (code, o, e) = formula_test_block(&ruby, &formula, &prefix.join("bin"));
            assert_eq!(code, 0, "{o}{e}");
            assert!(o.contains("test block passed"), "{o}{e}");
        }
    }
}

/// `coogle --version` names the git revision it was built from (this checkout's HEAD).
#[test]
fn version_names_the_git_revision() {
    let (code, version, _) = run(Command::new(support::COOGLE).arg("--version"));
    assert_eq!(code, 0);
    assert!(version.starts_with("coogle 0.1.0"), "{version}");
    // The tests' build is the plain one: only a build given a profile says `pgo` (build.rs).
    assert!(!version.contains("pgo"), "{version}");
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

/// The pkg's postinstall (run here with stand-ins for macOS's `stat`, `id`, `launchctl` and
/// `sudo`): the console user's daemon is upgraded in place, as that user; only when that fails
/// is the LaunchAgent restarted.
#[test]
fn the_postinstall_upgrades_the_users_daemon_in_place_first() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let calls = dir.path().join("calls.log");
    let stub = |name: &str, body: &str| {
        let p = bin.join(name);
        support::write_executable(
            &p,
            format!(
                "#!/bin/sh\necho \"{name} $*\" >> '{}'\n{body}\n",
                calls.display()
            ),
        );
    };
    stub("stat", "echo alice");
    stub("id", "echo 501");
    stub(
        "launchctl",
        "case \"$1\" in asuser) shift 2; exec \"$@\" ;; print) exit 0 ;; esac; exit 0",
    );
    stub("sudo", "shift 3; exec \"$@\"");
    for (coogle_exit, kickstarted) in [(0, false), (1, true)] {
        let _ = fs::remove_file(&calls);
        stub("coogle", &format!("exit {coogle_exit}"));
        let out = Command::new("sh")
            .arg(root().join("packaging/macos/scripts/postinstall"))
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("COOGLE_PKG_BIN", bin.join("coogle"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let log = fs::read_to_string(&calls).unwrap();
        assert!(
            log.contains("sudo -u alice -H") && log.contains("coogle restart --daemon"),
            "{log}"
        );
        assert_eq!(
            log.contains("launchctl kickstart -k gui/501/dev.coogle.daemon"),
            kickstarted,
            "coogle exited {coogle_exit}:\n{log}"
        );
    }
}

/// `brew upgrade` upgrades the running daemon in place (`post_install`), never fatally.
#[test]
fn the_formula_upgrades_the_daemon_in_place_after_install() {
    let formula = fs::read_to_string(root().join("homebrew/coogle.rb")).unwrap();
    let post = formula
        .split("def post_install")
        .nth(1)
        .and_then(|rest| rest.split("\n  end").next())
        .expect("the formula has a post_install");
    assert!(
        post.contains(r#"quiet_system opt_bin/"coogle", "restart", "--daemon""#),
        "{post}"
    );
}
