#!/bin/sh
# Build coogle's signed, notarized macOS installer:
#   1. a universal binary (cargo build for aarch64 and x86_64, then lipo),
#   2. signed with the Developer ID Application identity (hardened runtime, secure timestamp),
#   3. a component pkg (pkgbuild, installs /usr/local/bin/coogle) with a postinstall that never
#      runs setup as root,
#   4. a product archive (productbuild with distribution.xml, welcome and license),
#   5. signed with the Developer ID Installer identity (productsign),
#   6. notarized (xcrun notarytool submit --wait) and stapled.
#
# Identities come from the environment; without them the pkg is built unsigned and the script
# says so:
#   COOGLE_SIGN_APP        "Developer ID Application: Name (TEAMID)"
#   COOGLE_SIGN_INSTALLER  "Developer ID Installer: Name (TEAMID)"
#   COOGLE_NOTARY_PROFILE  a keychain profile made with `xcrun notarytool store-credentials`
#
#   packaging/macos/build-pkg.sh [--version X.Y.Z] [--out DIR] [--dry-run]
#
# --dry-run runs anywhere (Linux CI too): it validates the inputs (distribution.xml well-formed,
# the resources present, every script shellcheck-clean, the version) and prints the commands it
# would run, without building.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dry_run=0
out="$root/target/pkg"
version=""

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry_run=1; shift ;;
        --version) [ $# -ge 2 ] || die "--version needs a value"; version="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
done

if [ -z "$version" ]; then
    version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
fi
printf '%s' "$version" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$' \
    || die "not a version: $version"

# run CMD...: execute, or under --dry-run print it.
run() {
    if [ "$dry_run" -eq 1 ]; then
        say "would run: $*"
    else
        "$@"
    fi
}

validate() {
    for f in distribution.xml resources/welcome.html resources/license.html scripts/postinstall; do
        [ -f "$here/$f" ] || die "missing packaging input: packaging/macos/$f"
    done
    [ -x "$here/scripts/postinstall" ] || die "packaging/macos/scripts/postinstall is not executable"
    if command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$here/distribution.xml" || die "distribution.xml is not well-formed"
    elif command -v python3 >/dev/null 2>&1; then
        python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
            "$here/distribution.xml" || die "distribution.xml is not well-formed"
    else
        die "need xmllint or python3 to check distribution.xml"
    fi
    grep -q 'dev.coogle.pkg' "$here/distribution.xml" || die "distribution.xml does not reference the component dev.coogle.pkg"
    if command -v shellcheck >/dev/null 2>&1; then
        shellcheck "$here/build-pkg.sh" "$here/scripts/postinstall" || die "shellcheck found problems"
    else
        say "note: shellcheck is not installed; scripts not checked"
    fi
    say "inputs valid: distribution.xml, welcome, license, postinstall (version $version)"
}

validate

if [ "$dry_run" -eq 0 ] && [ "$(uname -s)" != "Darwin" ]; then
    die "building the pkg needs macOS (pkgbuild, productbuild, lipo); --dry-run validates anywhere"
fi

app_id="${COOGLE_SIGN_APP:-}"
installer_id="${COOGLE_SIGN_INSTALLER:-}"
notary="${COOGLE_NOTARY_PROFILE:-}"
if [ -z "$app_id" ] || [ -z "$installer_id" ]; then
    say "warning: COOGLE_SIGN_APP or COOGLE_SIGN_INSTALLER is not set: building an UNSIGNED pkg (Gatekeeper will block it)"
fi

stage="$out/stage"
run rm -rf "$stage"
run mkdir -p "$stage/root/usr/local/bin" "$out"

# 1. Universal binary.
for t in aarch64-apple-darwin x86_64-apple-darwin; do
    run cargo build --release --locked --target "$t" --manifest-path "$root/Cargo.toml"
done
# `coogle-mcp` is the small executable `coogle mcp` becomes (one shim per session and server).
for b in coogle coogle-mcp; do
    run lipo -create -output "$stage/root/usr/local/bin/$b" \
        "$root/target/aarch64-apple-darwin/release/$b" \
        "$root/target/x86_64-apple-darwin/release/$b"
done

# 2. Sign the binaries.
if [ -n "$app_id" ]; then
    for b in coogle coogle-mcp; do
        run codesign --force --options runtime --timestamp --sign "$app_id" "$stage/root/usr/local/bin/$b"
        run codesign --verify --strict --verbose=2 "$stage/root/usr/local/bin/$b"
    done
fi

# 3. Component pkg.
run pkgbuild --root "$stage/root" --identifier dev.coogle.pkg --version "$version" \
    --install-location / --scripts "$here/scripts" "$stage/coogle-component.pkg"

# 4. Product archive.
unsigned="$stage/coogle-$version-unsigned.pkg"
run productbuild --distribution "$here/distribution.xml" --resources "$here/resources" \
    --package-path "$stage" --version "$version" "$unsigned"

# 5. Sign it; 6. notarize and staple.
final="$out/coogle-$version.pkg"
if [ -n "$installer_id" ]; then
    run productsign --timestamp --sign "$installer_id" "$unsigned" "$final"
    if [ -n "$notary" ]; then
        run xcrun notarytool submit "$final" --keychain-profile "$notary" --wait
        run xcrun stapler staple "$final"
        run xcrun stapler validate "$final"
    else
        say "warning: COOGLE_NOTARY_PROFILE is not set: the pkg is signed but not notarized"
    fi
else
    run cp "$unsigned" "$final"
fi
run shasum -a 256 "$final"
say "pkg: $final"
