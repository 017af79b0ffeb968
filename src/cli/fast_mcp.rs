//! `coogle mcp`'s own options, read without clap: the shim starts once per agent session, and
//! building clap's whole command tree pages in a good part of the binary for a process that
//! then only pumps bytes. Only the plain forms are taken (`mcp`, `--server`, and the global
//! `--config`/`--socket`, as `--flag value` or `--flag=value`, and their `COOGLE_*`
//! variables); anything else (`--help`, unknown flags, non-UTF-8, an empty variable) returns
//! `None` and goes to clap, so behaviour never differs.
//!
//! This file must never call into clap: that is the whole point of it.

use std::path::PathBuf;

use super::{Cli, Command};

/// The parsed command line when it is a plain `coogle mcp`, else `None` (clap decides).
pub fn fast_mcp(
    args: &[std::ffi::OsString],
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<Cli> {
    let mut config: Option<PathBuf> = None;
    let mut socket: Option<PathBuf> = None;
    let mut server: Option<String> = None;
    let mut seen_mcp = false;
    let mut it = args.iter().map(|a| a.to_str());
    while let Some(arg) = it.next() {
        let arg = arg?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg, None),
        };
        let mut value = || -> Option<String> {
            let v = match inline {
                Some(v) => v.to_owned(),
                None => it.next()??.to_owned(),
            };
            (!v.is_empty() && !v.starts_with('-')).then_some(v)
        };
        match flag {
            "mcp" if !seen_mcp && inline.is_none() => seen_mcp = true,
            "--config" if config.is_none() => config = Some(PathBuf::from(value()?)),
            "--socket" if socket.is_none() => socket = Some(PathBuf::from(value()?)),
            "--server" if seen_mcp && server.is_none() => server = Some(value()?),
            _ => return None,
        }
    }
    if !seen_mcp {
        return None;
    }
    let from_env = |name: &str| -> Option<Option<PathBuf>> {
        match env(name) {
            None => Some(None),
            Some(v) if v.is_empty() => None,
            Some(v) => Some(Some(PathBuf::from(v))),
        }
    };
    if config.is_none() {
        config = from_env("COOGLE_CONFIG")?;
    }
    if socket.is_none() {
        socket = from_env("COOGLE_SOCKET")?;
    }
    Some(Cli {
        config,
        socket,
        command: Command::Mcp { server },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::ffi::OsString;
    use std::path::Path;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    /// The shim's fast path takes only what clap would parse the same way; everything else is
    /// left to clap.
    #[test]
    fn fast_mcp_agrees_with_clap() {
        let no_env = |_: &str| None;
        let taken = [
            "mcp",
            "mcp --server search",
            "mcp --server=search",
            "--config /c.json mcp",
            "mcp --config /c.json --socket /s.sock",
            "--socket=/s.sock mcp --server google --config=/c.json",
        ];
        let real_env = std::env::var_os("COOGLE_CONFIG").is_some()
            || std::env::var_os("COOGLE_SOCKET").is_some();
        for line in taken {
            let fast = fast_mcp(&argv(line), &no_env).unwrap_or_else(|| panic!("{line} not taken"));
            if !real_env {
                let mut full = vec![OsString::from("coogle")];
                full.extend(argv(line));
                let clap = Cli::try_parse_from(full).unwrap();
                assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{line}");
            }
        }
        for line in [
            "",
            "mcp --help",
            "mcp -h",
            "--version",
            "status",
            "mcp extra",
            "--server x mcp",
            "mcp --server",
            "mcp --server --config",
            "mcp --config=",
            "mcp --config a --config b",
            "mcp mcp",
            "mcp --unknown",
        ] {
            assert!(
                fast_mcp(&argv(line), &no_env).is_none(),
                "{line:?} was taken"
            );
        }
        // The variables, like clap's `env`; an empty one goes to clap.
        let env = |k: &str| (k == "COOGLE_SOCKET").then(|| OsString::from("/env.sock"));
        let cli = fast_mcp(&argv("mcp"), &env).unwrap();
        assert_eq!(cli.socket.as_deref(), Some(Path::new("/env.sock")));
        let cli = fast_mcp(&argv("mcp --socket /flag.sock"), &env).unwrap();
        assert_eq!(cli.socket.as_deref(), Some(Path::new("/flag.sock")));
        let empty = |k: &str| (k == "COOGLE_CONFIG").then(OsString::new);
        assert!(fast_mcp(&argv("mcp"), &empty).is_none());
    }
}
