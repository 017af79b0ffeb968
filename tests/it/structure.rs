//! The code's shape, checked on every run (docs/ARCHITECTURE.md, "Layers"): no cycle between
//! top-level modules, no `unsafe` outside src/os, no untyped JSON (`json!`, lookup by key) in
//! the control path between the CLI and the daemon, and the layer rules (nothing imports `cli`,
//! only `cli` imports `setup` and `update`, `os` imports nothing of coogle's, the shared layer
//! imports no mode). `scripts/module-deps` reads the imports; these tests run it on this
//! checkout, and on copies with each fault planted, so a checker that stopped seeing would fail
//! here too instead of passing everything.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `scripts/module-deps --check`, on `src` (this checkout's when None).
fn module_deps(src: Option<&Path>) -> Output {
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("scripts/module-deps")).arg("--check");
    if let Some(src) = src {
        cmd.arg("--src").arg(src);
    }
    cmd.output()
        .expect("python3 runs scripts/module-deps (CI has it: .ci/run uses it for pip)")
}

fn shown(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of src/ with `text` appended to the file at `rel`.
fn src_with(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let src = dir.join("src");
    copy_tree(&root().join("src"), &src);
    let file = src.join(rel);
    let mut code = fs::read_to_string(&file).unwrap();
    code.push_str(text);
    fs::write(&file, code).unwrap();
    src
}

#[test]
fn no_module_cycle_no_unsafe_outside_os_a_typed_control_path_and_the_layers_hold() {
    let out = module_deps(None);
    assert!(out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ok: no module cycle"),
        "{}",
        shown(&out)
    );
}

#[test]
fn a_cycle_between_top_level_modules_fails_the_check_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = src_with(
        dir.path(),
        "wire/status.rs",
        "\nfn _planted() {\n    let _ = crate::daemon::run;\n}\n",
    );
    let out = module_deps(Some(&src));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        stdout.contains("the shortest: daemon -> wire -> daemon"),
        "{}",
        shown(&out)
    );
    // Where: the planted line, so whoever broke it sees what to move.
    let line = fs::read_to_string(src.join("wire/status.rs"))
        .unwrap()
        .lines()
        .count()
        - 1;
    assert!(
        stdout.contains(&format!("wire -> daemon: src/wire/status.rs:{line}")),
        "{}",
        shown(&out)
    );
}

#[test]
fn unsafe_outside_os_fails_the_check_but_a_comment_or_string_does_not() {
    let dir = tempfile::tempdir().unwrap();
    // Prose and literals are not code: this much passes.
    let words = "\n// unsafe { crate::cli }\nconst _S: &str = \"unsafe crate::cli\";\n";
    let src = src_with(dir.path(), "shim/pump.rs", words);
    let out = module_deps(Some(&src));
    assert!(out.status.success(), "{}", shown(&out));

    let dir = tempfile::tempdir().unwrap();
    let src = src_with(
        dir.path(),
        "shim/pump.rs",
        "\nfn _planted(p: *const u8) -> u8 {\n    unsafe { *p }\n}\n",
    );
    let out = module_deps(Some(&src));
    let line = fs::read_to_string(src.join("shim/pump.rs"))
        .unwrap()
        .lines()
        .count()
        - 1;
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("`unsafe` outside src/os: src/shim/pump.rs:{line}")),
        "{}",
        shown(&out)
    );
}

#[test]
fn an_import_against_the_layers_fails_the_check_without_a_cycle() {
    // Neither makes a cycle (nothing under `update` reaches `daemon`, nothing under `client`
    // reaches `installed`): the layer rules, not the cycle check, must catch them.
    let dir = tempfile::tempdir().unwrap();
    let src = src_with(
        dir.path(),
        "daemon/stats.rs",
        "\nfn _planted() {\n    let _ = crate::update::run;\n}\n",
    );
    let installed = src.join("installed.rs");
    let mut code = fs::read_to_string(&installed).unwrap();
    code.push_str("\nuse crate::{client::Starter as _, paths as _};\n");
    fs::write(&installed, code).unwrap();
    let out = module_deps(Some(&src));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(!stdout.contains("a cycle"), "{}", shown(&out));
    for rule in [
        "only cli imports setup and update: daemon -> update at src/daemon/stats.rs:",
        "the shared layer imports no mode: installed -> client at src/installed.rs:",
    ] {
        assert!(stdout.contains(rule), "{rule}\n{}", shown(&out));
    }
}

#[test]
fn untyped_json_in_the_control_path_fails_the_check_but_its_unit_tests_may() {
    let dir = tempfile::tempdir().unwrap();
    // The daemon's answer built by hand, and the CLI reading one back by key: what issue 19
    // replaced with `wire::control`'s types.
    let src = src_with(
        dir.path(),
        "daemon/control.rs",
        "\nfn _planted() -> serde_json::Value {\n    serde_json::json!({\"pid\": 1})\n}\n",
    );
    let cli = src.join("cli/control.rs");
    let mut code = fs::read_to_string(&cli).unwrap();
    code.push_str("\nfn _planted(v: &serde_json::Value) -> bool {\n    v[\"pid\"].is_null()\n}\n");
    fs::write(&cli, code).unwrap();
    let out = module_deps(Some(&src));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    for hit in [
        "src/daemon/control.rs:",
        "(json!)",
        "src/cli/control.rs:",
        "([\"\"])",
    ] {
        assert!(stdout.contains(hit), "{hit}\n{}", shown(&out));
    }

    // wire/control.rs's unit tests build expected lines with json!, which is their job: this
    // checkout passes with them.
    let wire = fs::read_to_string(root().join("src/wire/control.rs")).unwrap();
    assert!(
        wire.contains("json!"),
        "the unit tests this relies on still use json!"
    );
    let out = module_deps(None);
    assert!(out.status.success(), "{}", shown(&out));
}

/// Every file under `dir`, as paths relative to `base`.
fn files_under(base: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn architecture_md_names_every_source_file_and_only_files_that_exist() {
    let doc = fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    files_under(&root().join("src"), &root().join("src"), &mut files);
    files.sort();
    let unnamed: Vec<&String> = files
        .iter()
        .filter(|f| !doc.contains(&format!("`{f}`")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "docs/ARCHITECTURE.md does not name these files under src/ (add each, as `path/from/src.rs`, \
         with the one thing it owns): {unnamed:?}"
    );
    // And nothing it names is gone: a `….rs` in backquotes is a file under src/ (or
    // src/daemon/, the journey's `upstream/…`), or a test's, unless it is a pattern (`NAME`).
    let roots = ["src", "src/daemon", "tests/it", "tests/it/support", "."];
    let mut gone = Vec::new();
    for quoted in doc.split('`').skip(1).step_by(2) {
        let is_path = quoted.ends_with(".rs")
            && !quoted.contains(char::is_whitespace)
            && !quoted.contains("NAME");
        if is_path && !roots.iter().any(|r| root().join(r).join(quoted).is_file()) {
            gone.push(quoted);
        }
    }
    assert!(
        gone.is_empty(),
        "docs/ARCHITECTURE.md names files that do not exist: {gone:?}"
    );
}
