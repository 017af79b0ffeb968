//! The interactive `coogle setup`, driven for real in a pseudo-terminal: the client id is
//! typed, the secret typed without echo, the service declined, the client list confirmed.
//! Every wait is bounded; a failure prints everything the terminal showed.

use crate::support;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Env, fake_mcp};

struct Pty {
    master: File,
    screen: Arc<Mutex<Vec<u8>>>,
    child: std::process::Child,
}

impl Pty {
    fn spawn(mut cmd: std::process::Command) -> Pty {
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

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Wait until the terminal has shown `needle` after `from`; returns the position after it.
    fn expect(&mut self, needle: &str, from: usize, timeout: Duration) -> usize {
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

    fn send(&mut self, keys: &str) {
        // Give the prompt a moment to switch the terminal to raw mode.
        std::thread::sleep(Duration::from_millis(150));
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    fn wait(&mut self, timeout: Duration) -> Option<i32> {
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

const API_KEY: &str = "AIzaSyD-typed-in-the-terminal-012345678";

#[test]
fn interactive_setup_in_a_pty() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp()}}}));
    let secret = "GOCSPX-typed-in-the-terminal-42";
    let mut cmd = env.cmd();
    cmd.arg("setup")
        .env("TERM", "xterm")
        .env("COOGLE_SYSTEMCTL", env.path("none"))
        .env_remove("GOOGLE_OAUTH_CLIENT_ID")
        .env_remove("GOOGLE_OAUTH_CLIENT_SECRET")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("CI");
    let mut pty = Pty::spawn(cmd);
    let t = Duration::from_secs(30);

    let at = pty.expect("Google OAuth client id", 0, t);
    pty.send("typed-id.apps.googleusercontent.com\r");
    let at = pty.expect("Google OAuth client secret", at, t);
    pty.send(&format!("{secret}\r"));
    let at = pty.expect("secret <31 chars> (entered)", at, t);
    // No Gemini API key anywhere: the wizard offers the search server and takes one, hidden.
    let at = pty.expect("Set up the ask_google search server?", at, t);
    pty.send("y");
    let at = pty.expect("Gemini API key", at, t);
    pty.send(&format!("{API_KEY}\r"));
    let at = pty.expect("Gemini API key <39 chars> (entered)", at, t);
    let at = pty.expect("listed", at, Duration::from_secs(60));
    let at = pty.expect("Install the service", at, t);
    pty.send("n");
    let at = pty.expect("Point these clients at coogle", at, t);
    pty.send("\r");
    pty.expect("[9/9] Done", at, Duration::from_secs(60));
    let code = pty.wait(Duration::from_secs(30));
    let screen = pty.text();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains(secret), "the secret was echoed:\n{screen}");
    assert!(
        !screen.contains(API_KEY),
        "the API key was echoed:\n{screen}"
    );

    let config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config["servers"]["google"]["credentials"],
        json!({"source": "manual", "clientId": "typed-id.apps.googleusercontent.com", "clientSecret": secret})
    );
    assert!(!env.service_file().exists(), "the service was declined");
    let claude: Value =
        serde_json::from_slice(&std::fs::read(env.home.join(".claude.json")).unwrap()).unwrap();
    // The test socket is not the default one, so the entry names it.
    assert_eq!(
        claude["mcpServers"]["coogle"]["args"],
        json!(["mcp", "--socket", env.socket])
    );
    assert_eq!(
        claude["mcpServers"]["coogle-search"]["args"],
        json!(["mcp", "--server", "search", "--socket", env.socket])
    );
    assert_eq!(config["search"]["apiKey"], API_KEY);
}
