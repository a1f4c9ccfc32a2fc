//! A real MLIR context for interop: every upstream dialect registered, unregistered dialects
//! (commlir's own, in generic form) allowed, and MLIR's diagnostics captured instead of
//! printed, so that they can be reported the way commlir reports its own.

use melior::diagnostic::DiagnosticSeverity;
use melior::dialect::DialectRegistry;
use melior::ir::operation::{OperationLike, OperationPrintingFlags};
use melior::ir::{Location, Module, Operation};
use melior::utility::register_all_dialects;
use melior::Context as MlirContext;
use mlir_sys::{mlirModuleCreateParseFromFile, mlirOperationCreateParse, MlirStringRef};
use std::cell::RefCell;
use std::rc::Rc;

/// One diagnostic MLIR emitted: severity, the first file location found in its location
/// (MLIR wraps them in name, call-site and fused locations), message and notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlirDiagnostic {
    /// "error", "warning", "note" or "remark".
    pub severity: &'static str,
    /// `(file, line, column)`, when the location has one.
    pub file_loc: Option<(String, u32, u32)>,
    /// The message, as MLIR wrote it.
    pub message: String,
    /// Attached notes.
    pub notes: Vec<MlirDiagnostic>,
}

impl MlirDiagnostic {
    /// A diagnostic of our own (no MLIR location).
    pub fn error(message: impl Into<String>) -> Self {
        MlirDiagnostic {
            severity: "error",
            file_loc: None,
            message: message.into(),
            notes: Vec::new(),
        }
    }

    /// Renames the file `from` to `to` in this diagnostic's locations and its notes'.
    pub fn rename_file(&mut self, from: &str, to: &str) {
        if let Some((f, _, _)) = &mut self.file_loc {
            if f == from {
                *f = to.to_string();
            }
        }
        for n in &mut self.notes {
            n.rename_file(from, to);
        }
    }

    /// Converts into a commlir diagnostic whose location is interned in `ctx`.
    pub fn to_commlir(&self, ctx: &mut commlir_ir::Context) -> commlir_ir::Diagnostic {
        let loc = match &self.file_loc {
            Some((f, l, c)) => ctx.file_loc(f, *l, *c),
            None => ctx.unknown_loc(),
        };
        let mut d = match self.severity {
            "warning" => commlir_ir::Diagnostic::warning(loc, self.message.clone()),
            "remark" | "note" => commlir_ir::Diagnostic::remark(loc, self.message.clone()),
            _ => commlir_ir::Diagnostic::error(loc, self.message.clone()),
        };
        for n in &self.notes {
            let nl = match &n.file_loc {
                Some((f, l, c)) => ctx.file_loc(f, *l, *c),
                None => ctx.unknown_loc(),
            };
            d = d.with_note(nl, n.message.clone());
        }
        d
    }
}

/// A string ref borrowing `s` (the C API's `mlirStringRefCreate` is an inline function).
pub(crate) fn sref(s: &str) -> MlirStringRef {
    MlirStringRef {
        data: s.as_ptr().cast(),
        length: s.len(),
    }
}

fn severity(s: DiagnosticSeverity) -> &'static str {
    match s {
        DiagnosticSeverity::Error => "error",
        DiagnosticSeverity::Warning => "warning",
        DiagnosticSeverity::Note => "note",
        DiagnosticSeverity::Remark => "remark",
    }
}

/// The first `file:line:col` inside `loc`, looking through name, call-site and fused
/// locations (depth-bounded: locations are DAGs MLIR builds, but we never trust depth).
pub fn file_line_col(loc: Location<'_>) -> Option<(String, u32, u32)> {
    let mut stack = vec![(loc, 0u32)];
    while let Some((l, depth)) = stack.pop() {
        if depth > 64 {
            continue;
        }
        if l.is_file_line_col_range() {
            return Some((
                l.file_line_col_range_filename()
                    .as_string_ref()
                    .as_str()
                    .ok()?
                    .to_string(),
                l.file_line_col_range_start_line() as u32,
                l.file_line_col_range_start_column() as u32,
            ));
        } else if l.is_name() {
            stack.push((l.name_child_location(), depth + 1));
        } else if l.is_call_site() {
            stack.push((l.call_site_caller(), depth + 1));
            stack.push((l.call_site_callee(), depth + 1));
        } else if l.is_fused() {
            for i in (0..l.fused_num_locations()).rev() {
                stack.push((l.fused_location(i), depth + 1));
            }
        }
    }
    None
}

fn convert(d: melior::diagnostic::Diagnostic<'_>) -> MlirDiagnostic {
    let notes = (0..d.note_count())
        .filter_map(|i| d.note(i).ok())
        .map(convert)
        .collect();
    MlirDiagnostic {
        severity: severity(d.severity()),
        file_loc: file_line_col(d.location()),
        message: d.to_string(),
        notes,
    }
}

/// A real MLIR context with all upstream dialects and captured diagnostics.
pub struct MlirSession {
    context: MlirContext,
    diagnostics: Rc<RefCell<Vec<MlirDiagnostic>>>,
    /// Temporary paths standing for source names (see [`MlirSession::parse_file`]).
    renames: RefCell<Vec<(String, String)>>,
}

impl Default for MlirSession {
    fn default() -> Self {
        Self::new()
    }
}

impl MlirSession {
    /// A context with every upstream dialect registered and loaded lazily, unregistered
    /// dialects allowed, and no thread pool (results must not depend on scheduling).
    pub fn new() -> Self {
        let registry = DialectRegistry::new();
        register_all_dialects(&registry);
        let context = MlirContext::new_with_registry(&registry, false);
        context.set_allow_unregistered_dialects(true);
        let diagnostics = Rc::new(RefCell::new(Vec::new()));
        let sink = diagnostics.clone();
        context.attach_diagnostic_handler(move |d| {
            sink.borrow_mut().push(convert(d));
            true
        });
        MlirSession {
            context,
            diagnostics,
            renames: RefCell::new(Vec::new()),
        }
    }

    /// The MLIR context.
    pub fn context(&self) -> &MlirContext {
        &self.context
    }

    /// Takes the diagnostics emitted so far.
    pub fn take_diagnostics(&self) -> Vec<MlirDiagnostic> {
        let mut ds = std::mem::take(&mut *self.diagnostics.borrow_mut());
        for (from, to) in self.renames.borrow().iter() {
            for d in &mut ds {
                d.rename_file(from, to);
            }
        }
        ds
    }

    fn failure(&self, fallback: &str) -> Vec<MlirDiagnostic> {
        let ds = self.take_diagnostics();
        if ds.iter().any(|d| d.severity == "error") {
            ds
        } else {
            vec![MlirDiagnostic::error(fallback)]
        }
    }

    /// Parses a whole file with MLIR's own parser, as `mlir-opt` reads its input: several
    /// top-level ops (or one that is not a module) are wrapped in a `builtin.module`, and
    /// locations name `source_name`.
    pub fn parse_file(
        &self,
        source_name: &str,
        text: &str,
    ) -> Result<Module<'_>, Vec<MlirDiagnostic>> {
        // MLIR's file parser is the one that wraps top-level ops in a module, and the only way
        // to reach it through the C API is a path: give it the text in a private temporary
        // file, then put `source_name` back wherever the temporary path shows up.
        let tmp = TempSource::write(source_name, text).map_err(|e| {
            vec![MlirDiagnostic::error(format!(
                "cannot stage the input for MLIR: {e}"
            ))]
        })?;
        let path = tmp.path_str();
        // SAFETY: the string ref borrows `path` for the call; a null module maps to `None`.
        let module = unsafe {
            Module::from_option_raw(mlirModuleCreateParseFromFile(
                self.context.to_raw(),
                sref(&path),
            ))
        };
        self.renames
            .borrow_mut()
            .push((path.clone(), source_name.to_string()));
        let ds = self.take_diagnostics();
        match module {
            Some(m) => Ok(m),
            None if ds.iter().any(|d| d.severity == "error") => Err(ds),
            None => Err(vec![MlirDiagnostic::error(
                "MLIR could not parse the input",
            )]),
        }
    }

    /// Parses text that holds exactly one top-level op (a module printed by commlir, say).
    pub fn parse_op(
        &self,
        source_name: &str,
        text: &str,
    ) -> Result<Operation<'_>, Vec<MlirDiagnostic>> {
        match self.parse_one(source_name, text) {
            Some(op) => {
                self.take_diagnostics();
                Ok(op)
            }
            None => Err(self.failure("MLIR could not parse the input")),
        }
    }

    fn parse_one(&self, source_name: &str, text: &str) -> Option<Operation<'_>> {
        // SAFETY: the string refs borrow `text` / `source_name` for the duration of the call;
        // MLIR copies what it keeps. A null result is mapped to `None`.
        unsafe {
            let raw =
                mlirOperationCreateParse(self.context.to_raw(), sref(text), sref(source_name));
            Operation::from_option_raw(raw)
        }
    }

    /// Runs MLIR's verifier on `op`.
    pub fn verify<'c: 'a, 'a, O: OperationLike<'c, 'a>>(
        &self,
        op: &O,
    ) -> Result<(), Vec<MlirDiagnostic>> {
        if op.verify() {
            self.take_diagnostics();
            Ok(())
        } else {
            Err(self.failure("MLIR's verifier rejected the module"))
        }
    }

    /// Prints `op` in MLIR's generic form with locations: the form commlir's parser reads.
    pub fn print_generic<'c: 'a, 'a, O: OperationLike<'c, 'a>>(
        &self,
        op: &O,
    ) -> Result<String, Vec<MlirDiagnostic>> {
        self.print(op, true, true)
    }

    /// Replaces staged temporary paths in printed locations by the names they stand for.
    fn apply_renames(&self, mut text: String) -> String {
        for (from, to) in self.renames.borrow().iter() {
            let quoted_from = format!("\"{from}\"");
            if text.contains(&quoted_from) {
                text = text.replace(&quoted_from, &format!("\"{}\"", escape(to)));
            }
        }
        text
    }

    /// Prints `op` as MLIR does: custom syntax where a dialect has one unless `generic`, with
    /// locations when `debug_info`.
    pub fn print<'c: 'a, 'a, O: OperationLike<'c, 'a>>(
        &self,
        op: &O,
        generic: bool,
        debug_info: bool,
    ) -> Result<String, Vec<MlirDiagnostic>> {
        let mut flags = OperationPrintingFlags::new().enable_debug_info(debug_info, false);
        if generic {
            flags = flags.print_generic_operation_form();
        }
        op.to_string_with_flags(flags)
            .map(|t| self.apply_renames(t))
            .map_err(|e| {
                vec![MlirDiagnostic::error(format!(
                    "MLIR could not print the module: {e}"
                ))]
            })
    }
}

/// MLIR's string escaping for file names in locations.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The input written to a private temporary directory for MLIR's file parser; removed on
/// drop.
struct TempSource {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl TempSource {
    fn write(source_name: &str, text: &str) -> std::io::Result<TempSource> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "commlir-mlir-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        let base: String = std::path::Path::new(source_name)
            .file_name()
            .and_then(|b| b.to_str())
            .unwrap_or("input.mlir")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(if base.is_empty() {
            "input.mlir".into()
        } else {
            base
        });
        std::fs::write(&path, text)?;
        Ok(TempSource { dir, path })
    }

    fn path_str(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }
}

impl Drop for TempSource {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
