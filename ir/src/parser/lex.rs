//! Lexing helpers shared by the parser: input validation before pest runs (UTF-8, nesting
//! depth), lazy line/column computation, and decoding of literal tokens (strings, integers).

use rustc_hash::FxHashMap;
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
    prescan(src, max, false).overflow
}

/// The end offset (past the `)`) and the region count of each region list, by the offset of
/// its `(`.
pub(crate) type RegionListEnds = FxHashMap<usize, (usize, usize)>;

/// What [`prescan`] found.
pub(crate) struct Prescan {
    /// See [`find_nesting_overflow`].
    pub overflow: Option<usize>,
    /// Every region list (a `(` whose next non-blank byte is `{`) and where it ends, as the
    /// fast path's region skip would find it; empty unless asked for. Only
    /// `()[]{}`, strings and `//` comments are followed: the fast path checks that parsing a
    /// list really ends where this says (and scans for itself where it says nothing), so an
    /// entry is a hint, never trusted.
    pub region_lists: RegionListEnds,
}

/// The nesting check of [`find_nesting_overflow`] and, with `regions`, the region lists of
/// the file, in one pass over the bytes (the fast path would otherwise make a second one).
/// Bytes that neither acts on are stepped over sixteen at a time.
pub(crate) fn prescan(src: &str, max: usize, regions: bool) -> Prescan {
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut lists = RegionTracker {
        on: regions,
        ..RegionTracker::default()
    };
    let mut i = 0;
    'chunks: while i < b.len() {
        let base = i;
        let rest = &b[base..];
        let mut mask = match rest.first_chunk::<16>() {
            Some(chunk) => {
                i += 16;
                stop_mask(chunk)
            }
            None => {
                i = b.len();
                rest.iter()
                    .enumerate()
                    .fold(0, |m, (k, &c)| m | (is_stop(c) as u32) << k)
            }
        };
        while mask != 0 {
            let p = base + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            // Where a string or comment starting at `p` ends.
            let skip_to = match b[p] {
                b'"' => {
                    let mut k = p + 1;
                    while k < b.len() && b[k] != b'"' && b[k] != b'\n' {
                        k += if b[k] == b'\\' { 2 } else { 1 };
                    }
                    // The grammar's strings hold no raw newline and are closed.
                    if b.get(k) != Some(&b'"') {
                        lists.on = false;
                    }
                    k + 1
                }
                b'/' if b.get(p + 1) == Some(&b'/') => {
                    match b[p..].iter().position(|&c| c == b'\n') {
                        Some(n) => p + n + 1,
                        None => b.len(),
                    }
                }
                _ => 0,
            };
            if skip_to != 0 {
                if skip_to >= i {
                    i = skip_to;
                    continue 'chunks;
                }
                // Still inside this chunk: drop the stops before `skip_to`.
                mask &= !0u32 << (skip_to - base);
                continue;
            }
            match b[p] {
                b'"' | b'/' => {}
                c @ (b'(' | b'[' | b'{' | b'<') => {
                    depth += 1;
                    if depth > max {
                        return Prescan {
                            overflow: Some(p),
                            region_lists: RegionListEnds::default(),
                        };
                    }
                    if c != b'<' {
                        lists.open(b, p);
                    }
                }
                b'>' if p > 0 && b[p - 1] == b'-' => {}
                b'>' if b.get(p + 1) == Some(&b'=') => {}
                b'>' => depth = depth.saturating_sub(1),
                c => {
                    depth = depth.saturating_sub(1);
                    lists.close(c, p);
                }
            }
        }
    }
    Prescan {
        overflow: None,
        region_lists: lists.ends,
    }
}

/// The bytes [`prescan`] acts on: `"/()[]{}<>`. `[`/`{` and `]`/`}` differ in bit 5 only,
/// `(`/`)` in bit 0 and `<`/`>` in bit 1, so six comparisons cover the ten bytes, which the
/// compiler does for a whole chunk with vector compares.
#[inline(always)]
fn is_stop(c: u8) -> bool {
    (c & 0xDF == b'[')
        | (c & 0xDF == b']')
        | (c & 0xFE == b'(')
        | (c & 0xFD == b'<')
        | (c == b'"')
        | (c == b'/')
}

/// Bit `k` set where `chunk[k]` is a byte [`prescan`] acts on. Not inlined: on its own the
/// compiler turns it into a few vector instructions, inlined into the scan loop it did not.
#[inline(never)]
fn stop_mask(chunk: &[u8; 16]) -> u32 {
    let hits: [u8; 16] = std::array::from_fn(|k| is_stop(chunk[k]) as u8);
    let (lo, hi) = hits.split_at(8);
    // Each byte is 0 or 1; the product gathers bit 0 of byte `k` into bit `56 + k` (the
    // partial products never overlap, so nothing carries).
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let gather = |half: &[u8]| {
        let word = u64::from_le_bytes(half.try_into().unwrap_or_default());
        (word.wrapping_mul(GATHER) >> 56) as u32
    };
    gather(lo) | gather(hi) << 8
}

/// The region-list bookkeeping of [`prescan`]; it stops (`on` false) at the first bracket
/// mismatch or bad string, keeping the lists it found before.
#[derive(Default)]
struct RegionTracker {
    on: bool,
    /// Open brackets: (expected closer, offset, is a region list, regions directly inside).
    open: Vec<(u8, usize, bool, usize)>,
    ends: RegionListEnds,
}

impl RegionTracker {
    #[inline]
    fn open(&mut self, b: &[u8], p: usize) {
        if !self.on {
            return;
        }
        match b[p] {
            b'(' => {
                let mut j = p + 1;
                while matches!(b.get(j), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    j += 1;
                }
                self.open.push((b')', p, b.get(j) == Some(&b'{'), 0));
            }
            b'[' => self.open.push((b']', p, false, 0)),
            _ => {
                // A region list holds one `{` group per region (a list that is not of that
                // shape fails when it is parsed).
                if let Some(top) = self.open.last_mut() {
                    top.3 += 1;
                }
                self.open.push((b'}', p, false, 0));
            }
        }
    }

    #[inline]
    fn close(&mut self, c: u8, p: usize) {
        if !self.on {
            return;
        }
        match self.open.pop() {
            Some((close, at, is_list, regions)) if close == c => {
                if is_list {
                    self.ends.insert(at, (p + 1, regions));
                }
            }
            _ => self.on = false,
        }
    }
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

    /// The nesting scan as a plain byte loop: the model [`prescan`] must agree with.
    fn nesting_model(src: &str, max: usize) -> Option<usize> {
        let b = src.as_bytes();
        let mut depth = 0usize;
        let mut i = 0;
        while i < b.len() {
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

    /// Region lists as a plain per-bracket walk: `(` offset -> (end, regions).
    fn regions_model(src: &str) -> RegionListEnds {
        let b = src.as_bytes();
        let mut out = RegionListEnds::default();
        let mut open: Vec<(u8, usize, bool, usize)> = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    if b.get(i) != Some(&b'"') {
                        return out;
                    }
                }
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
                b'(' => {
                    let rest = src[i + 1..].trim_start_matches([' ', '\t', '\n', '\r']);
                    open.push((b')', i, rest.starts_with('{'), 0));
                }
                b'[' => open.push((b']', i, false, 0)),
                b'{' => {
                    if let Some(top) = open.last_mut() {
                        top.3 += 1;
                    }
                    open.push((b'}', i, false, 0));
                }
                c @ (b')' | b']' | b'}') => match open.pop() {
                    Some((close, at, list, n)) if close == c => {
                        if list {
                            out.insert(at, (i + 1, n));
                        }
                    }
                    _ => return out,
                },
                _ => {}
            }
            i += 1;
        }
        out
    }

    proptest::proptest! {
        /// The chunked scan finds what the byte loop finds, on text made of the bytes it acts
        /// on (and their neighbours), long enough to cross chunks.
        #[test]
        fn prescan_matches_model(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "(", ")", "[", "]", "{", "}", "<", ">", "->", ">=", "\"", "\\", "/", "//",
                "\n", " ", "a", "({", "( {", "abcdefghijklmno", "\"x\"", "=",
            ]), 0..120),
            max in 0usize..6,
        ) {
            let src: String = parts.concat();
            let pre = prescan(&src, max, true);
            proptest::prop_assert_eq!(pre.overflow, nesting_model(&src, max));
            if pre.overflow.is_none() {
                proptest::prop_assert_eq!(pre.region_lists, regions_model(&src));
            }
        }
    }

    #[test]
    fn prescan_regions() {
        let src = "\"a\"() ({\n  \"b\"() ({}, {^x: \"c\"() : () -> ()}) : () -> ()\n}) : () -> ()";
        let pre = prescan(src, 10, true);
        let outer = src.find("({").unwrap();
        let inner = src[outer + 1..].find("({").unwrap() + outer + 1;
        assert_eq!(pre.region_lists[&outer], (src.rfind("})").unwrap() + 2, 1));
        assert_eq!(pre.region_lists[&inner].1, 2);
        assert_eq!(pre.region_lists.len(), 2);
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
