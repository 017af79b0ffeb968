//! Whether a file is the `coogle-mcp` of this very build, decided by reading it, never by
//! running it. `coogle mcp` hands each session to that file (see `cli::shim_exe`) with `exec`,
//! after which there is no way back: a file that is empty, cut short by an interrupted copy,
//! another program, or another build's would take the session with it. An empty executable
//! file even "runs": `execvp` hands it to `/bin/sh` as a script, which exits 0 at once, and the
//! agent sees a server that said nothing.
//!
//! `coogle-mcp` carries an identity in a section of its own ([`shim_identity!`]: a fixed head,
//! its version, a NUL). The check: a regular file, executable, of plausible size; an
//! executable image for this machine (ELF on Linux, Mach-O on macOS, of this processor) whose
//! headers say it is whole (every segment, and the ELF section table, lies inside the file);
//! and that section, found through the headers, holding this version's identity. It reads the
//! first 64 KiB and a few small pieces the headers point to (the section table and names, the
//! identity), whatever the file's size: a session's start does not pay for a scan, nor for a
//! process.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Defines `IDENTITY`, the identity `coogle-mcp` carries, in the section [`check`] looks in.
/// Expanded in the `coogle-mcp` binary, whose `main` keeps it alive.
#[macro_export]
macro_rules! shim_identity {
    () => {
        const IDENTITY_TEXT: &str = concat!(
            "\0dev.coogle.shim-identity:",
            env!("CARGO_PKG_VERSION"),
            "\0"
        );
        $crate::static_in_section! {
            elf = ".coogle_id",
            macho = "__DATA,__coogle_id",
            /// What `coogle` reads in this file, without running it, before it hands a session
            /// here.
            static IDENTITY: [u8; IDENTITY_TEXT.len()] = {
                let text = IDENTITY_TEXT.as_bytes();
                let mut out = [0u8; IDENTITY_TEXT.len()];
                let mut i = 0;
                while i < text.len() {
                    out[i] = text[i];
                    i += 1;
                }
                out
            };
        }
    };
}

/// The identity's head, as [`shim_identity!`] writes it.
const HEAD: &[u8] = b"\0dev.coogle.shim-identity:";
/// The section it is in: ELF's name, Mach-O's section name (in segment `__DATA`).
const ELF_SECTION: &[u8] = b".coogle_id";
const MACHO_SECTION: &[u8] = b"__coogle_id";

/// The identity a `coogle-mcp` of `version` carries.
fn identity(version: &str) -> Vec<u8> {
    let mut id = HEAD.to_vec();
    id.extend_from_slice(version.as_bytes());
    id.push(0);
    id
}

/// Smaller than this, a file is not a build of the shim (a release one is about 1 MB).
const MIN_SIZE: u64 = 64 * 1024;
/// Larger than this, it is not one either (a debug build is some hundreds of MB).
const MAX_SIZE: u64 = 1 << 30;
/// What is read of the start: the headers must fit in it.
const HEADERS: usize = 64 * 1024;
/// The most read for a section table or its names.
const MAX_TABLE: u64 = 1 << 20;
/// The most an identity section holds.
const MAX_IDENTITY: u64 = 256;

/// What a look at the file found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No such file: an install that only copied `coogle`, which is fine.
    Missing,
    /// The `coogle-mcp` of this version.
    Trusted,
    /// Something is there, and it is not that; the reason reads after the file's name
    /// ("… is empty").
    Refused(String),
}

/// Look at `path` for the `coogle-mcp` of `version`.
pub fn check(path: &Path, version: &str) -> Verdict {
    match check_file(path, version) {
        Ok(()) => Verdict::Trusted,
        Err(Problem::Missing) => Verdict::Missing,
        Err(Problem::Refused(why)) => Verdict::Refused(why),
    }
}

enum Problem {
    Missing,
    Refused(String),
}

fn refused<T>(why: impl Into<String>) -> Result<T, Problem> {
    Err(Problem::Refused(why.into()))
}

fn unreadable(e: std::io::Error) -> Problem {
    Problem::Refused(format!("cannot be read ({e})"))
}

fn check_file(path: &Path, version: &str) -> Result<(), Problem> {
    // Non-blocking: a FIFO in its place must not hang the session's start.
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Problem::Missing),
        Err(e) => return Err(unreadable(e)),
    };
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return refused("is not a regular file");
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return refused("is not executable");
    }
    let len = meta.len();
    if len == 0 {
        return refused("is empty");
    }
    if !(MIN_SIZE..=MAX_SIZE).contains(&len) {
        return refused(format!(
            "is {len} bytes, not the size of a build of coogle's shim"
        ));
    }
    let mut head = vec![0u8; HEADERS];
    let n = read_full(&mut file, &mut head).map_err(unreadable)?;
    head.truncate(n);
    let image = Image {
        file: &file,
        head: &head,
        len,
    };
    let found = if cfg!(target_os = "macos") {
        image.macho()?
    } else {
        image.elf()?
    };
    let wanted = identity(version);
    match found {
        Some(id) if id == wanted => Ok(()),
        Some(id) => match other_version(&id) {
            Some(v) => refused(format!(
                "is coogle-mcp {v}, not {version}: it comes from another install of coogle"
            )),
            None => refused("is not coogle's shim (its identity is unreadable)"),
        },
        None => refused("is not coogle's shim (it carries no coogle-mcp identity)"),
    }
}

/// Read until `buf` is full or the file ends; how many bytes were read.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The version in an identity of another build.
fn other_version(id: &[u8]) -> Option<&str> {
    let rest = id.strip_prefix(HEAD)?.strip_suffix(b"\0")?;
    std::str::from_utf8(rest)
        .ok()
        .filter(|v| !v.is_empty() && !v.contains('\0'))
}

fn u16_at(b: &[u8], at: usize, le: bool) -> Option<u64> {
    let s: [u8; 2] = b.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(if le {
        u16::from_le_bytes(s)
    } else {
        u16::from_be_bytes(s)
    } as u64)
}

fn u32_at(b: &[u8], at: usize, le: bool) -> Option<u64> {
    let s: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(s)
    } else {
        u32::from_be_bytes(s)
    } as u64)
}

fn u64_at(b: &[u8], at: usize, le: bool) -> Option<u64> {
    let s: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(if le {
        u64::from_le_bytes(s)
    } else {
        u64::from_be_bytes(s)
    })
}

/// Whether `offset + size` lies within `len`.
fn inside(offset: u64, size: u64, len: u64) -> bool {
    offset.checked_add(size).is_some_and(|end| end <= len)
}

fn truncated<T>() -> Result<T, Problem> {
    refused("is truncated (an interrupted copy?)")
}

fn damaged<T>() -> Result<T, Problem> {
    refused("is a damaged executable (its headers do not read)")
}

/// The file being looked at: its first bytes, and the rest on demand.
struct Image<'a> {
    file: &'a File,
    head: &'a [u8],
    len: u64,
}

impl Image<'_> {
    /// `size` bytes at `offset`, which the caller checked lie inside the file.
    fn read_at(&self, offset: u64, size: u64) -> Result<Vec<u8>, Problem> {
        let mut buf = vec![0u8; size as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(unreadable)?;
        Ok(buf)
    }

    fn not_an_executable<T>(&self) -> Result<T, Problem> {
        if self.head.starts_with(b"#!") {
            refused("is a script, not coogle's shim")
        } else {
            refused("is not an executable for this system")
        }
    }

    /// An ELF executable of this processor, whole; its identity section's bytes, if any.
    fn elf(&self) -> Result<Option<Vec<u8>>, Problem> {
        let b = self.head;
        if !b.starts_with(b"\x7fELF") {
            return self.not_an_executable();
        }
        let (wide, le) = match (b.get(4), b.get(5)) {
            (Some(1), Some(1)) => (false, true),
            (Some(1), Some(2)) => (false, false),
            (Some(2), Some(1)) => (true, true),
            (Some(2), Some(2)) => (true, false),
            _ => return damaged(),
        };
        let Some(kind) = u16_at(b, 0x10, le) else {
            return damaged();
        };
        if kind != 2 && kind != 3 {
            return refused("is not an executable program (an object file or a core dump?)");
        }
        let machine = u16_at(b, 0x12, le).unwrap_or(0);
        if let Some(want) = elf_machine()
            && machine != want
        {
            return refused(format!(
                "is built for another processor (ELF machine {machine}), not {}",
                std::env::consts::ARCH
            ));
        }
        // Where the program headers and the section table are, their entries' size and count,
        // and which section holds the section names.
        let (o, w) = if wide { (0x20, 8) } else { (0x1c, 4) };
        let word = |at: usize| {
            if wide {
                u64_at(b, at, le)
            } else {
                u32_at(b, at, le)
            }
        };
        let h = (|| {
            Some((
                word(o)?,
                word(o + w)?,
                u16_at(b, o + 2 * w + 6, le)?,
                u16_at(b, o + 2 * w + 8, le)?,
                u16_at(b, o + 2 * w + 10, le)?,
                u16_at(b, o + 2 * w + 12, le)?,
                u16_at(b, o + 2 * w + 14, le)?,
            ))
        })();
        let Some((phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx)) = h else {
            return damaged();
        };
        if phnum == 0 || !inside(phoff, phentsize * phnum, self.len) {
            return truncated();
        }
        // The section table comes last in the file: a cut copy loses it first.
        let table_size = shentsize * shnum;
        if shnum == 0 || !inside(shoff, table_size, self.len) {
            return truncated();
        }
        for i in 0..phnum {
            let at = (phoff + i * phentsize) as usize;
            let segment = if wide {
                u64_at(b, at + 0x08, le).zip(u64_at(b, at + 0x20, le))
            } else {
                u32_at(b, at + 0x04, le).zip(u32_at(b, at + 0x10, le))
            };
            match segment {
                Some((offset, size)) if !inside(offset, size, self.len) => return truncated(),
                Some(_) => {}
                // Program headers sit right after the ELF header, in what was read.
                None => return damaged(),
            }
        }
        if table_size > MAX_TABLE || shstrndx >= shnum {
            return damaged();
        }
        let table = self.read_at(shoff, table_size)?;
        // A section's name (offset into the names), file offset and size.
        let section = |i: u64| {
            let at = (i * shentsize) as usize;
            let name = u32_at(&table, at, le)?;
            let (offset, size) = if wide {
                (
                    u64_at(&table, at + 0x18, le)?,
                    u64_at(&table, at + 0x20, le)?,
                )
            } else {
                (
                    u32_at(&table, at + 0x10, le)?,
                    u32_at(&table, at + 0x14, le)?,
                )
            };
            Some((name, offset, size))
        };
        let Some((_, names_at, names_size)) = section(shstrndx) else {
            return damaged();
        };
        if names_size > MAX_TABLE || !inside(names_at, names_size, self.len) {
            return damaged();
        }
        let names = self.read_at(names_at, names_size)?;
        for i in 0..shnum {
            let Some((name, offset, size)) = section(i) else {
                return damaged();
            };
            let named = names
                .get(name as usize..)
                .and_then(|n| n.strip_prefix(ELF_SECTION))
                .is_some_and(|rest| rest.first() == Some(&0));
            if named {
                if size > MAX_IDENTITY || !inside(offset, size, self.len) {
                    return damaged();
                }
                return Ok(Some(self.read_at(offset, size)?));
            }
        }
        Ok(None)
    }

    /// A Mach-O executable (or universal binary) with a slice for this processor, whole; its
    /// identity section's bytes, if any.
    fn macho(&self) -> Result<Option<Vec<u8>>, Problem> {
        let b = self.head;
        match b.get(..4) {
            Some([0xca, 0xfe, 0xba, 0xbe]) => {
                let Some(n) = u32_at(b, 4, false) else {
                    return damaged();
                };
                let mut ours = None;
                for i in 0..n.min(16) {
                    let at = 8 + 20 * i as usize;
                    let (Some(cpu), Some(offset), Some(size)) = (
                        u32_at(b, at, false),
                        u32_at(b, at + 8, false),
                        u32_at(b, at + 12, false),
                    ) else {
                        return damaged();
                    };
                    if !inside(offset, size, self.len) {
                        return truncated();
                    }
                    if macho_cpu().is_none_or(|c| c == cpu) && ours.is_none() {
                        ours = Some((offset, size));
                    }
                }
                let Some((offset, size)) = ours else {
                    return refused("has no slice for this processor");
                };
                let head = self.read_at(offset, size.min(HEADERS as u64))?;
                Image {
                    file: self.file,
                    head: &head,
                    len: size,
                }
                .thin_macho(offset)
            }
            _ => self.thin_macho(0),
        }
    }

    /// One Mach-O image, starting at `base` in the file (a universal binary's slice) and `len`
    /// bytes long.
    fn thin_macho(&self, base: u64) -> Result<Option<Vec<u8>>, Problem> {
        let b = self.head;
        if b.get(..4) != Some(&[0xcf, 0xfa, 0xed, 0xfe]) {
            return self.not_an_executable();
        }
        let (Some(cpu), Some(ncmds), Some(cmds_size)) =
            (u32_at(b, 4, true), u32_at(b, 16, true), u32_at(b, 20, true))
        else {
            return damaged();
        };
        if let Some(want) = macho_cpu()
            && cpu != want
        {
            return refused(format!(
                "is built for another processor (Mach-O cpu {cpu:#x}), not {}",
                std::env::consts::ARCH
            ));
        }
        if 32 + cmds_size > b.len() as u64 {
            return damaged();
        }
        let mut found = None;
        let mut at = 32usize;
        for _ in 0..ncmds {
            let (Some(cmd), Some(size)) = (u32_at(b, at, true), u32_at(b, at + 4, true)) else {
                return damaged();
            };
            if size < 8 {
                return damaged();
            }
            match cmd {
                // LC_SEGMENT_64: its file extent, then its sections.
                0x19 => {
                    let (Some(offset), Some(filesize), Some(nsects)) = (
                        u64_at(b, at + 40, true),
                        u64_at(b, at + 48, true),
                        u32_at(b, at + 64, true),
                    ) else {
                        return damaged();
                    };
                    if !inside(offset, filesize, self.len) {
                        return truncated();
                    }
                    for s in 0..nsects as usize {
                        let sect = at + 72 + 80 * s;
                        let Some(name) = b.get(sect..sect + 16) else {
                            return damaged();
                        };
                        let named = name
                            .strip_prefix(MACHO_SECTION)
                            .is_some_and(|rest| rest.iter().all(|c| *c == 0));
                        if named {
                            let (Some(size), Some(offset)) =
                                (u64_at(b, sect + 40, true), u32_at(b, sect + 48, true))
                            else {
                                return damaged();
                            };
                            found = Some((offset, size));
                        }
                    }
                }
                // LC_CODE_SIGNATURE, the file's last bytes: dataoff, datasize.
                0x1d => {
                    let (Some(offset), Some(size)) =
                        (u32_at(b, at + 8, true), u32_at(b, at + 12, true))
                    else {
                        return damaged();
                    };
                    if !inside(offset, size, self.len) {
                        return truncated();
                    }
                }
                _ => {}
            }
            at += size as usize;
        }
        match found {
            None => Ok(None),
            Some((offset, size)) if size <= MAX_IDENTITY && inside(offset, size, self.len) => {
                Ok(Some(self.read_at(base + offset, size)?))
            }
            Some(_) => damaged(),
        }
    }
}

/// ELF `e_machine` of this processor, where known.
fn elf_machine() -> Option<u64> {
    Some(match std::env::consts::ARCH {
        "x86_64" => 62,
        "aarch64" => 183,
        "x86" => 3,
        "arm" => 40,
        "riscv64" => 243,
        "powerpc64" => 21,
        "s390x" => 22,
        "loongarch64" => 258,
        _ => return None,
    })
}

/// Mach-O `cputype` of this processor, where known.
fn macho_cpu() -> Option<u64> {
    Some(match std::env::consts::ARCH {
        "x86_64" => 0x0100_0007,
        "aarch64" => 0x0100_000c,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_builds_version_is_read_back() {
        assert_eq!(other_version(&identity("1.2.3")), Some("1.2.3"));
        assert_eq!(other_version(b"\0dev.coogle.shim-identity:\0"), None);
        assert_eq!(other_version(b"something else"), None);
    }

    /// A Mach-O image as the linker lays one out (header, one `__DATA` segment with the
    /// identity section), `filesize` claimed for its segment.
    fn macho_image(id: &[u8], filesize: u64) -> Vec<u8> {
        let cpu = macho_cpu().unwrap_or(0x0100_0007) as u32;
        let mut b = Vec::new();
        let le32 = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        let le64 = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        let name = |b: &mut Vec<u8>, n: &[u8]| {
            let mut padded = n.to_vec();
            padded.resize(16, 0);
            b.extend_from_slice(&padded);
        };
        b.extend_from_slice(&[0xcf, 0xfa, 0xed, 0xfe]);
        for v in [cpu, 3, 2, 1, 72 + 80, 0, 0] {
            le32(&mut b, v);
        }
        le32(&mut b, 0x19);
        le32(&mut b, 72 + 80);
        name(&mut b, b"__DATA");
        for v in [0, 0x1000, 0, filesize] {
            le64(&mut b, v);
        }
        for v in [3, 3, 1, 0] {
            le32(&mut b, v);
        }
        name(&mut b, MACHO_SECTION);
        name(&mut b, b"__DATA");
        le64(&mut b, 0x1000);
        le64(&mut b, id.len() as u64);
        for v in [0x1000, 0, 0, 0, 0, 0, 0, 0] {
            le32(&mut b, v);
        }
        b.resize(0x1000, 0);
        b.extend_from_slice(id);
        b.resize(MIN_SIZE as usize, 0);
        b
    }

    fn macho_of(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, bytes).unwrap();
        let head = &bytes[..bytes.len().min(HEADERS)];
        let image = Image {
            file: &f,
            head,
            len: bytes.len() as u64,
        };
        image.macho().map_err(|p| match p {
            Problem::Refused(why) => why,
            Problem::Missing => "missing".into(),
        })
    }

    /// The Mach-O side, read on any system: the identity is found through the load commands,
    /// in a thin image and in a universal binary's slice; a segment past the end is a cut file.
    #[test]
    fn a_macho_image_is_read_through_its_load_commands() {
        let id = identity("1.2.3");
        let thin = macho_image(&id, MIN_SIZE);
        assert_eq!(macho_of(&thin).unwrap(), Some(id.clone()));
        let cut = macho_image(&id, MIN_SIZE + 1);
        assert!(macho_of(&cut).unwrap_err().contains("truncated"));
        let mut fat = vec![0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 1];
        let cpu = macho_cpu().unwrap_or(0x0100_0007) as u32;
        for v in [cpu, 3, 0x1000, thin.len() as u32, 12] {
            fat.extend_from_slice(&v.to_be_bytes());
        }
        fat.resize(0x1000, 0);
        fat.extend_from_slice(&thin);
        assert_eq!(macho_of(&fat).unwrap(), Some(id));
        assert!(
            macho_of(&[0u8; 100])
                .unwrap_err()
                .contains("not an executable")
        );
    }

    /// The crate's own test binary is an executable of this machine but not the shim: it, and
    /// what is cut from it, emptied, made a script or not executable are refused, each with its
    /// reason. (The real `coogle-mcp` is taken, and the section found, in the integration
    /// tests: `shim_sibling.rs`, `shim_footprint.rs`.)
    #[test]
    fn files_that_are_not_the_shim_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let put = |name: &str, bytes: &[u8], mode: u32| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let v = env!("CARGO_PKG_VERSION");
        let why = |p: &Path| match check(p, v) {
            Verdict::Refused(why) => why,
            other => panic!("{} was {other:?}", p.display()),
        };
        assert_eq!(check(&dir.path().join("none"), v), Verdict::Missing);
        assert_eq!(why(&put("empty", b"", 0o755)), "is empty");
        assert!(why(&put("small", b"\x7fELF", 0o755)).contains("bytes"));
        let script = [b"#!/bin/sh\n".as_slice(), &vec![b'#'; 100_000]].concat();
        assert!(why(&put("script", &script, 0o755)).contains("script"));
        let zeros = vec![0u8; 100_000];
        assert!(why(&put("zeros", &zeros, 0o755)).contains("not an executable"));
        assert!(why(&put("foreign", &exe, 0o755)).contains("no coogle-mcp identity"));
        assert!(why(&put("noexec", &exe, 0o644)).contains("not executable"));
        assert!(why(dir.path()).contains("not a regular file"));
        let cut = why(&put("cut", &exe[..exe.len() * 3 / 4], 0o755));
        assert!(cut.contains("truncated"), "{cut}");
        // A FIFO in its place is not opened for a read that would block.
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(why(&fifo).contains("not a regular file"));
    }
}
