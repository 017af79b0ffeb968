//! What the flags cargo compiles coogle with say about the build. build.rs includes this file
//! (`#[path]`) to mark a build made with profile-guided optimization in `--version`; the library
//! includes it only for its tests.

/// Whether `CARGO_ENCODED_RUSTFLAGS` (the flags cargo gives rustc, separated by 0x1f) give
/// rustc a profile to optimize with: `-Cprofile-use=…`, or `-C` then `profile-use=…`
/// (`scripts/pgo` passes the first). A profile that only collects (`-Cprofile-generate`, the
/// instrumented build) is not one.
pub fn given_profile(encoded: &str) -> bool {
    let flags: Vec<&str> = encoded.split('\x1f').collect();
    flags.iter().enumerate().any(|(i, f)| {
        f.starts_with("-Cprofile-use=")
            || (i > 0 && flags[i - 1] == "-C" && f.starts_with("profile-use="))
    })
}

#[cfg(test)]
mod tests {
    use super::given_profile;

    #[test]
    fn a_profile_to_use_is_found_spelled_either_way() {
        let sep = "\x1f";
        // What scripts/pgo's second build gets: the project's flags, then its own.
        let pgo = [
            "-C",
            "link-arg=-Wl,-z,pack-relative-relocs",
            "-Cprofile-use=/x/coogle.profdata",
            "-Cllvm-args=-pgo-warn-missing-function=false",
        ]
        .join(sep);
        assert!(given_profile(&pgo));
        assert!(given_profile(
            &["-C", "profile-use=/x/p.profdata"].join(sep)
        ));
        // The plain build, the instrumented one, and names that only look alike.
        for plain in [
            String::new(),
            ["-C", "link-arg=-Wl,-z,pack-relative-relocs"].join(sep),
            "-Cprofile-generate=/tmp/raw".to_owned(),
            ["-C", "profile-generate=/tmp/raw"].join(sep),
            ["-Cllvm-args=-Cprofile-use=x"].join(sep),
            ["-Z", "profile-use=x"].join(sep),
            "profile-use=x".to_owned(),
        ] {
            assert!(!given_profile(&plain), "{plain:?}");
        }
    }
}
