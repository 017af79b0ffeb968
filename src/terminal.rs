//! The terminal a person answers prompts on, given back as it was when they cancel: Ctrl-C
//! (SIGINT, whether the terminal sent it or a prompt reading keys raised it) or Esc. The
//! cursor a list hid is shown again, the echo and line mode a secret prompt turned off are
//! restored, and "cancelled" is said once; the process exits 130, as an interrupted command
//! does.
//!
//! It only ever touches the terminal's modes saved before the first prompt, and does nothing
//! until [`guard`] is called, so commands that never prompt keep the default SIGINT.

use std::sync::OnceLock;

/// The exit code of a cancelled command (128 + SIGINT, as a shell reports an interrupted one).
pub const CANCELLED_EXIT: i32 = 130;

/// Show the cursor (a list prompt hides it), then say so on a line of its own.
const CANCELLED: &[u8] = b"\x1b[?25h\ncancelled\n";

/// The terminal's modes before the first prompt; `None` inside when stdin is no terminal.
static SAVED: OnceLock<Option<libc::termios>> = OnceLock::new();

/// Save the terminal's modes and handle Ctrl-C from now on (once; later calls do nothing).
pub fn guard() {
    SAVED.get_or_init(|| {
        // SAFETY: termios is plain data; all-zero is valid and tcgetattr overwrites it.
        let mut modes: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr writes into our local; fd 0 is only read.
        let saved =
            (unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut modes) } == 0).then_some(modes);
        // SAFETY: a zeroed sigaction is valid; we set the handler and an empty mask. The
        // handler only calls async-signal-safe functions (tcsetattr, write, _exit).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        }
        saved
    });
}

extern "C" fn on_interrupt(_signal: libc::c_int) {
    restore();
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(CANCELLED_EXIT) }
}

/// Give the terminal back and say "cancelled". Async-signal-safe: no allocation, no locks.
fn restore() {
    if let Some(Some(modes)) = SAVED.get() {
        // SAFETY: restoring modes tcgetattr gave us, on the same terminal.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, modes) };
    }
    // SAFETY: writing a static buffer to stderr.
    unsafe {
        libc::write(
            libc::STDERR_FILENO,
            CANCELLED.as_ptr().cast(),
            CANCELLED.len(),
        )
    };
}

/// The person cancelled a prompt (Esc): the same as Ctrl-C.
pub fn cancel() -> ! {
    restore();
    std::process::exit(CANCELLED_EXIT)
}
