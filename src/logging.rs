//! Tracing setup: the daemon logs to a size-rotated file (and to stderr when that is a
//! terminal); every other mode logs to stderr only. Never to stdout, which `coogle mcp` reserves
//! for MCP. Default filter `coogle=info,rmcp=warn` (`warn` for the CLI); `RUST_LOG` overrides.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// Rotate past this size.
pub const MAX_LOG_BYTES: u64 = 10 * 1024 * 1024;
/// Rotated files kept (`coogle.log.1` … `.N`).
pub const KEEP: usize = 3;

/// A log file that rotates itself by size.
pub struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max: u64,
    /// Rotate only between lines, however a line is split into writes.
    at_line_start: bool,
}

/// Open a log for appending, private to this user: the file 0600 and coogle's own log
/// directory 0700, also when an older coogle created them with the umask's looser modes. A
/// log holds what children print on stderr and, at debug level, what sessions ask.
pub fn open_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};

    if let Some(dir) = path.parent() {
        if let Some(up) = dir.parent() {
            std::fs::create_dir_all(up)?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        // Only coogle's own directory is tightened, and only when it is a real directory of
        // ours: a log directory the user symlinked elsewhere is theirs to set.
        if dir == crate::paths::log_dir()
            && let Ok(meta) = std::fs::symlink_metadata(dir)
            && meta.is_dir()
            && meta.uid() == crate::os::uid()
            && meta.mode() & 0o077 != 0
        {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    // On the open file (fchmod), so a rename in between cannot redirect it.
    let meta = file.metadata()?;
    if meta.mode() & 0o077 != 0 && meta.uid() == crate::os::uid() {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

impl RotatingFile {
    pub fn open(path: &Path, max: u64) -> io::Result<Self> {
        let file = open_private(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            file,
            size,
            max,
            at_line_start: true,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        for i in (1..KEEP).rev() {
            let from = rotated(&self.path, i);
            if from.exists() {
                std::fs::rename(&from, rotated(&self.path, i + 1))?;
            }
        }
        std::fs::rename(&self.path, rotated(&self.path, 1))?;
        self.file = open_private(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

pub fn rotated(path: &Path, i: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.at_line_start && self.size + buf.len() as u64 > self.max && self.size > 0 {
            // A failed rotation must not stop logging: keep appending to the current file.
            let _ = self.rotate();
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        if n > 0 {
            self.at_line_start = buf[n - 1] == b'\n';
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// The target of events for the log file alone: what the daemon also says to the person on
/// stderr in its own words (its fatal error), so a terminal does not show it twice.
pub const FILE_ONLY: &str = "coogle::log_file";

/// For the daemon: the log file, plus stderr when it is a terminal or `also_stderr`.
pub fn init_daemon(log_file: &Path, level: &str, also_stderr: bool) -> io::Result<()> {
    let file = RotatingFile::open(log_file, MAX_LOG_BYTES)?;
    let default = format!("coogle={level},rmcp=warn");
    let to_stderr = also_stderr || io::stderr().is_terminal();
    let file = Mutex::new(file);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(&default))
        .with_ansi(false);
    // `coogle serve` calls this once, first thing, so no subscriber can be set yet; were one
    // set, it would keep its place rather than fail a daemon over its logging.
    let _ = if to_stderr {
        let stderr = io::stderr.with_filter(|m: &tracing::Metadata<'_>| m.target() != FILE_ONLY);
        builder.with_writer(Scrubbing(file.and(stderr))).try_init()
    } else {
        builder.with_writer(Scrubbing(file)).try_init()
    };
    Ok(())
}

/// A log writer that takes the daemon's known secret values out of every line (see `redact`):
/// whatever a line quotes (a child's words, a command line, an error), no configured value
/// reaches the log or `coogle logs`.
struct Scrubbing<M>(M);

impl<'a, M: tracing_subscriber::fmt::MakeWriter<'a>> tracing_subscriber::fmt::MakeWriter<'a>
    for Scrubbing<M>
{
    type Writer = ScrubbingWriter<M::Writer>;
    fn make_writer(&'a self) -> Self::Writer {
        ScrubbingWriter(self.0.make_writer())
    }
    /// The inner writer's choice per event (what goes to the file only) is kept.
    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        ScrubbingWriter(self.0.make_writer_for(meta))
    }
}

struct ScrubbingWriter<W>(W);

impl<W: Write> Write for ScrubbingWriter<W> {
    /// tracing writes each event whole, in one call: a value cannot straddle two calls.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let known = crate::redact::known();
        match known.values_in(&text) {
            std::borrow::Cow::Borrowed(_) => self.0.write_all(buf)?,
            std::borrow::Cow::Owned(clean) => self.0.write_all(clean.as_bytes())?,
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// For every other mode: stderr only, quiet by default. `RUST_LOG` takes `target=level` lists
/// here (a `Targets` filter, which parses by hand): the shim starts once per agent session and
/// should not page in the `EnvFilter` machinery for a process that only pumps bytes.
pub fn init_stderr(default: &str) {
    let targets: tracing_subscriber::filter::Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| default.parse().unwrap_or_default());
    // `try_init`, not `set_global_default`: it also routes the `log` crate's records (rustls,
    // reqwest) to the subscriber.
    let _ = tracing_subscriber::util::SubscriberInitExt::try_init(Deferred {
        targets,
        built: std::sync::OnceLock::new(),
    });
}

/// A stderr subscriber built at the first event its filter lets through. The formatting one
/// sits on a span registry whose slab takes about 32 KiB as it is made, and a shim (one per
/// session and server, most of which never log) would hold it all its life; the filter alone
/// answers every check until then.
struct Deferred {
    targets: tracing_subscriber::filter::Targets,
    built: std::sync::OnceLock<Box<dyn tracing::Subscriber + Send + Sync>>,
}

impl Deferred {
    /// Building it must emit no event: one would come back here, inside `get_or_init`, and
    /// wait on itself.
    fn built(&self) -> &(dyn tracing::Subscriber + Send + Sync) {
        use tracing_subscriber::layer::SubscriberExt;
        self.built
            .get_or_init(|| {
                Box::new(
                    tracing_subscriber::registry()
                        .with(
                            tracing_subscriber::fmt::layer()
                                .with_ansi(io::stderr().is_terminal())
                                .with_writer(io::stderr),
                        )
                        .with(self.targets.clone()),
                )
            })
            .as_ref()
    }
}

impl tracing::Subscriber for Deferred {
    fn register_callsite(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if self.targets.would_enable(meta.target(), meta.level()) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        self.targets.would_enable(meta.target(), meta.level())
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        use tracing_subscriber::layer::Layer;
        Layer::<tracing_subscriber::Registry>::max_level_hint(&self.targets)
    }

    // Everything below reaches the built subscriber: an event or a span is what builds it,
    // and every other call names a span it made.
    fn event(&self, event: &tracing::Event<'_>) {
        self.built().event(event)
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.built().new_span(span)
    }

    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        self.built().record(span, values)
    }

    fn record_follows_from(&self, span: &tracing::span::Id, follows: &tracing::span::Id) {
        self.built().record_follows_from(span, follows)
    }

    fn enter(&self, span: &tracing::span::Id) {
        self.built().enter(span)
    }

    fn exit(&self, span: &tracing::span::Id) {
        self.built().exit(span)
    }

    fn clone_span(&self, id: &tracing::span::Id) -> tracing::span::Id {
        self.built().clone_span(id)
    }

    fn try_close(&self, id: tracing::span::Id) -> bool {
        self.built().try_close(id)
    }

    fn current_span(&self) -> tracing_core::span::Current {
        match self.built.get() {
            Some(built) => built.current_span(),
            None => tracing_core::span::Current::none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stderr subscriber is built by the first event that passes its filter, not before
    /// (a quiet shim never pays for it), and from then on events reach it.
    #[test]
    fn the_stderr_subscriber_is_built_by_the_first_event_it_lets_through() {
        let dispatch = tracing::Dispatch::new(Deferred {
            targets: "coogle=warn".parse().unwrap(),
            built: std::sync::OnceLock::new(),
        });
        let built = || {
            dispatch
                .downcast_ref::<Deferred>()
                .unwrap()
                .built
                .get()
                .is_some()
        };
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::info!(target: "coogle", "below the filter");
            tracing::error!(target: "other", "another crate's");
            assert!(!built());
            tracing::warn!(target: "coogle", "through the filter");
            assert!(built());
        });
    }

    /// Regression: the log was created 0644 in a 0755 directory, readable by every local user.
    #[test]
    fn a_log_is_private_even_when_it_was_created_loose() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("logs").join("coogle.log");
        let mut f = RotatingFile::open(&path, 100).unwrap();
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(f);
        f = RotatingFile::open(&path, 100).unwrap();
        assert_eq!(mode(&path), 0o600);
        // Rotation starts a new file, private too.
        for i in 0..5 {
            writeln!(f, "{i:0>60}").unwrap();
        }
        assert!(rotated(&path, 1).exists());
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&rotated(&path, 1)), 0o600);
    }

    #[test]
    fn rotates_by_size_and_keeps_a_bounded_number() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("coogle.log");
        let mut f = RotatingFile::open(&path, 100).unwrap();
        for i in 0..20 {
            writeln!(f, "{i:0>60}").unwrap();
        }
        // Each file holds whole lines only.
        for p in [path.clone(), rotated(&path, 1), rotated(&path, 2)] {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                text.ends_with('\n') && text.lines().all(|l| l.len() == 60),
                "{text:?}"
            );
        }
        assert!(rotated(&path, 1).exists());
        assert!(rotated(&path, KEEP).exists());
        assert!(!rotated(&path, KEEP + 1).exists());
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.contains(&format!("{:0>60}", 19)));
    }
}
