//! The upstream `shard` dialect (MLIR's successor of `mesh`), as far as commlir consumes it:
//! `shard.grid` and the collectives of a partitioned program, which `shard-to-coll` maps to
//! `coll` groups and collectives. The sharding annotations (`shard.sharding`, `shard.shard`),
//! point-to-point ops and process queries stay upstream: the dialect is partial, and those ops
//! are accepted under `--allow-unregistered-dialect` only.
//!
//! The verifier checks what MLIR checks without evaluating anything: the grid reference, the
//! grid axes (in range, no repeats), the tensor axes, and the result shape where the grid and
//! the tensors are static. The wording matches `shard-to-coll`'s, which checks the same facts
//! again for its own reasons (it runs on IR that may not have been verified).

use crate::shape::ty_str;
use commlir_ir::{
    register_dialect, register_op, register_partial_dialect, ArgDef, AttrConstraint, AttrDef,
    Context, Diagnostic, OpDef, OpId, Syntax, Trait, TypeConstraint, TypeKind, DYNAMIC,
};

register_dialect!(pub SHARD_DIALECT = commlir_ir::opdef::DialectDef {
    name: "shard",
    summary: "Upstream MLIR's `shard` dialect: device grids and their collectives.",
    description: "The grid declaration and the collectives of a program partitioned by \
        upstream `shard-partition`, with MLIR's names, operands and properties, for \
        `shard-to-coll`. A collective runs over the processes that differ only in the grid \
        axes `grid_axes` (all of them, in the given order, form one group; an empty list is \
        a group of one). The dialect is partial: sharding annotations, point-to-point ops and \
        process queries are accepted under `--allow-unregistered-dialect`. The ops print in \
        MLIR's generic form, which MLIR reads back.",
});
register_partial_dialect!("shard");

const ANY: TypeConstraint = TypeConstraint::Any;
const GRID: AttrDef = AttrDef::required("grid", AttrConstraint::SymbolRef)
    .doc("The `shard.grid` the collective runs on.");
const GRID_AXES: AttrDef = AttrDef::optional("grid_axes", AttrConstraint::I64Array)
    .doc("The grid axes spanned by the group (`array<i16: ...>`); absent: none.");
const REDUCTION: AttrDef = AttrDef::optional("reduction", AttrConstraint::Any).doc(
    "The reduction (`#shard<partial sum>`, `max`, `min`, `product`, `average`, ...); absent: sum.",
);
const INPUT: &[ArgDef] = &[ArgDef::one("input", ANY)];
const RESULT: &[ArgDef] = &[ArgDef::one("result", ANY)];
/// MLIR declares the collectives `Pure`: their result depends on their operands only.
const COLLECTIVE: &[Trait] = &[Trait::Pure];

/// A tensor axis attribute of a collective (`gather_axis = 0 : index`).
const fn axis(name: &'static str, doc: &'static str) -> AttrDef {
    AttrDef::required(name, AttrConstraint::Integer).doc(doc)
}

fn verify_grid(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let shape = ctx
        .inherent_attr(op, "shape")
        .and_then(|a| ctx.attr_as_i64_array(a))
        .unwrap_or_default();
    if shape.is_empty() {
        return Err(ctx.op_error(op, "rank of grid is expected to be a positive integer"));
    }
    if let Some(d) = shape.iter().find(|d| **d < 0 && **d != DYNAMIC) {
        return Err(ctx.op_error(
            op,
            format!("dimension size {d} of a grid is expected to be non-negative or dynamic"),
        ));
    }
    Ok(())
}

/// What a collective knows of its group: its grid's name, the axes, and the group's size when
/// every selected grid dimension is static.
struct Group<'c> {
    grid: &'c str,
    size: Option<i64>,
}

fn group<'c>(ctx: &'c Context, op: OpId) -> Result<Group<'c>, Diagnostic> {
    let grid = ctx
        .inherent_attr(op, "grid")
        .and_then(|a| ctx.attr_as_symbol(a))
        .ok_or_else(|| ctx.op_error(op, "attribute 'grid' must be a flat symbol reference"))?;
    let grid_op = ctx
        .lookup_symbol(op, grid)
        .filter(|g| ctx.op_name(*g) == "shard.grid")
        .ok_or_else(|| {
            ctx.op_error(
                op,
                format!("grid @{grid} does not reference a 'shard.grid'"),
            )
        })?;
    let shape = ctx
        .inherent_attr(grid_op, "shape")
        .and_then(|a| ctx.attr_as_i64_array(a))
        .unwrap_or_default();
    let axes = ctx
        .inherent_attr(op, "grid_axes")
        .and_then(|a| ctx.attr_as_i64_array(a))
        .unwrap_or_default();
    let mut seen = Vec::with_capacity(axes.len());
    let mut size = Some(1i64);
    for a in axes {
        let d = usize::try_from(a)
            .ok()
            .filter(|d| *d < shape.len())
            .ok_or_else(|| {
                ctx.op_error(
                    op,
                    format!(
                        "grid axis {a} is out of range for grid @{grid} of rank {}",
                        shape.len()
                    ),
                )
            })?;
        if seen.contains(&d) {
            return Err(ctx.op_error(op, format!("grid axis {a} appears more than once")));
        }
        seen.push(d);
        size = match shape[d] {
            DYNAMIC => None,
            n => size.and_then(|s| s.checked_mul(n)),
        };
    }
    Ok(Group { grid, size })
}

/// The shape of a ranked tensor (dynamic dims as [`DYNAMIC`]), or `None` for other types.
fn tensor_shape(ctx: &Context, v: commlir_ir::Value) -> Option<&[i64]> {
    match ctx.type_kind(ctx.value_type(v)) {
        TypeKind::Tensor { shape, .. } | TypeKind::MemRef { shape, .. } => Some(shape),
        _ => None,
    }
}

/// The operand's and the result's shapes.
type Shapes<'c> = (&'c [i64], &'c [i64]);

/// The operand's and result's shapes and element types, which every collective keeps
/// (`all_reduce` may widen the element type, as upstream allows).
fn shapes(ctx: &Context, op: OpId, same_elem: bool) -> Result<Option<Shapes<'_>>, Diagnostic> {
    let (x, r) = (ctx.operand(op, 0), ctx.result(op, 0));
    let (tx, tr) = (ctx.value_type(x), ctx.value_type(r));
    let elem = |t| ctx.type_kind(t).shaped().map(|(_, e)| e);
    if same_elem && elem(tx) != elem(tr) {
        return Err(ctx.op_error(
            op,
            format!(
                "operand and result must have the same element type, got '{}' and '{}'",
                ty_str(ctx, tx),
                ty_str(ctx, tr)
            ),
        ));
    }
    let (Some(sx), Some(sr)) = (tensor_shape(ctx, x), tensor_shape(ctx, r)) else {
        return Ok(None);
    };
    if sx.len() != sr.len() {
        return Err(ctx.op_error(
            op,
            format!(
                "operand and result must have the same rank, got '{}' and '{}'",
                ty_str(ctx, tx),
                ty_str(ctx, tr)
            ),
        ));
    }
    Ok(Some((sx, sr)))
}

/// A tensor axis attribute, in range of `rank`.
fn tensor_axis(ctx: &Context, op: OpId, attr: &str, rank: usize) -> Result<usize, Diagnostic> {
    let v = ctx
        .inherent_attr(op, attr)
        .and_then(|a| ctx.attr_as_i64(a))
        .ok_or_else(|| ctx.op_error(op, format!("requires integer attribute '{attr}'")))?;
    usize::try_from(v)
        .ok()
        .filter(|d| *d < rank)
        .ok_or_else(|| {
            ctx.op_error(
                op,
                format!("'{attr}' = {v} is out of range for a rank-{rank} tensor"),
            )
        })
}

/// Checks the result shape of a collective that multiplies (`true`) or divides (`false`) each
/// listed dimension by the group size (`what` names the dimension in the diagnostic). Dynamic
/// dimensions and groups of dynamic size are left to run time.
fn check_shape(
    ctx: &Context,
    op: OpId,
    g: &Group<'_>,
    sx: &[i64],
    sr: &[i64],
    changes: &[(usize, bool, &str)],
) -> Result<(), Diagnostic> {
    let Some(size) = g.size else {
        return Ok(());
    };
    let mut want = sx.to_vec();
    for &(dim, multiply, what) in changes {
        if want[dim] == DYNAMIC {
            continue;
        }
        if multiply {
            want[dim] = want[dim].saturating_mul(size);
        } else {
            if size == 0 || want[dim] % size != 0 {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "{what} dimension {dim} of size {} is not divisible by the group size {size}",
                        want[dim]
                    ),
                ));
            }
            want[dim] /= size;
        }
    }
    let agree = want
        .iter()
        .zip(sr)
        .all(|(w, r)| *w == DYNAMIC || *r == DYNAMIC || w == r);
    if !agree {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape {sr:?} does not match the group of {size} processes on grid @{} (expected {want:?})",
                g.grid
            ),
        ));
    }
    Ok(())
}

fn verify_all_reduce(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group(ctx, op)?;
    if let Some((sx, sr)) = shapes(ctx, op, false)? {
        check_shape(ctx, op, &g, sx, sr, &[])?;
    }
    Ok(())
}

fn verify_broadcast(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group(ctx, op)?;
    if let Some((sx, sr)) = shapes(ctx, op, true)? {
        check_shape(ctx, op, &g, sx, sr, &[])?;
    }
    Ok(())
}

fn verify_all_gather(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group(ctx, op)?;
    if let Some((sx, sr)) = shapes(ctx, op, true)? {
        let k = tensor_axis(ctx, op, "gather_axis", sx.len())?;
        check_shape(ctx, op, &g, sx, sr, &[(k, true, "gather")])?;
    }
    Ok(())
}

fn verify_reduce_scatter(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group(ctx, op)?;
    if let Some((sx, sr)) = shapes(ctx, op, true)? {
        let k = tensor_axis(ctx, op, "scatter_axis", sx.len())?;
        check_shape(ctx, op, &g, sx, sr, &[(k, false, "scatter")])?;
    }
    Ok(())
}

fn verify_all_slice(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group(ctx, op)?;
    if let Some((sx, sr)) = shapes(ctx, op, true)? {
        let k = tensor_axis(ctx, op, "slice_axis", sx.len())?;
        check_shape(ctx, op, &g, sx, sr, &[(k, false, "sliced")])?;
    }
    Ok(())
}

fn verify_all_to_all(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group(ctx, op)?;
    if let Some((sx, sr)) = shapes(ctx, op, true)? {
        let s = tensor_axis(ctx, op, "split_axis", sx.len())?;
        let c = tensor_axis(ctx, op, "concat_axis", sx.len())?;
        check_shape(
            ctx,
            op,
            &g,
            sx,
            sr,
            &[(s, false, "split"), (c, true, "concat")],
        )?;
    }
    Ok(())
}

register_op!(
    /// `shard.grid`.
    pub GRID_OP = OpDef {
        name: "shard.grid",
        summary: "A device grid",
        description: "Declares an n-dimensional grid of processes; process `c` is global rank \
            `linear(c)` (row-major). `shard-to-coll` needs a static shape.",
        attributes: &[
            AttrDef::required("sym_name", AttrConstraint::SymbolName),
            AttrDef::required("shape", AttrConstraint::I64Array).doc("The grid's shape (`array<i64: 2, 4>`; a dynamic dimension is `ShapedType::kDynamic`)."),
            AttrDef::optional("sym_visibility", AttrConstraint::String),
        ],
        traits: &[Trait::Symbol],
        syntax: Syntax::Upstream,
        verify: Some(verify_grid),
        example: "\"shard.grid\"() <{shape = array<i64: 2, 4>, sym_name = \"grid0\"}> : () -> ()",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `shard.all_reduce`.
    pub ALL_REDUCE = OpDef {
        name: "shard.all_reduce",
        summary: "All-reduce over grid axes",
        description: "Every process of the group receives the reduction of the group's \
            inputs; the result has the operand's shape (its element type may be wider).",
        operands: INPUT,
        results: RESULT,
        attributes: &[GRID, GRID_AXES, REDUCTION],
        traits: COLLECTIVE,
        syntax: Syntax::Upstream,
        verify: Some(verify_all_reduce),
        example: "%r = \"shard.all_reduce\"(%x) <{grid = @grid0, grid_axes = array<i16: 1>, reduction = #shard<partial max>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `shard.all_gather`.
    pub ALL_GATHER = OpDef {
        name: "shard.all_gather",
        summary: "All-gather over grid axes",
        description: "The group's inputs concatenated along `gather_axis`, in the group's \
            order: the result's `gather_axis` is G times the operand's.",
        operands: INPUT,
        results: RESULT,
        attributes: &[GRID, GRID_AXES, axis("gather_axis", "The tensor axis gathered along.")],
        traits: COLLECTIVE,
        syntax: Syntax::Upstream,
        verify: Some(verify_all_gather),
        example: "%r = \"shard.all_gather\"(%x) <{gather_axis = 1 : index, grid = @grid0, grid_axes = array<i16: 0>}> : (tensor<4x6xf32>) -> tensor<4x12xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `shard.reduce_scatter`.
    pub REDUCE_SCATTER = OpDef {
        name: "shard.reduce_scatter",
        summary: "Reduce-scatter over grid axes",
        description: "The reduction of the group's inputs, split along `scatter_axis`: each \
            process keeps its block, of 1/G of the operand's `scatter_axis`.",
        operands: INPUT,
        results: RESULT,
        attributes: &[GRID, GRID_AXES, REDUCTION, axis("scatter_axis", "The tensor axis scattered along.")],
        traits: COLLECTIVE,
        syntax: Syntax::Upstream,
        verify: Some(verify_reduce_scatter),
        example: "%r = \"shard.reduce_scatter\"(%x) <{grid = @grid0, grid_axes = array<i16: 0>, scatter_axis = 0 : index}> : (tensor<8x6xf32>) -> tensor<4x6xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `shard.all_slice`.
    pub ALL_SLICE = OpDef {
        name: "shard.all_slice",
        summary: "This process's slice over grid axes (no communication)",
        description: "Each process keeps its block of `slice_axis`, of 1/G of the operand's; \
            the inverse of `shard.all_gather` on a value replicated over the group.",
        operands: INPUT,
        results: RESULT,
        attributes: &[GRID, GRID_AXES, axis("slice_axis", "The tensor axis sliced.")],
        traits: COLLECTIVE,
        syntax: Syntax::Upstream,
        verify: Some(verify_all_slice),
        example: "%r = \"shard.all_slice\"(%x) <{grid = @grid0, grid_axes = array<i16: 0>, slice_axis = 1 : index}> : (tensor<4x6xf32>) -> tensor<4x3xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `shard.all_to_all`.
    pub ALL_TO_ALL = OpDef {
        name: "shard.all_to_all",
        summary: "All-to-all over grid axes",
        description: "The operand is split in G blocks along `split_axis`; process `j` \
            receives block `j` of every process, concatenated along `concat_axis`.",
        operands: INPUT,
        results: RESULT,
        attributes: &[
            GRID,
            GRID_AXES,
            axis("split_axis", "The tensor axis split among the group."),
            axis("concat_axis", "The tensor axis the received blocks are concatenated along."),
        ],
        traits: COLLECTIVE,
        syntax: Syntax::Upstream,
        verify: Some(verify_all_to_all),
        example: "%r = \"shard.all_to_all\"(%x) <{concat_axis = 0 : index, grid = @grid0, grid_axes = array<i16: 0>, split_axis = 1 : index}> : (tensor<4x6xf32>) -> tensor<8x3xf32>",
        ..OpDef::EMPTY
    }
);

register_op!(
    /// `shard.broadcast`.
    pub BROADCAST = OpDef {
        name: "shard.broadcast",
        summary: "Broadcast from a root over grid axes",
        description: "Every process of the group receives the input of the process at the \
            multi-index `root` over `grid_axes` (`shard-to-coll` needs a static `root`; a \
            dynamic root is given by the `root_dynamic` operands).",
        operands: &[
            ArgDef::one("input", ANY),
            ArgDef::variadic("root_dynamic", TypeConstraint::Index),
        ],
        results: RESULT,
        attributes: &[
            GRID,
            GRID_AXES,
            AttrDef::required("root", AttrConstraint::I64Array).doc("The root's multi-index over `grid_axes`."),
        ],
        traits: COLLECTIVE,
        syntax: Syntax::Upstream,
        verify: Some(verify_broadcast),
        example: "%r = \"shard.broadcast\"(%x) <{grid = @grid0, grid_axes = array<i16: 0>, root = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>",
        ..OpDef::EMPTY
    }
);
