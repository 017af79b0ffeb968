//! scripts/macho-check and scripts/macho-sign-adhoc, the inspection CI runs on the macOS
//! binaries it links from Linux (scripts/check-macos), against small real Mach-O executables
//! zig links here: a signed universal one passes, and each surprise fails with its own message —
//! a framework loaded, another minimum macOS, a missing architecture, a page changed after
//! signing, no signature, not a Mach-O file. The ad-hoc signer signs what zig leaves unsigned
//! (x86_64), in a way the inspection verifies page by page.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// zig (PyPI's `ziglang`) and an llvm-lipo, or None (a failure in CI, which installs both).
fn tools() -> Option<String> {
    let zig = Command::new("python3")
        .args(["-m", "ziglang", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let lipo = ["llvm-lipo-14", "llvm-lipo", "lipo"]
        .into_iter()
        .find(|l| on_path(l));
    if !zig || lipo.is_none() {
        assert!(
            !in_ci(),
            "zig ({zig}) or llvm-lipo ({lipo:?}) is missing but CI is set (.ci/run installs them)"
        );
        crate::support::skipped("needs `pip install ziglang` and llvm-lipo");
        return None;
    }
    lipo.map(str::to_owned)
}

/// Link `source` (C) for zig's `target` (`aarch64-macos.11.0`) into `out`, with `extra` inputs.
fn link(dir: &Path, target: &str, source: &str, extra: &[&str], out: &str) -> PathBuf {
    let c = dir.join(format!("{out}.c"));
    fs::write(&c, source).unwrap();
    let path = dir.join(out);
    let o = Command::new("python3")
        .args(["-m", "ziglang", "cc", "-target", target])
        .arg(&c)
        .args(extra)
        .arg("-o")
        .arg(&path)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path
}

fn check(args: &[&str], files: &[&Path]) -> (i32, String, String) {
    let o = Command::new("python3")
        .arg(root().join("scripts/macho-check"))
        .args(args)
        .args(files)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn sign(file: &Path) -> (i32, String, String) {
    let o = Command::new("python3")
        .arg(root().join("scripts/macho-sign-adhoc"))
        .args(["--identifier", "hello"])
        .arg(file)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const HELLO: &str = "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n";

/// What check-macos does: arm64 as zig signs it, x86_64 linked with room and signed here, lipo.
fn universal(dir: &Path, lipo: &str, minos: &str) -> PathBuf {
    let arm = link(dir, &format!("aarch64-macos.{minos}"), HELLO, &[], "arm");
    let x86 = link(
        dir,
        &format!("x86_64-macos.{minos}"),
        HELLO,
        &["-Wl,-headerpad_max_install_names"],
        "x86",
    );
    let (code, out, err) = sign(&x86);
    assert_eq!(code, 0, "{out}{err}");
    let uni = dir.join(format!("universal-{minos}"));
    let o = Command::new(lipo)
        .arg("-create")
        .arg("-output")
        .arg(&uni)
        .arg(&arm)
        .arg(&x86)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    uni
}

#[test]
fn a_signed_universal_executable_passes_and_says_what_it_found() {
    let Some(lipo) = tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let uni = universal(tmp.path(), &lipo, "11.0");
    let (code, out, err) = check(&[], &[&uni]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("universal (x86_64, arm64)"), "{out}");
    for arch in ["arm64", "x86_64"] {
        assert!(
            out.contains(&format!("{arch}: minos 11.0")),
            "{arch} in {out}"
        );
    }
    assert_eq!(
        out.matches("loads /usr/lib/libSystem.B.dylib; signature ad-hoc/linker-signed sha256")
            .count(),
        2,
        "{out}"
    );
    assert!(out.contains("identifier hello"), "{out}");
}

#[test]
fn each_surprise_fails_with_its_own_message() {
    let Some(lipo) = tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // A framework: linked against a stub of Security.framework, as a dependency that needs it
    // would be on a Mac.
    fs::write(
        dir.join("Security.tbd"),
        "--- !tapi-tbd\ntbd-version: 4\ntargets: [ x86_64-macos, arm64-macos ]\n\
         install-name: '/System/Library/Frameworks/Security.framework/Versions/A/Security'\n\
         exports:\n  - targets: [ x86_64-macos, arm64-macos ]\n    symbols: [ _SecRandomCopyBytes ]\n...\n",
    )
    .unwrap();
    let framework = link(
        dir,
        "aarch64-macos.11.0",
        "#include <stddef.h>\nextern int SecRandomCopyBytes(const void *, size_t, void *);\n\
         int main(void) { unsigned char b[4]; return SecRandomCopyBytes(NULL, 4, b); }\n",
        &["Security.tbd"],
        "framework",
    );
    let (code, out, err) = check(&["--archs", "arm64"], &[&framework]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("arm64: loads a framework not allowed here: /System/Library/Frameworks/Security.framework/Versions/A/Security (LC_LOAD_DYLIB)"),
        "{err}"
    );

    // Another minimum macOS than the one set on purpose.
    let newer = universal(dir, &lipo, "13.0");
    let (code, out, err) = check(&["--minos", "11.0"], &[&newer]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("arm64: minimum macOS 13.0, expected 11.0")
            && err.contains("x86_64: minimum macOS 13.0, expected 11.0"),
        "{err}"
    );

    // One architecture where two are expected.
    let arm = link(dir, "aarch64-macos.11.0", HELLO, &[], "arm-only");
    let (code, out, err) = check(&[], &[&arm]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("missing architecture x86_64"), "{err}");

    // A byte changed after signing (in the header's padding, so the file still parses).
    let tampered = dir.join("tampered");
    let mut bytes = fs::read(&arm).unwrap();
    let sizeofcmds = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
    bytes[32 + sizeofcmds + 8] ^= 0xff;
    fs::write(&tampered, &bytes).unwrap();
    let (code, out, err) = check(&["--archs", "arm64"], &[&tampered]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("arm64: 1 page(s) do not match the signature's hashes (page 0)"),
        "{err}"
    );

    // No signature: x86_64 as zig links it.
    let unsigned = link(dir, "x86_64-macos.11.0", HELLO, &[], "unsigned");
    let (code, out, err) = check(&["--archs", "x86_64"], &[&unsigned]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("x86_64: no code signature (LC_CODE_SIGNATURE)"),
        "{err}"
    );

    // Not Mach-O at all (a Linux build where a Mac one should be).
    let (code, out, err) = check(&[], &[Path::new(crate::support::COOGLE)]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("not a 64-bit Mach-O file"), "{err}");
}

#[test]
fn the_adhoc_signer_signs_what_zig_leaves_unsigned() {
    let Some(_) = tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let x86 = link(
        dir,
        "x86_64-macos.11.0",
        HELLO,
        &["-Wl,-headerpad_max_install_names"],
        "x86",
    );
    let (code, out, err) = sign(&x86);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("signed ad-hoc (hello,"), "{out}");
    let (code, out, err) = check(&["--archs", "x86_64"], &[&x86]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("signature ad-hoc/linker-signed sha256, identifier hello"),
        "{out}"
    );

    // Signed already: left as it is, byte for byte.
    let before = fs::read(&x86).unwrap();
    let (code, out, _) = sign(&x86);
    assert_eq!(code, 0);
    assert!(out.contains("already signed"), "{out}");
    assert_eq!(fs::read(&x86).unwrap(), before);

    // No room for the load command: a clear error, and the file untouched.
    let tight = link(dir, "x86_64-macos.11.0", HELLO, &[], "tight");
    let before = fs::read(&tight).unwrap();
    let (code, out, err) = sign(&tight);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("no room for LC_CODE_SIGNATURE after the load commands (link with -headerpad_max_install_names)"),
        "{err}"
    );
    assert_eq!(fs::read(&tight).unwrap(), before);
}
