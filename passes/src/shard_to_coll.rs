//! `shard-to-coll`: upstream MLIR's `shard` collectives on device grids → `coll` ops on groups.
//!
//! MLIR's `shard` dialect (the successor of `mesh`) describes SPMD programs over an
//! n-dimensional grid of processes: `shard.grid @g(shape = 2x4)` and collectives that run
//! over a subset of the grid's axes (`grid_axes = [1]`). Upstream lowers them only to MPI
//! (`ShardToMPI`): every (grid, axes) pair becomes a communicator split off the world, with
//! the *color* the linear index of the process over the other axes and the *key* its linear
//! index over the selected axes. This pass makes the same mapping to `coll.group`s, so that
//! the program goes through commlir's lowering, scheduling and pools, and runs on the sim
//! backend or on GPUs through NCCL:
//!
//! - each (grid, axes) pair used by a collective becomes one `coll.group`, named
//!   `@<grid>_axes_<a>_<b>`, of size ∏ shape[axes]; the process of grid coordinates `c` is
//!   global rank `linear(c)` (row-major, as `shard.process_linear_index`), and the group's
//!   `ranks` lists the subgroups (one per color, each ordered by key). The whole grid in its
//!   natural axis order needs no `ranks`;
//! - `all_reduce` → `coll.all_reduce` + `coll.wait_tensor`;
//! - `all_gather` / `reduce_scatter` → the dim-0 `coll` forms, with `compute.slice` /
//!   `compute.concat` moving the chunks between `gather_axis` / `scatter_axis` and dim 0;
//! - `all_to_all` → `coll.all_to_all_single`, rearranged the same way for `split_axis` and
//!   `concat_axis`;
//! - `broadcast` → `coll.broadcast` from the root's key;
//! - collectives over a group of one process are the identity.
//!
//! `shard.grid` ops are erased once nothing refers to them. Any other `shard` op (sharding
//! annotations, point-to-point, rank queries) is an error: the pass expects a partitioned
//! program, the output of upstream `shard-partition`.

use commlir_ir::pass::{Anchor, Pass, PassEnv, PassInfo, StatisticDef};
use commlir_ir::{Attr, AttrKind, Builder, Context, Diagnostic, OpId, Type, TypeKind, Value};
use std::collections::BTreeMap;

commlir_ir::register_pass!(
    /// The `shard-to-coll` pass.
    pub SHARD_TO_COLL = PassInfo {
        argument: "shard-to-coll",
        name: "ShardToColl",
        summary: "Convert upstream `shard` collectives on grids to `coll` ops on groups",
        description: "Maps every (grid, grid_axes) pair to a `coll.group` whose subgroups are \
            the communicators MLIR's ShardToMPI would split (color: the linear index over the \
            other axes, key: the linear index over the selected ones), and each `shard` \
            collective to the `coll` collective and `coll.wait_tensor`, with slices and \
            concats for gather, scatter, split and concat axes other than 0.",
        anchor: Anchor::MODULE,
        options: &[],
        statistics: &[
            StatisticDef::new("num-collectives", "Number of shard collectives converted"),
            StatisticDef::new("num-groups", "Number of coll.group ops created"),
        ],
        create: |_| Ok(Box::new(ShardToColl)),
    }
);

/// The `shard-to-coll` pass instance (stateless).
pub struct ShardToColl;

/// A `shard.grid`: its op and static shape.
struct Grid {
    op: OpId,
    shape: Vec<i64>,
}

/// The group of one (grid, axes) pair.
struct GroupSpec {
    name: String,
    size: i64,
    /// `None` when the group is the whole grid in row-major order (no `ranks` needed).
    ranks: Option<Vec<Vec<i64>>>,
}

/// Row-major linear index of `coords` in `shape`.
fn linear(coords: &[i64], shape: &[i64]) -> i64 {
    coords.iter().zip(shape).fold(0, |acc, (c, s)| acc * s + c)
}

/// Coordinates of the linear index `i` in `shape` (row-major).
fn delinear(mut i: i64, shape: &[i64]) -> Vec<i64> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// The communicators of `axes` on a grid of `shape`, as ShardToMPI splits them: one row per
/// color (linear index over the other axes, ascending), each listing the global ranks in key
/// order (linear index over `axes`, in the order the axes are given).
pub fn subgroups(shape: &[i64], axes: &[usize]) -> Vec<Vec<i64>> {
    let others: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let sel_shape: Vec<i64> = axes.iter().map(|&a| shape[a]).collect();
    let other_shape: Vec<i64> = others.iter().map(|&a| shape[a]).collect();
    let group: i64 = sel_shape.iter().product();
    let colors: i64 = other_shape.iter().product();
    (0..colors)
        .map(|color| {
            let oc = delinear(color, &other_shape);
            (0..group)
                .map(|key| {
                    let kc = delinear(key, &sel_shape);
                    let mut coords = vec![0; shape.len()];
                    for (i, &d) in others.iter().enumerate() {
                        coords[d] = oc[i];
                    }
                    for (i, &d) in axes.iter().enumerate() {
                        coords[d] = kc[i];
                    }
                    linear(&coords, shape)
                })
                .collect()
        })
        .collect()
}

struct Converter {
    grids: BTreeMap<String, Grid>,
    /// Symbol names already in the module (new group names avoid them).
    taken: std::collections::BTreeSet<String>,
    groups: BTreeMap<(String, Vec<usize>), GroupSpec>,
    converted: u64,
}

fn static_tensor(ctx: &Context, t: Type) -> Option<(Vec<i64>, Type)> {
    match ctx.type_kind(t) {
        TypeKind::Tensor { .. } => {
            let (shape, elem) = ctx.type_kind(t).shaped()?;
            shape
                .iter()
                .all(|d| *d >= 0)
                .then(|| (shape.to_vec(), elem))
        }
        _ => None,
    }
}

fn int_prop(ctx: &Context, op: OpId, name: &str) -> Option<i64> {
    ctx.inherent_attr(op, name).and_then(|a| ctx.attr_as_i64(a))
}

impl Converter {
    fn collect_grids(ctx: &Context, module: OpId) -> Result<BTreeMap<String, Grid>, Diagnostic> {
        let mut grids = BTreeMap::new();
        let mut err = None;
        ctx.walk(module, |op| {
            if err.is_some() || ctx.op_name(op) != "shard.grid" {
                return;
            }
            let name = ctx.symbol_name(op).map(str::to_string);
            let shape = ctx
                .inherent_attr(op, "shape")
                .and_then(|a| ctx.attr_as_i64_array(a));
            match (name, shape) {
                (Some(name), Some(shape)) => {
                    if shape.is_empty() || shape.iter().any(|d| *d <= 0) {
                        err = Some(ctx.op_error(
                            op,
                            format!(
                                "grid @{name} must have a static, non-empty shape to map to groups"
                            ),
                        ));
                    } else {
                        grids.insert(name, Grid { op, shape });
                    }
                }
                _ => {
                    err = Some(ctx.op_error(op, "expected a 'sym_name' and a 'shape' property"));
                }
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(grids),
        }
    }

    /// The grid and axes of a collective, and its group (created on first use).
    fn group_of(
        &mut self,
        ctx: &Context,
        op: OpId,
    ) -> Result<(String, i64, Vec<usize>, Vec<i64>), Diagnostic> {
        let grid_name = ctx
            .inherent_attr(op, "grid")
            .and_then(|a| ctx.attr_as_symbol(a))
            .ok_or_else(|| ctx.op_error(op, "expected a 'grid' symbol reference"))?
            .to_string();
        let grid = self.grids.get(&grid_name).ok_or_else(|| {
            ctx.op_error(
                op,
                format!("grid @{grid_name} does not reference a 'shard.grid'"),
            )
        })?;
        let axes_raw = match ctx.inherent_attr(op, "grid_axes") {
            Some(a) => ctx
                .attr_as_i64_array(a)
                .ok_or_else(|| ctx.op_error(op, "'grid_axes' must be an array of integers"))?,
            None => Vec::new(),
        };
        let mut axes = Vec::with_capacity(axes_raw.len());
        for a in axes_raw {
            let d = usize::try_from(a)
                .ok()
                .filter(|d| *d < grid.shape.len())
                .ok_or_else(|| {
                    ctx.op_error(
                        op,
                        format!(
                            "grid axis {a} is out of range for grid @{grid_name} of rank {}",
                            grid.shape.len()
                        ),
                    )
                })?;
            if axes.contains(&d) {
                return Err(ctx.op_error(op, format!("grid axis {a} appears more than once")));
            }
            axes.push(d);
        }
        let shape = grid.shape.clone();
        let key = (grid_name.clone(), axes.clone());
        let size: i64 = axes.iter().map(|&a| shape[a]).product();
        if size == 1 {
            // The identity: no group is needed.
            return Ok((String::new(), 1, axes, shape));
        }
        if !self.groups.contains_key(&key) {
            let suffix: Vec<String> = axes.iter().map(|a| a.to_string()).collect();
            let base = if suffix.is_empty() {
                format!("{grid_name}_self")
            } else {
                format!("{grid_name}_axes_{}", suffix.join("_"))
            };
            let mut name = base.clone();
            let mut n = 0;
            while self.taken.contains(&name) {
                n += 1;
                name = format!("{base}_{n}");
            }
            self.taken.insert(name.clone());
            // Consecutive blocks of ranks are the default layout of a group: no `ranks`.
            let rows = subgroups(&shape, &axes);
            let consecutive = rows
                .iter()
                .flatten()
                .enumerate()
                .all(|(i, r)| *r == i as i64);
            let ranks = (!consecutive).then_some(rows);
            self.groups.insert(key, GroupSpec { name, size, ranks });
        }
        let spec = &self.groups[&(grid_name.clone(), axes.clone())];
        Ok((spec.name.clone(), size, axes, shape))
    }

    fn reduce_op(ctx: &Context, op: OpId) -> Result<&'static str, Diagnostic> {
        let Some(a) = ctx.inherent_attr(op, "reduction") else {
            return Ok("sum");
        };
        let text = match ctx.attr_kind(a) {
            AttrKind::Dialect { text, .. } => text.clone(),
            AttrKind::Opaque(text) => text.clone(),
            AttrKind::String(_) => ctx.attr_as_str(a).unwrap_or_default().to_string(),
            _ => String::new(),
        };
        let kind = text
            .trim_end_matches('>')
            .rsplit(|c: char| c.is_whitespace() || c == '<')
            .next()
            .unwrap_or("");
        match kind {
            "sum" => Ok("sum"),
            "max" => Ok("max"),
            "min" => Ok("min"),
            "product" => Ok("product"),
            "average" => Ok("avg"),
            _ => Err(ctx.op_error(
                op,
                format!("reduction '{kind}' has no functional-collective equivalent (sum, max, min, product, average)"),
            )),
        }
    }

    fn convert(&mut self, ctx: &mut Context, op: OpId) -> Result<(), Diagnostic> {
        let name = ctx.op_name(op).to_string();
        let kind = name.trim_start_matches("shard.");
        if !matches!(
            kind,
            "all_reduce"
                | "all_gather"
                | "reduce_scatter"
                | "all_to_all"
                | "broadcast"
                | "all_slice"
        ) {
            return Err(ctx.op_error(
                op,
                format!(
                    "'{name}' is not supported by shard-to-coll (it converts the collectives of a partitioned program: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, all_slice)"
                ),
            ));
        }
        if ctx.operands(op).len() != 1 || ctx.results(op).len() != 1 {
            return Err(ctx.op_error(op, "expected one tensor operand and one result"));
        }
        let x = ctx.operand(op, 0);
        let res = ctx.result(op, 0);
        let (in_shape, in_elem) = static_tensor(ctx, ctx.value_type(x))
            .ok_or_else(|| ctx.op_error(op, "operand must be a statically shaped tensor"))?;
        let (out_shape, out_elem) = static_tensor(ctx, ctx.value_type(res))
            .ok_or_else(|| ctx.op_error(op, "result must be a statically shaped tensor"))?;
        if in_elem != out_elem {
            return Err(ctx.op_error(op, "operand and result must have the same element type"));
        }
        let (group, g, axes, grid_shape) = self.group_of(ctx, op)?;
        let axis_attr = |ctx: &Context, attr: &str| -> Result<usize, Diagnostic> {
            let v = int_prop(ctx, op, attr)
                .ok_or_else(|| ctx.op_error(op, format!("expected an integer '{attr}'")))?;
            usize::try_from(v)
                .ok()
                .filter(|d| *d < in_shape.len())
                .ok_or_else(|| {
                    ctx.op_error(
                        op,
                        format!(
                            "'{attr}' = {v} is out of range for a rank-{} tensor",
                            in_shape.len()
                        ),
                    )
                })
        };
        let expect_shape = |ctx: &Context, want: &[i64]| -> Result<(), Diagnostic> {
            if out_shape != want {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "result shape {:?} does not match the group of {g} processes (expected {:?})",
                        out_shape, want
                    ),
                ));
            }
            Ok(())
        };
        let divisible = |ctx: &Context, dim: usize, what: &str| -> Result<(), Diagnostic> {
            if in_shape[dim] % g != 0 {
                return Err(ctx.op_error(
                    op,
                    format!(
                        "{what} dimension {dim} of size {} is not divisible by the group size {g}",
                        in_shape[dim]
                    ),
                ));
            }
            Ok(())
        };
        let result_ty = ctx.value_type(res);
        let group_attr = ctx.symbol_ref(&group);
        let mut b = Builder::before(ctx, op);
        let new = match kind {
            "all_reduce" => {
                expect_shape(b.ctx, &in_shape)?;
                let reduce = Self::reduce_op(b.ctx, op)?;
                if g == 1 {
                    x
                } else {
                    let r = b.ctx.str_attr(reduce);
                    let t = b.ctx.value_type(x);
                    let s = b.create_value(
                        "coll.all_reduce",
                        &[x],
                        t,
                        &[("reduce_op", r), ("group", group_attr)],
                    );
                    b.create_value("coll.wait_tensor", &[s], t, &[])
                }
            }
            "broadcast" => {
                expect_shape(b.ctx, &in_shape)?;
                let root = b
                    .ctx
                    .inherent_attr(op, "root")
                    .and_then(|a| b.ctx.attr_as_i64_array(a))
                    .ok_or_else(|| b.ctx.op_error(op, "expected a static 'root' multi-index"))?;
                let sel: Vec<i64> = axes.iter().map(|&a| grid_shape[a]).collect();
                if root.len() != sel.len() || root.iter().zip(&sel).any(|(r, s)| *r < 0 || r >= s) {
                    return Err(b.ctx.op_error(
                        op,
                        format!("root {root:?} is not a process of the grid axes {axes:?} (shape {sel:?})"),
                    ));
                }
                if g == 1 {
                    x
                } else {
                    let src = b.ctx.int_attr(linear(&root, &sel), 64);
                    let t = b.ctx.value_type(x);
                    let s = b.create_value(
                        "coll.broadcast",
                        &[x],
                        t,
                        &[("src", src), ("group", group_attr)],
                    );
                    b.create_value("coll.wait_tensor", &[s], t, &[])
                }
            }
            "all_slice" => {
                // No communication: each process keeps its block of `slice_axis`.
                let k = axis_attr(b.ctx, "slice_axis")?;
                divisible(b.ctx, k, "sliced")?;
                let mut want = in_shape.clone();
                want[k] /= g;
                expect_shape(b.ctx, &want)?;
                if g == 1 {
                    x
                } else {
                    let dim = b.ctx.int_attr(k as i64, 64);
                    b.create_value(
                        "coll.all_slice",
                        &[x],
                        result_ty,
                        &[("dim", dim), ("group", group_attr)],
                    )
                }
            }
            "all_gather" => {
                let k = axis_attr(b.ctx, "gather_axis")?;
                let mut want = in_shape.clone();
                want[k] *= g;
                expect_shape(b.ctx, &want)?;
                if g == 1 {
                    x
                } else {
                    let mut dim0 = in_shape.clone();
                    dim0[0] *= g;
                    let t0 = b.ctx.tensor_type(&dim0, in_elem);
                    let s = b.create_value(
                        "coll.all_gather_into_tensor",
                        &[x],
                        t0,
                        &[("group", group_attr)],
                    );
                    let w = b.create_value("coll.wait_tensor", &[s], t0, &[]);
                    if k == 0 {
                        w
                    } else {
                        let chunks = split(&mut b, w, 0, g as usize);
                        concat(&mut b, &chunks, k, result_ty)
                    }
                }
            }
            "reduce_scatter" => {
                let k = axis_attr(b.ctx, "scatter_axis")?;
                divisible(b.ctx, k, "scatter")?;
                let mut want = in_shape.clone();
                want[k] /= g;
                expect_shape(b.ctx, &want)?;
                let reduce = Self::reduce_op(b.ctx, op)?;
                if g == 1 {
                    x
                } else {
                    let input = if k == 0 {
                        x
                    } else {
                        let chunks = split(&mut b, x, k, g as usize);
                        let mut stacked = want.clone();
                        stacked[0] *= g;
                        let t = b.ctx.tensor_type(&stacked, in_elem);
                        concat(&mut b, &chunks, 0, t)
                    };
                    let r = b.ctx.str_attr(reduce);
                    let s = b.create_value(
                        "coll.reduce_scatter_tensor",
                        &[input],
                        result_ty,
                        &[("reduce_op", r), ("group", group_attr)],
                    );
                    b.create_value("coll.wait_tensor", &[s], result_ty, &[])
                }
            }
            "all_to_all" => {
                let s_ax = axis_attr(b.ctx, "split_axis")?;
                let c_ax = axis_attr(b.ctx, "concat_axis")?;
                divisible(b.ctx, s_ax, "split")?;
                let mut chunk = in_shape.clone();
                chunk[s_ax] /= g;
                let mut want = chunk.clone();
                want[c_ax] *= g;
                expect_shape(b.ctx, &want)?;
                if g == 1 {
                    x
                } else {
                    let mut stacked = chunk.clone();
                    stacked[0] *= g;
                    let ts = b.ctx.tensor_type(&stacked, in_elem);
                    let input = if s_ax == 0 {
                        x
                    } else {
                        let chunks = split(&mut b, x, s_ax, g as usize);
                        concat(&mut b, &chunks, 0, ts)
                    };
                    let a = b.create_value(
                        "coll.all_to_all_single",
                        &[input],
                        ts,
                        &[("group", group_attr)],
                    );
                    let w = b.create_value("coll.wait_tensor", &[a], ts, &[]);
                    if c_ax == 0 {
                        w
                    } else {
                        let chunks = split(&mut b, w, 0, g as usize);
                        concat(&mut b, &chunks, c_ax, result_ty)
                    }
                }
            }
            _ => unreachable!("filtered above"),
        };
        ctx.replace_all_uses(res, new);
        ctx.erase_op(op);
        self.converted += 1;
        Ok(())
    }
}

/// `n` equal slices of `v` along `dim`.
fn split(b: &mut Builder<'_>, v: Value, dim: usize, n: usize) -> Vec<Value> {
    let t = b.ctx.value_type(v);
    let (shape, elem) = static_tensor(b.ctx, t).expect("checked static");
    let part = shape[dim] / n as i64;
    let mut ps = shape.clone();
    ps[dim] = part;
    let pt = b.ctx.tensor_type(&ps, elem);
    (0..n as i64)
        .map(|i| {
            let d = b.ctx.int_attr(dim as i64, 64);
            let st = b.ctx.int_attr(i * part, 64);
            let sz = b.ctx.int_attr(part, 64);
            b.create_value(
                "compute.slice",
                &[v],
                pt,
                &[("dim", d), ("start", st), ("size", sz)],
            )
        })
        .collect()
}

fn concat(b: &mut Builder<'_>, parts: &[Value], dim: usize, ty: Type) -> Value {
    let d = b.ctx.int_attr(dim as i64, 64);
    b.create_value("compute.concat", parts, ty, &[("dim", d)])
}

/// Runs the conversion on `module`; returns (collectives converted, groups created).
pub fn shard_to_coll(ctx: &mut Context, module: OpId) -> Result<(u64, u64), Diagnostic> {
    let grids = Converter::collect_grids(ctx, module)?;
    let mut ops = Vec::new();
    ctx.walk(module, |op| {
        let n = ctx.op_name(op);
        if n.starts_with("shard.") && n != "shard.grid" {
            ops.push(op);
        }
    });
    if grids.is_empty() && ops.is_empty() {
        return Ok((0, 0));
    }
    let mut taken = std::collections::BTreeSet::new();
    let body = ctx.op_regions(module)[0];
    for &b in ctx.region_blocks(body) {
        for op in ctx.block_ops(b) {
            if let Some(n) = ctx.symbol_name(op) {
                taken.insert(n.to_string());
            }
        }
    }
    let mut cv = Converter {
        grids,
        taken,
        groups: BTreeMap::new(),
        converted: 0,
    };
    for op in ops {
        cv.convert(ctx, op)?;
    }
    // The groups go where their grid was, in (grid, axes) order, so output is deterministic.
    let n_groups = cv.groups.len() as u64;
    for ((grid, _), spec) in &cv.groups {
        let anchor = cv.grids[grid].op;
        let mut b = Builder::before(ctx, anchor);
        let sym = b.ctx.str_attr(&spec.name);
        let size = b.ctx.int_attr(spec.size, 64);
        let mut st = commlir_ir::OpState::new(b.ctx.ident("coll.group"), b.loc);
        st.attrs.push((b.ctx.ident("size"), size));
        if let Some(rows) = &spec.ranks {
            let rows: Vec<Attr> = rows
                .iter()
                .map(|r| {
                    let items: Vec<Attr> = r.iter().map(|v| b.ctx.int_attr(*v, 64)).collect();
                    b.ctx.attr(AttrKind::Array(items))
                })
                .collect();
            let ranks = b.ctx.attr(AttrKind::Array(rows));
            st.attrs.push((b.ctx.ident("ranks"), ranks));
        }
        st.attrs.push((b.ctx.ident("sym_name"), sym));
        b.ctx.sort_named(&mut st.attrs);
        b.create_state(st);
    }
    for grid in cv.grids.values() {
        ctx.erase_op(grid.op);
    }
    Ok((cv.converted, n_groups))
}

impl Pass for ShardToColl {
    fn info(&self) -> &'static PassInfo {
        &SHARD_TO_COLL
    }
    fn run(
        &mut self,
        ctx: &mut Context,
        op: OpId,
        env: &mut PassEnv<'_>,
    ) -> Result<(), Diagnostic> {
        let (n, g) = shard_to_coll(ctx, op)?;
        env.add_stat("num-collectives", n);
        env.add_stat("num-groups", g);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::subgroups;

    #[test]
    fn subgroups_follow_shard_to_mpi_color_and_key() {
        // A 2x4 grid: axis 1 groups are the rows, axis 0 groups the columns.
        assert_eq!(
            subgroups(&[2, 4], &[1]),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        assert_eq!(
            subgroups(&[2, 4], &[0]),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        // Axes in reverse order: the key runs over axis 1 fastest-varying last.
        assert_eq!(subgroups(&[2, 2], &[1, 0]), vec![vec![0, 2, 1, 3]]);
        assert_eq!(subgroups(&[2, 3, 2], &[0, 2]).len(), 3);
    }
}
