//! Robustness and scale: IR, types, attributes and locations nested far deeper than any
//! recursion could handle must print; a large flat program must print in one pass.

mod printer_common;

use commlir_ir::printer::{
    attr_to_string, loc_body, print_op, type_to_string, PrintOptions, MAX_INDENT_LEVELS,
};
use commlir_ir::{AttrKind, FloatKind, LocKind, OpState, TypeKind};
use printer_common::{context, module, op};

const DEPTH: usize = 100_000;

/// Runs `f` on a thread with a small stack, so that any recursion proportional to the
/// nesting depth fails loudly instead of passing thanks to a large main-thread stack.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn ops_nested_100k_deep() {
    on_small_stack(|| {
        let mut ctx = context();
        let loc = ctx.unknown_loc();
        let (m, mut block) = module(&mut ctx, loc);
        let i32t = ctx.int_type(32);
        let name = ctx.ident("x.nest");
        for _ in 0..DEPTH {
            let mut st = OpState::new(name, loc);
            st.num_regions = 1;
            st.result_types = vec![i32t];
            let o = ctx.create_op(st);
            ctx.append_op(block, o);
            let b = ctx.new_block(&[i32t]);
            ctx.append_block(ctx.op_regions(o)[0], b);
            block = b;
        }
        op(&mut ctx, block, "x.leaf", &[], &[], &[], 1);
        for (opts, end) in [
            (
                PrintOptions {
                    generic: false,
                    debug_info: false,
                },
                "\n}\n",
            ),
            (
                PrintOptions {
                    generic: true,
                    debug_info: true,
                },
                "}) : () -> () loc(unknown)\n",
            ),
        ] {
            let text = print_op(&ctx, m, &opts);
            // Module open/close, one open, one block header and one close per level, a leaf.
            assert_eq!(text.lines().count(), 2 + 3 * DEPTH + 1);
            let max_indent = text
                .lines()
                .map(|l| l.len() - l.trim_start().len())
                .max()
                .unwrap();
            assert_eq!(max_indent, 2 * MAX_INDENT_LEVELS);
            assert!(
                text.contains("%99999 = \"x.nest\"() ({"),
                "{}",
                &text[..200]
            );
            assert!(text.ends_with(end));
        }
    });
}

#[test]
fn types_attrs_and_locs_nested_100k_deep() {
    on_small_stack(|| {
        let mut ctx = context();
        let mut t = ctx.int_type(32);
        for i in 0..DEPTH {
            t = if i % 2 == 0 {
                ctx.ty(TypeKind::Tuple(vec![t]))
            } else {
                ctx.function_type(vec![t], vec![])
            };
        }
        let text = type_to_string(&ctx, t);
        assert!(text.starts_with("(tuple<(tuple<"), "{}", &text[..40]);
        assert_eq!(text.matches("tuple<").count(), DEPTH / 2);
        assert_eq!(text.matches(") -> ()").count(), DEPTH / 2);

        let mut a = ctx.int_attr(1, 64);
        for _ in 0..DEPTH {
            a = ctx.attr(AttrKind::Array(vec![a]));
        }
        let text = attr_to_string(&ctx, a);
        assert_eq!(text.len(), 2 * DEPTH + 1);

        let mut l = ctx.file_loc("f", 1, 1);
        for i in 0..DEPTH {
            let caller = ctx.file_loc("g", i as u32, 1);
            l = ctx.loc(LocKind::CallSite { callee: l, caller });
        }
        let text = loc_body(&ctx, l);
        assert_eq!(text.matches("callsite(").count(), DEPTH);
    });
}

#[test]
fn large_flat_program() {
    // 200k ops in one function: the benchmark's shape (timing belongs in bench/).
    let mut ctx = context();
    let loc = ctx.unknown_loc();
    let (m, body) = module(&mut ctx, loc);
    let bf16 = ctx.float_type(FloatKind::BF16);
    let t = ctx.tensor_type(&[8, 1024], bf16);
    let (_, entry) = printer_common::func(&mut ctx, body, "big", (&[t], &[t]), &[], false, 1);
    let entry = entry.unwrap();
    let mut v = ctx.block_args(entry)[0];
    let tp = ctx.symbol_ref("tp");
    let sum = ctx.str_attr("sum");
    for i in 0..200_000 {
        let o = if i % 2 == 0 {
            op(
                &mut ctx,
                entry,
                "coll.all_reduce",
                &[v],
                &[t],
                &[("group", tp), ("reduce_op", sum)],
                2,
            )
        } else {
            op(&mut ctx, entry, "coll.wait_tensor", &[v], &[t], &[], 3)
        };
        v = ctx.result(o, 0);
    }
    op(&mut ctx, entry, "func.return", &[v], &[], &[], 4);
    let start = std::time::Instant::now();
    let text = print_op(&ctx, m, &PrintOptions::default());
    eprintln!("printed {} bytes in {:?}", text.len(), start.elapsed());
    assert!(text.len() > 15_000_000);
    assert!(text.contains("    %199999 = coll.wait_tensor %199998 : tensor<8x1024xbf16>\n"));
}
