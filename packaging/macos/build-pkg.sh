#!/bin/sh
# Build coogle's signed, notarized macOS installer:
#   1. the universal binaries (coogle, coogle-mcp): --from DIR (scripts/release.sh's or
#      scripts/check-macos's output), else linked here (on a Mac with cargo and lipo; elsewhere
#      with scripts/check-macos, from Linux);
#   2. the payload: root/usr/local/bin/{coogle,coogle-mcp}, mode 0755;
#   3. the binaries signed with the Developer ID Application identity (hardened runtime, secure
#      timestamp): on a Mac with codesign, or anywhere with rcodesign and the identity as a PEM
#      file;
#   4. the payload checked: exactly those files and modes, each binary through
#      scripts/macho-check (both architectures, only libSystem, the minimum macOS that
#      distribution.xml also requires, a valid code signature), the postinstall script
#      (executable, `sh -n`, shellcheck), distribution.xml (well-formed, its component, its
#      architectures and minimum macOS);
#   --- what follows needs a Mac (Apple's pkgbuild, productbuild, productsign, notarytool,
#       stapler); --payload-only stops before it, on any machine ---
#   5. a component pkg (pkgbuild) with the postinstall, which never runs setup as root;
#   6. a product archive (productbuild with distribution.xml, welcome and license);
#   7. signed with the Developer ID Installer identity (productsign);
#   8. notarized (xcrun notarytool submit --wait) and stapled.
#
# Identities come from the environment; without them the pkg is built unsigned and the script
# says so:
#   COOGLE_SIGN_APP        "Developer ID Application: Name (TEAMID)" (codesign, on a Mac)
#   COOGLE_SIGN_PEM        the same identity as a PEM file, certificate and private key
#                          (rcodesign, on any machine; rcodesign from crates.io `apple-codesign`)
#   COOGLE_SIGN_INSTALLER  "Developer ID Installer: Name (TEAMID)"
#   COOGLE_NOTARY_PROFILE  a keychain profile made with `xcrun notarytool store-credentials`
#   COOGLE_TIMESTAMP_URL   rcodesign's timestamp server (default Apple's; `none` for a test
#                          identity, which Apple's server would not stamp)
#
#   packaging/macos/build-pkg.sh [--version X.Y.Z] [--out DIR] [--from DIR] [--payload-only]
#                                [--dry-run]
#
# --dry-run runs anywhere: it validates the inputs (distribution.xml, the resources, the
# scripts, the version) and prints the commands it would run, without building.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dry_run=0
payload_only=0
out="$root/target/pkg"
from=""
version=""

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry_run=1; shift ;;
        --payload-only) payload_only=1; shift ;;
        --version) [ $# -ge 2 ] || die "--version needs a value"; version="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        --from) [ $# -ge 2 ] || die "--from needs a value"; from="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^set -eu$/ { exit } NR > 1' "$0"; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
done

if [ -z "$version" ]; then
    version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
fi
printf '%s' "$version" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$' \
    || die "not a version: $version"
on_mac=0
[ "$(uname -s)" = "Darwin" ] && on_mac=1

# The minimum macOS the binaries are built for (scripts/check-macos) and distribution.xml asks.
min_macos="$(sed -n 's/^MACOSX_DEPLOYMENT_TARGET=//p' "$root/scripts/check-macos")"
[ -n "$min_macos" ] || die "scripts/check-macos does not set MACOSX_DEPLOYMENT_TARGET"

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
    extra="$(find "$here/scripts" -type f ! -name postinstall)"
    [ -z "$extra" ] || die "packaging/macos/scripts holds more than the postinstall: $extra"
    sh -n "$here/scripts/postinstall" || die "packaging/macos/scripts/postinstall does not parse"
    if command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$here/distribution.xml" || die "distribution.xml is not well-formed"
    elif command -v python3 >/dev/null 2>&1; then
        python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
            "$here/distribution.xml" || die "distribution.xml is not well-formed"
    else
        die "need xmllint or python3 to check distribution.xml"
    fi
    grep -q 'dev.coogle.pkg' "$here/distribution.xml" || die "distribution.xml does not reference the component dev.coogle.pkg"
    grep -q 'hostArchitectures="arm64,x86_64"' "$here/distribution.xml" \
        || die "distribution.xml does not name both architectures (hostArchitectures=\"arm64,x86_64\")"
    xml_min="$(sed -n 's/.*<os-version min="\([^"]*\)".*/\1/p' "$here/distribution.xml")"
    [ "$xml_min" = "$min_macos" ] \
        || die "distribution.xml requires macOS ${xml_min:-?}, but the binaries are built for $min_macos (scripts/check-macos)"
    if command -v shellcheck >/dev/null 2>&1; then
        shellcheck "$here/build-pkg.sh" "$here/scripts/postinstall" || die "shellcheck found problems"
    else
        say "note: shellcheck is not installed; scripts not checked"
    fi
    say "inputs valid: distribution.xml, welcome, license, postinstall (version $version, macOS $min_macos+)"
}

# check_payload DIR: exactly the two binaries, 0755, each one inspected.
check_payload() {
    found="$(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')"
    want="./usr ./usr/local ./usr/local/bin ./usr/local/bin/coogle ./usr/local/bin/coogle-mcp "
    [ "$found" = "$want" ] || die "the payload holds ${found:-nothing}, not $want"
    for b in coogle coogle-mcp; do
        mode="$(stat -c %a "$1/usr/local/bin/$b" 2>/dev/null || stat -f %Lp "$1/usr/local/bin/$b")"
        [ "$mode" = 755 ] || die "usr/local/bin/$b has mode $mode, not 755"
    done
    "${PYTHON:-python3}" "$root/scripts/macho-check" --archs arm64,x86_64 --minos "$min_macos" \
        "$1/usr/local/bin/coogle" "$1/usr/local/bin/coogle-mcp" \
        || die "the payload's binaries did not pass scripts/macho-check (above)"
    say "payload checked: $1 (usr/local/bin/coogle, usr/local/bin/coogle-mcp; postinstall)"
}

validate
if [ "$dry_run" -eq 0 ] && [ "$payload_only" -eq 0 ] && [ "$on_mac" -eq 0 ]; then
    die "wrapping the pkg needs macOS (pkgbuild, productbuild); --payload-only assembles and checks the payload anywhere, --dry-run validates"
fi

app_id="${COOGLE_SIGN_APP:-}"
app_pem="${COOGLE_SIGN_PEM:-}"
installer_id="${COOGLE_SIGN_INSTALLER:-}"
notary="${COOGLE_NOTARY_PROFILE:-}"
if [ -z "$app_id$app_pem" ] || [ -z "$installer_id" ]; then
    say "warning: COOGLE_SIGN_APP (or COOGLE_SIGN_PEM) or COOGLE_SIGN_INSTALLER is not set: building an UNSIGNED pkg (Gatekeeper will block it)"
fi

stage="$out/stage"
run rm -rf "$stage"
run mkdir -p "$stage/root/usr/local/bin" "$out"

# 1. Universal binaries.
if [ -z "$from" ]; then
    from="$stage/universal"
    if [ "$on_mac" -eq 1 ]; then
        run mkdir -p "$from"
        for t in aarch64-apple-darwin x86_64-apple-darwin; do
            run env "MACOSX_DEPLOYMENT_TARGET=$min_macos" \
                cargo build --release --locked --target "$t" --manifest-path "$root/Cargo.toml"
        done
        for b in coogle coogle-mcp; do
            run lipo -create -output "$from/$b" \
                "$root/target/aarch64-apple-darwin/release/$b" \
                "$root/target/x86_64-apple-darwin/release/$b"
        done
    else
        run "$root/scripts/check-macos" --no-clippy --profile release --out "$from"
    fi
fi

# 2. The payload.
for b in coogle coogle-mcp; do
    run install -m 0755 "$from/$b" "$stage/root/usr/local/bin/$b"
done

# 3. Sign the binaries.
for b in coogle coogle-mcp; do
    f="$stage/root/usr/local/bin/$b"
    if [ -n "$app_id" ]; then
        [ "$on_mac" -eq 1 ] || [ "$dry_run" -eq 1 ] || die "COOGLE_SIGN_APP needs codesign, on a Mac; elsewhere set COOGLE_SIGN_PEM (rcodesign)"
        run codesign --force --options runtime --timestamp --sign "$app_id" "$f"
        run codesign --verify --strict --verbose=2 "$f"
    elif [ -n "$app_pem" ]; then
        command -v rcodesign >/dev/null 2>&1 || [ "$dry_run" -eq 1 ] \
            || die "COOGLE_SIGN_PEM needs rcodesign (cargo install apple-codesign)"
        stamp="${COOGLE_TIMESTAMP_URL:-http://timestamp.apple.com/ts01}"
        run rcodesign sign --pem-file "$app_pem" --code-signature-flags runtime \
            --timestamp-url "$stamp" "$f"
        run rcodesign verify "$f"
    fi
done

# 4. Check the payload.
if [ "$dry_run" -eq 1 ]; then
    say "would check: the payload in $stage/root"
else
    check_payload "$stage/root"
fi
if [ "$payload_only" -eq 1 ]; then
    say "stopped before the steps that need a Mac: pkgbuild, productbuild, productsign, notarytool, stapler"
    exit 0
fi
# 5. Component pkg.
run pkgbuild --root "$stage/root" --identifier dev.coogle.pkg --version "$version" \
    --install-location / --scripts "$here/scripts" "$stage/coogle-component.pkg"

# 6. Product archive.
unsigned="$stage/coogle-$version-unsigned.pkg"
run productbuild --distribution "$here/distribution.xml" --resources "$here/resources" \
    --package-path "$stage" --version "$version" "$unsigned"

# 7. Sign it; 8. notarize and staple.
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
