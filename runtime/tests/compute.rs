//! Every `compute` op on small tensors, against hand-computed values (including the
//! round-to-nearest-even of bf16/f16 results), through `sim::compute::execute`.

mod common;

use commlir_ir::{Attr, OpId, OpState};
use commlir_runtime::sim::compute::execute;
use commlir_runtime::{ElemType, Tensor, TensorType};
use common::Prog;

/// A detached op carrying the attributes `execute` reads.
fn op(p: &mut Prog, name: &str, attrs: &[(&str, Attr)]) -> OpId {
    let n = p.ctx.ident(name);
    let mut st = OpState::new(n, p.ctx.unknown_loc());
    st.attrs = attrs.iter().map(|(k, v)| (p.ctx.ident(k), *v)).collect();
    p.ctx.create_op(st)
}

fn tt(elem: ElemType, shape: &[usize]) -> TensorType {
    TensorType {
        elem,
        shape: shape.to_vec(),
    }
}

fn t(elem: ElemType, shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(tt(elem, shape), v)
}

fn run(
    p: &mut Prog,
    name: &str,
    attrs: &[(&str, Attr)],
    ins: &[&Tensor],
    out: TensorType,
) -> Vec<f64> {
    let o = op(p, name, attrs);
    execute(&p.ctx, o, ins, &out)
        .expect("executes")
        .expect("supported")
        .to_f64_vec()
}

const F32: ElemType = ElemType::F32;
const BF16: ElemType = ElemType::BF16;
const I32: ElemType = ElemType::Int {
    width: 32,
    signedness: commlir_ir::Signedness::Signless,
};

#[test]
fn elementwise_binary() {
    let mut p = Prog::new();
    let a = t(F32, &[4], &[1.0, -2.0, 3.5, f64::NAN]);
    let b = t(F32, &[4], &[0.5, 4.0, -1.0, 1.0]);
    let ty = tt(F32, &[4]);
    assert_eq!(
        run(&mut p, "compute.add", &[], &[&a, &b], ty.clone())[..3],
        [1.5, 2.0, 2.5]
    );
    assert_eq!(
        run(&mut p, "compute.sub", &[], &[&a, &b], ty.clone())[..3],
        [0.5, -6.0, 4.5]
    );
    assert_eq!(
        run(&mut p, "compute.mul", &[], &[&a, &b], ty.clone())[..3],
        [0.5, -8.0, -3.5]
    );
    assert_eq!(
        run(&mut p, "compute.div", &[], &[&a, &b], ty.clone())[..3],
        [2.0, -0.5, -3.5]
    );
    let mx = run(&mut p, "compute.maximum", &[], &[&a, &b], ty.clone());
    assert_eq!(mx[..3], [1.0, 4.0, 3.5]);
    assert!(mx[3].is_nan(), "maximum propagates NaN");
    assert_eq!(
        run(&mut p, "compute.minimum", &[], &[&a, &b], ty)[..3],
        [0.5, -2.0, -1.0]
    );
}

#[test]
fn bf16_results_round_to_nearest_even() {
    let mut p = Prog::new();
    let e = 2f64.powi(-8);
    // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1); 1 + 3·2^-8 a tie between
    // 1 + 2^-7 and 1 + 2^-6 (even: 1 + 2^-6).
    let a = t(BF16, &[2], &[1.0, 1.0]);
    let b = t(F32, &[2], &[e, 3.0 * e]).cast(BF16);
    assert_eq!(
        b.to_f64_vec(),
        vec![e, 3.0 * e],
        "small values are exact in bf16"
    );
    assert_eq!(
        run(&mut p, "compute.add", &[], &[&a, &b], tt(BF16, &[2])),
        vec![1.0, 1.0 + 4.0 * e]
    );
    // Casting f32 → bf16 rounds the same way.
    let c = t(
        F32,
        &[3],
        &[1.0 + e, 1.0 + 3.0 * e, 1.0 + e + 2f64.powi(-20)],
    );
    assert_eq!(
        run(&mut p, "compute.cast", &[], &[&c], tt(BF16, &[3])),
        vec![1.0, 1.0 + 4.0 * e, 1.0 + 2.0 * e]
    );
    // f16 as well: 1/3 → 0x3555.
    let third = t(F32, &[1], &[1.0 / 3.0]);
    assert_eq!(
        run(
            &mut p,
            "compute.cast",
            &[],
            &[&third],
            tt(ElemType::F16, &[1])
        ),
        vec![0.333251953125]
    );
}

#[test]
fn elementwise_unary() {
    let mut p = Prog::new();
    let xs = [-1.5f32, 0.0, 0.5, 2.0];
    let a = t(F32, &[4], &xs.map(f64::from));
    let ty = tt(F32, &[4]);
    let check = |p: &mut Prog, name: &str, f: fn(f32) -> f32| {
        let got = run(p, name, &[], &[&a], ty.clone());
        let want: Vec<f64> = xs.iter().map(|x| f64::from(f(*x))).collect();
        assert_eq!(got, want, "{name}");
    };
    check(&mut p, "compute.neg", |x| -x);
    check(&mut p, "compute.exp", f32::exp);
    check(&mut p, "compute.relu", |x| x.max(0.0));
    check(&mut p, "compute.gelu", |x| {
        0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh())
    });
    check(&mut p, "compute.silu", |x| x / (1.0 + (-x).exp()));
    check(&mut p, "compute.tanh", f32::tanh);
    check(&mut p, "compute.clone", |x| x);
    let pos = t(F32, &[2], &[4.0, 0.25]);
    assert_eq!(
        run(&mut p, "compute.sqrt", &[], &[&pos], tt(F32, &[2])),
        vec![2.0, 0.5]
    );
    assert_eq!(
        run(&mut p, "compute.rsqrt", &[], &[&pos], tt(F32, &[2])),
        vec![0.5, 2.0]
    );
    let f = p.f64(-0.5);
    assert_eq!(
        run(&mut p, "compute.scale", &[("factor", f)], &[&a], ty),
        vec![0.75, -0.0, -0.25, -1.0]
    );
}

#[test]
fn reductions_and_softmax() {
    let mut p = Prog::new();
    let a = t(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let (d0, d1) = (p.i64(0), p.i64(1));
    assert_eq!(
        run(
            &mut p,
            "compute.reduce_sum",
            &[("dim", d0)],
            &[&a],
            tt(F32, &[3])
        ),
        vec![5.0, 7.0, 9.0]
    );
    assert_eq!(
        run(
            &mut p,
            "compute.reduce_sum",
            &[("dim", d1)],
            &[&a],
            tt(F32, &[2])
        ),
        vec![6.0, 15.0]
    );
    let s = run(
        &mut p,
        "compute.softmax",
        &[("dim", d1)],
        &[&a],
        tt(F32, &[2, 3]),
    );
    let row = |x: [f32; 3]| -> Vec<f64> {
        let m = 3.0f32.max(x[2]);
        let e: Vec<f32> = x.iter().map(|v| (v - m).exp()).collect();
        let sum = e[0] + e[1] + e[2];
        e.iter().map(|v| f64::from(v / sum)).collect()
    };
    assert_eq!(s[..3], row([1.0, 2.0, 3.0])[..]);
    assert_eq!(
        s[..3],
        s[3..],
        "softmax is shift invariant after max subtraction"
    );
}

#[test]
fn matmul_2d_and_batched() {
    let mut p = Prog::new();
    let a = t(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = t(F32, &[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    assert_eq!(
        run(&mut p, "compute.matmul", &[], &[&a, &b], tt(F32, &[2, 2])),
        vec![58.0, 64.0, 139.0, 154.0]
    );
    let ab = t(F32, &[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let bb = t(F32, &[2, 2, 1], &[5.0, 6.0, 7.0, 8.0]);
    assert_eq!(
        run(
            &mut p,
            "compute.matmul",
            &[],
            &[&ab, &bb],
            tt(F32, &[2, 1, 1])
        ),
        vec![17.0, 53.0]
    );
    // bf16: products accumulate in f32, one rounding at the end: 1·1 + 2^-8·1 + 2^-8·1 = 1 + 2^-7.
    let e = 2f64.powi(-8);
    let x = t(BF16, &[1, 3], &[1.0, e, e]);
    let y = t(BF16, &[3, 1], &[1.0, 1.0, 1.0]);
    assert_eq!(
        run(&mut p, "compute.matmul", &[], &[&x, &y], tt(BF16, &[1, 1])),
        vec![1.0 + 2.0 * e]
    );
    let xi = t(I32, &[1, 2], &[3.0, -2.0]);
    let yi = t(I32, &[2, 1], &[4.0, 5.0]);
    assert_eq!(
        run(&mut p, "compute.matmul", &[], &[&xi, &yi], tt(I32, &[1, 1])),
        vec![2.0]
    );
}

#[test]
fn data_movement() {
    let mut p = Prog::new();
    let a = t(F32, &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(
        run(&mut p, "compute.transpose", &[], &[&a], tt(F32, &[3, 2])),
        vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
    assert_eq!(
        run(&mut p, "compute.reshape", &[], &[&a], tt(F32, &[3, 2])),
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
    let (d, s, n) = (p.i64(1), p.i64(1), p.i64(2));
    assert_eq!(
        run(
            &mut p,
            "compute.slice",
            &[("dim", d), ("start", s), ("size", n)],
            &[&a],
            tt(F32, &[2, 2])
        ),
        vec![1.0, 2.0, 4.0, 5.0]
    );
    let b = t(F32, &[2, 1], &[9.0, 8.0]);
    assert_eq!(
        run(
            &mut p,
            "compute.concat",
            &[("dim", d)],
            &[&a, &b],
            tt(F32, &[2, 4])
        ),
        vec![0.0, 1.0, 2.0, 9.0, 3.0, 4.0, 5.0, 8.0]
    );
    let v = p.f64(0.1);
    assert_eq!(
        run(&mut p, "compute.fill", &[("value", v)], &[], tt(BF16, &[2])),
        vec![0.100_097_656_25; 2]
    );
    let ints = t(I32, &[3], &[-3.0, 0.0, 7.0]);
    assert_eq!(
        run(&mut p, "compute.cast", &[], &[&ints], tt(F32, &[3])),
        vec![-3.0, 0.0, 7.0]
    );
}

#[test]
fn integer_arithmetic_and_errors() {
    let mut p = Prog::new();
    let a = t(I32, &[3], &[7.0, -7.0, 2147483647.0]);
    let b = t(I32, &[3], &[2.0, 2.0, 1.0]);
    let ty = tt(I32, &[3]);
    assert_eq!(
        run(&mut p, "compute.add", &[], &[&a, &b], ty.clone()),
        vec![9.0, -5.0, -2147483648.0]
    );
    assert_eq!(
        run(&mut p, "compute.div", &[], &[&a, &b], ty.clone()),
        vec![3.0, -3.0, 2147483647.0]
    );
    assert_eq!(
        run(&mut p, "compute.relu", &[], &[&a], ty.clone()),
        vec![7.0, 0.0, 2147483647.0]
    );
    let zero = t(I32, &[3], &[1.0, 0.0, 1.0]);
    let o = op(&mut p, "compute.div", &[]);
    assert_eq!(
        execute(&p.ctx, o, &[&a, &zero], &ty).unwrap_err(),
        "divides by zero"
    );
    let o = op(&mut p, "compute.exp", &[]);
    assert!(execute(&p.ctx, o, &[&a], &ty)
        .unwrap_err()
        .contains("integer element type i32"));
    let o = op(&mut p, "compute.frobnicate", &[]);
    assert!(execute(&p.ctx, o, &[&a], &ty).unwrap().is_none());
}

#[test]
fn ui64_is_read_as_unsigned() {
    // ui64 elements hold bit patterns in the i64 storage: 2^63 + 5 is stored negative and
    // must still divide, compare and pass relu as the large unsigned number it is.
    use commlir_runtime::tensor::Data;
    let u64t = ElemType::Int {
        width: 64,
        signedness: commlir_ir::Signedness::Unsigned,
    };
    let ints = |v: Vec<i64>| Tensor {
        ty: tt(u64t, &[v.len()]),
        data: Data::Int(v),
    };
    let raw = |t: Tensor| match t.data {
        Data::Int(v) => v.into_iter().map(|x| x as u64).collect::<Vec<u64>>(),
        _ => unreachable!(),
    };
    let big = (1u64 << 63) + 5;
    let a = ints(vec![big as i64, 7, u64::MAX as i64]);
    let b = ints(vec![2, big as i64, 3]);
    let ty = tt(u64t, &[3]);
    let mut p = Prog::new();
    let mut go = |name: &str, ins: &[&Tensor]| {
        let o = op(&mut p, name, &[]);
        raw(execute(&p.ctx, o, ins, &ty).unwrap().unwrap())
    };
    assert_eq!(go("compute.div", &[&a, &b]), vec![big / 2, 0, u64::MAX / 3]);
    assert_eq!(go("compute.maximum", &[&a, &b]), vec![big, big, u64::MAX]);
    assert_eq!(go("compute.minimum", &[&a, &b]), vec![2, 7, 3]);
    assert_eq!(go("compute.relu", &[&a]), vec![big, 7, u64::MAX]);
    // Floats convert to ui64 over its whole range (saturating at 2^64 - 1, not 2^63 - 1).
    let f = t(ElemType::F64, &[3], &[1.5e19, 1e30, -3.0]);
    assert_eq!(
        raw(f.cast(u64t)),
        vec![15_000_000_000_000_000_000, u64::MAX, 0]
    );
}

const F16: ElemType = ElemType::F16;
const F64: ElemType = ElemType::F64;
const I1: ElemType = ElemType::Int {
    width: 1,
    signedness: commlir_ir::Signedness::Signless,
};

fn perm(p: &mut Prog, v: &[i64]) -> Attr {
    let items = v.iter().map(|x| p.i64(*x)).collect();
    p.ctx.attr(commlir_ir::AttrKind::Array(items))
}

#[test]
fn broadcast_and_permute() {
    let mut p = Prog::new();
    // 2x1x3 → 2x2x3 (the middle dim repeated) and 3 → 2x3 (a new leading dim).
    let a = t(I32, &[2, 1, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        run(&mut p, "compute.broadcast", &[], &[&a], tt(I32, &[2, 2, 3])),
        vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]
    );
    let v = t(BF16, &[3], &[0.1, 0.2, 0.3]);
    assert_eq!(
        run(&mut p, "compute.broadcast", &[], &[&v], tt(BF16, &[2, 3])),
        [0.100_097_656_25, 0.200_195_312_5, 0.300_781_25].repeat(2)
    );
    // x[i, j, k] = 100i + 10j + k on 2x3x2; perm [2, 0, 1]: out[a, b, c] = x[b, c, a].
    let x: Vec<f64> = (0..12)
        .map(|n| f64::from(100 * (n / 6) + 10 * ((n / 2) % 3) + n % 2))
        .collect();
    let x = t(F32, &[2, 3, 2], &x);
    let pm = perm(&mut p, &[2, 0, 1]);
    assert_eq!(
        run(
            &mut p,
            "compute.permute",
            &[("perm", pm)],
            &[&x],
            tt(F32, &[2, 2, 3])
        ),
        vec![0.0, 10.0, 20.0, 100.0, 110.0, 120.0, 1.0, 11.0, 21.0, 101.0, 111.0, 121.0]
    );
    // Errors the verifier would have caught, reported rather than wrong.
    let o = op(&mut p, "compute.broadcast", &[]);
    assert!(execute(&p.ctx, o, &[&a], &tt(I32, &[2, 2, 4]))
        .unwrap_err()
        .contains("cannot broadcast"));
    let bad = perm(&mut p, &[0, 0, 1]);
    let o = op(&mut p, "compute.permute", &[("perm", bad)]);
    assert!(execute(&p.ctx, o, &[&x], &tt(F32, &[2, 2, 3]))
        .unwrap_err()
        .contains("is not a permutation"));
}

#[test]
fn reduce_max_nan_and_integers() {
    let mut p = Prog::new();
    let (d0, d1) = (p.i64(0), p.i64(1));
    let a = t(
        F32,
        &[2, 3],
        &[-1.0, f64::NEG_INFINITY, -3.0, 2.0, f64::NAN, 7.0],
    );
    assert_eq!(
        run(
            &mut p,
            "compute.reduce_max",
            &[("dim", d1)],
            &[&a],
            tt(F32, &[2])
        )[0],
        -1.0
    );
    assert!(run(
        &mut p,
        "compute.reduce_max",
        &[("dim", d1)],
        &[&a],
        tt(F32, &[2])
    )[1]
    .is_nan());
    let r = run(
        &mut p,
        "compute.reduce_max",
        &[("dim", d0)],
        &[&a],
        tt(F32, &[3]),
    );
    assert_eq!((r[0], r[2]), (2.0, 7.0));
    assert!(r[1].is_nan());
    let i = t(I32, &[2, 2], &[-5.0, -9.0, 3.0, -1.0]);
    assert_eq!(
        run(
            &mut p,
            "compute.reduce_max",
            &[("dim", d0)],
            &[&i],
            tt(I32, &[2])
        ),
        vec![3.0, -1.0]
    );
    let e = t(F32, &[2, 0], &[]);
    let o = op(&mut p, "compute.reduce_max", &[("dim", d1)]);
    assert!(execute(&p.ctx, o, &[&e], &tt(F32, &[2]))
        .unwrap_err()
        .contains("size 0"));
}

#[test]
fn transcendental_unary_ops() {
    let mut p = Prog::new();
    // f16: libm's f32 value rounded to 11 significant bits (sin 1 = 0.8414709… → 1723·2^-11).
    let x = t(F16, &[3], &[0.0, 1.0, 2.0]);
    assert_eq!(
        run(&mut p, "compute.sin", &[], &[&x], tt(F16, &[3])),
        vec![0.0, 0.841_308_593_75, 0.909_179_687_5]
    );
    assert_eq!(
        run(&mut p, "compute.cos", &[], &[&x], tt(F16, &[3])),
        vec![1.0, 0.540_527_343_75, -0.416_259_765_625]
    );
    assert_eq!(
        run(&mut p, "compute.sigmoid", &[], &[&x], tt(F16, &[3])),
        vec![0.5, 0.730_957_031_25, 0.880_859_375]
    );
    // f64 in f64; log of 0 and of a negative.
    let y = t(F64, &[4], &[1.0, std::f64::consts::E, 0.0, -1.0]);
    let l = run(&mut p, "compute.log", &[], &[&y], tt(F64, &[4]));
    assert_eq!(&l[..3], &[0.0, 1.0, f64::NEG_INFINITY]);
    assert!(l[3].is_nan());
    let s = run(&mut p, "compute.sigmoid", &[], &[&y], tt(F64, &[4]));
    assert_eq!(s[2], 0.5);
    assert_eq!(s[0], 1.0 / (1.0 + (-1.0f64).exp()));
    let ints = t(I32, &[1], &[1.0]);
    let o = op(&mut p, "compute.sin", &[]);
    assert!(execute(&p.ctx, o, &[&ints], &tt(I32, &[1]))
        .unwrap_err()
        .contains("integer element type i32"));
}

#[test]
fn compare_select_iota() {
    let mut p = Prog::new();
    let a = t(F64, &[3], &[1.0, f64::NAN, 3.0]);
    let b = t(F64, &[3], &[1.0, 1.0, 2.0]);
    let cmp = |p: &mut Prog, pred: &str, a: &Tensor, b: &Tensor| {
        let pa = p.ctx.str_attr(pred);
        run(
            p,
            "compute.compare",
            &[("predicate", pa)],
            &[a, b],
            tt(I1, &[3]),
        )
    };
    assert_eq!(cmp(&mut p, "eq", &a, &b), vec![1.0, 0.0, 0.0]);
    assert_eq!(cmp(&mut p, "ne", &a, &b), vec![0.0, 1.0, 1.0]);
    assert_eq!(cmp(&mut p, "ge", &a, &b), vec![1.0, 0.0, 1.0]);
    assert_eq!(cmp(&mut p, "lt", &a, &b), vec![0.0, 0.0, 0.0]);
    let u8t = ElemType::Int {
        width: 8,
        signedness: commlir_ir::Signedness::Unsigned,
    };
    let u = t(u8t, &[3], &[200.0, 1.0, 0.0]);
    let one = t(u8t, &[3], &[1.0, 1.0, 1.0]);
    assert_eq!(cmp(&mut p, "gt", &u, &one), vec![1.0, 0.0, 0.0]);
    assert_eq!(cmp(&mut p, "le", &u, &one), vec![0.0, 1.0, 1.0]);
    let c = t(I1, &[3], &[1.0, 0.0, 1.0]);
    let x = t(BF16, &[3], &[1.0, 2.0, 3.0]);
    let y = t(BF16, &[3], &[-1.0, -2.0, -3.0]);
    assert_eq!(
        run(&mut p, "compute.select", &[], &[&c, &x, &y], tt(BF16, &[3])),
        vec![1.0, -2.0, 3.0]
    );
    let o = op(&mut p, "compute.select", &[]);
    assert!(execute(&p.ctx, o, &[&x, &x, &y], &tt(BF16, &[3]))
        .unwrap_err()
        .contains("i1 condition"));
    let eq = p.ctx.str_attr("eq");
    let o = op(&mut p, "compute.compare", &[("predicate", eq)]);
    assert!(execute(&p.ctx, o, &[&a, &b], &tt(F64, &[3]))
        .unwrap_err()
        .contains("produces i1"));
    let bad = p.ctx.str_attr("ult");
    let o = op(&mut p, "compute.compare", &[("predicate", bad)]);
    assert!(execute(&p.ctx, o, &[&a, &b], &tt(I1, &[3]))
        .unwrap_err()
        .contains("unknown predicate"));
    // f16 holds integers exactly up to 2048: 2049 rounds to even (2048), 2051 to 2052.
    let d1 = p.i64(1);
    let io = run(
        &mut p,
        "compute.iota",
        &[("dim", d1)],
        &[],
        tt(F16, &[1, 2052]),
    );
    assert_eq!(&io[2047..], &[2047.0, 2048.0, 2048.0, 2050.0, 2052.0]);
    let d0 = p.i64(0);
    assert_eq!(
        run(
            &mut p,
            "compute.iota",
            &[("dim", d0)],
            &[],
            tt(I32, &[2, 2])
        ),
        vec![0.0, 0.0, 1.0, 1.0]
    );
}
