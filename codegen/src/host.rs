//! The host program: every function lowered to `rt` becomes an LLVM function that calls the
//! runtime through the `commlir_rt_api` table ([`crate::abi`]), one call per `rt` op, in
//! program order, returning the first nonzero status at once.
//!
//! Exported symbols (what the runner `dlsym`s, see docs/codegen.md):
//! - `int32_t commlir_main(const commlir_rt_api*, void *rt, void *const *args, void **results)`
//!   runs the entry function; `commlir_fn_<name>` the same for every function;
//! - `commlir_abi_version` (u32), `commlir_num_kernels` (u32), `commlir_kernel_names`
//!   (`const char *const[]`, the kernel indices of `launch`), `commlir_num_events` (u32),
//!   `commlir_ptx` (NUL-terminated PTX, the same text as the artifact's PTX section).

use crate::abi;
use crate::kernels::DeviceCode;
use crate::lower_to_rt::module_block;
use commlir_dialects::rt::memref_info;
use commlir_dialects::shape::elem_bytes;
use commlir_ir::{Context as IrContext, Diagnostic, OpId, Value};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine,
};
use inkwell::types::{FunctionType, StructType};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, PointerValue,
};
use inkwell::{AddressSpace, IntPredicate, OptimizationLevel};
use std::collections::HashMap;

/// A group of the module's group table (index = position).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub name: String,
    pub size: i64,
    /// `ranks` as written (flat or nested), as text; empty when absent.
    pub ranks: String,
    pub symm_mem: bool,
}

/// The host program of a module.
#[derive(Clone, Debug, Default)]
pub struct HostCode {
    /// Verified LLVM IR text.
    pub llvm_ir: String,
    /// Relocatable ELF object (position independent), when requested.
    pub object: Vec<u8>,
    /// Events the runtime must create (max over functions).
    pub num_events: u32,
    /// The group table.
    pub groups: Vec<GroupEntry>,
    /// Lowered functions: (name, argument types, result types) as text.
    pub functions: Vec<(String, Vec<String>, Vec<String>)>,
    /// The entry function (`commlir_main`).
    pub entry: String,
    /// Per lowered function (same order as `functions`): its pools and argument/result slots.
    pub slots: Vec<crate::slots::FnSlots>,
}

/// The module's `coll.group` table, in module order.
pub fn group_table(ctx: &IrContext, module: OpId) -> Vec<GroupEntry> {
    let Some(body) = module_block(ctx, module) else {
        return Vec::new();
    };
    ctx.block_ops(body)
        .filter(|o| ctx.op_name(*o) == "coll.group")
        .map(|g| GroupEntry {
            name: ctx.symbol_name(g).unwrap_or("").to_string(),
            size: ctx
                .inherent_attr(g, "size")
                .and_then(|a| ctx.attr_as_i64(a))
                .unwrap_or(0),
            ranks: ctx
                .inherent_attr(g, "ranks")
                .map(|a| commlir_ir::printer::attr_to_string(ctx, a))
                .unwrap_or_default(),
            symm_mem: ctx.inherent_attr(g, "symm_mem").is_some(),
        })
        .collect()
}

/// The host machine (x86-64 or whatever this compiler runs on), position-independent code.
pub fn host_machine() -> Result<TargetMachine, String> {
    Target::initialize_native(&InitializationConfig::default())?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            "generic",
            "",
            OptimizationLevel::Default,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| "cannot create the host target machine".to_string())
}

/// Generates the host program of a module lowered by `comm-to-rt`.
pub fn compile(
    ctx: &IrContext,
    module: OpId,
    device: &DeviceCode,
    entry: Option<&str>,
    want_object: bool,
) -> Result<HostCode, Diagnostic> {
    let merr = |m: String| ctx.op_error(module, m);
    let tm = host_machine().map_err(merr)?;
    let llcx = Context::create();
    let lm = llcx.create_module("commlir_host");
    lm.set_triple(&tm.get_triple());
    lm.set_data_layout(&tm.get_target_data().get_data_layout());
    let groups = group_table(ctx, module);
    let mut h = Host::new(&llcx, &lm, device, &groups);
    let mut out = HostCode {
        groups: groups.clone(),
        ..HostCode::default()
    };
    let funcs: Vec<OpId> = module_block(ctx, module)
        .map(|b| {
            ctx.block_ops(b)
                .filter(|o| ctx.op_name(*o) == "func.func")
                .collect()
        })
        .unwrap_or_default();
    // The same default as the sim backend's, so `--check` runs the same function.
    let default_entry = commlir_dialects::func::default_entry(ctx, &funcs)
        .and_then(|f| ctx.symbol_name(f))
        .map(str::to_string);
    // Every function is declared first, so that a `func.call` can name a callee defined later.
    let funcs: Vec<(OpId, commlir_ir::BlockId, String)> = funcs
        .into_iter()
        .filter_map(|f| {
            let body = *ctx.region_blocks(ctx.op_regions(f)[0]).first()?;
            Some((f, body, ctx.symbol_name(f).unwrap_or("").to_string()))
        })
        .collect();
    for (_, _, name) in &funcs {
        h.declare(name);
    }
    let mut fns = Vec::new();
    for (f, body, name) in funcs {
        let ops: Vec<OpId> = ctx.block_ops(body).collect();
        let gnames: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
        let slots = crate::slots::analyze(ctx, &ops, ctx.block_args(body), &gnames);
        // Each function numbers its events after the previous one's: a callee's records
        // never reuse an event its caller may still wait on.
        let (events, lf) = h.function(ctx, f, body, &name, &slots, out.num_events)?;
        out.slots.push(slots);
        out.num_events = events;
        let args = ctx
            .block_args(body)
            .iter()
            .map(|v| commlir_ir::printer::type_to_string(ctx, ctx.value_type(*v)))
            .collect();
        let results = ctx
            .block_last(body)
            .map(|r| {
                ctx.operands(r)
                    .iter()
                    .map(|v| commlir_ir::printer::type_to_string(ctx, ctx.value_type(*v)))
                    .collect()
            })
            .unwrap_or_default();
        out.functions.push((name.clone(), args, results));
        fns.push((name, lf));
    }
    let (entry_name, entry_fn) = match entry {
        Some(e) => fns
            .iter()
            .find(|(n, _)| n == e)
            .cloned()
            .ok_or_else(|| merr(format!("no function @{e} to use as the entry")))?,
        None => default_entry
            .and_then(|e| fns.iter().find(|(n, _)| *n == e).cloned())
            .ok_or_else(|| merr("no function with a body".into()))?,
    };
    h.main(entry_fn).map_err(merr)?;
    h.globals(out.num_events).map_err(merr)?;
    out.entry = entry_name;
    lm.verify()
        .map_err(|e| merr(format!("LLVM verifier (host): {e}")))?;
    out.llvm_ir = lm.print_to_string().to_string();
    if want_object {
        let buf = tm
            .write_to_memory_buffer(&lm, FileType::Object)
            .map_err(|e| merr(format!("host code generation: {e}")))?;
        out.object = buf.as_slice().to_vec();
    }
    Ok(out)
}

type R<T> = Result<T, String>;

macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

/// `?` for a builder result inside a function returning a diagnostic.
macro_rules! b_d {
    ($ctx:expr, $op:expr, $e:expr) => {
        $e.map_err(|e| $ctx.op_error($op, e.to_string()))?
    };
}

struct Host<'a, 'c> {
    cx: &'c Context,
    m: &'a Module<'c>,
    b: Builder<'c>,
    api_ty: StructType<'c>,
    device: &'a DeviceCode,
    groups: &'a [GroupEntry],
    /// Per function: the api and rt parameters and the out-parameter slot.
    api: Option<PointerValue<'c>>,
    rt: Option<PointerValue<'c>>,
    slot: Option<PointerValue<'c>>,
    func: Option<FunctionValue<'c>>,
    /// Entry block position for allocas.
    alloca_b: Builder<'c>,
    /// Per function: the arrays every launch and call reuses (see [`Scratch`]).
    scratch: Option<Scratch<'c>>,
    /// Per function with reduce-scatter pipelines: the event the comm stream records after
    /// each one's end barrier, and the (group, bytes) of the workspaces released so far
    /// (`host::fused`, [`Host::release_workspace`]).
    release: Option<u32>,
    released: std::cell::RefCell<Vec<(String, i64)>>,
}

/// The stack arrays of one host function's launches and calls, allocated once in its entry
/// block at the largest size any of its ops needs. The runtime reads kernel parameters and
/// call arguments before the call returns, and a callee's results are loaded right after, so
/// every op can reuse them: a function's frame stays a few hundred bytes however many ops it
/// has (one pair of arrays per launch made a 50k-launch function's frame overflow a thread's
/// stack), which also bounds what a chain of calls needs.
#[derive(Clone, Copy)]
struct Scratch<'c> {
    kvals: PointerValue<'c>,
    kparams: PointerValue<'c>,
    cargs: PointerValue<'c>,
    cres: PointerValue<'c>,
}

impl<'a, 'c> Host<'a, 'c> {
    fn new(
        cx: &'c Context,
        m: &'a Module<'c>,
        device: &'a DeviceCode,
        groups: &'a [GroupEntry],
    ) -> Self {
        let ptr = cx.ptr_type(AddressSpace::default());
        let i32t = cx.i32_type();
        let mut fields: Vec<inkwell::types::BasicTypeEnum> = vec![i32t.into(), i32t.into()];
        fields.extend(
            abi::API_FIELDS
                .iter()
                .map(|_| -> inkwell::types::BasicTypeEnum { ptr.into() }),
        );
        let api_ty = cx.opaque_struct_type("struct.commlir_rt_api");
        api_ty.set_body(&fields, false);
        Host {
            cx,
            m,
            b: cx.create_builder(),
            api_ty,
            device,
            groups,
            api: None,
            rt: None,
            slot: None,
            func: None,
            alloca_b: cx.create_builder(),
            scratch: None,
            release: None,
            released: std::cell::RefCell::new(Vec::new()),
        }
    }

    fn ptr(&self) -> inkwell::types::PointerType<'c> {
        self.cx.ptr_type(AddressSpace::default())
    }
    fn i32(&self, v: u64) -> IntValue<'c> {
        self.cx.i32_type().const_int(v, false)
    }
    fn i64(&self, v: i64) -> IntValue<'c> {
        self.cx.i64_type().const_int(v as u64, true)
    }

    /// The C type of API function `name` (see `commlir_rt.h`).
    fn fn_type(&self, name: &str) -> FunctionType<'c> {
        let p = self.ptr().into();
        let u32t = self.cx.i32_type().into();
        let u64t = self.cx.i64_type().into();
        let params: Vec<inkwell::types::BasicMetadataTypeEnum> = match name {
            "alloc" => vec![p, u64t, p],
            "free" | "pool_free" => vec![p, p],
            "pool_alloc" => vec![p, u32t, u32t, u64t, u64t, p],
            "launch" => vec![p, u32t, u32t, u32t, u32t, p, u32t],
            "gemm" => {
                let f64t = self.cx.f64_type().into();
                vec![
                    p, u32t, u32t, u64t, u64t, u64t, p, u64t, u64t, p, u64t, u64t, p, u64t, u64t,
                    u64t, u32t, f64t, f64t,
                ]
            }
            "attention" | "attention_backward" => {
                let f64t = self.cx.f64_type().into();
                let buffers = if name == "attention" { 5 } else { 9 };
                let mut v = vec![p];
                v.extend([u64t; 7]);
                v.extend([u32t, u32t, f64t]);
                v.extend(std::iter::repeat_n(p, buffers));
                v
            }
            "copy_on" => vec![p, u32t, p, p, u64t],
            "symm_peer_put" => vec![p, u32t, p, u32t, u64t, p, u64t],
            "all_reduce" | "reduce_scatter" | "broadcast" => vec![p, u32t, p, p, u64t, u32t, u32t],
            "all_gather" => vec![p, u32t, p, p, u64t, u32t],
            "all_to_all" => vec![p, u32t, p, p, u64t, u64t, u32t, p, p],
            "group_start" | "group_end" => vec![p],
            "symm_fallback" => vec![p, u32t, u32t, p, u64t, p, u64t, u32t, u32t],
            "symm_pool_desc" => vec![p, p, p],
            "launch_on" => vec![p, u32t, u32t, u32t, u32t, u32t, p, u32t],
            "group_rank" => vec![p, u32t, p],
            "symm_peer_copy" => vec![p, u32t, p, u32t, u64t, p, u64t, u64t, u64t],
            "event_record" | "stream_wait" => vec![p, u32t, u32t],
            _ => vec![p],
        };
        self.cx.i32_type().fn_type(&params, false)
    }

    /// Calls API function `name` with `args` (after `rt`); returns from the function with the
    /// status when it is nonzero.
    fn call(&self, name: &str, args: &[BasicMetadataValueEnum<'c>]) -> R<()> {
        let idx = abi::API_FIELDS
            .iter()
            .position(|f| *f == name)
            .ok_or_else(|| format!("no API function {name}"))?;
        let api = self.api.ok_or("no api")?;
        let fp_addr = b!(self
            .b
            .build_struct_gep(self.api_ty, api, (idx + 2) as u32, name));
        let fp = b!(self.b.build_load(self.ptr(), fp_addr, name)).into_pointer_value();
        let mut all: Vec<BasicMetadataValueEnum> = vec![self.rt.ok_or("no rt")?.into()];
        all.extend_from_slice(args);
        let st = b!(self
            .b
            .build_indirect_call(self.fn_type(name), fp, &all, "st"));
        self.check_status(st)
    }

    /// Returns from the current function with the status of call `st` when it is nonzero.
    fn check_status(&self, st: inkwell::values::CallSiteValue<'c>) -> R<()> {
        let st = st
            .try_as_basic_value()
            .basic()
            .ok_or("call without status")?
            .into_int_value();
        let f = self.func.ok_or("no function")?;
        let bad = b!(self
            .b
            .build_int_compare(IntPredicate::NE, st, self.i32(0), "bad"));
        let fail = self.cx.append_basic_block(f, "fail");
        let ok = self.cx.append_basic_block(f, "ok");
        b!(self.b.build_conditional_branch(bad, fail, ok));
        self.b.position_at_end(fail);
        b!(self.b.build_return(Some(&st)));
        self.b.position_at_end(ok);
        Ok(())
    }

    /// An `alloca` in the entry block (so it is static and never grows the stack).
    fn entry_alloca(&self, n: u32, name: &str) -> R<PointerValue<'c>> {
        let ty = self.ptr().array_type(n.max(1));
        Ok(b!(self.alloca_b.build_alloca(ty, name)))
    }

    /// The type every host function has: `int32_t (api, rt, args, results)`.
    fn entry_type(&self) -> FunctionType<'c> {
        let p = self.ptr();
        self.cx
            .i32_type()
            .fn_type(&[p.into(), p.into(), p.into(), p.into()], false)
    }

    /// Declares the host function of rt function `name` (`commlir_fn_<name>`).
    fn declare(&self, name: &str) -> FunctionValue<'c> {
        let sym = format!("commlir_fn_{name}");
        self.m.get_function(&sym).unwrap_or_else(|| {
            self.m
                .add_function(&sym, self.entry_type(), Some(Linkage::External))
        })
    }

    /// Lowers one function whose event indices start at `first_event`; returns (the end of
    /// its event range, the LLVM function).
    fn function(
        &mut self,
        ctx: &IrContext,
        f: OpId,
        body: commlir_ir::BlockId,
        name: &str,
        slots: &crate::slots::FnSlots,
        first_event: u32,
    ) -> Result<(u32, FunctionValue<'c>), Diagnostic> {
        let p = self.ptr();
        let lf = self.declare(name);
        let entry = self.cx.append_basic_block(lf, "entry");
        self.b.position_at_end(entry);
        self.alloca_b.position_at_end(entry);
        self.func = Some(lf);
        let param = |i: u32| lf.get_nth_param(i).map(|v| v.into_pointer_value());
        self.api = param(0);
        self.rt = param(1);
        let slot = b_d!(ctx, f, self.alloca_b.build_alloca(p, "out"));
        self.slot = Some(slot);
        let (mut nk, mut na, mut nr) = (0u32, 0u32, 0u32);
        for op in ctx.block_ops(body) {
            match ctx.op_name(op) {
                "rt.launch" => nk = nk.max(ctx.operands(op).len() as u32),
                // (desc, in_offset, out, site, epilogue operands...); the fallback's launch
                // of the epilogue takes fewer.
                "rt.symm_collective" => nk = nk.max(2 + ctx.operands(op).len() as u32),
                // (desc, in_offset, out, site, step); the reduce-scatter's epilogue operands
                // follow (the fallback's launch of the epilogue takes fewer).
                "rt.symm_fused_all_gather_matmul" | "rt.nccl_all_gather" => nk = nk.max(5),
                "rt.symm_fused_matmul_reduce_scatter" => {
                    nk = nk.max(1 + ctx.operands(op).len() as u32)
                }
                "func.call" => {
                    na = na.max(ctx.operands(op).len() as u32);
                    nr = nr.max(ctx.results(op).len() as u32);
                }
                _ => {}
            }
        }
        let scratch = (|| -> R<Scratch<'c>> {
            Ok(Scratch {
                kvals: self.entry_alloca(nk, "kvals")?,
                kparams: self.entry_alloca(nk, "kparams")?,
                cargs: self.entry_alloca(na, "cargs")?,
                cres: self.entry_alloca(nr, "cres")?,
            })
        })()
        .map_err(|m| ctx.op_error(f, m))?;
        self.scratch = Some(scratch);
        // The entry block holds only allocas and a branch to the code, so every alloca is
        // static; `alloca_b` inserts before that branch.
        let code = self.cx.append_basic_block(lf, "code");
        let br = b_d!(ctx, f, self.b.build_unconditional_branch(code));
        self.alloca_b.position_before(&br);
        self.b.position_at_end(code);
        let mut vals: HashMap<Value, PointerValue<'c>> = HashMap::new();
        let mut events: HashMap<Value, u32> = HashMap::new();
        let mut next_event = first_event;
        // One event orders every reduce-scatter pipeline's end barrier before the next reuse
        // of a workspace (`Host::release_workspace`).
        self.release = None;
        if ctx
            .block_ops(body)
            .any(|o| ctx.op_name(o) == "rt.symm_fused_matmul_reduce_scatter")
        {
            self.release = Some(next_event);
            next_event += 1;
        }
        self.released.borrow_mut().clear();
        let res: R<()> = (|| {
            // ABI check: a runner built against another layout gets -1, never a wild call.
            let api = self.api.ok_or("no api")?;
            let ver_addr = b!(self.b.build_struct_gep(self.api_ty, api, 0, "ver"));
            let ver = b!(self.b.build_load(self.cx.i32_type(), ver_addr, "ver")).into_int_value();
            let bad = b!(self.b.build_int_compare(
                IntPredicate::NE,
                ver,
                self.i32(u64::from(abi::ABI_VERSION)),
                "badver"
            ));
            let fail = self.cx.append_basic_block(lf, "badabi");
            let ok = self.cx.append_basic_block(lf, "start");
            b!(self.b.build_conditional_branch(bad, fail, ok));
            self.b.position_at_end(fail);
            b!(self
                .b
                .build_return(Some(&self.cx.i32_type().const_int(u64::MAX, true))));
            self.b.position_at_end(ok);
            let args_p = param(2).ok_or("no args")?;
            for (i, &a) in ctx.block_args(body).iter().enumerate() {
                let at = unsafe {
                    b!(self
                        .b
                        .build_in_bounds_gep(p, args_p, &[self.i64(i as i64)], "argp"))
                };
                let v = b!(self.b.build_load(p, at, &format!("arg{i}"))).into_pointer_value();
                vals.insert(a, v);
            }
            Ok(())
        })();
        res.map_err(|m| ctx.op_error(f, m))?;
        // Slot conditions (module docs of `slots`): per skippable clone launch, an i1 that is
        // true when the copy is skipped.
        let mut skip: HashMap<OpId, IntValue<'c>> = HashMap::new();
        for op in ctx.block_ops(body) {
            let r: R<()> = (|| {
                if let Some(s) = slots.args.iter().find(|s| s.launch == op) {
                    // Skip the copy when the caller placed the argument in the slot.
                    let a = Self::get(&vals, ctx.block_args(body)[s.index])?;
                    let v = Self::get(&vals, s.view)?;
                    let c = b!(self.b.build_int_compare(IntPredicate::EQ, a, v, "argslot"));
                    skip.insert(op, c);
                }
                if let Some(s) = slots.results.iter().find(|s| s.alloc == Some(op)) {
                    // The caller asks for the result in the slot by passing its address in
                    // results[j]: no allocation, no copy.
                    let res = param(3).ok_or("no results")?;
                    let at = unsafe {
                        b!(self
                            .b
                            .build_in_bounds_gep(p, res, &[self.i64(s.index as i64)], "want"))
                    };
                    let want = b!(self.b.build_load(p, at, "want")).into_pointer_value();
                    let v = Self::get(&vals, s.view)?;
                    let c = b!(self
                        .b
                        .build_int_compare(IntPredicate::EQ, want, v, "resslot"));
                    skip.insert(s.launch, c);
                    let here = self.b.get_insert_block().ok_or("no block")?;
                    let doit = self.cx.append_basic_block(lf, "resalloc");
                    let join = self.cx.append_basic_block(lf, "resjoin");
                    b!(self.b.build_conditional_branch(c, join, doit));
                    self.b.position_at_end(doit);
                    self.op(ctx, op, &mut vals, &mut events, &mut next_event)?;
                    let buf = Self::get(&vals, ctx.result(op, 0))?;
                    let end = self.b.get_insert_block().ok_or("no block")?;
                    b!(self.b.build_unconditional_branch(join));
                    self.b.position_at_end(join);
                    let phi = b!(self.b.build_phi(p, "resbuf"));
                    phi.add_incoming(&[(&buf, end), (&v, here)]);
                    vals.insert(ctx.result(op, 0), phi.as_basic_value().into_pointer_value());
                    return Ok(());
                }
                if let Some(&c) = skip.get(&op) {
                    let doit = self.cx.append_basic_block(lf, "copy");
                    let join = self.cx.append_basic_block(lf, "copied");
                    b!(self.b.build_conditional_branch(c, join, doit));
                    self.b.position_at_end(doit);
                    self.op(ctx, op, &mut vals, &mut events, &mut next_event)?;
                    b!(self.b.build_unconditional_branch(join));
                    self.b.position_at_end(join);
                    return Ok(());
                }
                self.op(ctx, op, &mut vals, &mut events, &mut next_event)
            })();
            r.map_err(|m| ctx.op_error(op, format!("host code: {m}")))?;
        }
        Ok((next_event, lf))
    }

    fn get(vals: &HashMap<Value, PointerValue<'c>>, v: Value) -> R<PointerValue<'c>> {
        vals.get(&v)
            .copied()
            .ok_or_else(|| "use of a value with no host pointer".to_string())
    }

    fn attr_i64(ctx: &IrContext, op: OpId, name: &str) -> R<i64> {
        ctx.inherent_attr(op, name)
            .and_then(|a| ctx.attr_as_i64(a))
            .ok_or_else(|| format!("requires integer attribute '{name}'"))
    }

    fn attr_str<'x>(ctx: &'x IrContext, op: OpId, name: &str) -> R<&'x str> {
        ctx.inherent_attr(op, name)
            .and_then(|a| ctx.attr_as_str(a))
            .ok_or_else(|| format!("requires string attribute '{name}'"))
    }

    fn group_index(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        let g = ctx
            .inherent_attr(op, "group")
            .and_then(|a| ctx.attr_as_symbol(a))
            .ok_or("requires 'group'")?;
        let i = self
            .groups
            .iter()
            .position(|e| e.name == g)
            .ok_or_else(|| format!("no coll.group @{g} in the module"))?;
        Ok(self.i32(i as u64))
    }

    fn dtype(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        let d = Self::attr_str(ctx, op, "dtype")?;
        Ok(self.i32(u64::from(abi::code(abi::DTYPES, d).ok_or("unknown dtype")?)))
    }

    /// `rt.gemm`'s dtype argument: the operands' code, with `out_dtype`'s code plus one
    /// above [`abi::GEMM_OUT_SHIFT`] when the result's type differs.
    fn gemm_dtype(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        let d = Self::attr_str(ctx, op, "dtype")?;
        let mut code = abi::code(abi::DTYPES, d).ok_or("unknown dtype")?;
        if let Ok(o) = Self::attr_str(ctx, op, "out_dtype") {
            let oc = abi::code(abi::DTYPES, o).ok_or("unknown out_dtype")?;
            code |= (oc + 1) << abi::GEMM_OUT_SHIFT;
        }
        Ok(self.i32(u64::from(code)))
    }

    /// An `rt.nccl_reduce_scatter`'s reduction code: with a `prescale`, NCCL's
    /// pre-multiplied sum by it (and by 1/G for avg), else [`Self::redop`].
    fn reduce_scatter_op(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        let Some(f) = ctx
            .inherent_attr(op, "prescale")
            .and_then(|a| ctx.attr_as_f64(a))
        else {
            return self.redop(ctx, op);
        };
        let factor = if Self::attr_str(ctx, op, "reduce_op")? == "avg" {
            f / self.world_of(ctx, op)? as f64
        } else {
            f
        };
        let code = abi::premul_code(factor)
            .ok_or_else(|| format!("prescale {f}: not a pre-multiplied sum NCCL can run"))?;
        Ok(self.i32(u64::from(code)))
    }

    fn redop(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        let d = Self::attr_str(ctx, op, "reduce_op")?;
        Ok(self.i32(u64::from(
            abi::code(abi::REDUCE_OPS, d).ok_or("unknown reduce_op")?,
        )))
    }

    fn stream(&self, ctx: &IrContext, op: OpId) -> R<IntValue<'c>> {
        Ok(
            self.i32(u64::from(match Self::attr_str(ctx, op, "stream")? {
                "comm" => abi::STREAM_COMM,
                _ => abi::STREAM_COMPUTE,
            })),
        )
    }

    /// `pool + offset` (a device address; the host only adds).
    fn at(&self, pool: PointerValue<'c>, off: i64) -> R<PointerValue<'c>> {
        if off == 0 {
            return Ok(pool);
        }
        Ok(unsafe {
            b!(self
                .b
                .build_in_bounds_gep(self.cx.i8_type(), pool, &[self.i64(off)], "at"))
        })
    }

    /// A constant `int64_t[]` global of a split matrix, or null.
    fn splits(&self, ctx: &IrContext, op: OpId, name: &str) -> R<PointerValue<'c>> {
        let Some(a) = ctx.inherent_attr(op, name) else {
            return Ok(self.ptr().const_null());
        };
        let mut flat = Vec::new();
        flatten_ints(ctx, a, &mut flat);
        let vals: Vec<IntValue> = flat.iter().map(|v| self.i64(*v)).collect();
        let arr = self.cx.i64_type().const_array(&vals);
        let g = self.m.add_global(arr.get_type(), None, name);
        g.set_initializer(&arr);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        Ok(g.as_pointer_value())
    }

    fn op(
        &self,
        ctx: &IrContext,
        op: OpId,
        vals: &mut HashMap<Value, PointerValue<'c>>,
        events: &mut HashMap<Value, u32>,
        next_event: &mut u32,
    ) -> R<()> {
        let name = ctx.op_name(op);
        let operand = |i: usize| Self::get(vals, ctx.operand(op, i));
        let slot = self.slot.ok_or("no slot")?;
        match name {
            "rt.alloc" | "rt.pool_alloc" => {
                let r = ctx.result(op, 0);
                if name == "rt.alloc" {
                    let (shape, elem) =
                        memref_info(ctx, ctx.value_type(r)).ok_or("not a memref")?;
                    let n: i64 = shape.iter().product();
                    let bytes = n.saturating_mul(elem_bytes(ctx, elem) as i64);
                    self.call("alloc", &[self.i64(bytes).into(), slot.into()])?;
                } else {
                    let kind = match Self::attr_str(ctx, op, "kind")? {
                        "symm_mem" => abi::POOL_SYMM_MEM,
                        _ => abi::POOL_NCCL,
                    };
                    if kind == abi::POOL_SYMM_MEM {
                        self.await_workspaces(Some(Self::pool_key(ctx, op)?))?;
                    }
                    self.call(
                        "pool_alloc",
                        &[
                            self.i32(u64::from(kind)).into(),
                            self.group_index(ctx, op)?.into(),
                            self.i64(Self::attr_i64(ctx, op, "size")?).into(),
                            self.i64(Self::attr_i64(ctx, op, "alignment")?).into(),
                            slot.into(),
                        ],
                    )?;
                }
                let v = b!(self.b.build_load(self.ptr(), slot, "buf")).into_pointer_value();
                vals.insert(r, v);
            }
            "rt.free" => self.call("free", &[operand(0)?.into()])?,
            "rt.pool_free" => self.call("pool_free", &[operand(0)?.into()])?,
            "rt.rank_view" => {
                let slot = self.slot.ok_or("no slot")?;
                self.call(
                    "group_rank",
                    &[self.group_index(ctx, op)?.into(), slot.into()],
                )?;
                let rank =
                    b!(self.b.build_load(self.cx.i32_type(), slot, "grank")).into_int_value();
                let rank = b!(self
                    .b
                    .build_int_z_extend(rank, self.cx.i64_type(), "grank64"));
                let off = b!(self.b.build_int_mul(
                    rank,
                    self.i64(Self::attr_i64(ctx, op, "stride")?),
                    "rank_off"
                ));
                let base = operand(0)?;
                let v = unsafe {
                    b!(self
                        .b
                        .build_in_bounds_gep(self.cx.i8_type(), base, &[off], "rank_view"))
                };
                vals.insert(ctx.result(op, 0), v);
            }
            "rt.view" => {
                vals.insert(ctx.result(op, 0), operand(0)?);
            }
            "rt.pool_view" => {
                let v = self.at(operand(0)?, Self::attr_i64(ctx, op, "offset")?)?;
                vals.insert(ctx.result(op, 0), v);
            }
            "rt.launch" => {
                let k = ctx
                    .inherent_attr(op, "kernel")
                    .and_then(|a| ctx.attr_as_symbol(a))
                    .ok_or("requires 'kernel'")?;
                let ki = self
                    .device
                    .kernels
                    .iter()
                    .position(|n| n == k)
                    .ok_or_else(|| format!("kernel @{k} was not compiled"))?;
                let n = ctx.operands(op).len() as u32;
                // kernelParams: an array of pointers to the argument values.
                let sc = self.scratch.ok_or("no scratch arrays")?;
                let (values, params) = (sc.kvals, sc.kparams);
                let arr = self.ptr().array_type(n.max(1));
                for i in 0..n {
                    let idx = [self.i64(0), self.i64(i64::from(i))];
                    let vp = unsafe { b!(self.b.build_in_bounds_gep(arr, values, &idx, "v")) };
                    b!(self.b.build_store(vp, operand(i as usize)?));
                    let pp = unsafe { b!(self.b.build_in_bounds_gep(arr, params, &idx, "p")) };
                    b!(self.b.build_store(pp, vp));
                }
                self.call(
                    "launch",
                    &[
                        self.i32(ki as u64).into(),
                        self.i32(Self::attr_i64(ctx, op, "grid")? as u64).into(),
                        self.i32(Self::attr_i64(ctx, op, "block")? as u64).into(),
                        self.i32(0).into(),
                        params.into(),
                        self.i32(u64::from(n)).into(),
                    ],
                )?;
            }
            "rt.gemm" => {
                let i = |n: &str| -> R<BasicMetadataValueEnum<'c>> {
                    Ok(self.i64(Self::attr_i64(ctx, op, n)?).into())
                };
                let off = |n: &str| Self::attr_i64(ctx, op, n).unwrap_or(0);
                let u = |n: &str| -> R<BasicMetadataValueEnum<'c>> {
                    Ok(self.i32(Self::attr_i64(ctx, op, n)? as u64).into())
                };
                self.call(
                    "gemm",
                    &[
                        u("transa")?,
                        u("transb")?,
                        i("m")?,
                        i("n")?,
                        i("k")?,
                        self.at(operand(0)?, off("offset_a"))?.into(),
                        i("lda")?,
                        i("stride_a")?,
                        self.at(operand(1)?, off("offset_b"))?.into(),
                        i("ldb")?,
                        i("stride_b")?,
                        self.at(operand(2)?, off("offset_c"))?.into(),
                        i("ldc")?,
                        i("stride_c")?,
                        i("batch")?,
                        self.gemm_dtype(ctx, op)?.into(),
                        self.cx.f64_type().const_float(1.0).into(),
                        self.cx
                            .f64_type()
                            .const_float(if ctx.get_attr(op, "accumulate").is_some() {
                                1.0
                            } else {
                                0.0
                            })
                            .into(),
                    ],
                )?;
            }
            "rt.attention" | "rt.attention_backward" => {
                let mut args: Vec<BasicMetadataValueEnum<'c>> = Vec::new();
                for n in [
                    "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "v_dim",
                ] {
                    args.push(self.i64(Self::attr_i64(ctx, op, n)?).into());
                }
                args.push(self.dtype(ctx, op)?.into());
                args.push(
                    self.i32(u64::from(ctx.get_attr(op, "causal").is_some()))
                        .into(),
                );
                let scale = ctx
                    .inherent_attr(op, "scale")
                    .and_then(|a| ctx.attr_as_f64(a))
                    .ok_or("requires 'scale'")?;
                args.push(self.cx.f64_type().const_float(scale).into());
                for i in 0..ctx.operands(op).len() {
                    args.push(operand(i)?.into());
                }
                // The forward's log-sum-exp is optional: a null pointer when not wanted.
                if name == "rt.attention" && ctx.operands(op).len() == 4 {
                    args.push(self.ptr().const_null().into());
                }
                let f = if name == "rt.attention" {
                    "attention"
                } else {
                    "attention_backward"
                };
                self.call(f, &args)?;
            }
            "rt.nccl_all_reduce" | "rt.nccl_broadcast" => {
                let p = self.at(operand(0)?, Self::attr_i64(ctx, op, "offset")?)?;
                let last = if name == "rt.nccl_all_reduce" {
                    self.redop(ctx, op)?
                } else {
                    self.i32(Self::attr_i64(ctx, op, "root")? as u64)
                };
                let f = if name == "rt.nccl_all_reduce" {
                    "all_reduce"
                } else {
                    "broadcast"
                };
                self.call(
                    f,
                    &[
                        self.group_index(ctx, op)?.into(),
                        p.into(),
                        p.into(),
                        self.i64(Self::attr_i64(ctx, op, "count")?).into(),
                        self.dtype(ctx, op)?.into(),
                        last.into(),
                    ],
                )?;
            }
            "rt.nccl_all_gather" | "rt.nccl_reduce_scatter" | "rt.nccl_all_to_all" => {
                let s = self.at(operand(0)?, Self::attr_i64(ctx, op, "send_offset")?)?;
                let r = self.at(operand(1)?, Self::attr_i64(ctx, op, "recv_offset")?)?;
                let g = self.group_index(ctx, op)?.into();
                let d = self.dtype(ctx, op)?.into();
                match name {
                    "rt.nccl_all_gather" if ctx.inherent_attr(op, "push_kernel").is_some() => {
                        self.push_all_gather(ctx, op, (s, r), operand(1)?)?;
                    }
                    "rt.nccl_all_gather" => {
                        let count = Self::attr_i64(ctx, op, "send_count")?;
                        let c = self.i64(count).into();
                        self.call("all_gather", &[g, s.into(), r.into(), c, d])?;
                    }
                    "rt.nccl_reduce_scatter" => {
                        let c = self.i64(Self::attr_i64(ctx, op, "recv_count")?).into();
                        let o = self.reduce_scatter_op(ctx, op)?.into();
                        self.call("reduce_scatter", &[g, s.into(), r.into(), c, d, o])?;
                    }
                    _ => {
                        let c = self.i64(Self::attr_i64(ctx, op, "count")?).into();
                        let re = self.i64(Self::attr_i64(ctx, op, "row_elems")?).into();
                        let sr = self.splits(ctx, op, "input_split_sizes")?.into();
                        let rr = self.splits(ctx, op, "output_split_sizes")?.into();
                        self.call("all_to_all", &[g, s.into(), r.into(), c, re, d, sr, rr])?;
                    }
                }
            }
            "rt.nccl_group_start" => self.call("group_start", &[])?,
            "rt.nccl_group_end" => self.call("group_end", &[])?,
            "rt.symm_collective" => {
                let extras = (2..ctx.operands(op).len())
                    .map(operand)
                    .collect::<R<Vec<_>>>()?;
                self.symm_collective(ctx, op, operand(0)?, operand(1)?, &extras)?
            }
            "rt.symm_fused_all_gather_matmul" | "rt.symm_fused_matmul_reduce_scatter" => {
                let bufs = (0..ctx.operands(op).len())
                    .map(operand)
                    .collect::<R<Vec<_>>>()?;
                if name == "rt.symm_fused_all_gather_matmul" {
                    self.fused_all_gather_matmul(ctx, op, &bufs, next_event)?;
                } else {
                    self.fused_matmul_reduce_scatter(ctx, op, &bufs, next_event)?;
                }
            }
            "rt.event_record" => {
                let e = *next_event;
                *next_event += 1;
                events.insert(ctx.result(op, 0), e);
                self.call(
                    "event_record",
                    &[self.stream(ctx, op)?.into(), self.i32(u64::from(e)).into()],
                )?;
            }
            "rt.stream_wait" => {
                let e = *events
                    .get(&ctx.operand(op, 0))
                    .ok_or("waits on an unknown event")?;
                self.call(
                    "stream_wait",
                    &[self.stream(ctx, op)?.into(), self.i32(u64::from(e)).into()],
                )?;
            }
            "func.call" => {
                self.await_workspaces(None)?;
                let callee = ctx
                    .inherent_attr(op, "callee")
                    .and_then(|a| ctx.attr_as_symbol(a))
                    .ok_or("requires 'callee'")?;
                let lf = self
                    .m
                    .get_function(&format!("commlir_fn_{callee}"))
                    .ok_or_else(|| format!("calls @{callee}, which has no body"))?;
                let n = ctx.operands(op).len() as u32;
                let m = ctx.results(op).len() as u32;
                let sc = self.scratch.ok_or("no scratch arrays")?;
                let (args, res) = (sc.cargs, sc.cres);
                let gep = |base: PointerValue<'c>, i: u32, nm: &str| -> R<PointerValue<'c>> {
                    Ok(unsafe {
                        b!(self.b.build_in_bounds_gep(
                            self.ptr(),
                            base,
                            &[self.i64(i64::from(i))],
                            nm
                        ))
                    })
                };
                for i in 0..n {
                    b!(self
                        .b
                        .build_store(gep(args, i, "carg")?, operand(i as usize)?));
                }
                // Null result pointers: the callee allocates its results (no result slots).
                for j in 0..m {
                    b!(self
                        .b
                        .build_store(gep(res, j, "cres")?, self.ptr().const_null()));
                }
                let f = self.func.ok_or("no function")?;
                let fwd = |i: u32| -> R<BasicMetadataValueEnum<'c>> {
                    Ok(f.get_nth_param(i).ok_or("no parameter")?.into())
                };
                let st =
                    b!(self
                        .b
                        .build_call(lf, &[fwd(0)?, fwd(1)?, args.into(), res.into()], "cst"));
                self.check_status(st)?;
                for j in 0..m {
                    let v = b!(self.b.build_load(self.ptr(), gep(res, j, "cres")?, "cr"));
                    vals.insert(ctx.result(op, j as usize), v.into_pointer_value());
                }
            }
            "func.return" => {
                self.await_workspaces(None)?;
                let f = self.func.ok_or("no function")?;
                let results = f.get_nth_param(3).ok_or("no results")?.into_pointer_value();
                for i in 0..ctx.operands(op).len() {
                    let at = unsafe {
                        b!(self.b.build_in_bounds_gep(
                            self.ptr(),
                            results,
                            &[self.i64(i as i64)],
                            "res"
                        ))
                    };
                    b!(self.b.build_store(at, operand(i)?));
                }
                b!(self.b.build_return(Some(&self.i32(0))));
            }
            other => {
                return Err(format!(
                    "no host lowering for '{other}' (run comm-to-rt first)"
                ))
            }
        }
        Ok(())
    }

    /// The kernel-table index of the kernel named by symbol attribute `attr` of `op`.
    fn kernel_index(&self, ctx: &IrContext, op: OpId, attr: &str) -> R<usize> {
        let k = ctx
            .inherent_attr(op, attr)
            .and_then(|a| ctx.attr_as_symbol(a))
            .ok_or_else(|| format!("requires '{attr}'"))?;
        self.device
            .kernels
            .iter()
            .position(|n| n == k)
            .ok_or_else(|| format!("kernel @{k} was not compiled"))
    }

    /// Launches kernel `index` with `args` as its parameters (each one 8-byte cell of the
    /// scratch `kvals`, pointed to by `kparams`: the `launch` ABI's `kernelParams`).
    fn launch_with(
        &self,
        index: usize,
        grid: i64,
        block: i64,
        args: &[BasicValueEnum<'c>],
    ) -> R<()> {
        let sc = self.scratch.ok_or("no scratch arrays")?;
        for (i, v) in args.iter().enumerate() {
            let idx = [self.i64(i as i64)];
            let vp = unsafe { b!(self.b.build_in_bounds_gep(self.ptr(), sc.kvals, &idx, "sv")) };
            b!(self.b.build_store(vp, *v));
            let pp = unsafe {
                b!(self
                    .b
                    .build_in_bounds_gep(self.ptr(), sc.kparams, &idx, "sp"))
            };
            b!(self.b.build_store(pp, vp));
        }
        self.call(
            "launch",
            &[
                self.i32(index as u64).into(),
                self.i32(grid as u64).into(),
                self.i32(block as u64).into(),
                self.i32(0).into(),
                sc.kparams.into(),
                self.i32(args.len() as u64).into(),
            ],
        )
    }

    /// The ABI's `symm_fallback`: collective `coll` (an `abi::SYMM_COLLS` code) through NCCL
    /// from `count` elements at `pool + offset` into `out`, with reduction `red`.
    #[allow(clippy::too_many_arguments)]
    fn symm_fallback(
        &self,
        ctx: &IrContext,
        op: OpId,
        coll: u32,
        (pool, offset): (PointerValue<'c>, i64),
        out: PointerValue<'c>,
        count: i64,
        red: IntValue<'c>,
    ) -> R<()> {
        self.call(
            "symm_fallback",
            &[
                self.i32(u64::from(coll)).into(),
                self.group_index(ctx, op)?.into(),
                pool.into(),
                self.i64(offset).into(),
                out.into(),
                self.i64(count).into(),
                self.dtype(ctx, op)?.into(),
                red.into(),
            ],
        )
    }

    /// `desc = symm_pool_desc(pool)`; when the pool is peer-mapped, the generated kernel is
    /// launched with `(desc, in_offset, out, site, extras...)`, else `symm_fallback` runs
    /// NCCL. With an `epilogue`, `out` is the chain's result: the fallback reduces into a
    /// temporary allocation, launches the chain's own kernel on it and frees it.
    fn symm_collective(
        &self,
        ctx: &IrContext,
        op: OpId,
        pool: PointerValue<'c>,
        out: PointerValue<'c>,
        extras: &[PointerValue<'c>],
    ) -> R<()> {
        let coll_name = Self::attr_str(ctx, op, "coll")?;
        let coll = abi::code(abi::SYMM_COLLS, coll_name)
            .ok_or_else(|| format!("unknown symm collective {coll_name}"))?;
        let site = self.kernel_index(ctx, op, "kernel")?;
        let offset = Self::attr_i64(ctx, op, "offset")?;
        let slot = self.slot.ok_or("no slot")?;
        self.call("symm_pool_desc", &[pool.into(), slot.into()])?;
        let desc = b!(self.b.build_load(self.ptr(), slot, "desc")).into_pointer_value();
        let f = self.func.ok_or("no function")?;
        let mapped = self.cx.append_basic_block(f, "symm_kernel");
        let fallback = self.cx.append_basic_block(f, "symm_nccl");
        let join = self.cx.append_basic_block(f, "symm_done");
        let is_null = b!(self.b.build_is_null(desc, "unmapped"));
        b!(self.b.build_conditional_branch(is_null, fallback, mapped));
        // Kernel parameters: pointers to (desc, in_offset, out, site), in the launch
        // scratch arrays (sized for at least 4 by `function`).
        self.b.position_at_end(mapped);
        let mut vals: Vec<BasicValueEnum<'c>> = vec![
            desc.into(),
            self.i64(offset).into(),
            out.into(),
            self.i32(site as u64).into(),
        ];
        vals.extend(extras.iter().map(|p| BasicValueEnum::from(*p)));
        self.launch_with(
            site,
            Self::attr_i64(ctx, op, "grid")?,
            Self::attr_i64(ctx, op, "block")?,
            &vals,
        )?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(fallback);
        let red = match ctx.inherent_attr(op, "reduce_op") {
            Some(_) => self.redop(ctx, op)?,
            None => self.i32(0),
        };
        let count = Self::attr_i64(ctx, op, "count")?;
        // The fallback's result: `out` itself, or a temporary the epilogue reads.
        let reduced = self.epilogue_input(ctx, op, count)?.unwrap_or(out);
        self.symm_fallback(ctx, op, coll, (pool, offset), reduced, count, red)?;
        if reduced != out {
            self.launch_epilogue(ctx, op, extras, reduced, out)?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    /// For a fallback collective of `op` that has an `epilogue`: a temporary allocation of
    /// `count` elements of its dtype to reduce into (none without an epilogue).
    pub(super) fn epilogue_input(
        &self,
        ctx: &IrContext,
        op: OpId,
        count: i64,
    ) -> R<Option<PointerValue<'c>>> {
        if ctx.inherent_attr(op, "epilogue").is_none() {
            return Ok(None);
        }
        let elem = crate::symm_kernels::dtype_bytes(Self::attr_str(ctx, op, "dtype")?);
        if elem == 0 {
            return Err(format!("{} of an unknown dtype", ctx.op_name(op)));
        }
        let bytes = count.saturating_mul(elem as i64);
        let slot = self.slot.ok_or("no slot")?;
        self.call("alloc", &[self.i64(bytes).into(), slot.into()])?;
        Ok(Some(
            b!(self.b.build_load(self.ptr(), slot, "reduced")).into_pointer_value(),
        ))
    }

    /// The chain's own kernel after a fallback collective reduced into `reduced` (from
    /// [`Self::epilogue_input`]), as if unfused: its inputs with the reduced value at
    /// `epilogue_operand`, then its result `out`; then `reduced` is freed.
    pub(super) fn launch_epilogue(
        &self,
        ctx: &IrContext,
        op: OpId,
        extras: &[PointerValue<'c>],
        reduced: PointerValue<'c>,
        out: PointerValue<'c>,
    ) -> R<()> {
        let at = Self::attr_i64(ctx, op, "epilogue_operand")? as usize;
        let mut args: Vec<BasicValueEnum<'c>> =
            extras.iter().map(|p| BasicValueEnum::from(*p)).collect();
        if at > args.len() {
            return Err("'epilogue_operand' is past the epilogue's inputs".into());
        }
        args.insert(at, reduced.into());
        args.push(out.into());
        self.launch_with(
            self.kernel_index(ctx, op, "epilogue")?,
            Self::attr_i64(ctx, op, "epilogue_grid")?,
            Self::attr_i64(ctx, op, "epilogue_block")?,
            &args,
        )?;
        self.call("free", &[reduced.into()])?;
        Ok(())
    }

    /// `commlir_main`: calls the entry function.
    fn main(&self, entry: FunctionValue<'c>) -> R<()> {
        let p = self.ptr();
        let fty = self
            .cx
            .i32_type()
            .fn_type(&[p.into(), p.into(), p.into(), p.into()], false);
        let f = self
            .m
            .add_function(abi::MAIN_SYMBOL, fty, Some(Linkage::External));
        let bb = self.cx.append_basic_block(f, "entry");
        self.b.position_at_end(bb);
        let args: Vec<BasicMetadataValueEnum> = f.get_param_iter().map(|v| v.into()).collect();
        let st = b!(self.b.build_call(entry, &args, "st"));
        let st: BasicValueEnum = st.try_as_basic_value().basic().ok_or("no status")?;
        b!(self.b.build_return(Some(&st)));
        Ok(())
    }

    /// The exported data symbols.
    fn globals(&self, num_events: u32) -> R<()> {
        let i32t = self.cx.i32_type();
        for (name, v) in [
            ("commlir_abi_version", abi::ABI_VERSION),
            ("commlir_num_kernels", self.device.kernels.len() as u32),
            ("commlir_num_events", num_events),
        ] {
            let g = self.m.add_global(i32t, None, name);
            g.set_initializer(&i32t.const_int(u64::from(v), false));
            g.set_constant(true);
        }
        let ptx = self.cx.const_string(self.device.ptx.as_bytes(), true);
        let g = self.m.add_global(ptx.get_type(), None, "commlir_ptx");
        g.set_initializer(&ptx);
        g.set_constant(true);
        let mut names = Vec::new();
        for (i, k) in self.device.kernels.iter().enumerate() {
            let s = self.cx.const_string(k.as_bytes(), true);
            let g = self
                .m
                .add_global(s.get_type(), None, &format!("commlir_kname{i}"));
            g.set_initializer(&s);
            g.set_constant(true);
            g.set_linkage(Linkage::Private);
            names.push(g.as_pointer_value());
        }
        let arr = self.ptr().const_array(&names);
        let g = self
            .m
            .add_global(arr.get_type(), None, "commlir_kernel_names");
        g.set_initializer(&arr);
        g.set_constant(true);
        Ok(())
    }
}

fn flatten_ints(ctx: &IrContext, a: commlir_ir::Attr, out: &mut Vec<i64>) {
    if let Some(v) = ctx.attr_as_i64(a) {
        out.push(v);
        return;
    }
    if let Some(v) = ctx.attr_as_i64_array(a) {
        out.extend(v);
        return;
    }
    if let commlir_ir::AttrKind::Array(items) = ctx.attr_kind(a) {
        for &i in items {
            flatten_ints(ctx, i, out);
        }
    }
}

mod fused;
