//! Verifiers of the `coll` ops: shapes against the group size, reduce ops, broadcast source,
//! all-to-all split consistency, and the in-flight rule (only waits read collective results).

use crate::compute::fmt_shape;
use crate::shape::{int_attr, same_modulo_encoding, ty_str, value_tensor_view};
use commlir_ir::{AttrKind, Context, Diagnostic, OpId, Trait};

/// What a collective needs to know about its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    pub op: OpId,
    pub name: String,
    pub size: i64,
    pub symm_mem: bool,
}

/// What a verifier needs to know about an op's group, borrowed from the IR: resolving it
/// allocates nothing (it runs for every collective on every verification).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupRef<'a> {
    pub op: OpId,
    pub name: &'a str,
    pub size: i64,
}

/// Resolves the `group` attribute of `op` to its `coll.group`.
pub fn group_of(ctx: &Context, op: OpId) -> Result<GroupInfo, Diagnostic> {
    let g = group_ref(ctx, op)?;
    Ok(GroupInfo {
        op: g.op,
        name: g.name.to_string(),
        size: g.size,
        symm_mem: ctx.inherent_attr(g.op, "symm_mem").is_some(),
    })
}

/// [`group_of`] without the owned name and the `symm_mem` flag (same diagnostics).
pub(crate) fn group_ref(ctx: &Context, op: OpId) -> Result<GroupRef<'_>, Diagnostic> {
    let attr = ctx
        .inherent_attr(op, "group")
        .ok_or_else(|| ctx.op_error(op, "requires attribute 'group'"))?;
    let name = ctx
        .attr_as_symbol(attr)
        .ok_or_else(|| ctx.op_error(op, "attribute 'group' must be a flat symbol reference"))?;
    let g = ctx
        .lookup_symbol(op, name)
        .filter(|g| ctx.op_name(*g) == "coll.group")
        .ok_or_else(|| {
            ctx.op_error(
                op,
                format!("group @{name} does not reference a 'coll.group'"),
            )
        })?;
    let size = int_attr(ctx, g, "size").unwrap_or(0);
    Ok(GroupRef { op: g, name, size })
}

pub(super) fn verify_group(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let size = int_attr(ctx, op, "size").unwrap_or(0);
    if size < 1 {
        return Err(ctx.op_error(op, format!("size must be at least 1, got {size}")));
    }
    if let Some(ranks) = ctx.inherent_attr(op, "ranks") {
        let rows: Vec<Vec<i64>> = match ctx.attr_as_i64_array(ranks) {
            Some(flat) => vec![flat],
            None => match ctx.attr_kind(ranks) {
                AttrKind::Array(items) => items
                    .iter()
                    .map(|a| ctx.attr_as_i64_array(*a))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        ctx.op_error(
                            op,
                            "ranks must be an array of i64 or an array of arrays of i64",
                        )
                    })?,
                _ => {
                    return Err(ctx.op_error(
                        op,
                        "ranks must be an array of i64 or an array of arrays of i64",
                    ))
                }
            },
        };
        let mut seen = std::collections::BTreeSet::new();
        for row in &rows {
            if row.len() as i64 != size {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "each ranks list must have {size} entries (the group size), got {}",
                        row.len()
                    ),
                ));
            }
            for r in row {
                if *r < 0 {
                    return Err(ctx.op_error(op, format!("rank {r} is negative")));
                }
                if !seen.insert(*r) {
                    return Err(
                        ctx.op_error(op, format!("rank {r} appears more than once in ranks"))
                    );
                }
            }
        }
    }
    Ok(())
}

/// Every result of a non-blocking collective may only be consumed by `coll.wait_tensor`.
fn verify_in_flight(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    for (i, r) in ctx.results(op).iter().enumerate() {
        for u in ctx.uses(*r) {
            if ctx.op_name(u.op) != "coll.wait_tensor" {
                return Err(ctx
                    .op_error(op, format!("result #{i} is in flight and may only be consumed by 'coll.wait_tensor'"))
                    .with_note(ctx.op_loc(u.op), format!("used by '{}' here", ctx.op_name(u.op))));
            }
        }
    }
    Ok(())
}

fn dim_mismatch(
    ctx: &Context,
    op: OpId,
    what: &str,
    want: i64,
    g: &GroupRef<'_>,
    got: i64,
) -> Diagnostic {
    ctx.op_error(
        op,
        format!(
            "{what} dim 0 must be {want} (group @{} has size {}), got {got}",
            g.name, g.size
        ),
    )
}

fn check_pair_same(ctx: &Context, op: OpId, i: usize) -> Result<(), Diagnostic> {
    let a = ctx.value_type(ctx.operand(op, i));
    let r = ctx.value_type(ctx.result(op, i));
    if !same_modulo_encoding(ctx, a, r) {
        return Err(ctx.op_error(
            op,
            format!(
                "result #{i} must have the type of operand #{i} ({}), got {}",
                ty_str(ctx, a),
                ty_str(ctx, r)
            ),
        ));
    }
    Ok(())
}

fn check_counts(ctx: &Context, op: OpId) -> Result<usize, Diagnostic> {
    let (n, m) = (ctx.operands(op).len(), ctx.results(op).len());
    if n != m || n == 0 {
        return Err(ctx.op_error(op, format!("expects as many results as operands (at least one), got {n} operands and {m} results")));
    }
    Ok(n)
}

pub(super) fn verify_all_reduce(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    group_ref(ctx, op)?;
    check_pair_same(ctx, op, 0)?;
    verify_in_flight(ctx, op)
}

pub(super) fn verify_all_reduce_coalesced(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    group_ref(ctx, op)?;
    for i in 0..check_counts(ctx, op)? {
        check_pair_same(ctx, op, i)?;
    }
    verify_in_flight(ctx, op)
}

/// `r` is `x` with dim 0 multiplied (`gather`) or divided by G (operand and result #`i`).
pub(crate) fn check_gather_shape(
    ctx: &Context,
    op: OpId,
    i: usize,
    g: &GroupRef<'_>,
    gather: bool,
) -> Result<(), Diagnostic> {
    let x = value_tensor_view(ctx, ctx.operand(op, i)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, i)).unwrap();
    if x.shape.is_empty() || r.shape.len() != x.shape.len() {
        return Err(ctx.op_error(
            op,
            format!("operand #{i} and result #{i} must have the same rank of at least 1"),
        ));
    }
    if x.elem != r.elem {
        return Err(ctx.op_error(
            op,
            format!("result #{i} must have the element type of operand #{i}"),
        ));
    }
    if x.shape[1..] != r.shape[1..] {
        return Err(ctx.op_error(
            op,
            format!(
                "result #{i} must match operand #{i} beyond dim 0: {} vs {}",
                fmt_shape(r.shape),
                fmt_shape(x.shape)
            ),
        ));
    }
    let too_big = || {
        ctx.op_error(
            op,
            format!("dim 0 times the group size ({}) overflows", g.size),
        )
    };
    if gather {
        let want = x.shape[0].checked_mul(g.size).ok_or_else(too_big)?;
        if r.shape[0] != want {
            return Err(dim_mismatch(ctx, op, "result", want, g, r.shape[0]));
        }
    } else {
        let want = r.shape[0].checked_mul(g.size).ok_or_else(too_big)?;
        if x.shape[0] != want {
            return Err(dim_mismatch(ctx, op, "operand", want, g, x.shape[0]));
        }
    }
    Ok(())
}

pub(super) fn verify_all_gather(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    check_gather_shape(ctx, op, 0, &g, true)?;
    verify_in_flight(ctx, op)
}

pub(super) fn verify_all_gather_coalesced(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    for i in 0..check_counts(ctx, op)? {
        check_gather_shape(ctx, op, i, &g, true)?;
    }
    verify_in_flight(ctx, op)
}

pub(super) fn verify_reduce_scatter(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    check_gather_shape(ctx, op, 0, &g, false)?;
    verify_prescale(ctx, op)?;
    verify_in_flight(ctx, op)
}

pub(super) fn verify_reduce_scatter_coalesced(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    for i in 0..check_counts(ctx, op)? {
        check_gather_shape(ctx, op, i, &g, false)?;
    }
    verify_prescale(ctx, op)?;
    verify_in_flight(ctx, op)
}

/// The `prescale` factor of a reduce-scatter, if it has one.
pub fn prescale_of(ctx: &Context, op: OpId) -> Option<f64> {
    ctx.inherent_attr(op, "prescale")
        .and_then(|a| ctx.attr_as_f64(a))
}

/// Whether `f` may be a `prescale`: ± 2^k with k from −14 to 15, so that every float type
/// (f16 included) holds it as a normal number and multiplying by it is exact.
pub fn prescale_ok(f: f64) -> bool {
    let e = f.abs().log2();
    f.is_finite() && f != 0.0 && e.fract() == 0.0 && (-14.0..=15.0).contains(&e)
}

/// A reduce-scatter's `prescale` (coll and comm level): ± a power of two within every float
/// type's normal range (so that multiplying by it is exact, and a pre-multiplied sum equals
/// scaling, rounding and summing), only for `sum` and `avg`, only on float inputs (the first
/// operand's element type; the others were checked equal to their results).
pub fn verify_prescale(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let Some(f) = prescale_of(ctx, op) else {
        return Ok(());
    };
    if !prescale_ok(f) {
        return Err(ctx.op_error(
            op,
            format!("'prescale' must be ± a power of two from 2^-14 to 2^15, got {f:?}"),
        ));
    }
    let reduce = ctx
        .inherent_attr(op, "reduce_op")
        .and_then(|a| ctx.attr_as_str(a));
    if !matches!(reduce, Some("sum" | "avg")) {
        return Err(ctx.op_error(op, "'prescale' needs reduce_op \"sum\" or \"avg\""));
    }
    for &x in ctx.operands(op) {
        let float = crate::shape::value_tensor(ctx, x)
            .is_some_and(|t| matches!(ctx.type_kind(t.elem), commlir_ir::TypeKind::Float(_)));
        if !float {
            return Err(ctx.op_error(op, "'prescale' needs float tensors"));
        }
    }
    Ok(())
}

/// Reads a split matrix (`G` arrays of `G` sizes).
pub fn split_matrix(
    ctx: &Context,
    op: OpId,
    name: &str,
    g: i64,
) -> Result<Option<Vec<Vec<i64>>>, Diagnostic> {
    let Some(a) = ctx.inherent_attr(op, name) else {
        return Ok(None);
    };
    let bad = || {
        ctx.op_error(
            op,
            format!("'{name}' must be {g} arrays of {g} non-negative sizes (one per rank)"),
        )
    };
    let rows = match ctx.attr_kind(a) {
        AttrKind::Array(items) => items
            .iter()
            .map(|x| ctx.attr_as_i64_array(*x))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    if rows.len() as i64 != g
        || rows
            .iter()
            .any(|r| r.len() as i64 != g || r.iter().any(|x| *x < 0))
    {
        return Err(bad());
    }
    Ok(Some(rows))
}

pub(super) fn verify_all_to_all(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    check_pair_same(ctx, op, 0)?;
    let x = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    if x.shape.is_empty() {
        return Err(ctx.op_error(op, "expects an operand of rank at least 1"));
    }
    let d0 = x.shape[0];
    let input = split_matrix(ctx, op, "input_split_sizes", g.size)?;
    let output = split_matrix(ctx, op, "output_split_sizes", g.size)?;
    match (&input, &output) {
        (None, None) => {
            if d0.checked_rem(g.size) != Some(0) {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "dim 0 ({d0}) must be divisible by the group size ({}) for equal splits",
                        g.size
                    ),
                ));
            }
        }
        (Some(i), Some(o)) => {
            for r in 0..g.size as usize {
                for (which, m) in [("input_split_sizes", i), ("output_split_sizes", o)] {
                    let s = m[r]
                        .iter()
                        .try_fold(0i64, |a, x| a.checked_add(*x))
                        .unwrap_or(i64::MAX);
                    if s != d0 {
                        return Err(ctx
                            .op_error(op, format!("{which}[{r}] sums to {s}, but dim 0 is {d0}")));
                    }
                }
                for j in 0..g.size as usize {
                    if o[r][j] != i[j][r] {
                        return Err(ctx.op_error(op, format!("output_split_sizes[{r}][{j}] = {} must equal input_split_sizes[{j}][{r}] = {}", o[r][j], i[j][r])));
                    }
                }
            }
        }
        _ => {
            return Err(ctx.op_error(
                op,
                "input_split_sizes and output_split_sizes must be given together",
            ));
        }
    }
    verify_in_flight(ctx, op)
}

pub(super) fn verify_broadcast(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    check_pair_same(ctx, op, 0)?;
    let src = int_attr(ctx, op, "src").unwrap_or(-1);
    if src < 0 || src >= g.size {
        return Err(ctx.op_error(
            op,
            format!(
                "src {src} is out of range for group @{} of size {}",
                g.name, g.size
            ),
        ));
    }
    verify_in_flight(ctx, op)
}

pub(super) fn verify_shard_dim_alltoall(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    let g = group_ref(ctx, op)?;
    let x = value_tensor_view(ctx, ctx.operand(op, 0)).unwrap();
    let r = value_tensor_view(ctx, ctx.result(op, 0)).unwrap();
    let rank = x.shape.len() as i64;
    let gd = int_attr(ctx, op, "gather_dim").unwrap_or(-1);
    let sd = int_attr(ctx, op, "shard_dim").unwrap_or(-1);
    for (n, d) in [("gather_dim", gd), ("shard_dim", sd)] {
        if d < 0 || d >= rank {
            return Err(ctx.op_error(op, format!("{n} {d} is out of range for rank {rank}")));
        }
    }
    let mut want = x.shape.to_vec();
    if gd != sd {
        if want[sd as usize].checked_rem(g.size) != Some(0) {
            return Err(ctx.op_error(
                op,
                format!(
                    "shard_dim {sd} of size {} is not divisible by the group size {}",
                    want[sd as usize], g.size
                ),
            ));
        }
        want[gd as usize] = want[gd as usize].checked_mul(g.size).ok_or_else(|| {
            ctx.op_error(
                op,
                format!("gather_dim times the group size ({}) overflows", g.size),
            )
        })?;
        want[sd as usize] /= g.size;
    }
    if r.shape != want || r.elem != x.elem {
        return Err(ctx.op_error(
            op,
            format!(
                "result shape must be {} (group @{} has size {}), got {}",
                fmt_shape(&want),
                g.name,
                g.size,
                fmt_shape(r.shape)
            ),
        ));
    }
    Ok(())
}

pub(super) fn verify_wait(ctx: &Context, op: OpId) -> Result<(), Diagnostic> {
    check_pair_same(ctx, op, 0)?;
    let src = ctx.operand(op, 0);
    let ok = ctx.defining_op(src).is_some_and(|d| {
        ctx.op_has_trait(d, Trait::Collective) && !ctx.op_has_trait(d, Trait::Blocking)
    });
    if !ok {
        return Err(ctx.op_error(
            op,
            "operand must be the result of a non-blocking collective",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use commlir_ir::parser::{parse_source, ParseOptions};
    use commlir_ir::Context;

    /// Error messages of verifying `src`.
    fn errors(src: &str) -> Vec<String> {
        let mut ctx = Context::new();
        let m = parse_source(&mut ctx, "t", src.as_bytes(), &ParseOptions::default()).unwrap();
        match commlir_ir::verify::verify(&ctx, m) {
            Ok(()) => Vec::new(),
            Err(ds) => ds.into_iter().map(|d| d.message).collect(),
        }
    }

    /// A group of size 0 is reported (as not dividing the split dimension), not divided by.
    #[test]
    fn degenerate_group_sizes_are_diagnosed() {
        let group = |size: i64| format!("coll.group @tp {{size = {size} : i64}}\n");
        let funcs = [
            "func.func @a(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
               %r = coll.all_to_all_single %x {group = @tp} : tensor<8x8xf32>
               %w = coll.wait_tensor %r : tensor<8x8xf32>
               return %w : tensor<8x8xf32>
             }",
            "func.func @s(%x: tensor<4x16xf32>) -> tensor<8x8xf32> {
               %r = coll.shard_dim_alltoall %x {gather_dim = 0 : i64, shard_dim = 1 : i64, group = @tp} : (tensor<4x16xf32>) -> tensor<8x8xf32>
               return %r : tensor<8x8xf32>
             }",
            "func.func @c(%g: tensor<8x8xf32, #comm.buffer<nccl, @tp>>, %o: tensor<4x8xf32, #comm.buffer<nccl, @tp>>) {
               %w = comm.reduce_scatter %g, %o {reduce_op = \"sum\", group = @tp} : (tensor<8x8xf32, #comm.buffer<nccl, @tp>>, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> !comm.work
               %r = comm.wait %w, %o : (!comm.work, tensor<4x8xf32, #comm.buffer<nccl, @tp>>) -> tensor<4x8xf32, #comm.buffer<nccl, @tp>>
               return
             }",
        ];
        for f in funcs {
            let errs = errors(&(group(0) + f));
            assert!(
                errs.iter()
                    .any(|e| e.contains("divisible by the group size")),
                "{errs:?}"
            );
            assert!(errors(&(group(2) + f)).is_empty(), "{f}");
        }
    }
}
