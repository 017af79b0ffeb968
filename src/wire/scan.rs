//! Where JSON values end in text: the steps of the walks that read a line or an object in
//! place (`answer.rs` in the shim, `object.rs` in the daemon) without building anything. They
//! find ends; they do not check: on text that is not JSON they never panic, but may read
//! nonsense (`{"a":tru}` has a field `a` of `tru`). Only text that was checked, or that the
//! daemon wrote itself, is walked.

/// The first byte at or after `i` that is not JSON whitespace.
pub(super) fn skip_space(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Where the string that opens at `b[i]` ends (just past its closing quote), and whether it
/// has an escape. Eight bytes at a time, each word's first quote or backslash found at once:
/// a result's long texts cost about a step per byte, and a key a few steps (a call into
/// `memchr` for each string cost more than the whole of a short key).
pub(super) fn string_end(b: &[u8], i: usize) -> Option<(usize, bool)> {
    if *b.get(i)? != b'"' {
        return None;
    }
    let (mut at, mut escaped) = (i + 1, false);
    loop {
        match b.get(at..at + 8) {
            Some(word) => {
                let w = u64::from_le_bytes(word.try_into().ok()?);
                let found = bytes_equal(w, b'"') | bytes_equal(w, b'\\');
                if found == 0 {
                    at += 8;
                    continue;
                }
                at += found.trailing_zeros() as usize / 8;
            }
            None => {
                while !matches!(b.get(at)?, b'"' | b'\\') {
                    at += 1;
                }
            }
        }
        match b[at] {
            b'"' => return Some((at + 1, escaped)),
            _ => (at, escaped) = (at + 2, true),
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that may be `c`: its lowest is exactly the first that is
/// (the subtraction's borrow only ever flags bytes above one that truly is `c`).
pub(super) fn bytes_equal(w: u64, c: u8) -> u64 {
    bytes_below(w ^ (ONES * u64::from(c)), 1)
}

/// The high bit of each byte of `w` that may be below `n` (n <= 128): nonzero exactly when one
/// is, and its lowest is the first (the borrow flags only bytes above one truly below).
pub(super) fn bytes_below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH
}

/// Where the value that starts at `b[i]` ends: a string, an object or an array (to its
/// matching close, strings skipped whole), or a number or literal (to the next delimiter).
pub(super) fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i).map(|(end, _)| end),
        b'{' | b'[' => {
            let (mut depth, mut at) = (0usize, i);
            loop {
                match *b.get(at)? {
                    b'"' => {
                        at = string_end(b, at)?.0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let rest = b.get(i..)?;
            let len = rest
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(i + len)
        }
    }
}
