//! The terminal a person answers prompts on, given back as it was when they cancel: Ctrl-C
//! (SIGINT, whether the terminal sent it or a prompt reading keys raised it) or Esc. The
//! cursor a list hid is shown again, the echo and line mode a secret prompt turned off are
//! restored, and "cancelled" is said once; the process exits 130, as an interrupted command
//! does.
//!
//! It only ever touches the terminal's modes saved before the first prompt, and does nothing
//! until [`guard`] is called, so commands that never prompt keep the default SIGINT. Saving and
//! restoring the modes, and the signal handler, are the OS layer's (`os`).

/// The exit code of a cancelled command (128 + SIGINT, as a shell reports an interrupted one).
pub const CANCELLED_EXIT: i32 = 130;

/// Show the cursor (a list prompt hides it), then say so on a line of its own.
const CANCELLED: &[u8] = b"\x1b[?25h\ncancelled\n";

/// Save the terminal's modes and handle Ctrl-C from now on (once; later calls do nothing).
pub fn guard() {
    crate::os::restore_terminal_on_interrupt(CANCELLED, CANCELLED_EXIT);
}

/// The person cancelled a prompt (Esc): the same as Ctrl-C.
pub fn cancel() -> ! {
    crate::os::restore_terminal(CANCELLED);
    std::process::exit(CANCELLED_EXIT)
}
