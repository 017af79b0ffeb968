//! A `coogle serve` that a test starts with a command of its own (another socket, more
//! environment), where [`super::Env::daemon`] does not fit. Stopped when dropped (SIGTERM, then
//! SIGKILL after 10 s), so no daemon outlives its test; its output is discarded.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Serve {
    child: Child,
}

impl Serve {
    /// Run `cmd serve` (`cmd` as [`super::Env::cmd`] made it, adjusted).
    pub fn spawn(mut cmd: Command) -> Serve {
        let child = cmd
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn coogle serve");
        Serve { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True once the process has exited.
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
