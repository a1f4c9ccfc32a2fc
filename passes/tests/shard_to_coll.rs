//! `shard-to-coll` against an independent model of upstream `shard` collective semantics.
//!
//! Generated programs (grid shapes of 1–3 axes, every subset and order of grid axes, every
//! collective with its gather / scatter / split / concat axes and roots) are converted and
//! run on the sim backend with one rank per grid process; each rank's result must equal what
//! the collective means on the grid, computed here from the same generated inputs with plain
//! index arithmetic (no commlir code involved). Integer tensors keep sums exact, so results
//! must match bit for bit.

mod common;

use commlir_ir::Context;
use commlir_runtime::inputs::generate;
use commlir_runtime::{ElemType, SimOptions, TensorType};
use commlir_testgen::Rng;

/// A dense row-major tensor of the model.
#[derive(Clone, Debug, PartialEq)]
struct T {
    shape: Vec<usize>,
    v: Vec<f64>,
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

impl T {
    fn at(&self, idx: &[usize]) -> f64 {
        let st = strides(&self.shape);
        self.v[idx.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()]
    }
    fn slice(&self, dim: usize, start: usize, size: usize) -> T {
        let mut shape = self.shape.clone();
        shape[dim] = size;
        let n: usize = shape.iter().product();
        let v = (0..n)
            .map(|i| {
                let mut idx = unravel(i, &shape);
                idx[dim] += start;
                self.at(&idx)
            })
            .collect();
        T { shape, v }
    }
    fn concat(parts: &[T], dim: usize) -> T {
        let mut shape = parts[0].shape.clone();
        shape[dim] = parts.iter().map(|p| p.shape[dim]).sum();
        let n: usize = shape.iter().product();
        let v = (0..n)
            .map(|i| {
                let mut idx = unravel(i, &shape);
                let mut k = 0;
                while idx[dim] >= parts[k].shape[dim] {
                    idx[dim] -= parts[k].shape[dim];
                    k += 1;
                }
                parts[k].at(&idx)
            })
            .collect();
        T { shape, v }
    }
    fn combine(parts: &[T], f: fn(f64, f64) -> f64) -> T {
        let mut out = parts[0].clone();
        for p in &parts[1..] {
            for (o, x) in out.v.iter_mut().zip(&p.v) {
                *o = f(*o, *x);
            }
        }
        out
    }
}

/// The members of process `p`'s group over `axes` of `grid`, in key order.
fn members(p: usize, grid: &[usize], axes: &[usize]) -> Vec<usize> {
    let coords = unravel(p, grid);
    let sel: Vec<usize> = axes.iter().map(|&a| grid[a]).collect();
    let g: usize = sel.iter().product();
    (0..g)
        .map(|k| {
            let kc = unravel(k, &sel);
            let mut c = coords.clone();
            for (i, &a) in axes.iter().enumerate() {
                c[a] = kc[i];
            }
            c.iter().zip(strides(grid)).map(|(a, b)| a * b).sum()
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Coll {
    AllReduce(&'static str),
    AllGather(usize),
    ReduceScatter(&'static str, usize),
    AllToAll(usize, usize),
    Broadcast(Vec<usize>),
}

/// What `c` produces on process `p`.
fn model(c: &Coll, p: usize, grid: &[usize], axes: &[usize], inputs: &[T]) -> T {
    let m = members(p, grid, axes);
    let key = m.iter().position(|&q| q == p).unwrap();
    let ins: Vec<T> = m.iter().map(|&q| inputs[q].clone()).collect();
    let g = m.len();
    let red = |op: &str| -> fn(f64, f64) -> f64 {
        match op {
            "sum" => |a, b| a + b,
            "max" => f64::max,
            "min" => f64::min,
            _ => unreachable!(),
        }
    };
    match c {
        Coll::AllReduce(op) => T::combine(&ins, red(op)),
        Coll::AllGather(k) => T::concat(&ins, *k),
        Coll::ReduceScatter(op, k) => {
            let r = T::combine(&ins, red(op));
            let part = r.shape[*k] / g;
            r.slice(*k, key * part, part)
        }
        Coll::AllToAll(s, c) => {
            let parts: Vec<T> = ins
                .iter()
                .map(|x| {
                    let part = x.shape[*s] / g;
                    x.slice(*s, key * part, part)
                })
                .collect();
            T::concat(&parts, *c)
        }
        Coll::Broadcast(root) => {
            let sel: Vec<usize> = axes.iter().map(|&a| grid[a]).collect();
            let r: usize = root.iter().zip(strides(&sel)).map(|(a, b)| a * b).sum();
            ins[r].clone()
        }
    }
}

fn dims(s: &[usize]) -> String {
    s.iter().map(|d| format!("{d}x")).collect::<String>()
}

/// The generic-form program, as `mlir-opt --mlir-print-op-generic` writes upstream `shard`.
fn program(c: &Coll, grid: &[usize], axes: &[usize], in_shape: &[usize]) -> (String, Vec<usize>) {
    let g: usize = axes.iter().map(|&a| grid[a]).product();
    let mut out = in_shape.to_vec();
    let (name, props) = match c {
        Coll::AllReduce(op) => ("all_reduce", format!("reduction = #shard<partial {op}>, ")),
        Coll::AllGather(k) => {
            out[*k] *= g;
            ("all_gather", format!("gather_axis = {k} : index, "))
        }
        Coll::ReduceScatter(op, k) => {
            out[*k] /= g;
            (
                "reduce_scatter",
                format!("reduction = #shard<partial {op}>, scatter_axis = {k} : index, "),
            )
        }
        Coll::AllToAll(s, cc) => {
            out[*s] /= g;
            out[*cc] *= g;
            (
                "all_to_all",
                format!("concat_axis = {cc} : index, split_axis = {s} : index, "),
            )
        }
        Coll::Broadcast(root) => {
            let r: Vec<String> = root.iter().map(|x| x.to_string()).collect();
            (
                "broadcast",
                format!("root = array<i64: {}>, ", r.join(", ")),
            )
        }
    };
    let gs: Vec<String> = grid.iter().map(|x| x.to_string()).collect();
    let ax: Vec<String> = axes.iter().map(|x| x.to_string()).collect();
    let tin = format!("tensor<{}i32>", dims(in_shape));
    let tout = format!("tensor<{}i32>", dims(&out));
    let text = format!(
        "\"shard.grid\"() <{{shape = array<i64: {}>, sym_name = \"grid0\"}}> : () -> ()\n\
         func.func @main(%x: {tin}) -> {tout} {{\n\
         \x20 %r = \"shard.{name}\"(%x) <{{{props}grid = @grid0, grid_axes = array<i16: {}>}}> : ({tin}) -> {tout}\n\
         \x20 return %r : {tout}\n}}\n",
        gs.join(", "),
        ax.join(", ")
    );
    (text, out)
}

fn check_case(seed: u64, rng: &mut Rng) {
    let grids: &[&[usize]] = &[&[4], &[2, 2], &[2, 3], &[3, 2], &[2, 2, 2], &[1, 4]];
    let grid = grids[rng.below(grids.len())].to_vec();
    // A random subset of the axes in a random order.
    let mut axes: Vec<usize> = (0..grid.len()).filter(|_| rng.below(3) != 0).collect();
    for i in (1..axes.len()).rev() {
        axes.swap(i, rng.below(i + 1));
    }
    let g: usize = axes.iter().map(|&a| grid[a]).product();
    let rank = 1 + rng.below(3);
    let mut shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3)).collect();
    let ops = ["sum", "max", "min"];
    let coll = match rng.below(5) {
        0 => Coll::AllReduce(ops[rng.below(3)]),
        1 => Coll::AllGather(rng.below(rank)),
        2 => {
            let k = rng.below(rank);
            shape[k] *= g;
            Coll::ReduceScatter(ops[rng.below(3)], k)
        }
        3 => {
            let s = rng.below(rank);
            shape[s] *= g;
            Coll::AllToAll(s, rng.below(rank))
        }
        _ => Coll::Broadcast(axes.iter().map(|&a| rng.below(grid[a])).collect()),
    };
    let (text, out_shape) = program(&coll, &grid, &axes, &shape);
    let world: usize = grid.iter().product();
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let opts = commlir_ir::parser::ParseOptions::default();
    commlir_passes::link();
    let module = commlir_ir::parser::parse_source(&mut ctx, "shard.mlir", text.as_bytes(), &opts)
        .unwrap_or_else(|d| panic!("{}\n{text}", d.message));
    common::run_pipeline(&mut ctx, module, "builtin.module(shard-to-coll)", &text);
    let lowered = common::print(&ctx, module);
    assert!(!lowered.contains("shard."), "shard ops left:\n{lowered}");
    commlir_ir::verify::verify(&ctx, module)
        .unwrap_or_else(|_| panic!("converted IR does not verify:\n{lowered}"));
    let sim = SimOptions {
        ranks: world,
        entry: None,
        seed,
    };
    let results = commlir_runtime::run(&ctx, module, &sim)
        .unwrap_or_else(|d| panic!("sim failed: {}\n{text}\n{lowered}", d.message));
    let ty = TensorType {
        elem: ElemType::Int {
            width: 32,
            signedness: commlir_ir::Signedness::Signless,
        },
        shape: shape.clone(),
    };
    let inputs: Vec<T> = (0..world)
        .map(|p| T {
            shape: shape.clone(),
            v: generate(&ty, seed, p, 0).to_f64_vec(),
        })
        .collect();
    for (p, r) in results.iter().enumerate() {
        let want = model(&coll, p, &grid, &axes, &inputs);
        assert_eq!(want.shape, out_shape);
        let got = T {
            shape: r.results[0].ty.shape.clone(),
            v: r.results[0].to_f64_vec(),
        };
        assert_eq!(
            got, want,
            "rank {p}, {coll:?} on grid {grid:?} axes {axes:?}\n{text}\n{lowered}"
        );
    }
}

#[test]
fn generated_programs_match_the_shard_semantics() {
    let mut rng = Rng::new(0x5eed);
    for seed in 0..300 {
        check_case(seed, &mut rng);
    }
}

#[test]
fn groups_are_shared_and_named_by_axes() {
    let text = r#""shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "g"}> : () -> ()
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = "shard.all_reduce"(%x) <{grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<4xf32>
  %b = "shard.all_reduce"(%a) <{grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<4xf32>
  %c = "shard.all_reduce"(%b) <{grid = @g, grid_axes = array<i16: 0, 1>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}
"#;
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let opts = commlir_ir::parser::ParseOptions::default();
    commlir_passes::link();
    let m = commlir_ir::parser::parse_source(&mut ctx, "t.mlir", text.as_bytes(), &opts).unwrap();
    common::run_pipeline(&mut ctx, m, "builtin.module(shard-to-coll)", text);
    let out = common::print(&ctx, m);
    assert!(
        out.contains("coll.group @g_axes_0 {ranks = [[0, 2], [1, 3]], size = 2 : i64}"),
        "{out}"
    );
    // The whole grid in its natural order is the world: no ranks.
    assert!(
        out.contains("coll.group @g_axes_0_1 {size = 4 : i64}"),
        "{out}"
    );
    assert_eq!(out.matches("coll.group").count(), 2, "{out}");
}
