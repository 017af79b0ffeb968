#!/bin/sh
# Build coogle's release artifacts into DIR (default target/release-artifacts), from Linux or a
# Mac:
#   coogle-<version>-<linux target>.tar.gz     for each Linux target this machine can build
#                                              (the host always; others whose rustup target is
#                                              installed and whose build succeeds)
#   coogle-<version>-universal-apple-darwin.tar.gz
#                                              the macOS universal binaries (arm64 + x86_64),
#                                              what the Homebrew formula and the pkg install
#   coogle-<version>-aarch64-apple-darwin.tar.gz, coogle-<version>-x86_64-apple-darwin.tar.gz
#                                              each architecture's slice of the same binaries,
#                                              what scripts/install.sh and `coogle self-update`
#                                              fetch (they pick by `uname -m`)
#   coogle-<version>.tar.gz                    the source tarball (git archive of the tag, or HEAD)
#   SHA256SUMS                                 of all of the above
# Each archive holds coogle-<version>-<target>/{coogle,coogle-mcp,README.md,LICENSE,
# completions/,coogle.1} (completions and man page from the host's build, the same everywhere).
# A Linux glibc archive's coogle-mcp is linked static (scripts/static-shim) when this script builds
# it; with --binary, the coogle-mcp beside that binary is packed as it is.
# Then the formula's archive section (between its `# >>> archives` and `# <<< archives` lines)
# is rewritten with the version and each archive's url and sha256.
#
#   scripts/release.sh [--out DIR] [--target TRIPLE]... [--binary PATH] [--macos-dir DIR]
#                      [--no-macos] [--pgo | --no-pgo] [--formula FILE] [--url-base URL]
#
# --binary     packs an already-built host binary (and the coogle-mcp beside it) instead of
#              building (CI reuses its build; scripts/static-shim links the shim it should ship)
# --macos-dir  packs the universal coogle and coogle-mcp in DIR (scripts/check-macos's output)
#              instead of linking them; they are inspected again either way (scripts/macho-check)
# --no-macos   leaves macOS out (a Linux-only release: the formula then has no macOS archive)
# --pgo        insists on the default below, and is refused where it cannot apply (--binary, the
#              host not among the targets, a Mac)
# --no-pgo     builds every coogle plain (as `cargo install` does)
#
# By default the host's Linux coogle, when built here (not --binary), is built with
# profile-guided optimization (scripts/pgo, which runs the daemon's calls on this machine to make
# the profile): its calls cost less (docs/PERFORMANCE.md). The other targets built here (the
# other Linux architecture, the macOS binaries), whose daemon cannot run here, are built with
# the same profile mapped onto their own builds (scripts/pgo --target). That needs rustup's
# llvm-tools, and llvm-cxxfilt (Debian's llvm) for the other targets; without them the release
# stops before building anything and says so, rather than ship a slower build quietly. Where the
# host's coogle is not built here (--binary, the host not among the targets, a Mac), there is no
# profile, and every coogle is built plain; --macos-dir's binaries are packed as they are.
#
# The macOS binaries are linked here, from Linux too, by scripts/check-macos (cargo-zigbuild;
# see it for what it needs). What only a Mac can do (a Developer ID signature, the pkg,
# notarizing) is packaging/macos/build-pkg.sh's, on the binaries this script packs.
set -eu

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/target/release-artifacts"
formula="$root/homebrew/coogle.rb"
url_base="https://github.com/coogle-dev/coogle/releases/download"
binary=""
targets=""
macos_dir=""
macos=1
pgo=auto

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        --target) [ $# -ge 2 ] || die "--target needs a value"; targets="$targets $2"; shift 2 ;;
        --binary) [ $# -ge 2 ] || die "--binary needs a value"; binary="$2"; shift 2 ;;
        --macos-dir) [ $# -ge 2 ] || die "--macos-dir needs a value"; macos_dir="$2"; shift 2 ;;
        --no-macos) macos=0; shift ;;
        --pgo) [ "$pgo" != 0 ] || die "--pgo and --no-pgo contradict each other"; pgo=1; shift ;;
        --no-pgo) [ "$pgo" != 1 ] || die "--pgo and --no-pgo contradict each other"; pgo=0; shift ;;
        --formula) [ $# -ge 2 ] || die "--formula needs a value"; formula="$2"; shift 2 ;;
        --url-base) [ $# -ge 2 ] || die "--url-base needs a value"; url_base="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^set -eu$/ { exit } NR > 1' "$0"; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
done
[ "$macos" -eq 1 ] || [ -z "$macos_dir" ] || die "--macos-dir and --no-macos contradict each other"

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
[ -n "$version" ] || die "no version in Cargo.toml"
host="$(rustc -vV | sed -n 's/^host: //p')"
[ -n "$host" ] || die "rustc -vV did not name the host target"
case "$host" in
    *-apple-darwin) ;;
    *-linux-*) ;;
    *) die "no release is built on $host" ;;
esac
for t in $targets; do
    case "$t" in
        *-unknown-linux-gnu) ;;
        *-apple-darwin) die "--target $t: macOS is packed as a universal binary; drop --target for it (or pass --no-macos)" ;;
        *) die "--target $t: not a target coogle releases" ;;
    esac
done
if [ -z "$targets" ]; then
    case "$host" in *-linux-*) targets="$host" ;; esac
    for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu; do
        [ "$t" = "$host" ] && continue
        if rustup target list --installed 2>/dev/null | grep -qx "$t"; then
            targets="$targets $t"
        fi
    done
fi

# Profile-guided optimization is made from the host's Linux build, made here, and applies to
# every build made here. Asked for with --pgo where it would be ignored, it is refused; by
# default it is simply not used there. What it needs is found before anything is built.
host_built=0
case "$host" in
    *-linux-*)
        if [ -z "$binary" ]; then
            case " $targets " in *" $host "*) host_built=1 ;; esac
        fi ;;
esac
if [ "$pgo" = 1 ]; then
    [ -z "$binary" ] || die "--pgo builds the host's coogle, --binary packs one already built: pass one of them"
    case "$host" in
        *-linux-*) ;;
        *) die "--pgo profiles a Linux host's build; $host's binaries are built plain" ;;
    esac
    [ "$host_built" -eq 1 ] || die "--pgo profiles the host's Linux build ($host), which is not among the targets"
    "$root/scripts/pgo" --check || die "--pgo cannot run here (above)"
elif [ "$pgo" = auto ]; then
    pgo=0
    if [ "$host_built" -eq 1 ]; then
        "$root/scripts/pgo" --check \
            || die "the host's archive is built with profile-guided optimization by default, which cannot run here (above); --no-pgo builds it plain"
        pgo=1
    fi
fi
# The other Linux targets take the host's profile, mapped onto their builds: what that needs is
# found here too.
if [ "$pgo" -eq 1 ]; then
    for t in $targets; do
        [ "$t" = "$host" ] && continue
        "$root/scripts/pgo" --check --target "$t" \
            || die "$t is built with the host's profile, which cannot be mapped here (above); --no-pgo builds every binary plain"
    done
fi

lipo="${LIPO:-}"
find_lipo() {
    [ -z "$lipo" ] || return 0
    for l in lipo llvm-lipo llvm-lipo-14 llvm-lipo-15 llvm-lipo-16 llvm-lipo-17 llvm-lipo-18 llvm-lipo-19; do
        if command -v "$l" >/dev/null 2>&1; then lipo="$l"; return 0; fi
    done
    die "no lipo: install Debian's llvm (llvm-lipo-14) or set LIPO"
}

# The macOS binaries are linked (or taken from --macos-dir) and split after the Linux builds
# (minutes, the PGO one a quarter of an hour): what that needs is found before any of it.
if [ "$macos" -eq 1 ]; then
    if [ -z "$macos_dir" ]; then
        "$root/scripts/check-macos" --check \
            || die "the macOS binaries cannot be linked here (above); --no-macos leaves them out"
        if [ "$pgo" -eq 1 ]; then
            "$root/scripts/pgo" --check --target aarch64-apple-darwin \
                || die "the macOS binaries are built with the host's profile, which cannot be mapped here (above); --no-pgo builds every binary plain"
        fi
    fi
    find_lipo
fi

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}


mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
: > "$work/SHA256SUMS"

# Build every Linux target first (a failed cross build is skipped), remembering each binary.
# With PGO the host's comes first: its profile is the one every other build is given.
built=""
profile=""
if [ "$pgo" -eq 1 ]; then
    say "building $host with profile-guided optimization (scripts/pgo)"
    host_pgo="$("$root/scripts/pgo")" || die "could not build the PGO coogle (scripts/pgo, above); --no-pgo builds it plain"
    profile="$root/target/pgo/coogle.profdata"
fi
for t in $targets; do
    shim=""
    if [ -n "$binary" ] && [ "$t" = "$host" ]; then
        bin="$binary"
        case "$t" in
            *-linux-gnu*)
                "$root/scripts/static-shim" --check "$(dirname "$bin")/coogle-mcp" 2>/dev/null \
                    || say "warning: the coogle-mcp beside $bin is not linked static (scripts/static-shim); packed as it is" ;;
        esac
    else
        if [ "$pgo" -eq 1 ] && [ "$t" = "$host" ]; then
            bin="$host_pgo"
        elif [ "$pgo" -eq 1 ]; then
            say "building $t with the host's profile (scripts/pgo --target)"
            # Exit 3: built, but the profile does not fit it; not a target to leave out quietly.
            code=0
            bin="$("$root/scripts/pgo" --target "$t" --profile "$profile")" || code=$?
            case "$code" in
                0) ;;
                3) die "the host's profile does not fit $t's build (scripts/pgo, above); --no-pgo builds every binary plain" ;;
                *) say "warning: could not build $t; skipped"; continue ;;
            esac
        else
            say "building $t"
            cargo build --release --locked --target "$t" --manifest-path "$root/Cargo.toml" \
                || { say "warning: could not build $t; skipped"; continue; }
            bin="$root/target/$t/release/coogle"
        fi
        # A glibc target's shim is linked static (scripts/static-shim says why); a given
        # --binary's is packed as it is.
        case "$t" in
            *-linux-gnu*)
                # The target built, so a shim that will not link static is a fault to fix, not
                # a target to leave out (or to ship, quietly, with a dynamic shim).
                shim="$("$root/scripts/static-shim" --target "$t")" \
                    || die "could not link the static shim for $t (scripts/static-shim, above)" ;;
        esac
    fi
    [ -x "$bin" ] || die "no binary at $bin"
    mkdir -p "$work/bin/$t"
    cp "$bin" "$work/bin/$t/coogle"
    # `coogle mcp` execs this small sibling (one shim per agent session and server).
    cp "${shim:-$(dirname "$bin")/coogle-mcp}" "$work/bin/$t/coogle-mcp" \
        || die "no coogle-mcp beside $bin"
    built="$built $t"
done

# macOS: the universal binaries (linked and inspected by scripts/check-macos, or given), then
# each architecture's slice of them.
if [ "$macos" -eq 1 ]; then
    if [ -z "$macos_dir" ]; then
        macos_dir="$work/macos"
        set -- --no-clippy --profile release --out "$macos_dir"
        [ -z "$profile" ] || set -- "$@" --pgo "$profile"
        "$root/scripts/check-macos" "$@" \
            || die "could not link the macOS binaries (scripts/check-macos, above); --no-macos leaves them out${profile:+, --no-pgo builds them plain}"
    fi
    for b in coogle coogle-mcp; do
        [ -f "$macos_dir/$b" ] || die "no $b in $macos_dir"
    done
    "${PYTHON:-python3}" "$root/scripts/macho-check" --archs arm64,x86_64 \
        "$macos_dir/coogle" "$macos_dir/coogle-mcp" >/dev/null \
        || die "the macOS binaries in $macos_dir did not pass scripts/macho-check (above)"
    find_lipo
    mkdir -p "$work/bin/universal-apple-darwin"
    for b in coogle coogle-mcp; do
        cp "$macos_dir/$b" "$work/bin/universal-apple-darwin/$b"
        for pair in aarch64:arm64 x86_64:x86_64; do
            t="${pair%%:*}-apple-darwin"
            mkdir -p "$work/bin/$t"
            "$lipo" "$macos_dir/$b" -thin "${pair#*:}" -output "$work/bin/$t/$b"
        done
    done
    chmod 0755 "$work"/bin/*-apple-darwin/*
    built="$built universal-apple-darwin aarch64-apple-darwin x86_64-apple-darwin"
fi
[ -n "$built" ] || die "no target was built"

# Completions and the man page are the same for every target: they come from a binary that
# runs here (the host's; built for them when the host is not among the targets).
mkdir -p "$work/extras/completions"
gen="$work/bin/$host/coogle"
if [ ! -x "$gen" ]; then
    cargo build --release --locked --manifest-path "$root/Cargo.toml"
    gen="$root/target/release/coogle"
fi
for shell in bash zsh fish elvish powershell; do
    "$gen" completions "$shell" > "$work/extras/completions/coogle.$shell"
done
"$gen" completions --man > "$work/extras/coogle.1"

for t in $built; do
    name="coogle-$version-$t"
    stage="$work/stage/$name"
    mkdir -p "$stage"
    cp "$work/bin/$t/coogle" "$work/bin/$t/coogle-mcp" "$stage/"
    chmod 0755 "$stage/coogle" "$stage/coogle-mcp"
    cp "$root/README.md" "$stage/"
    [ ! -f "$root/LICENSE" ] || cp "$root/LICENSE" "$stage/"
    cp -R "$work/extras/completions" "$work/extras/coogle.1" "$stage/"
    tar -czf "$out/$name.tar.gz" -C "$work/stage" "$name"
    printf '%s  %s\n' "$(sha256 "$out/$name.tar.gz")" "$name.tar.gz" >> "$work/SHA256SUMS"
    say "packed $out/$name.tar.gz"
done

# The source tarball: the tag when it exists, else HEAD.
ref="v$version"
git -C "$root" rev-parse -q --verify "refs/tags/$ref" >/dev/null || ref="HEAD"
src="coogle-$version.tar.gz"
git -C "$root" archive --format=tar.gz --prefix="coogle-$version/" -o "$out/$src" "$ref"
printf '%s  %s\n' "$(sha256 "$out/$src")" "$src" >> "$work/SHA256SUMS"
cp "$work/SHA256SUMS" "$out/SHA256SUMS"
say "wrote $out/SHA256SUMS"

[ -f "$formula" ] || exit 0
# The formula's archive section: the version, then a url and sha256 for each archive Homebrew
# installs (the universal one on macOS; each Linux architecture's), and nothing for what was
# not built, so the formula never names an archive this release lacks.
entry() {  # entry INDENT TARGET: the url and sha256 lines of TARGET's archive, if it was built
    case " $built " in *" $2 "*) ;; *) return 0 ;; esac
    name="coogle-$version-$2.tar.gz"
    printf '%surl "%s/v%s/%s"\n' "$1" "$url_base" "$version" "$name"
    printf '%ssha256 "%s"\n' "$1" "$(sha256 "$out/$name")"
}
{
    printf '  version "%s"\n' "$version"
    if [ -n "$(entry '' universal-apple-darwin)" ]; then
        printf '\n  on_macos do\n'
        entry '    ' universal-apple-darwin
        printf '  end\n'
    fi
    intel="$(entry '      ' x86_64-unknown-linux-gnu)"
    arm="$(entry '      ' aarch64-unknown-linux-gnu)"
    if [ -n "$intel$arm" ]; then
        printf '\n  on_linux do\n'
        [ -z "$intel" ] || printf '    on_intel do\n%s\n    end\n' "$intel"
        [ -z "$arm" ] || printf '    on_arm do\n%s\n    end\n' "$arm"
        printf '  end\n'
    fi
} > "$work/archives.rb"
if ! grep -q '^  # >>> archives' "$formula" || ! grep -q '^  # <<< archives' "$formula"; then
    die "$formula has no '# >>> archives' ... '# <<< archives' section to write"
fi
awk -v section="$work/archives.rb" '
    /^  # >>> archives/ { print; while ((getline line < section) > 0) print line; skip = 1; next }
    /^  # <<< archives/ { skip = 0 }
    !skip { print }
' "$formula" > "$work/formula.rb"
cp "$work/formula.rb" "$formula"
say "updated $formula (version $version; archives:$(grep -o 'coogle-[^"]*\.tar\.gz' "$work/archives.rb" | tr '\n' ' ' | sed 's/^/ /'))"
