//! commlir passes inside a real MLIR pass pipeline, as melior external passes.
//!
//! [`commlir_pass`] wraps a commlir pipeline (say `func.func(coll-to-comm)`) as one MLIR pass
//! on `builtin.module`. When MLIR runs it, the module crosses into commlir in the generic
//! form with its locations, the commlir pipeline runs (verifying after each pass), and the
//! result crosses back: MLIR parses it in the module's own context and the module's body is
//! replaced by the new body in place (`mlirRegionTakeBody`), so the pass manager, its
//! instrumentation and the ops around the module never see a different module op. A commlir
//! failure becomes an MLIR error at the commlir diagnostic's location and fails the pass.
//!
//! The MLIR C API cannot add passes to MLIR's registry, so `mlirParsePassPipeline` cannot
//! name commlir passes. [`add_pipeline`] reads a pipeline string that mixes both instead:
//! every pass MLIR knows goes to MLIR by name (`canonicalize`, `cse`, ...; prefix a name with
//! `commlir.` to pick commlir's pass of the same name), every commlir pass becomes an
//! external pass, and consecutive commlir passes share one crossing. A commlir pass written
//! under `func.func(...)` runs from the enclosing module (commlir nests it on every function
//! itself), which gives the same result, since function passes see only their function.

use crate::session::sref;
use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::pass::{parse_pipeline, PassManager as CommlirPassManager, PassRegistry};
use commlir_ir::printer::{print_op, PrintOptions};
use commlir_ir::{Context, Diagnostic};
use melior::ir::operation::{OperationLike, OperationPrintingFlags};
use melior::ir::r#type::TypeId;
use melior::ir::{Location, OperationRef, RegionLike};
use melior::pass::{create_external, ExternalPass, OperationPassManager, Pass, RunExternalPass};
use melior::ContextRef;
use mlir_sys::{
    mlirEmitError, mlirOpPassManagerAddPipeline, mlirOperationCreateParse, mlirOperationDestroy,
    mlirOperationGetRegion, mlirRegionTakeBody, MlirStringRef,
};
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::sync::{Mutex, OnceLock};

/// A commlir pipeline run as one MLIR pass on `builtin.module`.
#[derive(Clone, Debug)]
pub struct CommlirPass {
    /// The elements of a pipeline anchored on `builtin.module`, in commlir's syntax.
    pipeline: String,
}

impl<'c> RunExternalPass<'c> for CommlirPass {
    fn initialize(&mut self, _context: ContextRef<'c>) {}

    fn run(&mut self, operation: OperationRef<'c, '_>, pass: ExternalPass<'_>) {
        if let Err(errors) = run_on_module(&self.pipeline, operation) {
            for (loc, msg) in errors {
                let context = operation.context();
                let location = match loc {
                    // SAFETY: the context outlives the pass run that borrowed it.
                    Some((f, l, c)) => {
                        Location::new(unsafe { context.to_ref() }, &f, l as usize, c as usize)
                    }
                    None => operation.location(),
                };
                let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the location belongs to the module's live context; the message is a
                // NUL-terminated string that outlives the call.
                unsafe { mlirEmitError(location.to_raw(), msg.as_ptr()) };
            }
            pass.signal_failure();
        }
    }
}

type Located = (Option<(String, u32, u32)>, String);

fn located(ctx: &Context, ds: &[Diagnostic]) -> Vec<Located> {
    ds.iter()
        .map(|d| {
            let loc = commlir_ir::diag::file_line_col(ctx, d.loc);
            let mut msg = d.message.clone();
            for n in &d.notes {
                msg.push_str(&format!("\nnote: {}", n.message));
            }
            (loc, msg)
        })
        .collect()
}

/// The crossing: MLIR module → commlir → pipeline → MLIR module body.
fn run_on_module(pipeline: &str, module: OperationRef<'_, '_>) -> Result<(), Vec<Located>> {
    commlir_passes::link();
    let fail = |m: String| vec![(None, m)];
    let text = module
        .to_string_with_flags(
            OperationPrintingFlags::new()
                .enable_debug_info(true, false)
                .print_generic_operation_form(),
        )
        .map_err(|e| fail(format!("cannot print the module for commlir: {e}")))?;
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let m = parse_source(
        &mut ctx,
        "<mlir module>",
        text.as_bytes(),
        &ParseOptions::default(),
    )
    .map_err(|d| located(&ctx, &[d]))?;
    commlir_ir::verify::verify(&ctx, m).map_err(|ds| located(&ctx, &ds))?;
    let opm = parse_pipeline(&format!("builtin.module({pipeline})"))
        .map_err(|e| fail(format!("invalid commlir pipeline '{pipeline}': {e}")))?;
    let mut pm = CommlirPassManager::from_pipeline(opm);
    pm.run(&mut ctx, m).map_err(|ds| located(&ctx, &ds))?;
    let out = print_op(
        &ctx,
        m,
        &PrintOptions {
            generic: true,
            debug_info: true,
        },
    );
    // MLIR's parser recurses on nesting and runs on the caller's stack here.
    crate::guard::check_nesting("<commlir>", &out, crate::guard::MAX_NESTING)
        .map_err(|d| fail(d.message))?;
    // SAFETY: `out` and the name outlive the call; the parsed op is owned here and destroyed
    // below after its body moved; the module's region 0 is its body (builtin.module has one).
    unsafe {
        let name = "<commlir>";
        let parsed =
            mlirOperationCreateParse(module.context().to_ref().to_raw(), sref(&out), sref(name));
        if parsed.ptr.is_null() {
            return Err(fail(
                "MLIR could not read the module commlir produced (see the diagnostics above)"
                    .into(),
            ));
        }
        let target = module.region(0).map_err(|e| fail(e.to_string()))?;
        mlirRegionTakeBody(target.to_raw(), mlirOperationGetRegion(parsed, 0));
        mlirOperationDestroy(parsed);
    }
    Ok(())
}

/// One pass identity per pipeline: MLIR tells passes apart by `TypeID`, an 8-byte-aligned
/// address that must live as long as the process.
fn pass_id(pipeline: &str) -> &'static u64 {
    static IDS: OnceLock<Mutex<BTreeMap<String, &'static u64>>> = OnceLock::new();
    let mut ids = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    ids.entry(pipeline.to_string())
        .or_insert_with(|| Box::leak(Box::new(0u64)))
}

/// An MLIR pass running the commlir `pipeline` (elements anchored on `builtin.module`, e.g.
/// `func.func(coll-to-comm,comm-sink-waits-iterative)`); checked against commlir's registry
/// here, so that a typo fails when the pipeline is built, not when it runs.
pub fn commlir_pass(pipeline: &str) -> Result<Pass, String> {
    commlir_passes::link();
    parse_pipeline(&format!("builtin.module({pipeline})")).map_err(|e| {
        format!(
            "invalid commlir pipeline '{pipeline}': {}",
            e.render(pipeline)
        )
    })?;
    let argument = match parse_tree(pipeline).ok().as_deref() {
        Some([Node::Pass { name, .. }]) => name.clone(),
        _ => "commlir-pipeline".to_string(),
    };
    Ok(create_external(
        CommlirPass {
            pipeline: pipeline.to_string(),
        },
        TypeId::create(pass_id(pipeline)),
        "CommlirPass",
        &argument,
        "Runs a commlir pipeline on the module",
        "builtin.module",
        &[],
    ))
}

/// One element of a pipeline string.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    /// `name` or `name{options}` (`opts` keeps the braces).
    Pass { name: String, opts: String },
    /// `anchor(elements)`.
    Nest { anchor: String, children: Vec<Node> },
}

impl Node {
    fn text(&self) -> String {
        match self {
            Node::Pass { name, opts } => format!("{name}{opts}"),
            Node::Nest { anchor, children } => format!("{anchor}({})", join(children)),
        }
    }
}

fn join(nodes: &[Node]) -> String {
    nodes.iter().map(Node::text).collect::<Vec<_>>().join(",")
}

/// Parses `a,b{x=1},func.func(c,d)`: names, balanced option braces (with quoted strings),
/// nests. Depth is bounded by the input's length and checked.
fn parse_tree(text: &str) -> Result<Vec<Node>, String> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    let nodes = parse_elements(bytes, &mut pos, 0)?;
    if pos != bytes.len() {
        return Err(format!(
            "unexpected '{}' at offset {pos}",
            bytes[pos] as char
        ));
    }
    Ok(nodes)
}

fn skip_ws(b: &[u8], pos: &mut usize) {
    while *pos < b.len() && b[*pos].is_ascii_whitespace() {
        *pos += 1;
    }
}

fn parse_elements(b: &[u8], pos: &mut usize, depth: usize) -> Result<Vec<Node>, String> {
    if depth > 64 {
        return Err("pipeline nested too deeply".into());
    }
    let mut out = Vec::new();
    loop {
        skip_ws(b, pos);
        if *pos >= b.len() || b[*pos] == b')' {
            return Ok(out);
        }
        let start = *pos;
        while *pos < b.len()
            && (b[*pos].is_ascii_alphanumeric() || matches!(b[*pos], b'.' | b'_' | b'-'))
        {
            *pos += 1;
        }
        if start == *pos {
            return Err(format!("expected a pass or op name at offset {start}"));
        }
        let name = String::from_utf8_lossy(&b[start..*pos]).into_owned();
        skip_ws(b, pos);
        if *pos < b.len() && b[*pos] == b'(' {
            *pos += 1;
            let children = parse_elements(b, pos, depth + 1)?;
            if *pos >= b.len() || b[*pos] != b')' {
                return Err(format!("expected ')' to close '{name}('"));
            }
            *pos += 1;
            out.push(Node::Nest {
                anchor: name,
                children,
            });
        } else {
            let ostart = *pos;
            if *pos < b.len() && b[*pos] == b'{' {
                let mut level = 0usize;
                let mut quoted = false;
                while *pos < b.len() {
                    let c = b[*pos];
                    *pos += 1;
                    match c {
                        b'"' => quoted = !quoted,
                        b'{' if !quoted => level += 1,
                        b'}' if !quoted => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                if level != 0 {
                    return Err(format!("unbalanced '{{' in the options of '{name}'"));
                }
            }
            out.push(Node::Pass {
                name,
                opts: String::from_utf8_lossy(&b[ostart..*pos]).into_owned(),
            });
        }
        skip_ws(b, pos);
        if *pos < b.len() && b[*pos] == b',' {
            *pos += 1;
        }
    }
}

unsafe extern "C" fn collect_message(s: MlirStringRef, data: *mut c_void) {
    // SAFETY: `data` is the `String` passed by `add_upstream`; `s` is valid for the call.
    unsafe {
        let out = &mut *(data as *mut String);
        let bytes = std::slice::from_raw_parts(s.data.cast::<u8>(), s.length);
        out.push_str(&String::from_utf8_lossy(bytes));
    }
}

/// Adds upstream pipeline elements to `opm`; MLIR's message on failure.
fn add_upstream(opm: &OperationPassManager<'_, '_>, elements: &str) -> Result<(), String> {
    let mut message = String::new();
    // SAFETY: the string ref borrows `elements` for the call; the callback only appends to
    // `message`, which outlives the call.
    let ok = unsafe {
        mlirOpPassManagerAddPipeline(
            opm.to_raw(),
            sref(elements),
            Some(collect_message),
            &mut message as *mut String as *mut c_void,
        )
    };
    if ok.value != 0 {
        Ok(())
    } else {
        Err(message)
    }
}

/// Whether MLIR's registry has a pass of this name.
fn upstream_has(name: &str) -> bool {
    static CACHE: OnceLock<Mutex<BTreeMap<String, bool>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    *cache.entry(name.to_string()).or_insert_with(|| {
        melior::utility::register_all_passes();
        let ctx = melior::Context::new();
        let pm = melior::pass::PassManager::new(&ctx);
        add_upstream(&pm.as_operation_pass_manager(), name).is_ok()
    })
}

/// Whether a node runs in commlir: `commlir.`-prefixed, or a commlir pass MLIR lacks; a nest
/// is commlir's when everything in it is.
fn is_commlir(node: &Node) -> bool {
    match node {
        Node::Pass { name, .. } => {
            name.starts_with("commlir.")
                || (PassRegistry::global().get(name).is_some() && !upstream_has(name))
        }
        Node::Nest { children, .. } => !children.is_empty() && children.iter().all(is_commlir),
    }
}

/// Splits mixed nests (`func.func(a, upstream, b)`) into homogeneous ones, in order.
fn normalize(nodes: &[Node]) -> Vec<Node> {
    let mut out = Vec::new();
    for n in nodes {
        match n {
            Node::Nest { anchor, children } if anchor != "builtin.module" => {
                let children = normalize(children);
                let mut run: Vec<Node> = Vec::new();
                let mut run_ours = None;
                for c in children {
                    let ours = is_commlir(&c);
                    if run_ours.is_some_and(|r| r != ours) {
                        out.push(Node::Nest {
                            anchor: anchor.clone(),
                            children: std::mem::take(&mut run),
                        });
                    }
                    run_ours = Some(ours);
                    run.push(c);
                }
                if !run.is_empty() {
                    out.push(Node::Nest {
                        anchor: anchor.clone(),
                        children: run,
                    });
                }
            }
            _ => out.push(n.clone()),
        }
    }
    out
}

fn strip_prefix(node: &Node) -> Node {
    match node {
        Node::Pass { name, opts } => Node::Pass {
            name: name.trim_start_matches("commlir.").to_string(),
            opts: opts.clone(),
        },
        Node::Nest { anchor, children } => Node::Nest {
            anchor: anchor.clone(),
            children: children.iter().map(strip_prefix).collect(),
        },
    }
}

/// Adds the elements of a pipeline anchored on a module to `opm`.
fn add_module_elements(opm: &OperationPassManager<'_, '_>, nodes: &[Node]) -> Result<(), String> {
    let nodes = normalize(nodes);
    let mut ours: Vec<Node> = Vec::new();
    let flush = |ours: &mut Vec<Node>| -> Result<(), String> {
        if !ours.is_empty() {
            let stripped: Vec<Node> = ours.iter().map(strip_prefix).collect();
            opm.add_pass(commlir_pass(&join(&stripped))?);
            ours.clear();
        }
        Ok(())
    };
    for n in &nodes {
        match n {
            Node::Nest { anchor, children } if anchor == "builtin.module" => {
                flush(&mut ours)?;
                add_module_elements(&opm.nested_under("builtin.module"), children)?;
            }
            n if is_commlir(n) => ours.push(n.clone()),
            n => {
                flush(&mut ours)?;
                add_upstream(opm, &n.text())?;
            }
        }
    }
    flush(&mut ours)
}

/// Adds a pipeline string that may mix MLIR's passes and commlir's to a melior pass manager,
/// e.g. `builtin.module(canonicalize,func.func(coll-to-comm,comm-sink-waits-iterative),cse)`.
/// The outer `builtin.module(...)` may be left out.
pub fn add_pipeline(pm: &melior::pass::PassManager<'_>, pipeline: &str) -> Result<(), String> {
    let tree = parse_tree(pipeline)?;
    let elements = match tree.as_slice() {
        [Node::Nest { anchor, children }] if anchor == "builtin.module" => children.clone(),
        _ => tree,
    };
    add_module_elements(&pm.as_operation_pass_manager(), &elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_trees() {
        let t = parse_tree(
            "canonicalize, func.func(coll-to-comm{one-shot-threshold=0},cse),x{a=\"}\"}",
        )
        .unwrap();
        assert_eq!(
            join(&t),
            "canonicalize,func.func(coll-to-comm{one-shot-threshold=0},cse),x{a=\"}\"}"
        );
        assert!(parse_tree("a(b").is_err());
        assert!(parse_tree("a{b").is_err());
        assert!(parse_tree(&"a(".repeat(100)).is_err());
    }
}
