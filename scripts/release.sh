#!/bin/sh
# Build coogle's release artifacts into DIR (default target/release-artifacts):
#   coogle-<version>-<target>.tar.gz  for each target this machine can build (the host always;
#                                     others whose rustup target is installed), each holding
#                                     coogle-<version>-<target>/{coogle,README.md,LICENSE,
#                                     completions/,coogle.1} (completions and man page from
#                                     the host's build, the same for every target)
#   coogle-<version>.tar.gz           the source tarball (git archive of the tag, or HEAD)
#   SHA256SUMS                        of all of the above
# and point homebrew/coogle.rb at the source tarball (url and sha256).
#
#   scripts/release.sh [--out DIR] [--target TRIPLE]... [--binary PATH] [--formula FILE]
#                      [--url-base URL]
#
# --binary packs an already-built host binary instead of building (CI reuses its build).
#
# macOS binaries are built on a Mac. Linking one needs Apple's SDK (the Security and
# CoreFoundation frameworks rustls-platform-verifier links against), which only Xcode or its
# Command Line Tools provide; from Linux, a macOS target gets as far as scripts/check-macos (a
# compile and lint check, what CI runs), so this script leaves macOS targets out unless it
# runs on a Mac (an explicit --target is tried, and skipped with a warning when its link
# fails). On a Mac (or a macOS CI runner, which has the SDK):
#   rustup target add aarch64-apple-darwin x86_64-apple-darwin
#   scripts/release.sh --target aarch64-apple-darwin --target x86_64-apple-darwin
# packs both archives; packaging/macos/build-pkg.sh joins the two into a universal binary
# (lipo) and signs, notarizes and staples the pkg. Homebrew builds from the source tarball on
# the user's Mac (the formula's `depends_on "rust" => :build`), so it needs no binary from here.
set -eu

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/target/release-artifacts"
formula="$root/homebrew/coogle.rb"
url_base="https://github.com/coogle-dev/coogle/releases/download"
binary=""
targets=""

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        --target) [ $# -ge 2 ] || die "--target needs a value"; targets="$targets $2"; shift 2 ;;
        --binary) [ $# -ge 2 ] || die "--binary needs a value"; binary="$2"; shift 2 ;;
        --formula) [ $# -ge 2 ] || die "--formula needs a value"; formula="$2"; shift 2 ;;
        --url-base) [ $# -ge 2 ] || die "--url-base needs a value"; url_base="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^set -eu$/ { exit } NR > 1' "$0"; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
done

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
[ -n "$version" ] || die "no version in Cargo.toml"
host="$(rustc -vV | sed -n 's/^host: //p')"
[ -n "$host" ] || die "rustc -vV did not name the host target"
if [ -z "$targets" ]; then
    targets="$host"
    for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin aarch64-apple-darwin; do
        [ "$t" = "$host" ] && continue
        # Only a Mac can link a macOS binary (see above): elsewhere an installed macOS target is
        # there for scripts/check-macos, not for a release build that cannot finish.
        case "$t:$host" in *-apple-darwin:*-apple-darwin) ;; *-apple-darwin:*) continue ;; esac
        if rustup target list --installed 2>/dev/null | grep -qx "$t"; then
            targets="$targets $t"
        fi
    done
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

# Build every target first (a failed cross build is skipped), remembering where each binary is.
built=""
for t in $targets; do
    if [ -n "$binary" ] && [ "$t" = "$host" ]; then
        bin="$binary"
    else
        say "building $t"
        cargo build --release --locked --target "$t" --manifest-path "$root/Cargo.toml" \
            || { say "warning: could not build $t; skipped"; continue; }
        bin="$root/target/$t/release/coogle"
    fi
    [ -x "$bin" ] || die "no binary at $bin"
    mkdir -p "$work/bin/$t"
    cp "$bin" "$work/bin/$t/coogle"
    # `coogle mcp` execs this small sibling (one shim per agent session and server).
    cp "$(dirname "$bin")/coogle-mcp" "$work/bin/$t/coogle-mcp" \
        || die "no coogle-mcp beside $bin"
    built="$built $t"
done
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
    cp "$root/README.md" "$stage/"
    [ ! -f "$root/LICENSE" ] || cp "$root/LICENSE" "$stage/"
    cp -R "$work/extras/completions" "$work/extras/coogle.1" "$stage/"
    tar -czf "$out/$name.tar.gz" -C "$work/stage" "$name"
    printf '%s  %s\n' "$(sha256 "$out/$name.tar.gz")" "$name.tar.gz" >> "$work/SHA256SUMS"
    say "packed $out/$name.tar.gz"
done

# The source tarball the formula builds from: the tag when it exists, else HEAD.
ref="v$version"
git -C "$root" rev-parse -q --verify "refs/tags/$ref" >/dev/null || ref="HEAD"
src="coogle-$version.tar.gz"
git -C "$root" archive --format=tar.gz --prefix="coogle-$version/" -o "$out/$src" "$ref"
src_sha="$(sha256 "$out/$src")"
printf '%s  %s\n' "$src_sha" "$src" >> "$work/SHA256SUMS"
cp "$work/SHA256SUMS" "$out/SHA256SUMS"
say "wrote $out/SHA256SUMS"

if [ -f "$formula" ]; then
    sed -e "s|^  url \".*\"|  url \"$url_base/v$version/$src\"|" \
        -e "s|^  sha256 \".*\"|  sha256 \"$src_sha\"|" "$formula" > "$work/formula.rb"
    cp "$work/formula.rb" "$formula"
    say "updated $formula (url $url_base/v$version/$src, sha256 $src_sha)"
fi
