//! Building IR from code: the structural ops every program needs (a module, `coll.group`
//! declarations, `func.func` with its entry block, `func.return`), so that the body can then
//! be filled with a [`Builder`].
//!
//! The IR core's [`Builder`] creates any op by name at an insertion point (MLIR's
//! `OpBuilder`); these helpers only spare embedders the details of the structural ops (which
//! attributes are inherent, how a function's entry block is made).
//!
//! ```rust
//! use commlir::{build, Builder, Context};
//!
//! commlir::register_all();
//! let mut ctx = Context::new();
//! let module = build::module(&mut ctx);
//! build::group(&mut ctx, module, "tp", 2, false);
//! let t = commlir::parse_type(&mut ctx, "tensor<4x8xf32>")?;
//! let (func, entry) = build::func(&mut ctx, module, "f", &[t], &[t]);
//! let x = ctx.block_args(entry)[0];
//!
//! let mut b = Builder::at_end(&mut ctx, entry);
//! let h = b.create_value("compute.relu", &[x], t, &[]);
//! let sum = b.ctx.str_attr("sum");
//! let tp = b.ctx.symbol_ref("tp");
//! let r = b.create_value("coll.all_reduce", &[h], t, &[("reduce_op", sum), ("group", tp)]);
//! let y = b.create_value("coll.wait_tensor", &[r], t, &[]);
//! build::ret(&mut b, &[y]);
//!
//! commlir::verify(&ctx, module)?;
//! let text = commlir::print(&ctx, module);
//! assert!(text.contains("func.func @f(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {"), "{text}");
//! assert!(text.contains("%0 = compute.relu %arg0 : tensor<4x8xf32>"), "{text}");
//! assert!(text.contains("return %2 : tensor<4x8xf32>"), "{text}");
//! assert_eq!(ctx.symbol_name(func), Some("f"));
//! # Ok::<(), commlir::Diagnostics>(())
//! ```

use commlir_ir::{BlockId, Builder, Context, OpId, OpState, Type, Value};

/// A new, empty, detached `builtin.module` (with its one block).
pub fn module(ctx: &mut Context) -> OpId {
    let name = ctx.ident("builtin.module");
    let mut st = OpState::new(name, ctx.unknown_loc());
    st.num_regions = 1;
    let m = ctx.create_op(st);
    let block = ctx.new_block(&[]);
    let region = ctx.op_regions(m)[0];
    ctx.append_block(region, block);
    m
}

/// The block holding the ops of `module` (any single-block, single-region op such as a
/// module or a function body's entry).
///
/// # Panics
/// If `op` has no region or its first region has no block.
pub fn body(ctx: &Context, op: OpId) -> BlockId {
    let region = ctx.op_regions(op)[0];
    ctx.region_blocks(region)[0]
}

/// Appends `coll.group @name {size = size, [symm_mem]}` to `module` and returns it.
pub fn group(ctx: &mut Context, module: OpId, name: &str, size: i64, symm_mem: bool) -> OpId {
    let block = body(ctx, module);
    let sym = ctx.str_attr(name);
    let size = ctx.int_attr(size, 64);
    let mut attrs = vec![("sym_name", sym), ("size", size)];
    if symm_mem {
        attrs.push(("symm_mem", ctx.unit_attr()));
    }
    Builder::at_end(ctx, block).create("coll.group", &[], &[], &attrs)
}

/// Appends `func.func @name(inputs) -> results` with an entry block to `module`; returns the
/// function and its entry block, whose arguments are the function's arguments. Fill the
/// block with [`Builder::at_end`] and end it with [`ret`].
pub fn func(
    ctx: &mut Context,
    module: OpId,
    name: &str,
    inputs: &[Type],
    results: &[Type],
) -> (OpId, BlockId) {
    let block = body(ctx, module);
    let fty = ctx.function_type(inputs.to_vec(), results.to_vec());
    // `sym_name` and `function_type` are inherent: the parser keeps them as properties, and
    // so do we, so that a built function prints and compares like a parsed one.
    let props = vec![
        (ctx.ident("sym_name"), ctx.str_attr(name)),
        (ctx.ident("function_type"), ctx.type_attr(fty)),
    ];
    let mut st = OpState::new(ctx.ident("func.func"), ctx.unknown_loc());
    st.properties = Some(ctx.dict_attr(props));
    st.num_regions = 1;
    let f = Builder::at_end(ctx, block).create_state(st);
    let entry = ctx.new_block(inputs);
    let region = ctx.op_regions(f)[0];
    ctx.append_block(region, entry);
    (f, entry)
}

/// Creates `return values` (`func.return`) at the builder's insertion point.
pub fn ret(b: &mut Builder<'_>, values: &[Value]) -> OpId {
    b.create("func.return", values, &[], &[])
}
