//! `coogle-mcp`: `coogle mcp` in an executable holding nothing else, so each of the many shims
//! (one per agent session and server) costs little memory. `coogle mcp` execs it when it is
//! installed beside `coogle` (see `cli::shim_exe`); it takes the same arguments.

use coogle::cli;

// `IDENTITY`: what `coogle` reads in this file, without running it, before it hands a session
// here (see `shim_identity`).
coogle::shim_identity!();

fn main() -> std::process::ExitCode {
    // Used, so the linker keeps it.
    std::hint::black_box(&IDENTITY);
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    cli::hand_back_if_mismatched(&args);
    // Linked static for the Linux release archives (scripts/static-shim).
    if cfg!(target_feature = "crt-static") {
        cli::statically_linked(&args);
    }
    match cli::fast_mcp(&args, &|k| std::env::var_os(k)) {
        Some(cli) => cli::run_mcp(cli).into(),
        // Anything but a plain `mcp` command line (help, other commands) is `coogle`'s to
        // answer; this binary carries no parser for it.
        None => {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"error: coogle-mcp takes only `mcp [--server NAME]` (and --config, --socket); run `coogle --help`\n",
            );
            std::process::ExitCode::from(2)
        }
    }
}
