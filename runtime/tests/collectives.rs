//! The `coll`, `comm` and `symm` collectives on 2 and 4 ranks: values against hand
//! computations from the generated inputs, subgroup layouts, and equality of the lines
//! printed by a `coll`-level program and its hand-lowered `comm`-level form.

mod common;

use commlir_ir::{CommBufferKind, Type};
use commlir_runtime::inputs::generate;
use commlir_runtime::{ElemType, TensorType};
use common::Prog;

fn input(shape: &[usize], elem: ElemType, rank: usize, arg: usize) -> Vec<f64> {
    generate(
        &TensorType {
            elem,
            shape: shape.to_vec(),
        },
        0,
        rank,
        arg,
    )
    .to_f64_vec()
}

/// `f(x) = wait(coll.<name>(x))` on one f32 argument.
fn one_coll(
    p: &mut Prog,
    name: &str,
    in_ty: Type,
    out_ty: Type,
    attrs: &[(&str, commlir_ir::Attr)],
) {
    let x = p.func("main", &[in_ty])[0];
    let r = p.op1(name, &[x], out_ty, attrs);
    let y = p.op1("coll.wait_tensor", &[r], out_ty, &[]);
    p.ret(&[y]);
}

fn reduce_f32(op: &str, xs: &[f32]) -> f32 {
    let mut acc = xs[0];
    for &x in &xs[1..] {
        acc = match op {
            "sum" | "avg" => acc + x,
            "product" => acc * x,
            "max" => acc.max(x),
            _ => acc.min(x),
        };
    }
    if op == "avg" {
        acc /= xs.len() as f32;
    }
    acc
}

#[test]
fn all_reduce_every_op_on_2_and_4_ranks() {
    for n in [2usize, 4] {
        for op in ["sum", "avg", "max", "min", "product"] {
            let mut p = Prog::new();
            p.group("g", n as i64, None, false);
            let t = p.t(&[5], "f32");
            let (a, g) = (p.s(op), p.sym("g"));
            one_coll(
                &mut p,
                "coll.all_reduce",
                t,
                t,
                &[("reduce_op", a), ("group", g)],
            );
            p.verify();
            let res = p.try_run(n).unwrap();
            let ins: Vec<Vec<f64>> = (0..n).map(|r| input(&[5], ElemType::F32, r, 0)).collect();
            let want: Vec<f64> = (0..5)
                .map(|i| {
                    f64::from(reduce_f32(
                        op,
                        &ins.iter().map(|x| x[i] as f32).collect::<Vec<_>>(),
                    ))
                })
                .collect();
            for rr in &res {
                assert_eq!(
                    rr.results[0].to_f64_vec(),
                    want,
                    "{op} on {n} ranks, rank {}",
                    rr.rank
                );
            }
        }
    }
}

#[test]
fn bf16_all_reduce_accumulates_in_f32_and_rounds_once() {
    let mut p = Prog::new();
    p.group("g", 4, None, false);
    let t = p.t(&[64], "bf16");
    let (a, g) = (p.s("sum"), p.sym("g"));
    one_coll(
        &mut p,
        "coll.all_reduce",
        t,
        t,
        &[("reduce_op", a), ("group", g)],
    );
    let res = p.try_run(4).unwrap();
    let ins: Vec<Vec<f64>> = (0..4).map(|r| input(&[64], ElemType::BF16, r, 0)).collect();
    for i in 0..64 {
        let s = ins.iter().fold(0.0f32, |acc, x| acc + x[i] as f32);
        let want = commlir_runtime::numeric::round_bf16(f64::from(s));
        assert_eq!(res[0].results[0].to_f64_vec()[i], f64::from(want));
    }
}

#[test]
fn all_gather_reduce_scatter_broadcast_on_4_ranks() {
    // all_gather: rank order along dim 0.
    let mut p = Prog::new();
    p.group("g", 4, None, false);
    let (t, big) = (p.t(&[2, 3], "f32"), p.t(&[8, 3], "f32"));
    let g = p.sym("g");
    one_coll(
        &mut p,
        "coll.all_gather_into_tensor",
        t,
        big,
        &[("group", g)],
    );
    let res = p.try_run(4).unwrap();
    let want: Vec<f64> = (0..4)
        .flat_map(|r| input(&[2, 3], ElemType::F32, r, 0))
        .collect();
    for rr in &res {
        assert_eq!(rr.results[0].to_f64_vec(), want);
    }

    // reduce_scatter: rank i keeps rows [2i, 2i+2) of the sum.
    let mut p = Prog::new();
    p.group("g", 4, None, false);
    let (big, t) = (p.t(&[8, 3], "f32"), p.t(&[2, 3], "f32"));
    let (a, g) = (p.s("sum"), p.sym("g"));
    one_coll(
        &mut p,
        "coll.reduce_scatter_tensor",
        big,
        t,
        &[("reduce_op", a), ("group", g)],
    );
    let res = p.try_run(4).unwrap();
    let ins: Vec<Vec<f64>> = (0..4)
        .map(|r| input(&[8, 3], ElemType::F32, r, 0))
        .collect();
    for rr in &res {
        let want: Vec<f64> = (rr.rank * 6..rr.rank * 6 + 6)
            .map(|i| {
                f64::from(reduce_f32(
                    "sum",
                    &ins.iter().map(|x| x[i] as f32).collect::<Vec<_>>(),
                ))
            })
            .collect();
        assert_eq!(rr.results[0].to_f64_vec(), want);
    }

    // broadcast from group rank 2.
    let mut p = Prog::new();
    p.group("g", 4, None, false);
    let t = p.t(&[3], "f32");
    let (src, g) = (p.i64(2), p.sym("g"));
    one_coll(
        &mut p,
        "coll.broadcast",
        t,
        t,
        &[("src", src), ("group", g)],
    );
    let res = p.try_run(4).unwrap();
    for rr in &res {
        assert_eq!(rr.results[0].to_f64_vec(), input(&[3], ElemType::F32, 2, 0));
    }
}

#[test]
fn all_to_all_equal_and_uneven_splits() {
    let mut p = Prog::new();
    p.group("g", 2, None, false);
    let t = p.t(&[4], "f32");
    let g = p.sym("g");
    one_coll(&mut p, "coll.all_to_all_single", t, t, &[("group", g)]);
    let res = p.try_run(2).unwrap();
    let (x0, x1) = (
        input(&[4], ElemType::F32, 0, 0),
        input(&[4], ElemType::F32, 1, 0),
    );
    assert_eq!(
        res[0].results[0].to_f64_vec(),
        [&x0[..2], &x1[..2]].concat()
    );
    assert_eq!(
        res[1].results[0].to_f64_vec(),
        [&x0[2..], &x1[2..]].concat()
    );

    // Rank 0 sends 1 row to itself and 3 to rank 1; rank 1 sends 3 to rank 0 and 1 to itself.
    let mut p = Prog::new();
    p.group("g", 2, None, false);
    let t = p.t(&[4, 2], "f32");
    let g = p.sym("g");
    let ins = p.matrix(&[&[1, 3], &[3, 1]]);
    let outs = p.matrix(&[&[1, 3], &[3, 1]]);
    one_coll(
        &mut p,
        "coll.all_to_all_single",
        t,
        t,
        &[
            ("group", g),
            ("input_split_sizes", ins),
            ("output_split_sizes", outs),
        ],
    );
    p.verify();
    let res = p.try_run(2).unwrap();
    let (x0, x1) = (
        input(&[4, 2], ElemType::F32, 0, 0),
        input(&[4, 2], ElemType::F32, 1, 0),
    );
    assert_eq!(
        res[0].results[0].to_f64_vec(),
        [&x0[..2], &x1[..6]].concat()
    );
    assert_eq!(
        res[1].results[0].to_f64_vec(),
        [&x0[2..], &x1[6..]].concat()
    );
}

#[test]
fn shard_dim_alltoall_reshards() {
    let mut p = Prog::new();
    p.group("g", 2, None, false);
    let (t, o) = (p.t(&[2, 4], "f32"), p.t(&[4, 2], "f32"));
    let (gd, sd, g) = (p.i64(0), p.i64(1), p.sym("g"));
    let x = p.func("main", &[t])[0];
    let r = p.op1(
        "coll.shard_dim_alltoall",
        &[x],
        o,
        &[("gather_dim", gd), ("shard_dim", sd), ("group", g)],
    );
    p.ret(&[r]);
    p.verify();
    let res = p.try_run(2).unwrap();
    let xs: Vec<Vec<f64>> = (0..2)
        .map(|r| input(&[2, 4], ElemType::F32, r, 0))
        .collect();
    // The global 4x4 tensor stacks the ranks' rows; rank i keeps columns [2i, 2i+2).
    for rr in &res {
        let want: Vec<f64> = (0..4)
            .flat_map(|row| (0..2).map(move |c| (row, rr.rank * 2 + c)))
            .map(|(row, c)| xs[row / 2][(row % 2) * 4 + c])
            .collect();
        assert_eq!(rr.results[0].to_f64_vec(), want);
    }
}

#[test]
fn subgroup_families() {
    // size 2 on 4 ranks without `ranks`: [0,1] and [2,3].
    let mut p = Prog::new();
    p.group("g", 2, None, false);
    let t = p.t(&[3], "f32");
    let (a, g) = (p.s("sum"), p.sym("g"));
    one_coll(
        &mut p,
        "coll.all_reduce",
        t,
        t,
        &[("reduce_op", a), ("group", g)],
    );
    let res = p.try_run(4).unwrap();
    let xs: Vec<Vec<f64>> = (0..4).map(|r| input(&[3], ElemType::F32, r, 0)).collect();
    let pair = |a: usize, b: usize| -> Vec<f64> {
        (0..3)
            .map(|i| f64::from(xs[a][i] as f32 + xs[b][i] as f32))
            .collect()
    };
    assert_eq!(res[1].results[0].to_f64_vec(), pair(0, 1));
    assert_eq!(res[2].results[0].to_f64_vec(), pair(2, 3));

    // Explicit family [[0,2],[1,3]], and broadcast src is the index within the subgroup.
    let mut p = Prog::new();
    let fam = p.matrix(&[&[3, 1], &[0, 2]]);
    p.group("g", 2, Some(fam), false);
    let t = p.t(&[3], "f32");
    let (src, g) = (p.i64(0), p.sym("g"));
    one_coll(
        &mut p,
        "coll.broadcast",
        t,
        t,
        &[("src", src), ("group", g)],
    );
    p.verify();
    let res = p.try_run(4).unwrap();
    for (rank, from) in [(0, 0), (1, 3), (2, 0), (3, 3)] {
        assert_eq!(res[rank].results[0].to_f64_vec(), xs[from]);
    }
}

#[test]
fn group_layout_errors_name_the_op() {
    let mut p = Prog::new();
    let only = p.ints(&[0, 1]);
    p.group("g", 2, Some(only), false);
    let t = p.t(&[3], "f32");
    let (a, g) = (p.s("sum"), p.sym("g"));
    one_coll(
        &mut p,
        "coll.all_reduce",
        t,
        t,
        &[("reduce_op", a), ("group", g)],
    );
    assert!(p.lines(2).contains("rank 1 result 0"));
    let e = p.error(4);
    assert!(
        e.contains("test.mlir:")
            && e.contains(
                "'coll.all_reduce' op is executed by rank 2, which is not a member of group @g"
            ),
        "{e}"
    );

    let mut p = Prog::new();
    p.group("g", 3, None, false);
    let t = p.t(&[3], "f32");
    let (a, g) = (p.s("sum"), p.sym("g"));
    one_coll(
        &mut p,
        "coll.all_reduce",
        t,
        t,
        &[("reduce_op", a), ("group", g)],
    );
    let e = p.error(4);
    assert!(e.contains("group @g has size 3, but 4 ranks run"), "{e}");
}

#[test]
fn coalesced_forms() {
    let mut p = Prog::new();
    p.group("g", 2, None, false);
    let (a_t, b_t) = (p.t(&[2], "f32"), p.t(&[3], "f32"));
    let (a_big, b_big) = (p.t(&[4], "f32"), p.t(&[6], "f32"));
    let g = p.sym("g");
    let sum = p.s("max");
    let args = p.func("main", &[a_t, b_t]);
    let r = p.op(
        "coll.all_reduce_coalesced",
        &args,
        &[a_t, b_t],
        &[("reduce_op", sum), ("group", g)],
    );
    let ag = p.op(
        "coll.all_gather_into_tensor_coalesced",
        &args,
        &[a_big, b_big],
        &[("group", g)],
    );
    let mut outs = Vec::new();
    for (v, t) in [(r[0], a_t), (r[1], b_t), (ag[0], a_big), (ag[1], b_big)] {
        outs.push(p.op1("coll.wait_tensor", &[v], t, &[]));
    }
    p.ret(&outs);
    p.verify();
    let res = p.try_run(2).unwrap();
    let x = |r, a, n| input(&[n], ElemType::F32, r, a);
    let maxv = |a: usize, n: usize| -> Vec<f64> {
        x(0, a, n)
            .iter()
            .zip(x(1, a, n))
            .map(|(p, q)| p.max(q))
            .collect()
    };
    assert_eq!(res[1].results[0].to_f64_vec(), maxv(0, 2));
    assert_eq!(res[1].results[1].to_f64_vec(), maxv(1, 3));
    assert_eq!(
        res[0].results[3].to_f64_vec(),
        [x(0, 1, 3), x(1, 1, 3)].concat()
    );
}

/// The same computation at the `coll` level and hand-lowered to `comm` buffers prints the
/// same lines (types without encodings, identical digests).
#[test]
fn comm_level_matches_coll_level() {
    let build_coll = || {
        let mut p = Prog::new();
        p.group("tp", 2, None, true);
        let (t, big, small) = (
            p.t(&[4, 2], "bf16"),
            p.t(&[8, 2], "bf16"),
            p.t(&[2, 2], "bf16"),
        );
        let (sum, g, src) = (p.s("sum"), p.sym("tp"), p.i64(1));
        let x = p.func("main", &[t])[0];
        let h = p.op1("compute.gelu", &[x], t, &[]);
        let ar = p.op1(
            "coll.all_reduce",
            &[h],
            t,
            &[("reduce_op", sum), ("group", g)],
        );
        let ag = p.op1("coll.all_gather_into_tensor", &[x], big, &[("group", g)]);
        let rs = p.op1(
            "coll.reduce_scatter_tensor",
            &[x],
            small,
            &[("reduce_op", sum), ("group", g)],
        );
        let a2a = p.op1("coll.all_to_all_single", &[h], t, &[("group", g)]);
        let bc = p.op1("coll.broadcast", &[x], t, &[("src", src), ("group", g)]);
        let mut outs = Vec::new();
        for (v, ty) in [(ar, t), (ag, big), (rs, small), (a2a, t), (bc, t)] {
            outs.push(p.op1("coll.wait_tensor", &[v], ty, &[]));
        }
        let os = p.op1(
            "coll.all_reduce",
            &[x],
            t,
            &[("reduce_op", sum), ("group", g)],
        );
        outs.push(p.op1("coll.wait_tensor", &[os], t, &[]));
        p.ret(&outs);
        p
    };
    let build_comm = || {
        let mut p = Prog::new();
        p.group("tp", 2, None, true);
        let (t, big, small) = (
            p.t(&[4, 2], "bf16"),
            p.t(&[8, 2], "bf16"),
            p.t(&[2, 2], "bf16"),
        );
        let nccl = CommBufferKind::Nccl;
        let (bt, bbig, bsmall) = (
            p.buf(t, nccl, "tp"),
            p.buf(big, nccl, "tp"),
            p.buf(small, nccl, "tp"),
        );
        let st = p.buf(t, CommBufferKind::SymmMem, "tp");
        let work = commlir_dialects::comm::work_type(&mut p.ctx);
        let (sum, g, src) = (p.s("sum"), p.sym("tp"), p.i64(1));
        let x = p.func("main", &[t])[0];
        // The producer writes straight into the comm buffer; all_reduce runs in place on it.
        let h = p.op1("compute.gelu", &[x], bt, &[]);
        let h2 = p.op1("compute.clone", &[h], bt, &[]);
        let w = p.op1(
            "comm.all_reduce",
            &[h],
            work,
            &[("reduce_op", sum), ("group", g)],
        );
        let xb = p.op1("compute.clone", &[x], bt, &[]);
        let agb = p.op1("comm.alloc", &[], bbig, &[]);
        let wag = p.op1("comm.all_gather", &[xb, agb], work, &[("group", g)]);
        let rsb = p.op1("comm.alloc", &[], bsmall, &[]);
        let wrs = p.op1(
            "comm.reduce_scatter",
            &[xb, rsb],
            work,
            &[("reduce_op", sum), ("group", g)],
        );
        let a2b = p.op1("comm.alloc", &[], bt, &[]);
        let wa2a = p.op1("comm.all_to_all", &[h2, a2b], work, &[("group", g)]);
        let bcb = p.op1("compute.clone", &[x], bt, &[]);
        let wbc = p.op1(
            "comm.broadcast",
            &[bcb],
            work,
            &[("src", src), ("group", g)],
        );
        let mut outs = Vec::new();
        for (w, b, ty) in [
            (w, h, bt),
            (wag, agb, bbig),
            (wrs, rsb, bsmall),
            (wa2a, a2b, bt),
            (wbc, bcb, bt),
        ] {
            outs.push(p.op1("comm.wait", &[w, b], ty, &[]));
        }
        let xs = p.op1("compute.clone", &[x], st, &[]);
        outs.push(p.op1(
            "symm.one_shot_all_reduce",
            &[xs],
            t,
            &[("reduce_op", sum), ("group", g)],
        ));
        p.ret(&outs);
        p
    };
    let (coll, comm) = (build_coll(), build_comm());
    for n in [2, 4] {
        let a = coll.lines(n);
        assert_eq!(a, comm.lines(n));
        assert!(!a.contains("comm.buffer") && !a.contains("NaN"), "{a}");
        assert_eq!(a.lines().count(), n * 6);
    }
}

#[test]
fn in_place_all_reduce_is_visible_through_aliases_and_alloc_is_garbage() {
    let mut p = Prog::new();
    p.group("tp", 2, None, false);
    let t = p.t(&[3], "f32");
    let bt = p.buf(t, CommBufferKind::Nccl, "tp");
    let work = commlir_dialects::comm::work_type(&mut p.ctx);
    let (sum, g) = (p.s("sum"), p.sym("tp"));
    let x = p.func("main", &[t])[0];
    let b = p.op1("compute.clone", &[x], bt, &[]);
    let before = p.op1("compute.clone", &[b], t, &[]);
    let w = p.op1(
        "comm.all_reduce",
        &[b],
        work,
        &[("reduce_op", sum), ("group", g)],
    );
    // Read between start and wait: still this rank's own data (the collective snapshots its
    // input and delivers at the wait).
    let during = p.op1("compute.clone", &[b], t, &[]);
    let _y = p.op1("comm.wait", &[w, b], bt, &[]);
    // `b` itself now holds the sum: the wait's result is an alias.
    let after = p.op1("compute.clone", &[b], t, &[]);
    let junk = p.op1("comm.alloc", &[], bt, &[]);
    p.ret(&[before, during, after, junk]);
    p.verify();
    let res = p.try_run(2).unwrap();
    let (x0, x1) = (
        input(&[3], ElemType::F32, 0, 0),
        input(&[3], ElemType::F32, 1, 0),
    );
    let sum: Vec<f64> = x0
        .iter()
        .zip(&x1)
        .map(|(a, b)| f64::from(*a as f32 + *b as f32))
        .collect();
    assert_eq!(res[0].results[0].to_f64_vec(), x0);
    assert_eq!(res[0].results[1].to_f64_vec(), x0);
    assert_eq!(res[0].results[2].to_f64_vec(), sum);
    assert!(res[0].results[3].to_f64_vec().iter().all(|v| v.is_nan()));
}
