//! Lexing helpers shared by the parser: input validation before pest runs (UTF-8, nesting
//! depth), lazy line/column computation, and decoding of literal tokens (strings, integers).

use std::borrow::Cow;

/// Checks that `bytes` is UTF-8; on failure returns the byte offset of the first bad byte.
pub(crate) fn check_utf8(bytes: &[u8]) -> Result<&str, usize> {
    std::str::from_utf8(bytes).map_err(|e| e.valid_up_to())
}

/// Scans `src` for bracket nesting deeper than `max` and returns the offset of the first
/// opening bracket beyond the limit. String literals and `//` comments are skipped. The scan
/// errs on the side of counting too deep (every `<` opens, `->` and `>=` never close), so the
/// recursive grammar can never nest deeper than what this scan accepted.
pub(crate) fn find_nesting_overflow(src: &str, max: usize) -> Option<usize> {
    // The bytes the scan acts on; the others are stepped over in a tight loop.
    const STOP: [bool; 256] = {
        let mut t = [false; 256];
        let stops = b"\"/([{<>)]}";
        let mut i = 0;
        while i < stops.len() {
            t[stops[i] as usize] = true;
            i += 1;
        }
        t
    };
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        if !STOP[b[i] as usize] {
            i += 1;
            continue;
        }
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' | b'<' => {
                depth += 1;
                if depth > max {
                    return Some(i);
                }
            }
            b'>' if i > 0 && b[i - 1] == b'-' => {}
            b'>' if b.get(i + 1) == Some(&b'=') => {}
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Maps byte offsets to 1-based (line, byte column). Offsets are asked for in increasing order
/// while an op tree is built, so a cursor moving forward makes the whole file O(n) with no
/// line table; a backward query (rare: diagnostics, deferred locations) rescans from the start.
pub(crate) struct LineCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: u32,
    line_start: usize,
}

impl<'a> LineCursor<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        LineCursor {
            bytes: src.as_bytes(),
            pos: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// 1-based (line, column) of byte offset `pos`.
    pub(crate) fn line_col(&mut self, pos: usize) -> (u32, u32) {
        let pos = pos.min(self.bytes.len());
        if pos < self.pos {
            self.pos = 0;
            self.line = 1;
            self.line_start = 0;
        }
        let chunk = &self.bytes[self.pos..pos];
        if let Some(last) = chunk.iter().rposition(|&c| c == b'\n') {
            let n = chunk.iter().filter(|&&c| c == b'\n').count();
            self.line += n as u32;
            self.line_start = self.pos + last + 1;
        }
        self.pos = pos;
        (self.line, (pos - self.line_start) as u32 + 1)
    }
}

/// Line and column of a byte offset in raw bytes (for errors found before the text is known
/// to be UTF-8).
pub(crate) fn line_col_of_bytes(bytes: &[u8], pos: usize) -> (u32, u32) {
    let pos = pos.min(bytes.len());
    let before = &bytes[..pos];
    let line = before.iter().filter(|&&c| c == b'\n').count() as u32 + 1;
    let start = before
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    (line, (pos - start) as u32 + 1)
}

/// Decodes the body of a string literal token (with its quotes). MLIR's escapes: `\n`, `\t`,
/// `\"`, `\\` and `\XX` (two hex digits). On a bad escape returns the byte offset (within
/// the token) of the backslash.
pub(crate) fn unescape(token: &str) -> Result<Cow<'_, [u8]>, usize> {
    let body = &token[1..token.len() - 1];
    if !body.contains('\\') {
        return Ok(Cow::Borrowed(body.as_bytes()));
    }
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let esc = |j: usize| b.get(j).copied().unwrap_or(0);
        match esc(i + 1) {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'"' => out.push(b'"'),
            b'\\' => out.push(b'\\'),
            c if c.is_ascii_hexdigit() && esc(i + 2).is_ascii_hexdigit() => {
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                out.push(hex(c) * 16 + hex(esc(i + 2)));
                i += 3;
                continue;
            }
            _ => return Err(i + 1),
        }
        i += 2;
    }
    Ok(Cow::Owned(out))
}

/// An integer literal's magnitude and sign, decoded from `-`? (`0x` hex | decimal) text.
/// `None` for the magnitude when it does not fit 128 bits.
pub(crate) fn parse_int_literal(text: &str) -> (bool, Option<u128>) {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mag = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u128::from_str_radix(hex, 16).ok(),
        None => digits.parse::<u128>().ok(),
    };
    (neg, mag)
}

/// Whether `text` is a hexadecimal literal (`0x...`, optionally negative).
pub(crate) fn is_hex_literal(text: &str) -> bool {
    text.trim_start_matches('-').starts_with("0x")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes() {
        assert_eq!(&*unescape(r#""a\n\"b\\\0A""#).unwrap(), b"a\n\"b\\\n");
        assert!(unescape(r#""\q""#).is_err());
    }

    #[test]
    fn nesting() {
        assert_eq!(find_nesting_overflow("((()))", 3), None);
        assert_eq!(find_nesting_overflow("(((())))", 3), Some(3));
        assert_eq!(find_nesting_overflow("\"((((\" (a) -> b", 1), None);
    }

    #[test]
    fn cursor() {
        let mut c = LineCursor::new("ab\ncd\n\nx");
        assert_eq!(c.line_col(0), (1, 1));
        assert_eq!(c.line_col(4), (2, 2));
        assert_eq!(c.line_col(7), (4, 1));
        assert_eq!(c.line_col(1), (1, 2));
    }
}
