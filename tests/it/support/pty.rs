//! A pseudo-terminal for the tests that drive coogle as a person at a terminal would (the
//! setup wizard, the prompts, `coogle mcp` typed by hand): the child gets the pty as its
//! controlling terminal; everything it shows is kept for the assertions. Every wait is
//! bounded; a failure prints what the terminal showed.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Pty {
    master: File,
    screen: Arc<Mutex<Vec<u8>>>,
    pub child: std::process::Child,
}

impl Pty {
    pub fn spawn(mut cmd: std::process::Command) -> Pty {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes two fds into the given ints; the name and termios are null.
        // The termios is `*const` on Linux and `*mut` on macOS: a null `*mut` fits both.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                (&raw const size) as _,
            )
        };
        assert_eq!(rc, 0, "openpty failed");
        // SAFETY: both fds were just returned by openpty and are owned here.
        let slave = unsafe { OwnedFd::from_raw_fd(slave) };
        let master = unsafe { File::from_raw_fd(master) };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe; the child makes the pty its
        // controlling terminal so /dev/tty works for the prompts.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn coogle setup in a pty");
        drop(cmd);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            master,
            screen,
            child,
        }
    }

    /// The terminal's modes now (echo, line mode), as whoever uses it next would find them.
    pub fn modes(&self) -> libc::termios {
        use std::os::fd::AsRawFd;
        // SAFETY: termios is plain data; tcgetattr fills it from the pty we own.
        let mut modes: libc::termios = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::tcgetattr(self.master.as_raw_fd(), &mut modes) };
        assert_eq!(rc, 0, "tcgetattr on the pty failed");
        modes
    }

    /// What the terminal showed, as the program wrote it (escape sequences and all).
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// What the terminal showed, without escape sequences (colours, cursor moves): the words
    /// a person reads. [`Pty::expect`] searches this.
    pub fn text(&self) -> String {
        let raw = self.raw();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\x1b' {
                out.push(c);
                continue;
            }
            // CSI: ESC [ parameters, then one final byte in @..~.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        }
        out
    }

    /// Wait until the terminal has shown `needle` after `from`; returns the position after it.
    pub fn expect(&mut self, needle: &str, from: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if let Some(pos) = text.get(from..).and_then(|t| t.find(needle)) {
                return from + pos + needle.len();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("timed out waiting for {needle:?}; the terminal showed:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn send(&mut self, keys: &str) {
        // Give the prompt a moment to switch the terminal to raw mode.
        std::thread::sleep(Duration::from_millis(150));
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "setup did not finish; the terminal showed:\n{}",
                    self.text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
