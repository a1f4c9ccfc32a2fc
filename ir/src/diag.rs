//! Diagnostics in MLIR's shape: `file:line:col: error: message`, the source line, a caret,
//! then attached notes. A [`SourceMgr`] keeps the text of every file so the renderer can show
//! the offending line.

use crate::context::Context;
use crate::entity::Loc;
use crate::location::LocKind;
use std::fmt::Write as _;

/// Severity of a diagnostic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Note,
    Remark,
    Warning,
    Error,
}

impl Severity {
    /// The word MLIR prints (`error`, `warning`, `remark`, `note`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Remark => "remark",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One diagnostic with its notes.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub severity: Severity,
    pub loc: Loc,
    pub message: String,
    pub notes: Vec<Diagnostic>,
}

impl Diagnostic {
    /// An error at `loc`.
    pub fn error(loc: Loc, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            loc,
            message: message.into(),
            notes: Vec::new(),
        }
    }
    /// A warning at `loc`.
    pub fn warning(loc: Loc, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            loc,
            message: message.into(),
            notes: Vec::new(),
        }
    }
    /// A remark at `loc`.
    pub fn remark(loc: Loc, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Remark,
            loc,
            message: message.into(),
            notes: Vec::new(),
        }
    }
    /// Attaches a note.
    pub fn with_note(mut self, loc: Loc, message: impl Into<String>) -> Self {
        self.notes.push(Diagnostic {
            severity: Severity::Note,
            loc,
            message: message.into(),
            notes: Vec::new(),
        });
        self
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.severity.as_str(), self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// A source buffer: name, text and line start offsets.
#[derive(Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    /// Built on the first lookup: most runs render no diagnostic, and indexing a large input
    /// costs a pass over every byte and a vector per line.
    line_starts: std::sync::OnceLock<Vec<usize>>,
}

impl SourceFile {
    /// A file named `name` holding `text`; lines are indexed when first needed.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile {
            name: name.into(),
            text: text.into(),
            line_starts: std::sync::OnceLock::new(),
        }
    }

    fn line_starts(&self) -> &[usize] {
        self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(
                    self.text
                        .bytes()
                        .enumerate()
                        .filter(|&(_, b)| b == b'\n')
                        .map(|(i, _)| i + 1),
                )
                .collect()
        })
    }

    /// 1-based (line, column) of a byte offset; the column counts bytes, as MLIR does.
    pub fn line_col(&self, offset: usize) -> (u32, u32) {
        let starts = self.line_starts();
        let line = match starts.binary_search(&offset) {
            Ok(l) => l,
            Err(l) => l - 1,
        };
        (line as u32 + 1, (offset - starts[line]) as u32 + 1)
    }

    /// The text of 1-based line `line`, without its newline.
    pub fn line_text(&self, line: u32) -> Option<&str> {
        let starts = self.line_starts();
        let l = (line as usize).checked_sub(1)?;
        let start = *starts.get(l)?;
        let end = starts.get(l + 1).map(|e| e - 1).unwrap_or(self.text.len());
        self.text.get(start..end.max(start))
    }
}

/// The files diagnostics may point into.
#[derive(Debug, Default)]
pub struct SourceMgr {
    files: Vec<SourceFile>,
}

impl SourceMgr {
    /// Adds a file; later files with the same name shadow earlier ones.
    pub fn add(&mut self, file: SourceFile) {
        self.files.push(file);
    }
    /// Looks a file up by name.
    pub fn get(&self, name: &str) -> Option<&SourceFile> {
        self.files.iter().rev().find(|f| f.name == name)
    }

    /// Renders a diagnostic and its notes the way mlir-opt prints them.
    pub fn render(&self, ctx: &Context, d: &Diagnostic) -> String {
        let mut out = String::new();
        self.render_into(ctx, d, &mut out);
        for n in &d.notes {
            self.render_into(ctx, n, &mut out);
        }
        out
    }

    fn render_into(&self, ctx: &Context, d: &Diagnostic, out: &mut String) {
        match file_line_col(ctx, d.loc) {
            Some((file, line, col)) => {
                let _ = writeln!(
                    out,
                    "{file}:{line}:{col}: {}: {}",
                    d.severity.as_str(),
                    d.message
                );
                if let Some(text) = self.get(&file).and_then(|f| f.line_text(line)) {
                    let shown: String = text
                        .chars()
                        .map(|c| if c == '\t' { ' ' } else { c })
                        .collect();
                    let _ = writeln!(out, "{shown}");
                    let caret_col = (col as usize).saturating_sub(1);
                    let pad: String = text
                        .char_indices()
                        .take_while(|(i, _)| *i < caret_col)
                        .map(|_| ' ')
                        .collect();
                    let _ = writeln!(out, "{pad}^");
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "{}: {}: {}",
                    ctx.loc_to_string(d.loc),
                    d.severity.as_str(),
                    d.message
                );
            }
        }
    }
}

/// The first file:line:col position inside a location, if any.
pub fn file_line_col(ctx: &Context, loc: Loc) -> Option<(String, u32, u32)> {
    let mut stack = vec![loc];
    while let Some(l) = stack.pop() {
        match ctx.loc_kind(l) {
            LocKind::FileLineCol { file, line, col }
            | LocKind::FileRange {
                file, line, col, ..
            } => {
                return Some((ctx.ident_str(*file).to_string(), *line, *col));
            }
            LocKind::Name { child: Some(c), .. } => stack.push(*c),
            LocKind::CallSite { callee, .. } => stack.push(*callee),
            LocKind::Fused { locs, .. } => stack.extend(locs.iter().rev().copied()),
            _ => {}
        }
    }
    None
}
