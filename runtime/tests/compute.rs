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

// ----- attention: grouped heads, log-sum-exp, backward -------------------------------------

use commlir_runtime::sim::compute::execute_all;

/// Deterministic values in [-1, 1) (a 64-bit LCG), different for each `seed`.
fn noise(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// `compute.attention` / `compute.attention_backward` through `execute_all`.
fn attn(
    p: &mut Prog,
    name: &str,
    scale: f64,
    causal: bool,
    with_lse: bool,
    ins: &[&Tensor],
    outs: &[TensorType],
) -> Vec<Tensor> {
    let mut attrs = vec![("scale", p.f64(scale))];
    if causal {
        attrs.push(("causal", p.ctx.unit_attr()));
    }
    if with_lse {
        attrs.push(("with_lse", p.ctx.unit_attr()));
    }
    let o = op(p, name, &attrs);
    execute_all(&p.ctx, o, ins, outs)
        .expect("executes")
        .expect("supported")
}

/// One attention problem: `q: B×Hq×Lq×D`, `k: B×Hkv×Lk×D`, `v: B×Hkv×Lk×Dv`, and a `dout`.
struct Case {
    b: usize,
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
    scale: f64,
    causal: bool,
}

impl Case {
    fn q_shape(&self) -> Vec<usize> {
        vec![self.b, self.hq, self.lq, self.d]
    }
    fn k_shape(&self) -> Vec<usize> {
        vec![self.b, self.hkv, self.lk, self.d]
    }
    fn v_shape(&self) -> Vec<usize> {
        vec![self.b, self.hkv, self.lk, self.dv]
    }
    fn o_shape(&self) -> Vec<usize> {
        vec![self.b, self.hq, self.lq, self.dv]
    }
    fn lse_shape(&self) -> Vec<usize> {
        vec![self.b, self.hq, self.lq]
    }
    /// q, k, v, dout as f64 values (seeded by `seed`).
    fn values(&self, seed: u64) -> [Vec<f64>; 4] {
        let n = |s: &[usize]| s.iter().product::<usize>();
        [
            noise(seed, n(&self.q_shape())),
            noise(seed + 1, n(&self.k_shape())),
            noise(seed + 2, n(&self.v_shape())),
            noise(seed + 3, n(&self.o_shape())),
        ]
    }
    fn tensors(&self, e: ElemType, vals: &[Vec<f64>; 4]) -> [Tensor; 4] {
        [
            t(e, &self.q_shape(), &vals[0]),
            t(e, &self.k_shape(), &vals[1]),
            t(e, &self.v_shape(), &vals[2]),
            t(e, &self.o_shape(), &vals[3]),
        ]
    }
    fn lse_elem(e: ElemType) -> ElemType {
        if e == F64 {
            F64
        } else {
            F32
        }
    }

    /// The forward (output, lse) on the sim.
    fn forward(&self, p: &mut Prog, e: ElemType, x: &[Tensor; 4]) -> (Tensor, Tensor) {
        let outs = [
            tt(e, &self.o_shape()),
            tt(Self::lse_elem(e), &self.lse_shape()),
        ];
        let mut r = attn(
            p,
            "compute.attention",
            self.scale,
            self.causal,
            true,
            &[&x[0], &x[1], &x[2]],
            &outs,
        );
        let lse = r.pop().unwrap();
        (r.pop().unwrap(), lse)
    }

    /// The sim's dq, dk, dv (through its own forward's output and lse).
    fn backward(&self, p: &mut Prog, e: ElemType, x: &[Tensor; 4]) -> Vec<Vec<f64>> {
        let (o, lse) = self.forward(p, e, x);
        let outs = [
            tt(e, &self.q_shape()),
            tt(e, &self.k_shape()),
            tt(e, &self.v_shape()),
        ];
        attn(
            p,
            "compute.attention_backward",
            self.scale,
            self.causal,
            false,
            &[&x[0], &x[1], &x[2], &o, &x[3], &lse],
            &outs,
        )
        .iter()
        .map(|t| t.to_f64_vec())
        .collect()
    }

    /// A plain f64 reference written from the definition (softmax recomputed from scratch,
    /// no log-sum-exp): output, lse, and dq, dk, dv of the loss `Σ dout·out`.
    fn reference(&self, v: &[Vec<f64>; 4]) -> (Vec<f64>, Vec<f64>, [Vec<f64>; 3]) {
        let (q, k, vv, g) = (&v[0], &v[1], &v[2], &v[3]);
        let mut out = vec![0.0; g.len()];
        let mut lse = vec![f64::NEG_INFINITY; self.b * self.hq * self.lq];
        let mut grads = [vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; vv.len()]];
        let group = self.hq / self.hkv;
        for b in 0..self.b {
            for h in 0..self.hq {
                let qb = (b * self.hq + h) * self.lq;
                let kb = (b * self.hkv + h / group) * self.lk;
                for i in 0..self.lq {
                    let seen = if self.causal {
                        (i + 1).min(self.lk)
                    } else {
                        self.lk
                    };
                    let s: Vec<f64> = (0..seen)
                        .map(|j| {
                            (0..self.d)
                                .map(|c| q[(qb + i) * self.d + c] * k[(kb + j) * self.d + c])
                                .sum::<f64>()
                                * self.scale
                        })
                        .collect();
                    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                    lse[qb + i] = m + z.ln();
                    let pr: Vec<f64> = s.iter().map(|x| (x - m).exp() / z).collect();
                    let gi = &g[(qb + i) * self.dv..][..self.dv];
                    for c in 0..self.dv {
                        out[(qb + i) * self.dv + c] =
                            (0..seen).map(|j| pr[j] * vv[(kb + j) * self.dv + c]).sum();
                    }
                    // dP[j] = dout·v[j]; dS = P∘(dP − Σ_j P dP).
                    let dp: Vec<f64> = (0..seen)
                        .map(|j| {
                            (0..self.dv)
                                .map(|c| gi[c] * vv[(kb + j) * self.dv + c])
                                .sum()
                        })
                        .collect();
                    let delta: f64 = (0..seen).map(|j| pr[j] * dp[j]).sum();
                    for j in 0..seen {
                        let ds = pr[j] * (dp[j] - delta) * self.scale;
                        for c in 0..self.d {
                            grads[0][(qb + i) * self.d + c] += ds * k[(kb + j) * self.d + c];
                            grads[1][(kb + j) * self.d + c] += ds * q[(qb + i) * self.d + c];
                        }
                        for c in 0..self.dv {
                            grads[2][(kb + j) * self.dv + c] += pr[j] * gi[c];
                        }
                    }
                }
            }
        }
        (out, lse, grads)
    }
}

/// The largest error of `got` against `want`, relative to the largest magnitude of `want`.
fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
        / scale
}

/// `repeat_interleave` of dim 1 (heads) of a `B×H×L×D` tensor, `n` times each.
fn repeat_heads(x: &Tensor, n: usize) -> Tensor {
    let s = &x.ty.shape;
    let (b, h, rest) = (s[0], s[1], s[2] * s[3]);
    let v = x.to_f64_vec();
    let mut out = Vec::with_capacity(v.len() * n);
    for bi in 0..b {
        for hi in 0..h {
            for _ in 0..n {
                out.extend_from_slice(&v[(bi * h + hi) * rest..][..rest]);
            }
        }
    }
    t(x.ty.elem, &[b, h * n, s[2], s[3]], &out)
}

#[test]
fn attention_grouped_heads_equal_repeated_kv_heads() {
    let mut p = Prog::new();
    for (e, causal) in [(F32, true), (F32, false), (BF16, true), (F64, false)] {
        let c = Case {
            b: 2,
            hq: 6,
            hkv: 2,
            lq: 7,
            lk: 5,
            d: 4,
            dv: 3,
            scale: 0.6,
            causal,
        };
        let x = c.tensors(e, &c.values(11));
        let (o, lse) = c.forward(&mut p, e, &x);
        let full = Case { hkv: 6, ..c };
        let xr = [
            x[0].clone(),
            repeat_heads(&x[1], 3),
            repeat_heads(&x[2], 3),
            x[3].clone(),
        ];
        let (or, lser) = full.forward(&mut p, e, &xr);
        // The same sums in the same order: bit-identical.
        assert_eq!(o.to_f64_vec(), or.to_f64_vec(), "{e} causal={causal}");
        assert_eq!(lse.to_f64_vec(), lser.to_f64_vec(), "{e} causal={causal}");
        // The backward's dk/dv are the repeated problem's, summed over each group of heads.
        let g = c.backward(&mut p, e, &x);
        let gr = full.backward(&mut p, e, &xr);
        assert_eq!(g[0], gr[0], "dq, {e} causal={causal}");
        for (which, (grouped, repeated)) in [(1, (&g[1], &gr[1])), (2, (&g[2], &gr[2]))] {
            let rest = grouped.len() / (c.b * c.hkv);
            let mut summed = vec![0.0; grouped.len()];
            for bi in 0..c.b {
                for h in 0..c.hq {
                    let src = &repeated[(bi * c.hq + h) * rest..][..rest];
                    let dst = &mut summed[(bi * c.hkv + h / 3) * rest..][..rest];
                    dst.iter_mut().zip(src).for_each(|(a, b)| *a += b);
                }
            }
            // The grouped op sums before it rounds; the repeated one rounded per head.
            let tol = if e == BF16 { 2e-2 } else { 1e-5 };
            let err = rel_err(grouped, &summed);
            assert!(err < tol, "grad #{which}, {e} causal={causal}: {err}");
        }
    }
}

#[test]
fn attention_lse_is_the_row_log_sum_exp() {
    let mut p = Prog::new();
    for (lq, lk, causal) in [(5, 7, true), (7, 5, true), (13, 13, false), (1, 1, true)] {
        let c = Case {
            b: 1,
            hq: 4,
            hkv: 2,
            lq,
            lk,
            d: 8,
            dv: 8,
            scale: 0.35,
            causal,
        };
        let vals = c.values(23);
        let (out_ref, lse_ref, _) = c.reference(&vals);
        for e in [F32, F64] {
            let x = c.tensors(e, &vals);
            let (o, lse) = c.forward(&mut p, e, &x);
            assert_eq!(lse.ty, tt(Case::lse_elem(e), &[1, 4, lq]));
            let tol = if e == F64 { 1e-12 } else { 1e-6 };
            let err = rel_err(&lse.to_f64_vec(), &lse_ref);
            assert!(err < tol, "lse {lq}x{lk} causal={causal} {e}: {err}");
            let err = rel_err(&o.to_f64_vec(), &out_ref);
            assert!(err < tol, "out {lq}x{lk} causal={causal} {e}: {err}");
        }
    }
    // A row that sees no key (no keys at all) has lse -inf and a zero output.
    let c = Case {
        b: 1,
        hq: 1,
        hkv: 1,
        lq: 2,
        lk: 0,
        d: 2,
        dv: 2,
        scale: 1.0,
        causal: false,
    };
    let x = c.tensors(F32, &c.values(5));
    let (o, lse) = c.forward(&mut p, F32, &x);
    assert_eq!(o.to_f64_vec(), vec![0.0; 4]);
    assert_eq!(lse.to_f64_vec(), vec![f64::NEG_INFINITY; 2]);
}

#[test]
fn attention_backward_matches_the_f64_reference() {
    let mut p = Prog::new();
    for (lq, lk) in [(5, 7), (7, 5), (13, 13), (5, 13), (13, 7)] {
        for causal in [false, true] {
            for (hq, hkv) in [(2, 2), (6, 2), (3, 1)] {
                let c = Case {
                    b: 2,
                    hq,
                    hkv,
                    lq,
                    lk,
                    d: 5,
                    dv: 3,
                    scale: 0.45,
                    causal,
                };
                let vals = c.values((lq * 100 + lk) as u64 + hq as u64);
                let (_, _, want) = c.reference(&vals);
                for (e, tol) in [(F64, 1e-12), (F32, 2e-5), (BF16, 3e-2)] {
                    let x = c.tensors(e, &vals);
                    let got = c.backward(&mut p, e, &x);
                    for (i, name) in ["dq", "dk", "dv"].iter().enumerate() {
                        let err = rel_err(&got[i], &want[i]);
                        assert!(
                            err < tol,
                            "{name} {lq}x{lk} heads {hq}/{hkv} causal={causal} {e}: {err}"
                        );
                    }
                }
            }
        }
    }
}

/// The backward is the gradient of the forward: central finite differences of the loss
/// `Σ dout·attention(q, k, v)` in f64, for every element of q, k and v.
#[test]
fn attention_backward_is_the_gradient_of_the_forward() {
    let mut p = Prog::new();
    for causal in [false, true] {
        let c = Case {
            b: 1,
            hq: 4,
            hkv: 2,
            lq: 5,
            lk: 7,
            d: 3,
            dv: 2,
            scale: 0.8,
            causal,
        };
        let vals = c.values(99);
        let x = c.tensors(F64, &vals);
        let grads = c.backward(&mut p, F64, &x);
        let loss = |p: &mut Prog, v: &[Vec<f64>; 4]| -> f64 {
            let (o, _) = c.forward(p, F64, &c.tensors(F64, v));
            o.to_f64_vec().iter().zip(&v[3]).map(|(a, b)| a * b).sum()
        };
        let h = 1e-6;
        for (which, grad) in grads.iter().enumerate() {
            for i in 0..grad.len() {
                let mut up = vals.clone();
                up[which][i] += h;
                let mut down = vals.clone();
                down[which][i] -= h;
                let fd = (loss(&mut p, &up) - loss(&mut p, &down)) / (2.0 * h);
                assert!(
                    (fd - grad[i]).abs() < 1e-7,
                    "operand #{which} element {i} causal={causal}: {fd} vs {}",
                    grad[i]
                );
            }
        }
    }
}

#[test]
fn attention_single_result_entry_point_refuses_with_lse() {
    let mut p = Prog::new();
    let c = Case {
        b: 1,
        hq: 1,
        hkv: 1,
        lq: 2,
        lk: 2,
        d: 2,
        dv: 2,
        scale: 1.0,
        causal: false,
    };
    let x = c.tensors(F32, &c.values(1));
    let (s, u) = (p.f64(1.0), p.ctx.unit_attr());
    let o = op(
        &mut p,
        "compute.attention",
        &[("scale", s), ("with_lse", u)],
    );
    let err = execute(&p.ctx, o, &[&x[0], &x[1], &x[2]], &tt(F32, &c.o_shape())).unwrap_err();
    assert!(err.contains("computes 2 results"), "{err}");
}
