//! Property tests: randomly generated types, attributes, locations and whole ops print and
//! parse back to the same interned objects, and printing is a fixed point in both forms.

use commlir_ir::parser::{parse_attr, parse_source, parse_type, ParseOptions};
use commlir_ir::printer::{attr_to_string, print_op, type_to_string, PrintOptions};
use commlir_ir::{
    AttrKind, Builder, Context, DenseElem, FloatKind, FloatValue, IntValue, LocKind, OpState,
    Signedness, Type, TypeKind,
};
use proptest::prelude::*;

/// A recipe for a type, built inside a context later (interned ids are per context).
#[derive(Clone, Debug)]
enum TyR {
    Int(u32, u8),
    Float(u8),
    Index,
    Tensor(Vec<i64>, Box<TyR>, Option<Box<AttrR>>),
    Unranked(Box<TyR>),
    Func(Vec<TyR>, Vec<TyR>),
    Tuple(Vec<TyR>),
    Dialect(String),
}

#[derive(Clone, Debug)]
enum AttrR {
    Unit,
    Bool(bool),
    Int(i64, u32),
    Float(f64, u8),
    Str(Vec<u8>),
    Ty(TyR),
    Array(Vec<AttrR>),
    Dict(Vec<(String, AttrR)>),
    Sym(String, Vec<String>),
    DenseI64(Vec<i64>),
    Dialect(String),
}

fn ty_strategy() -> impl Strategy<Value = TyR> {
    let leaf = prop_oneof![
        (prop::sample::select(vec![1u32, 8, 16, 32, 64]), 0u8..3).prop_map(|(w, s)| TyR::Int(w, s)),
        (0u8..4).prop_map(TyR::Float),
        Just(TyR::Index),
        "[a-z][a-z0-9_]{0,6}".prop_map(|s| TyR::Dialect(format!("test.{s}"))),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                prop::collection::vec(prop_oneof![1i64..9, Just(commlir_ir::DYNAMIC)], 0..4),
                inner.clone(),
                prop::option::of(Just(Box::new(AttrR::Dialect(
                    "comm.buffer<nccl, @tp>".into()
                ))))
            )
                .prop_map(|(s, e, enc)| TyR::Tensor(s, Box::new(scalar(e)), enc)),
            inner
                .clone()
                .prop_map(|e| TyR::Unranked(Box::new(scalar(e)))),
            (
                prop::collection::vec(inner.clone(), 0..3),
                prop::collection::vec(inner.clone(), 0..3)
            )
                .prop_map(|(a, b)| TyR::Func(a, b)),
            prop::collection::vec(inner, 0..3).prop_map(TyR::Tuple),
        ]
    })
}

/// Tensor elements must be scalars.
fn scalar(t: TyR) -> TyR {
    match t {
        TyR::Int(..) | TyR::Float(_) | TyR::Index => t,
        _ => TyR::Float(2),
    }
}

fn attr_strategy() -> impl Strategy<Value = AttrR> {
    let leaf = prop_oneof![
        Just(AttrR::Unit),
        any::<bool>().prop_map(AttrR::Bool),
        (any::<i32>(), prop::sample::select(vec![8u32, 16, 32, 64]))
            .prop_map(|(v, w)| AttrR::Int(v as i64, w)),
        (-1e6f64..1e6, 0u8..4).prop_map(|(v, k)| AttrR::Float(v, k)),
        prop::collection::vec(any::<u8>(), 0..12).prop_map(AttrR::Str),
        ty_strategy().prop_map(AttrR::Ty),
        (
            "[a-z][a-z0-9_]{0,5}",
            prop::collection::vec("[a-z][a-z0-9_]{0,5}", 0..2)
        )
            .prop_map(|(r, n)| AttrR::Sym(r, n)),
        prop::collection::vec(any::<i64>(), 0..5).prop_map(AttrR::DenseI64),
        "[a-z]{1,5}".prop_map(|s| AttrR::Dialect(format!("test.{s}<1, \"x\">"))),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(AttrR::Array),
            prop::collection::vec(("[a-z_][a-z0-9_]{0,6}", inner), 0..4).prop_map(|mut v| {
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v.dedup_by(|a, b| a.0 == b.0);
                AttrR::Dict(v)
            }),
        ]
    })
}

fn build_ty(ctx: &mut Context, t: &TyR) -> Type {
    let k = match t {
        TyR::Int(w, s) => TypeKind::Integer {
            width: *w,
            signedness: [
                Signedness::Signless,
                Signedness::Signed,
                Signedness::Unsigned,
            ][*s as usize],
        },
        TyR::Float(k) => TypeKind::Float(
            [
                FloatKind::F16,
                FloatKind::BF16,
                FloatKind::F32,
                FloatKind::F64,
            ][*k as usize],
        ),
        TyR::Index => TypeKind::Index,
        TyR::Tensor(shape, e, enc) => {
            let elem = build_ty(ctx, e);
            let encoding = enc.as_ref().map(|a| build_attr(ctx, a));
            TypeKind::Tensor {
                shape: shape.clone(),
                elem,
                encoding,
            }
        }
        TyR::Unranked(e) => TypeKind::UnrankedTensor {
            elem: build_ty(ctx, e),
        },
        TyR::Func(a, b) => {
            let inputs = a.iter().map(|x| build_ty(ctx, x)).collect();
            let results = b.iter().map(|x| build_ty(ctx, x)).collect();
            TypeKind::Function { inputs, results }
        }
        TyR::Tuple(v) => TypeKind::Tuple(v.iter().map(|x| build_ty(ctx, x)).collect()),
        TyR::Dialect(s) => {
            let d = s.split(['.', '<']).next().unwrap_or("");
            TypeKind::Dialect {
                dialect: ctx.ident(d),
                text: s.clone(),
            }
        }
    };
    ctx.ty(k)
}

fn build_attr(ctx: &mut Context, a: &AttrR) -> commlir_ir::Attr {
    let k = match a {
        AttrR::Unit => AttrKind::Unit,
        AttrR::Bool(b) => AttrKind::Bool(*b),
        AttrR::Int(v, w) => {
            let w = *w;
            let v = match w {
                8 => *v as i8 as i64,
                16 => *v as i16 as i64,
                32 => *v as i32 as i64,
                _ => *v,
            };
            let ty = ctx.int_type(w);
            AttrKind::Integer {
                value: IntValue::Small(v as i128),
                ty,
            }
        }
        AttrR::Float(v, k) => {
            let fk = [
                FloatKind::F64,
                FloatKind::F32,
                FloatKind::F16,
                FloatKind::BF16,
            ][*k as usize];
            let ty = ctx.float_type(fk);
            AttrKind::Float {
                value: FloatValue::Bits(v.to_bits()).rounded_to(fk),
                ty,
            }
        }
        AttrR::Str(s) => AttrKind::String(s.clone()),
        AttrR::Ty(t) => AttrKind::Type(build_ty(ctx, t)),
        AttrR::Array(v) => AttrKind::Array(v.iter().map(|x| build_attr(ctx, x)).collect()),
        AttrR::Dict(v) => {
            let entries = v
                .iter()
                .map(|(k, x)| (ctx.ident(k), build_attr(ctx, x)))
                .collect();
            return ctx.dict_attr(entries);
        }
        AttrR::Sym(r, n) => AttrKind::SymbolRef {
            root: ctx.ident(r),
            nested: n.iter().map(|x| ctx.ident(x)).collect(),
        },
        AttrR::DenseI64(v) => {
            let elem = ctx.int_type(64);
            AttrKind::DenseArray {
                elem,
                values: v
                    .iter()
                    .map(|x| DenseElem::Int(IntValue::Small(*x as i128)))
                    .collect(),
            }
        }
        AttrR::Dialect(s) => {
            let d = s.split(['.', '<']).next().unwrap_or("");
            AttrKind::Dialect {
                dialect: ctx.ident(d),
                text: s.clone(),
            }
        }
    };
    ctx.attr(k)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn types_round_trip(t in ty_strategy()) {
        let mut ctx = Context::new();
        let ty = build_ty(&mut ctx, &t);
        let text = type_to_string(&ctx, ty);
        let back = parse_type(&mut ctx, &text).map_err(|d| TestCaseError::fail(format!("{text}: {}", d.message)))?;
        prop_assert_eq!(back, ty, "{}", text);
    }

    #[test]
    fn attributes_round_trip(a in attr_strategy()) {
        let mut ctx = Context::new();
        let at = build_attr(&mut ctx, &a);
        let text = attr_to_string(&ctx, at);
        let back = parse_attr(&mut ctx, &text).map_err(|d| TestCaseError::fail(format!("{text}: {}", d.message)))?;
        prop_assert_eq!(attr_to_string(&ctx, back), text.clone());
        prop_assert_eq!(back, at, "{}", text);
    }

    /// Whole modules of unregistered ops with random operands, attributes, properties,
    /// regions and locations: print (custom and generic, with debug info) → parse → print is
    /// the identity.
    #[test]
    fn modules_round_trip(ops in prop::collection::vec((0usize..4, prop::option::of(attr_strategy()), prop::option::of(attr_strategy()), ty_strategy(), any::<bool>(), 1u32..500), 1..12)) {
        let mut ctx = Context::new();
        ctx.allow_unregistered = true;
        let module = {
            let name = ctx.ident("builtin.module");
            let loc = ctx.file_loc("m.mlir", 1, 1);
            let mut st = OpState::new(name, loc);
            st.num_regions = 1;
            ctx.create_op(st)
        };
        let r = ctx.op_regions(module)[0];
        let body = ctx.new_block(&[]);
        ctx.append_block(r, body);
        let mut vals = Vec::new();
        for (i, (nops, attr, prop, ty, region, line)) in ops.iter().enumerate() {
            let ty = build_ty(&mut ctx, ty);
            let mut st = OpState::new(ctx.ident(&format!("test.op{}", i % 3)), ctx.file_loc("m.mlir", *line, 3));
            st.operands = vals.iter().rev().take(*nops).copied().collect();
            st.result_types = vec![ty];
            if let Some(a) = attr {
                let a = build_attr(&mut ctx, a);
                st.attrs.push((ctx.ident("a"), a));
            }
            if let Some(p) = prop {
                let p = build_attr(&mut ctx, p);
                let k = ctx.ident("p");
                st.properties = Some(ctx.dict_attr(vec![(k, p)]));
            }
            st.num_regions = usize::from(*region);
            let op = Builder::at_end(&mut ctx, body).create_state(st);
            if *region {
                let rr = ctx.op_regions(op)[0];
                let f32t = ctx.float_type(FloatKind::F32);
                let b = ctx.new_block(&[f32t]);
                ctx.append_block(rr, b);
                let arg = ctx.block_args(b)[0];
                let l = ctx.loc(LocKind::Unknown);
                ctx.set_value_loc(arg, l);
                let n = ctx.ident("test.yield");
                let mut y = OpState::new(n, l);
                y.operands = vec![arg];
                let y = ctx.create_op(y);
                ctx.append_op(b, y);
            }
            vals.push(ctx.result(op, 0));
        }
        for generic in [false, true] {
            let opts = PrintOptions { generic, debug_info: true };
            let text = print_op(&ctx, module, &opts);
            let mut ctx2 = Context::new();
            ctx2.allow_unregistered = true;
            let m2 = parse_source(&mut ctx2, "m.mlir", text.as_bytes(), &ParseOptions::default())
                .map_err(|d| TestCaseError::fail(format!("{}\n{text}", d.message)))?;
            let again = print_op(&ctx2, m2, &opts);
            prop_assert_eq!(&again, &text);
        }
    }
}
