//! MLIR's textual pass pipelines:
//!
//! ```text
//! pipeline ::= anchor `(` element-list? `)`
//! element  ::= anchor `(` element-list? `)`          -- a nested pipeline
//!            | pass-argument (`{` options `}`)?
//! options  ::= (key (`=` value)?)*                   -- see [`super::options`]
//! ```
//!
//! e.g. `builtin.module(func.func(cse,test-options{flag list=1,2}),symbol-dce)`. Errors carry
//! the byte offset they point at, so they can be rendered as MLIR does, with a caret under
//! the offending column of the pipeline string.

use super::def::PassInfo;
use super::manager::OpPassManager;
use super::options::split_options;
use super::registry::PassRegistry;
use crate::context::Context;
use crate::diag::{Diagnostic, SourceFile, SourceMgr};

/// The buffer name MLIR gives pipeline strings in its diagnostics.
pub const PIPELINE_BUFFER_NAME: &str = "MLIR Textual PassPipeline Parser";

/// A pipeline-string error; `at` is the byte offset it points at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("expected pass pipeline to be wrapped with the anchor operation type, e.g. 'builtin.module(...)'")]
    MissingAnchor { at: usize },
    #[error("expected a pass or pipeline name")]
    ExpectedName { at: usize },
    #[error("'{name}' does not refer to a registered pass or pass pipeline")]
    UnknownPass { name: String, at: usize },
    #[error("expected ',' or ')' in pass pipeline")]
    ExpectedCommaOrParen { at: usize },
    #[error("missing closing '}}' for the options of pass '{pass}'")]
    UnterminatedOptions { pass: String, at: usize },
    #[error("pass '{pass}': {message}")]
    BadOption {
        pass: String,
        message: String,
        at: usize,
    },
    #[error("{message}")]
    Invalid { message: String, at: usize },
    #[error("unexpected text after the pass pipeline")]
    TrailingText { at: usize },
}

impl PipelineError {
    /// The byte offset in the pipeline string the error points at.
    pub fn offset(&self) -> usize {
        match self {
            PipelineError::MissingAnchor { at }
            | PipelineError::ExpectedName { at }
            | PipelineError::UnknownPass { at, .. }
            | PipelineError::ExpectedCommaOrParen { at }
            | PipelineError::UnterminatedOptions { at, .. }
            | PipelineError::BadOption { at, .. }
            | PipelineError::Invalid { at, .. }
            | PipelineError::TrailingText { at } => *at,
        }
    }

    /// Shifts the offset by `delta` (when the parsed text was embedded in a larger one).
    pub fn shifted(mut self, delta: usize) -> Self {
        match &mut self {
            PipelineError::MissingAnchor { at }
            | PipelineError::ExpectedName { at }
            | PipelineError::UnknownPass { at, .. }
            | PipelineError::ExpectedCommaOrParen { at }
            | PipelineError::UnterminatedOptions { at, .. }
            | PipelineError::BadOption { at, .. }
            | PipelineError::Invalid { at, .. }
            | PipelineError::TrailingText { at } => *at += delta,
        }
        self
    }

    /// Renders the error as MLIR does: `MLIR Textual PassPipeline Parser:1:COL: error: ...`,
    /// then `text` and a caret under the column.
    pub fn render(&self, text: &str) -> String {
        let mut ctx = Context::new();
        let file = SourceFile::new(PIPELINE_BUFFER_NAME, text);
        let (line, col) = file.line_col(self.offset().min(text.len()));
        let loc = ctx.file_loc(PIPELINE_BUFFER_NAME, line, col);
        let mut sm = SourceMgr::default();
        sm.add(file);
        sm.render(&ctx, &Diagnostic::error(loc, self.to_string()))
    }
}

/// Parses a whole pipeline, which must be wrapped in its anchor (`builtin.module(...)`,
/// `func.func(...)` or `any(...)`). An empty string is an empty `any()` pipeline.
pub fn parse_pipeline(text: &str) -> Result<OpPassManager, PipelineError> {
    let mut p = Parser {
        text,
        pos: 0,
        registry: PassRegistry::global(),
    };
    p.skip_ws();
    if p.at_end() {
        return Ok(OpPassManager::new("any"));
    }
    let name_at = p.pos;
    let name = p.name();
    p.skip_ws();
    if name.is_empty() || p.peek() != Some(b'(') {
        return Err(PipelineError::MissingAnchor { at: name_at });
    }
    p.pos += 1;
    let mut pm = OpPassManager::new(name);
    p.list(&mut pm)?;
    p.skip_ws();
    if !p.at_end() {
        return Err(PipelineError::TrailingText { at: p.pos });
    }
    Ok(pm)
}

/// Parses `elements` (a comma-separated element list without an anchor, such as
/// `cse,func.func(dce)`) and adds them to `pm`.
pub fn parse_elements_into(pm: &mut OpPassManager, elements: &str) -> Result<(), PipelineError> {
    let mut p = Parser {
        text: elements,
        pos: 0,
        registry: PassRegistry::global(),
    };
    p.skip_ws();
    if p.at_end() {
        return Ok(());
    }
    loop {
        p.element(pm)?;
        p.skip_ws();
        match p.peek() {
            None => return Ok(()),
            Some(b',') => p.pos += 1,
            Some(_) => return Err(PipelineError::ExpectedCommaOrParen { at: p.pos }),
        }
    }
}

/// Adds pass `info` to `pm` with options given as text (the body of `{...}`, or what follows
/// `--pass=` on a command line); error offsets are relative to `options`.
pub fn add_pass_with_options(
    pm: &mut OpPassManager,
    info: &'static PassInfo,
    options: &str,
) -> Result<(), PipelineError> {
    let mut opts = info.default_options();
    let pass = || info.argument.to_string();
    let raw = split_options(options).map_err(|(at, message)| PipelineError::BadOption {
        pass: pass(),
        message,
        at,
    })?;
    for r in raw {
        opts.set(r.key, r.value)
            .map_err(|message| PipelineError::BadOption {
                pass: pass(),
                message,
                at: r.key_at,
            })?;
    }
    pm.add_registered(info, opts)
        .map_err(|message| PipelineError::Invalid { message, at: 0 })
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    registry: &'static PassRegistry,
}

impl<'a> Parser<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }
    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }
    fn name(&mut self) -> &'a str {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'$'))
        {
            self.pos += 1;
        }
        let text: &'a str = self.text;
        &text[start..self.pos]
    }

    /// Parses `element (, element)* )` (or just `)`), consuming the `)`.
    fn list(&mut self, pm: &mut OpPassManager) -> Result<(), PipelineError> {
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.element(pm)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b')') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(PipelineError::ExpectedCommaOrParen { at: self.pos }),
            }
        }
    }

    fn element(&mut self, pm: &mut OpPassManager) -> Result<(), PipelineError> {
        self.skip_ws();
        let name_at = self.pos;
        let name = self.name().to_string();
        if name.is_empty() {
            return Err(PipelineError::ExpectedName { at: name_at });
        }
        self.skip_ws();
        if self.peek() == Some(b'(') {
            self.pos += 1;
            return self.list(pm.nest(name));
        }
        let Some(info) = self.registry.get(&name) else {
            return Err(PipelineError::UnknownPass { name, at: name_at });
        };
        let mut options = "";
        let mut options_at = self.pos;
        if self.peek() == Some(b'{') {
            let open = self.pos;
            let close =
                self.matching_brace(open)
                    .ok_or_else(|| PipelineError::UnterminatedOptions {
                        pass: name.clone(),
                        at: open,
                    })?;
            options_at = open + 1;
            options = &self.text[open + 1..close];
            self.pos = close + 1;
        }
        add_pass_with_options(pm, info, options).map_err(|e| match e {
            // A pass that cannot be added is reported at its name, bad options at the option.
            PipelineError::Invalid { message, .. } => PipelineError::Invalid {
                message,
                at: name_at,
            },
            e => e.shifted(options_at),
        })
    }

    /// The offset of the `}` closing the `{` at `open`, skipping quoted text.
    fn matching_brace(&self, open: usize) -> Option<usize> {
        let bytes = self.text.as_bytes();
        let mut depth = 0usize;
        let mut quote: Option<u8> = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match quote {
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None => match b {
                    b'"' | b'\'' => quote = Some(b),
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => {}
                },
            }
        }
        None
    }
}
