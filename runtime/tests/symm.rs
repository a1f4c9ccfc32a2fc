//! The `symm` ops compute exactly what their `coll` counterparts do: one-shot and two-shot
//! all-reduce equal `coll.all_reduce`, `symm.all_gather` equals
//! `coll.all_gather_into_tensor`, `symm.reduce_scatter` equals `coll.reduce_scatter_tensor`,
//! for every reduction and element type on 2 and 4 ranks (integers exact, floats bitwise);
//! two-shot on a comm buffer leaves the result in its input's storage.

mod common;

use commlir_ir::{CommBufferKind, Type};
use commlir_runtime::RankResults;
use common::Prog;

const REDUCES: [&str; 5] = ["sum", "avg", "max", "min", "product"];
const ELEMS: [&str; 6] = ["f32", "bf16", "f16", "f64", "i32", "i8"];

/// The bits of every result of every rank: floats compared bitwise (NaN payloads included),
/// integers exactly.
fn bits(res: &[RankResults]) -> Vec<Vec<Vec<u64>>> {
    res.iter()
        .map(|r| {
            r.results
                .iter()
                .map(|t| t.to_f64_vec().iter().map(|v| v.to_bits()).collect())
                .collect()
        })
        .collect()
}

/// [`bits`] of `p` run on `n` ranks.
fn run_bits(p: &Prog, n: i64) -> Vec<Vec<Vec<u64>>> {
    bits(&p.try_run(n as usize).unwrap())
}

/// `f(x) = wait(coll_name(x))`.
fn coll_prog(
    n: i64,
    coll_name: &str,
    in_ty: (&[i64], &str),
    out_shape: &[i64],
    reduce: Option<&str>,
) -> Prog {
    let mut p = Prog::new();
    p.group("g", n, None, true);
    let t = p.t(in_ty.0, in_ty.1);
    let out = p.t(out_shape, in_ty.1);
    let attrs = attrs(&mut p, reduce);
    let x = p.func("main", &[t])[0];
    let r = p.op1(coll_name, &[x], out, &attrs);
    let y = p.op1("coll.wait_tensor", &[r], out, &[]);
    p.ret(&[y]);
    p
}

/// `f(x) = x`: each rank's generated input.
fn identity_prog(n: i64, in_ty: (&[i64], &str)) -> Prog {
    let mut p = Prog::new();
    p.group("g", n, None, true);
    let t = p.t(in_ty.0, in_ty.1);
    let x = p.func("main", &[t])[0];
    let y = p.op1("compute.clone", &[x], t, &[]);
    p.ret(&[y]);
    p
}

fn attrs(p: &mut Prog, reduce: Option<&str>) -> Vec<(&'static str, commlir_ir::Attr)> {
    let mut a = vec![("group", p.sym("g"))];
    if let Some(r) = reduce {
        a.push(("reduce_op", p.s(r)));
    }
    a
}

/// `f(x) = symm_name(clone(x))`, the input in a symm_mem buffer (`buffered`) or plain (the
/// input level). Two-shot's result is its input's storage: the program returns it through a
/// copy out read after the op, plus the input itself, which must hold the result too.
fn symm_prog(
    n: i64,
    symm_name: &str,
    in_ty: (&[i64], &str),
    out_shape: &[i64],
    reduce: Option<&str>,
    buffered: bool,
) -> Prog {
    let mut p = Prog::new();
    p.group("g", n, None, true);
    let t = p.t(in_ty.0, in_ty.1);
    let out = p.t(out_shape, in_ty.1);
    let bt: Type = if buffered {
        p.buf(t, CommBufferKind::SymmMem, "g")
    } else {
        t
    };
    let attrs = attrs(&mut p, reduce);
    let x = p.func("main", &[t])[0];
    let b = p.op1("compute.clone", &[x], bt, &[]);
    if symm_name == "symm.two_shot_all_reduce" {
        let r = p.op1(symm_name, &[b], bt, &attrs);
        let y = p.op1("compute.clone", &[r], t, &[]);
        let z = p.op1("compute.clone", &[b], t, &[]);
        p.ret(&[y, z]);
    } else {
        let y = p.op1(symm_name, &[b], out, &attrs);
        p.ret(&[y]);
    }
    p
}

/// [`run_bits`] of [`symm_prog`], verified first.
fn symm_bits(
    n: i64,
    symm_name: &str,
    in_ty: (&[i64], &str),
    out_shape: &[i64],
    reduce: Option<&str>,
    buffered: bool,
) -> Vec<Vec<Vec<u64>>> {
    let p = symm_prog(n, symm_name, in_ty, out_shape, reduce, buffered);
    p.verify();
    run_bits(&p, n)
}

#[test]
fn all_reduces_equal_coll_all_reduce() {
    for n in [2i64, 4] {
        for elem in ELEMS {
            for reduce in REDUCES {
                let shape: &[i64] = &[3, 5];
                let want = run_bits(
                    &coll_prog(n, "coll.all_reduce", (shape, elem), shape, Some(reduce)),
                    n,
                );
                let x_bits: Vec<Vec<u64>> = run_bits(&identity_prog(n, (shape, elem)), n)
                    .into_iter()
                    .map(|mut r| r.remove(0))
                    .collect();
                for buffered in [false, true] {
                    assert_eq!(
                        symm_bits(
                            n,
                            "symm.one_shot_all_reduce",
                            (shape, elem),
                            shape,
                            Some(reduce),
                            buffered,
                        ),
                        want,
                        "one-shot {reduce} {elem} on {n}"
                    );
                    let got = symm_bits(
                        n,
                        "symm.two_shot_all_reduce",
                        (shape, elem),
                        shape,
                        Some(reduce),
                        buffered,
                    );
                    for (rank, r) in got.iter().enumerate() {
                        assert_eq!(
                            r[0], want[rank][0],
                            "two-shot {reduce} {elem} on {n}, rank {rank}"
                        );
                        // On a comm buffer in place: the input's storage holds the reduction
                        // after the op. On a plain tensor (value semantics) it is unchanged.
                        let input = if buffered {
                            &want[rank][0]
                        } else {
                            &x_bits[rank]
                        };
                        assert_eq!(
                            &r[1], input,
                            "two-shot input after the op, {reduce} {elem} on {n}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn all_gather_and_reduce_scatter_equal_coll() {
    for n in [2i64, 4] {
        for elem in ELEMS {
            let (small, big): (&[i64], &[i64]) = (&[2, 3], &[2 * n, 3]);
            let want = run_bits(
                &coll_prog(n, "coll.all_gather_into_tensor", (small, elem), big, None),
                n,
            );
            for buffered in [false, true] {
                assert_eq!(
                    symm_bits(n, "symm.all_gather", (small, elem), big, None, buffered),
                    want,
                    "all_gather {elem} on {n}"
                );
            }
            for reduce in REDUCES {
                let want = run_bits(
                    &coll_prog(
                        n,
                        "coll.reduce_scatter_tensor",
                        (big, elem),
                        small,
                        Some(reduce),
                    ),
                    n,
                );
                for buffered in [false, true] {
                    assert_eq!(
                        symm_bits(
                            n,
                            "symm.reduce_scatter",
                            (big, elem),
                            small,
                            Some(reduce),
                            buffered,
                        ),
                        want,
                        "reduce_scatter {reduce} {elem} on {n}"
                    );
                }
            }
        }
    }
}

/// A reader of the two-shot input placed before the op still sees this rank's own data; the
/// op overwrites the storage for every later reader.
#[test]
fn two_shot_is_in_place() {
    let mut p = Prog::new();
    p.group("g", 2, None, true);
    let t = p.t(&[4], "i32");
    let bt = p.buf(t, CommBufferKind::SymmMem, "g");
    let attrs = attrs(&mut p, Some("sum"));
    let x = p.func("main", &[t])[0];
    let b = p.op1("compute.clone", &[x], bt, &[]);
    let before = p.op1("compute.clone", &[b], t, &[]);
    let r = p.op1("symm.two_shot_all_reduce", &[b], bt, &attrs);
    let twice = p.op1("compute.add", &[r, b], t, &[]);
    p.ret(&[before, twice]);
    p.verify();
    let res = p.try_run(2).unwrap();
    let x0 = res[0].results[0].to_f64_vec();
    let x1 = res[1].results[0].to_f64_vec();
    let want: Vec<f64> = x0.iter().zip(&x1).map(|(a, b)| 2.0 * (a + b)).collect();
    for (rank, r) in res.iter().enumerate() {
        assert_eq!(r.results[1].to_f64_vec(), want, "rank {rank}");
    }
}
