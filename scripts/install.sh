#!/bin/sh
# Install coogle from its GitHub releases: detect the OS and CPU, download the matching
# archive and SHA256SUMS, verify the checksum, and install the binary atomically into
# $COOGLE_INSTALL_DIR (default ~/.local/bin). Then run `coogle setup`.
#
#   curl -fsSL https://raw.githubusercontent.com/coogle-dev/coogle/main/scripts/install.sh | sh
#   sh install.sh --version 0.2.0
#
# Environment: COOGLE_VERSION (default: the newest release), COOGLE_INSTALL_DIR,
# COOGLE_DOWNLOAD_BASE (a mirror of the release downloads; tests point it at a local server),
# GH_TOKEN or GITHUB_TOKEN (sent to GitHub only).
set -eu

repo="coogle-dev/coogle"
base="${COOGLE_DOWNLOAD_BASE:-https://github.com/$repo/releases}"
dir="${COOGLE_INSTALL_DIR:-$HOME/.local/bin}"
version="${COOGLE_VERSION:-}"

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || die "--version needs a value"; version="$2"; shift 2 ;;
        --dir) [ $# -ge 2 ] || die "--dir needs a value"; dir="$2"; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0" 2>/dev/null || true; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
done

case "$(uname -s)" in
    Linux) os="unknown-linux-gnu" ;;
    Darwin) os="apple-darwin" ;;
    *) die "coogle has no build for $(uname -s); build it with: cargo install --git https://github.com/$repo" ;;
esac
case "$(uname -m)" in
    x86_64|amd64) arch="x86_64" ;;
    arm64|aarch64) arch="aarch64" ;;
    *) die "coogle has no build for $(uname -m); build it with: cargo install --git https://github.com/$repo" ;;
esac
target="$arch-$os"

auth=""
case "$base" in
    https://github.com/*)
        token="${GH_TOKEN:-${GITHUB_TOKEN:-}}"
        [ -n "$token" ] && auth="Authorization: token $token"
        ;;
esac

# fetch URL FILE: download with curl or wget, failing on HTTP errors.
fetch() {
    if command -v curl >/dev/null 2>&1; then
        if [ -n "$auth" ]; then
            curl -fsSL --retry 2 -H "$auth" -o "$2" "$1"
        else
            curl -fsSL --retry 2 -o "$2" "$1"
        fi
    elif command -v wget >/dev/null 2>&1; then
        if [ -n "$auth" ]; then
            wget -q --header="$auth" -O "$2" "$1"
        else
            wget -q -O "$2" "$1"
        fi
    else
        die "need curl or wget to download"
    fi
}

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        die "need sha256sum or shasum to verify the download"
    fi
}

tmp="$(mktemp -d 2>/dev/null || mktemp -d -t coogle)"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

if [ -n "$version" ]; then
    version="${version#v}"
    url="$base/download/v$version"
else
    url="$base/latest/download"
fi
# The archive name carries the version; with "latest", SHA256SUMS tells which one it is.
fetch "$url/SHA256SUMS" "$tmp/SHA256SUMS" || die "could not download $url/SHA256SUMS"
name="$(grep -- "-$target.tar.gz" "$tmp/SHA256SUMS" | head -n 1 | awk '{print $2}' | sed 's/^\*//')"
[ -n "$name" ] || die "the release has no build for $target"
expected="$(grep -- " \*\{0,1\}$name\$" "$tmp/SHA256SUMS" | head -n 1 | cut -d' ' -f1)"
say "downloading $name"
fetch "$url/$name" "$tmp/$name" || die "could not download $url/$name"
actual="$(sha256 "$tmp/$name")"
if [ "$actual" != "$expected" ]; then
    die "checksum mismatch for $name: SHA256SUMS says $expected, the download is $actual; nothing was installed"
fi
say "verified $name (sha256 $actual)"

mkdir -p "$tmp/unpacked"
tar -xzf "$tmp/$name" -C "$tmp/unpacked"
bin="$(find "$tmp/unpacked" -type f -name coogle | head -n 1)"
[ -n "$bin" ] || die "$name holds no coogle binary"
chmod 755 "$bin"
"$bin" --version >/dev/null 2>&1 || die "the downloaded coogle does not run on this machine"

mkdir -p "$dir"
# Copy beside the target, then rename: the old binary stays whole until the new one is in place.
cp "$bin" "$dir/.coogle.new.$$"
chmod 755 "$dir/.coogle.new.$$"
mv -f "$dir/.coogle.new.$$" "$dir/coogle"
# The small executable `coogle mcp` becomes (one shim per agent session and server).
shim="$(dirname "$bin")/coogle-mcp"
if [ -f "$shim" ]; then
    cp "$shim" "$dir/.coogle-mcp.new.$$"
    chmod 755 "$dir/.coogle-mcp.new.$$"
    mv -f "$dir/.coogle-mcp.new.$$" "$dir/coogle-mcp"
fi
say "installed $("$dir/coogle" --version) to $dir/coogle"

case ":$PATH:" in
    *":$dir:"*) ;;
    *) say "note: $dir is not on your PATH; add it, e.g.: export PATH=\"$dir:\$PATH\"" ;;
esac
say "next: run \`coogle setup\` to point your agents at coogle"
