//! The MLIR textual format parser (DESIGN.md §3): generic form, the uniform custom form, the
//! structural ops (`module`, `func.func`, `return`, `func.call`), types, attributes,
//! locations and aliases.
//!
//! The grammar is `mlir.pest` (pest); [`build`] walks the parse tree into the [`Context`].
//! Every file first goes through [`fast`], a hand-written front end for the generic form, the
//! uniform custom form, the structural ops and mixtures of them, which builds through the
//! same [`build`] functions and hands types and attributes to the pest-based code; whatever it
//! does not take whole is parsed by pest (see [`FrontEnd`]), the reference grammar and the
//! source of every diagnostic.
//! Robustness on hostile input comes from three layers: the input is checked to be UTF-8 and
//! pre-scanned for nesting deeper than [`ParseOptions::max_nesting`] before either front end
//! runs (pest recurses per nesting level; the same pass finds the fast path's region lists); the parse and the build run on a thread with a large stack;
//! and pest's own stack guard turns any remaining exhaustion into an error.

mod build;
mod errors;
mod fast;
mod grammar;
mod lex;
mod typeattr;

use crate::context::Context;
use crate::diag::Diagnostic;
use crate::entity::{Attr, OpId, Type};
use crate::location::LocKind;
use build::{Builder, PResult};
use grammar::{MlirParser, Rule};
use pest::iterators::Pairs;
use pest::Parser as _;

/// Default limit on bracket/region nesting depth; deeper input is rejected with a diagnostic
/// instead of risking the stack.
pub const DEFAULT_MAX_NESTING: usize = 1000;

/// Stack of the parsing thread: deep enough for `DEFAULT_MAX_NESTING` levels of the recursive
/// grammar even in debug builds. Only touched pages are committed.
const PARSE_STACK_BYTES: usize = 256 << 20;

/// Parser options.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Maximum nesting depth of regions, types and attributes.
    pub max_nesting: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_nesting: DEFAULT_MAX_NESTING,
        }
    }
}

/// Which front end [`parse_source_with`] uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrontEnd {
    /// The fast path, and pest for any file it does not take whole.
    #[default]
    Auto,
    /// The pest grammar only (the reference: every form, and the diagnostics).
    PestOnly,
    /// The fast path only; a file it does not handle fails (for tests and measurements).
    FastOnly,
}

/// Parses a whole file into a `builtin.module` (an implicit one when the file has none at
/// top level). `file_name` is used for the locations of parsed ops. On error, returns the
/// first diagnostic (file:line:col of the offending token).
pub fn parse_source(
    ctx: &mut Context,
    file_name: &str,
    bytes: &[u8],
    opts: &ParseOptions,
) -> Result<OpId, Diagnostic> {
    parse_source_with(ctx, file_name, bytes, opts, FrontEnd::Auto)
}

/// [`parse_source`] with a choice of front end. Under [`FrontEnd::Auto`] a file that the fast
/// path gives up on is parsed again by pest; what the fast path created until then stays in
/// the context's arenas, detached and unreachable.
pub fn parse_source_with(
    ctx: &mut Context,
    file_name: &str,
    bytes: &[u8],
    opts: &ParseOptions,
    front_end: FrontEnd,
) -> Result<OpId, Diagnostic> {
    let src = checked_utf8(ctx, file_name, bytes)?;
    // One pass over the bytes for the nesting check and the fast path's region lists.
    let pre = lex::prescan(src, opts.max_nesting, front_end != FrontEnd::PestOnly);
    if let Some(at) = pre.overflow {
        return Err(nesting_error(ctx, file_name, bytes, at, opts));
    }
    // Sized for the file and for the passes' additions, so that the arenas of a large program
    // are not copied over and over as they double (capacity that is never used costs
    // nothing: its pages are never touched).
    ctx.reserve(src.len() / 48, src.len() / 48);
    on_big_stack(ctx, |ctx| {
        if front_end != FrontEnd::PestOnly {
            let mut b = Builder::new(ctx, src, file_name, opts.max_nesting);
            match fast::parse_file(&mut b, pre.region_lists) {
                Ok(module) => return Ok(module),
                Err(e) if front_end == FrontEnd::FastOnly => return Err(e),
                Err(_) => {}
            }
        }
        let mut b = Builder::new(ctx, src, file_name, opts.max_nesting);
        let file = match run_pest(Rule::file, src) {
            Ok(mut pairs) => pairs.next(),
            Err(e) => return Err(b.err(e.pos, e.message)),
        };
        match file {
            Some(f) => b.build_file(f),
            None => Err(b.err(0, "expected operation")),
        }
    })
}

/// Parses a type written in MLIR syntax (`tensor<4x?xf32>`, `(i32) -> f32`, `!d.t<...>`).
pub fn parse_type(ctx: &mut Context, text: &str) -> Result<Type, Diagnostic> {
    let opts = ParseOptions::default();
    let src = checked_source(ctx, "<string>", text.as_bytes(), &opts)?;
    on_big_stack(ctx, |ctx| {
        let mut b = Builder::new(ctx, src, "<string>", opts.max_nesting);
        b.type_from_text(src)
    })
}

/// Parses an attribute written in MLIR syntax (`42 : i32`, `{a = 1, b}`, `#d.a<...>`,
/// `loc("f":1:2)`, a type, ...).
pub fn parse_attr(ctx: &mut Context, text: &str) -> Result<Attr, Diagnostic> {
    let opts = ParseOptions::default();
    let src = checked_source(ctx, "<string>", text.as_bytes(), &opts)?;
    on_big_stack(ctx, |ctx| {
        let mut b = Builder::new(ctx, src, "<string>", opts.max_nesting);
        b.attr_from_text(src)
    })
}

/// Checks the input is UTF-8 and not nested too deeply; returns it as text.
fn checked_source<'a>(
    ctx: &mut Context,
    file_name: &str,
    bytes: &'a [u8],
    opts: &ParseOptions,
) -> Result<&'a str, Diagnostic> {
    let src = checked_utf8(ctx, file_name, bytes)?;
    match lex::find_nesting_overflow(src, opts.max_nesting) {
        Some(at) => Err(nesting_error(ctx, file_name, bytes, at, opts)),
        None => Ok(src),
    }
}

/// Checks the input is UTF-8; returns it as text.
fn checked_utf8<'a>(
    ctx: &mut Context,
    file_name: &str,
    bytes: &'a [u8],
) -> Result<&'a str, Diagnostic> {
    lex::check_utf8(bytes).map_err(|at| {
        let (line, col) = lex::line_col_of_bytes(bytes, at);
        let l = ctx.file_loc(file_name, line, col);
        Diagnostic::error(l, "invalid UTF-8")
    })
}

/// The error for nesting beyond the limit at offset `at`.
fn nesting_error(
    ctx: &mut Context,
    file_name: &str,
    bytes: &[u8],
    at: usize,
    opts: &ParseOptions,
) -> Diagnostic {
    let (line, col) = lex::line_col_of_bytes(bytes, at);
    let file = ctx.ident(file_name);
    let l = ctx.loc(LocKind::FileLineCol { file, line, col });
    Diagnostic::error(
        l,
        format!(
            "nesting too deep: exceeds the limit of {} levels",
            opts.max_nesting
        ),
    )
}

/// Runs `f` on a thread with a large stack (pest and the IR walk recurse per nesting level).
/// Falls back to the current thread if the thread cannot be created.
fn on_big_stack<T: Send>(
    ctx: &mut Context,
    f: impl FnOnce(&mut Context) -> PResult<T> + Send,
) -> PResult<T> {
    let unknown = ctx.unknown_loc();
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("commlir-parse".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(s, || f(&mut *ctx));
        match spawned {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(Diagnostic::error(unknown, "internal parser error"))),
            Err(_) => Err(Diagnostic::error(unknown, "cannot start the parser thread")),
        }
    })
}

/// Runs the grammar from `rule` over `text`. On failure the parse is repeated with pest's
/// error detail on (it costs time, so only the failing path pays) to learn which literal
/// tokens were expected.
pub(crate) fn run_pest(rule: Rule, text: &str) -> Result<Pairs<'_, Rule>, errors::SyntaxError> {
    match MlirParser::parse(rule, text) {
        Ok(p) => Ok(p),
        Err(plain) => {
            // The detail switch is process-wide: serialize the detailed re-parses.
            static DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let guard = DETAIL.lock().unwrap_or_else(|e| e.into_inner());
            pest::set_error_detail(true);
            let detailed = MlirParser::parse(rule, text).err();
            pest::set_error_detail(false);
            drop(guard);
            Err(errors::describe(detailed.as_ref().unwrap_or(&plain)))
        }
    }
}
