//! The byte scanner of the parser's fast path: whitespace and comments, the atomic tokens
//! of `mlir.pest` (SSA names, block labels, strings, alias names, `"file":line:col`), and the
//! delimiting of type, attribute and region spans.
//!
//! Every token lexer mirrors the pest rule of the same name *exactly* — the spans it finds are
//! handed to the pest-based type and attribute parsers, so a span that differed from pest's
//! would change what the file means. Where mirroring pest would be costly (comments inside
//! bracketed attribute text) the scanner reports failure instead, and the whole file goes to
//! the pest front end.
//!
//! Lexers are pure (`&self`, an offset in, the end offset out, `None` when the rule does not
//! match) apart from one flag: a lexer that steps over a newline inside a token sets
//! `token_newline`, so that [`Scanner::advance`] only counts lines in the rare tokens that
//! have any. Line and column are otherwise tracked as whitespace is skipped.

use super::super::lex::RegionListEnds;

/// The longest rest of a line [`Scanner::line_rest`] returns (a generic op's signature, and
/// its location, fit several times over; a longer one is lexed as before).
const LINE_REST_LIMIT: usize = 512;

/// A scanner position with its line bookkeeping, to return to after a look-ahead.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mark {
    pos: usize,
    line: u32,
    line_start: usize,
}

pub(super) struct Scanner<'a> {
    src: &'a str,
    b: &'a [u8],
    /// Offset of the next byte to read.
    pub pos: usize,
    /// 1-based line of `pos` and the offset where that line starts.
    line: u32,
    line_start: usize,
    /// Set by a lexer that crossed a newline inside a token.
    token_newline: bool,
    /// Expected closing brackets of the span being scanned (reused between spans).
    closers: Vec<u8>,
    /// Region lists already skipped over: those the pre-scan found, and those found by the
    /// skips here (each nested one is found by the outermost skip, so every byte of the file
    /// is skipped at most once however deep regions nest).
    region_lists: RegionListEnds,
}

/// `ASCII_ALPHANUMERIC | "_" | "$" | "."`: the rest of a bare identifier.
fn is_id_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.')
}

/// `id_char | "-"`: the rest of a suffix id, `#alias` or `!alias`.
fn is_id_punct(c: u8) -> bool {
    is_id_char(c) || c == b'-'
}

/// The characters of `type_word` (types are delimited, not validated, by the file grammar).
fn is_type_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'!' | b'?' | b'$' | b'*')
}

/// The bytes [`Scanner::skip_region_list`] stops at: brackets, strings and comments.
const SKIP_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let stops = b"\"/()[]{}";
    let mut i = 0;
    while i < stops.len() {
        t[stops[i] as usize] = true;
        i += 1;
    }
    t
};

/// `WHITESPACE` of the grammar (also `type_ws`).
fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

impl<'a> Scanner<'a> {
    pub(super) fn new(src: &'a str, region_lists: RegionListEnds) -> Self {
        Scanner {
            src,
            b: src.as_bytes(),
            pos: 0,
            line: 1,
            line_start: 0,
            token_newline: false,
            closers: Vec::new(),
            region_lists,
        }
    }

    // ----- position -------------------------------------------------------------------------

    /// The byte at `i`, or 0 past the end (0 starts no token, so it reads as "unexpected").
    #[inline]
    pub(super) fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    #[inline]
    pub(super) fn peek(&self) -> u8 {
        self.at(self.pos)
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.b.len()
    }

    #[inline]
    pub(super) fn starts_with(&self, s: &[u8]) -> bool {
        self.b
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(s))
    }

    /// Consumes `c` if it is next.
    #[inline]
    pub(super) fn eat(&mut self, c: u8) -> bool {
        if self.peek() == c {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// The source text between two offsets found by the lexers (always on ASCII boundaries;
    /// `None` otherwise, never a panic).
    #[inline]
    pub(super) fn text(&self, start: usize, end: usize) -> Option<&'a str> {
        self.src.get(start..end)
    }

    /// 1-based line and byte column of the current position.
    #[inline]
    pub(super) fn line_col(&self) -> (u32, u32) {
        (self.line, (self.pos - self.line_start) as u32 + 1)
    }

    #[inline]
    pub(super) fn mark(&self) -> Mark {
        Mark {
            pos: self.pos,
            line: self.line,
            line_start: self.line_start,
        }
    }

    #[inline]
    pub(super) fn reset(&mut self, m: Mark) {
        self.pos = m.pos;
        self.line = m.line;
        self.line_start = m.line_start;
    }

    /// Moves to `end`, the end of a token that a lexer just found from the current position.
    #[inline]
    pub(super) fn advance(&mut self, end: usize) {
        if std::mem::take(&mut self.token_newline) {
            self.count_lines(self.pos, end);
        }
        self.pos = end;
    }

    /// Moves to `end` over `text` (the bytes from the current position to `end`) that no
    /// lexer read: a dictionary served from the cache of its spellings. Its newlines are
    /// counted here, since nothing flagged them.
    #[inline]
    pub(super) fn skip_known(&mut self, text: &str, end: usize) {
        self.token_newline = false;
        if text.as_bytes().contains(&b'\n') {
            self.count_lines(self.pos, end);
        }
        self.pos = end;
    }

    fn count_lines(&mut self, from: usize, to: usize) {
        for (i, &c) in self.b[from..to].iter().enumerate() {
            if c == b'\n' {
                self.line += 1;
                self.line_start = from + i + 1;
            }
        }
    }

    /// Jumps to `end` (past a skipped region list) and counts lines afresh from there (see
    /// [`Scanner::join_lines`]): the text after a region list is read before the line count
    /// inside the list is known.
    pub(super) fn jump_relative(&mut self, end: usize) {
        self.pos = end;
        self.line = 0;
        self.line_start = end;
        self.token_newline = false;
    }

    /// Combines the true position `base` (the end of a region list, reached by parsing it)
    /// with `tail`, the relative count of the text after it up to `tail.pos`.
    pub(super) fn join_lines(&mut self, base: Mark, tail: Mark) {
        self.pos = tail.pos;
        if tail.line == 0 {
            self.line = base.line;
            self.line_start = base.line_start;
        } else {
            self.line = base.line + tail.line;
            self.line_start = tail.line_start;
        }
    }

    /// Skips `WHITESPACE` and `// ...` comments, counting lines.
    #[inline]
    pub(super) fn skip_ws(&mut self) {
        loop {
            match self.at(self.pos) {
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.line_start = self.pos;
                }
                b'/' if self.at(self.pos + 1) == b'/' => {
                    while self.pos < self.b.len() && self.b[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    /// The text from the current position to the end of its line (or of the file), less
    /// trailing blanks.
    pub(super) fn line_rest(&self) -> Option<&'a str> {
        let rest = self.src.get(self.pos..)?;
        // Bounded: with many ops on one line each would otherwise search (and hash) the rest
        // of the file, quadratic in its length. A longer rest is left to the lexer.
        let window = &rest.as_bytes()[..rest.len().min(LINE_REST_LIMIT + 1)];
        let end = match window.iter().position(|&c| c == b'\n') {
            Some(end) => end,
            None if rest.len() <= LINE_REST_LIMIT => rest.len(),
            None => return None,
        };
        Some(rest[..end].trim_ascii_end())
    }

    /// Whether the `type` token at the current position ends at `end`, given that the bytes
    /// up to `end` were a whole `type` token somewhere else. The lexer reads those bytes the
    /// same way here (inside a token it looks at most one byte ahead, and never past a closing
    /// bracket or the token's last byte), so only what follows can differ: a byte that
    /// continues the last atom, or an arrow after blanks.
    pub(super) fn type_token_ends_at(&self, end: usize) -> bool {
        let c = self.at(end);
        if is_type_word(c) || c == b'<' || c == b'(' {
            return false;
        }
        let mut j = end;
        while is_ws(self.at(j)) {
            j += 1;
        }
        !(self.at(j) == b'-' && self.at(j + 1) == b'>')
    }

    // ----- atomic tokens ----------------------------------------------------------------------

    /// `suffix_id` at `i`: `ASCII_DIGIT+ | (ASCII_ALPHA | "_" | "$" | "." | "-") ~ id_punct*`.
    fn suffix_id(&self, mut i: usize) -> Option<usize> {
        let c = self.at(i);
        if c.is_ascii_digit() {
            while self.at(i).is_ascii_digit() {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || matches!(c, b'_' | b'$' | b'.' | b'-') {
            i += 1;
            while is_id_punct(self.at(i)) {
                i += 1;
            }
        } else {
            return None;
        }
        Some(i)
    }

    /// `sep ~ ASCII_DIGIT+` at `i` if present (an optional suffix: `i` when absent).
    fn digits_after(&self, i: usize, sep: u8) -> usize {
        if self.at(i) != sep || !self.at(i + 1).is_ascii_digit() {
            return i;
        }
        let mut j = i + 1;
        while self.at(j).is_ascii_digit() {
            j += 1;
        }
        j
    }

    /// `value_def`: `"%" ~ suffix_id ~ (":" ~ ASCII_DIGIT+)?`.
    pub(super) fn value_def(&self, i: usize) -> Option<usize> {
        if self.at(i) != b'%' {
            return None;
        }
        let end = self.suffix_id(i + 1)?;
        Some(self.digits_after(end, b':'))
    }

    /// `value_use`: `"%" ~ suffix_id ~ ("#" ~ ASCII_DIGIT+)?`.
    pub(super) fn value_use(&self, i: usize) -> Option<usize> {
        if self.at(i) != b'%' {
            return None;
        }
        let end = self.suffix_id(i + 1)?;
        Some(self.digits_after(end, b'#'))
    }

    /// `value_name` (`"%" ~ suffix_id`) or `block_name` (`"^" ~ suffix_id`), by `sigil`.
    pub(super) fn sigil_name(&self, i: usize, sigil: u8) -> Option<usize> {
        if self.at(i) != sigil {
            return None;
        }
        self.suffix_id(i + 1)
    }

    /// `hash_id` / `bang_id` by `sigil`: `sigil ~ (ASCII_ALPHA | "_") ~ id_punct*`.
    pub(super) fn alias_name(&self, i: usize, sigil: u8) -> Option<usize> {
        let c = self.at(i + 1);
        if self.at(i) != sigil || !(c.is_ascii_alphabetic() || c == b'_') {
            return None;
        }
        let mut j = i + 2;
        while is_id_punct(self.at(j)) {
            j += 1;
        }
        Some(j)
    }

    /// The bare form of `attr_key`: `(ASCII_ALPHA | "_") ~ id_char*`.
    pub(super) fn bare_key(&self, i: usize) -> Option<usize> {
        let c = self.at(i);
        if !(c.is_ascii_alphabetic() || c == b'_') {
            return None;
        }
        let mut j = i + 1;
        while is_id_char(self.at(j)) {
            j += 1;
        }
        Some(j)
    }

    /// `string`: a double-quoted literal with no raw newline; a backslash escapes any one
    /// character (checked later, when the literal is decoded).
    pub(super) fn string(&mut self, i: usize) -> Option<usize> {
        if self.at(i) != b'"' {
            return None;
        }
        let mut j = i + 1;
        loop {
            match *self.b.get(j)? {
                b'"' => return Some(j + 1),
                b'\n' => return None,
                b'\\' => {
                    if *self.b.get(j + 1)? == b'\n' {
                        self.token_newline = true;
                    }
                    j += 2;
                }
                _ => j += 1,
            }
        }
    }

    /// `loc_file`: `string ~ ":" ~ ASCII_DIGIT+ ~ (":" ~ ASCII_DIGIT+)?` and an optional
    /// `WHITESPACE* ~ "to" ~ WHITESPACE* ~ (ASCII_DIGIT* ~ ":" ~ ASCII_DIGIT+ | ASCII_DIGIT+)`.
    pub(super) fn loc_file(&mut self, i: usize) -> Option<usize> {
        let s = self.string(i)?;
        if self.at(s) != b':' || !self.at(s + 1).is_ascii_digit() {
            return None;
        }
        let mut j = s + 1;
        while self.at(j).is_ascii_digit() {
            j += 1;
        }
        let j = self.digits_after(j, b':');
        Some(self.loc_range_tail(j).unwrap_or(j))
    }

    /// The optional ` to [line]:col` / ` to line` of a `loc_file` token, starting at `i`.
    fn loc_range_tail(&mut self, mut i: usize) -> Option<usize> {
        let mut newline = false;
        while is_ws(self.at(i)) {
            newline |= self.at(i) == b'\n';
            i += 1;
        }
        if self.at(i) != b't' || self.at(i + 1) != b'o' {
            return None;
        }
        i += 2;
        while is_ws(self.at(i)) {
            newline |= self.at(i) == b'\n';
            i += 1;
        }
        let digits_end = |mut j: usize| {
            while self.at(j).is_ascii_digit() {
                j += 1;
            }
            j
        };
        let d = digits_end(i);
        let end = if self.at(d) == b':' && self.at(d + 1).is_ascii_digit() {
            digits_end(d + 1)
        } else if d > i {
            d
        } else {
            return None;
        };
        self.token_newline |= newline;
        Some(end)
    }

    /// Skips a `{-# ... #-}` metadata block at the current position (`(string | !"#-}" ~
    /// ANY)*`: a string literal is stepped over whole, anything else a character at a time).
    pub(super) fn metadata(&mut self) -> Option<usize> {
        let mut j = self.pos + 3;
        let mut newline = false;
        loop {
            match *self.b.get(j)? {
                b'#' if self.at(j + 1) == b'-' && self.at(j + 2) == b'}' => {
                    self.token_newline |= newline;
                    return Some(j + 3);
                }
                b'"' => match self.string(j) {
                    Some(e) => j = e,
                    None => j += 1,
                },
                c => {
                    newline |= c == b'\n';
                    j += 1;
                }
            }
        }
    }

    // ----- spans ------------------------------------------------------------------------------

    /// The `balanced` rule from `i`: plain text, strings, `->`, `>=` and nested bracket pairs
    /// of all four kinds. Returns where it stops (at a closer that it did not open, or the
    /// end); `None` where pest's `balanced` would stop inside an opened bracket, which leaves
    /// the bracket unclosed for every caller.
    fn balanced(&mut self, mut i: usize) -> Option<usize> {
        self.closers.clear();
        loop {
            let Some(&c) = self.b.get(i) else {
                return self.closers.is_empty().then_some(i);
            };
            match c {
                b'"' => i = self.string(i)?,
                b'-' if self.at(i + 1) == b'>' => i += 2,
                b'>' if self.at(i + 1) == b'=' => i += 2,
                b'<' => {
                    self.closers.push(b'>');
                    i += 1;
                }
                b'(' => {
                    self.closers.push(b')');
                    i += 1;
                }
                b'[' => {
                    self.closers.push(b']');
                    i += 1;
                }
                b'{' => {
                    self.closers.push(b'}');
                    i += 1;
                }
                b'>' | b')' | b']' | b'}' => match self.closers.last() {
                    None => return Some(i),
                    Some(&e) if e == c => {
                        self.closers.pop();
                        i += 1;
                    }
                    Some(_) => return None,
                },
                b'\n' => {
                    self.token_newline = true;
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }

    /// `type_atom`: `(type_word | "<" ~ balanced ~ ">" | "(" ~ balanced ~ ")")+`.
    fn type_atom(&mut self, start: usize) -> Option<usize> {
        let mut i = start;
        loop {
            let c = self.at(i);
            if is_type_word(c) {
                i += 1;
            } else if c == b'<' || c == b'(' {
                let close = if c == b'<' { b'>' } else { b')' };
                let end = self.balanced(i + 1)?;
                if self.at(end) != close {
                    return None;
                }
                i = end + 1;
            } else {
                break;
            }
        }
        (i > start).then_some(i)
    }

    /// The `type` token: `type_atom ~ (type_ws ~ "->" ~ type_ws ~ type_atom)?`.
    pub(super) fn type_token(&mut self, i: usize) -> Option<usize> {
        let atom = self.type_atom(i)?;
        let mut j = atom;
        let mut newline = false;
        while is_ws(self.at(j)) {
            newline |= self.at(j) == b'\n';
            j += 1;
        }
        if self.at(j) != b'-' || self.at(j + 1) != b'>' {
            return Some(atom);
        }
        j += 2;
        while is_ws(self.at(j)) {
            newline |= self.at(j) == b'\n';
            j += 1;
        }
        match self.type_atom(j) {
            Some(end) => {
                self.token_newline |= newline;
                Some(end)
            }
            None => Some(atom),
        }
    }

    /// The `{...}` group whose `{` is at `open`: the offset just past its `}`.
    pub(super) fn brace_group(&mut self, open: usize) -> Option<usize> {
        let end = self.balanced(open + 1)?;
        (self.at(end) == b'}').then_some(end + 1)
    }

    /// Drops the newline flag of a token that was looked at but not consumed.
    pub(super) fn forget_token(&mut self) {
        self.token_newline = false;
    }

    /// The `loc(...)` group whose `(` is at `open`: the offset just past its `)`.
    pub(super) fn paren_group(&mut self, open: usize) -> Option<usize> {
        let end = self.balanced(open + 1)?;
        (self.at(end) == b')').then_some(end + 1)
    }

    /// The text of one attribute value starting at `i`: up to a `,` or an unopened closer at
    /// bracket depth 0, a `//` comment at depth 0, or (with `line_ends`) the end of the line.
    /// Brackets are counted like `balanced` does (`->` and `>=` close nothing), which is how
    /// every attribute pest accepts is bracketed. `None` on a bracket mismatch, a bad string,
    /// or a `//` inside brackets (a comment there or text of an atomic token: not worth
    /// telling apart).
    pub(super) fn attr_span(&mut self, mut i: usize, line_ends: bool) -> Option<usize> {
        self.closers.clear();
        loop {
            let Some(&c) = self.b.get(i) else {
                return self.closers.is_empty().then_some(i);
            };
            let top = self.closers.is_empty();
            match c {
                b'"' => i = self.string(i)?,
                b'-' if self.at(i + 1) == b'>' => i += 2,
                b'>' if self.at(i + 1) == b'=' => i += 2,
                b',' if top => return Some(i),
                b'\n' if top && line_ends => return Some(i),
                b'/' if self.at(i + 1) == b'/' => return top.then_some(i),
                b'<' => {
                    self.closers.push(b'>');
                    i += 1;
                }
                b'(' => {
                    self.closers.push(b')');
                    i += 1;
                }
                b'[' => {
                    self.closers.push(b']');
                    i += 1;
                }
                b'{' => {
                    self.closers.push(b'}');
                    i += 1;
                }
                b'>' | b')' | b']' | b'}' => match self.closers.last() {
                    None => return Some(i),
                    Some(&e) if e == c => {
                        self.closers.pop();
                        i += 1;
                    }
                    Some(_) => return None,
                },
                b'\n' => {
                    self.token_newline = true;
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }

    /// The region list whose `(` is at `open`: the offset past its `)` and the number of
    /// regions in it. Only `()[]{}`, strings and `//` comments are
    /// followed; the caller checks that parsing the list really ends there. Every region list
    /// nested inside is recorded on the way, so its own skip later costs nothing.
    pub(super) fn skip_region_list(&mut self, open: usize) -> Option<(usize, usize)> {
        if let Some(&r) = self.region_lists.get(&open) {
            return Some(r);
        }
        // Open brackets: (expected closer, offset, is a region list, regions directly inside).
        let mut open_brackets: Vec<(u8, usize, bool, usize)> = Vec::new();
        let mut i = open;
        let found = loop {
            // Most bytes are none of the ones followed here: step over them in a tight loop.
            while i < self.b.len() && !SKIP_STOP[self.b[i] as usize] {
                i += 1;
            }
            let Some(&c) = self.b.get(i) else {
                break None;
            };
            match c {
                b'"' => {
                    match self.string(i) {
                        Some(e) => i = e,
                        None => break None,
                    }
                    continue;
                }
                b'/' if self.at(i + 1) == b'/' => {
                    while i < self.b.len() && self.b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'(' => {
                    let mut j = i + 1;
                    while is_ws(self.at(j)) {
                        j += 1;
                    }
                    open_brackets.push((b')', i, self.at(j) == b'{', 0));
                }
                b'[' => open_brackets.push((b']', i, false, 0)),
                b'{' => {
                    // A region list holds one `{` group per region (a list that is not of that
                    // shape fails when it is parsed).
                    if let Some(top) = open_brackets.last_mut() {
                        top.3 += 1;
                    }
                    open_brackets.push((b'}', i, false, 0));
                }
                b')' | b']' | b'}' => {
                    let Some((close, at, is_list, regions)) = open_brackets.pop() else {
                        break None;
                    };
                    if close != c {
                        break None;
                    }
                    let end = (i + 1, regions);
                    if is_list {
                        self.region_lists.insert(at, end);
                    }
                    if at == open {
                        break Some(end);
                    }
                }
                _ => {}
            }
            i += 1;
        };
        // Newlines are not tracked here: the caller comes back to parse the list itself.
        self.token_newline = false;
        found
    }
}
