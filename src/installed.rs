//! How this binary was installed, decided from its path: which package manager owns it (so
//! `self-update` leaves it to that manager), and the stable path to write into the service and
//! client configs (Homebrew's `opt` link, which survives upgrades, never a versioned Cellar
//! path).
//!
//! It reads paths and the environment only; it never runs a package manager.

use std::path::{Component, Path, PathBuf};

/// Left by `installer` for packaging/macos's pkg (identifier `dev.coogle.pkg`).
const PKG_RECEIPT: &str = "/var/db/receipts/dev.coogle.pkg.plist";

/// Where the `Cellar` component of a Homebrew keg path is, when there is one with something
/// after it (`<prefix>/Cellar/<formula>/<version>/…`).
fn cellar_index(parts: &[Component<'_>]) -> Option<usize> {
    parts
        .iter()
        .position(|c| c.as_os_str() == "Cellar")
        .filter(|&i| i + 1 < parts.len())
}

/// Homebrew installs into `<prefix>/Cellar/coogle/<version>/bin/coogle` and links
/// `<prefix>/opt/coogle` to the current version: the `opt` path survives upgrades.
pub fn stable_path_for(exe: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = exe.components().collect();
    let cellar = cellar_index(&parts)?;
    let formula = parts.get(cellar + 1)?;
    // Skip the version directory; keep what follows (bin/coogle).
    let rest = parts.get(cellar + 3..)?;
    if rest.is_empty() {
        return None;
    }
    let mut p: PathBuf = parts[..cellar].iter().collect();
    p.push("opt");
    p.push(formula);
    p.extend(rest);
    Some(p)
}

/// The path to write into client configs and the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StableExe {
    pub path: PathBuf,
    /// True when `path` is Homebrew's `opt` link for this binary's Cellar path.
    pub homebrew_opt: bool,
}

/// Homebrew's `opt` link when this binary lives in a Cellar and the link exists, else this
/// executable.
pub(crate) fn stable_exe() -> StableExe {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("coogle"));
    match stable_path_for(&exe) {
        Some(opt) if opt.exists() => StableExe {
            path: opt,
            homebrew_opt: true,
        },
        _ => StableExe {
            path: exe,
            homebrew_opt: false,
        },
    }
}

/// True when Homebrew owns a binary at this path: in a Cellar, or under a Homebrew prefix.
fn homebrew_owns(exe: &Path) -> bool {
    let parts: Vec<_> = exe.components().collect();
    let s = exe.to_string_lossy();
    let brew_prefix = std::env::var("HOMEBREW_PREFIX")
        .ok()
        .filter(|p| !p.is_empty());
    cellar_index(&parts).is_some()
        || s.starts_with("/opt/homebrew/")
        || s.starts_with("/home/linuxbrew/.linuxbrew/")
        || brew_prefix.is_some_and(|p| s.starts_with(&format!("{}/", p.trim_end_matches('/'))))
}

/// The package manager that owns a binary at this path, and how to update it that way:
/// Homebrew's Cellar or prefixes, the macOS installer package, Nix's store, or a system
/// directory a distribution package fills.
pub fn managed_by(exe: &Path) -> Option<(&'static str, &'static str)> {
    let s = exe.to_string_lossy();
    if homebrew_owns(exe) {
        return Some(("Homebrew", "brew upgrade coogle"));
    }
    // The macOS installer package puts the binary here and leaves a receipt.
    if s == "/usr/local/bin/coogle" && Path::new(PKG_RECEIPT).exists() {
        return Some((
            "the coogle installer package",
            "install the newest coogle-<version>.pkg from https://github.com/coogle-dev/coogle/releases",
        ));
    }
    if s.starts_with("/nix/store/") {
        return Some((
            "Nix",
            "update it the way you installed it (nix profile upgrade, home-manager, ...)",
        ));
    }
    if s.starts_with("/usr/bin/") || s.starts_with("/bin/") || s.starts_with("/usr/sbin/") {
        return Some((
            "the system package manager",
            "update it with your package manager",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cellar_maps_to_opt() {
        assert_eq!(
            stable_path_for(Path::new("/opt/homebrew/Cellar/coogle/0.3.1/bin/coogle")),
            Some(PathBuf::from("/opt/homebrew/opt/coogle/bin/coogle"))
        );
        assert_eq!(
            stable_path_for(Path::new(
                "/home/linuxbrew/.linuxbrew/Cellar/coogle/1.0.0_1/bin/coogle"
            )),
            Some(PathBuf::from(
                "/home/linuxbrew/.linuxbrew/opt/coogle/bin/coogle"
            ))
        );
        assert_eq!(stable_path_for(Path::new("/usr/local/bin/coogle")), None);
    }

    #[test]
    fn package_manager_paths() {
        for p in [
            "/opt/homebrew/Cellar/coogle/0.1.0/bin/coogle",
            "/usr/local/Cellar/coogle/0.1.0/bin/coogle",
            "/opt/homebrew/bin/coogle",
            "/home/linuxbrew/.linuxbrew/bin/coogle",
        ] {
            assert_eq!(
                managed_by(Path::new(p)).map(|m| m.1),
                Some("brew upgrade coogle"),
                "{p}"
            );
        }
        assert_eq!(
            managed_by(Path::new("/nix/store/abc-coogle/bin/coogle")).map(|m| m.0),
            Some("Nix")
        );
        assert!(managed_by(Path::new("/usr/bin/coogle")).is_some());
        assert_eq!(managed_by(Path::new("/home/ada/.local/bin/coogle")), None);
        assert_eq!(managed_by(Path::new("/usr/local/bin/coogle")), None);
    }
}
