//! No input may crash the parser: garbage, invalid UTF-8, truncation, huge literals and deep
//! nesting all end in a diagnostic (or a successful parse), never a panic or a stack overflow.
//! Inputs are generated here rather than stored.

use commlir_ir::diag::file_line_col;
use commlir_ir::parser::{parse_attr, parse_source, parse_type, ParseOptions, DEFAULT_MAX_NESTING};
use commlir_ir::Context;

fn run(bytes: &[u8]) -> Result<(), String> {
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    match parse_source(&mut ctx, "r.mlir", bytes, &ParseOptions::default()) {
        Ok(_) => Ok(()),
        Err(d) => {
            let (f, l, c) = file_line_col(&ctx, d.loc).unwrap_or_default();
            Err(format!("{f}:{l}:{c}: {}", d.message))
        }
    }
}

const SAMPLE: &str = r#"#map = affine_map<(d0) -> (d0)>
!t = tensor<4x?xf32, #comm.buffer<symm_mem, @tp>>
module @m attributes {a = [1, 2.5, "s\n", @x::@y, array<i64: 1, 2>, dense<[1, 2]> : tensor<2xi32>]} {
  coll.group @tp {size = 2 : i64, symm_mem}
  func.func @f(%a: !t {x.y}, %b: i1 loc("b":1:2)) -> (!t, i32) {
    %0:2 = "t.op"(%a, %b) <{p = #map}> ({
    ^bb0(%x: f32 loc(fused["a":1:2, "b"])):
      "t.br"(%x)[^bb1] : (f32) -> ()
    ^bb1:
      "t.yield"() : () -> ()
    }) {q = unit} : (!t, i1) -> (!t, i32) loc(#loc1)
    %r = coll.all_reduce %0#0 {reduce_op = "sum", group = @tp} : !t
    %c:2 = func.call @f(%r, %b) : (!t, i1) -> (!t, i32)
    return %r, %0#1 : !t, i32
  }
}
#loc1 = loc(callsite("x" at "y":3:4))
"#;

#[test]
fn sample_parses() {
    run(SAMPLE.as_bytes()).unwrap();
}

#[test]
fn every_truncation_is_handled() {
    let b = SAMPLE.as_bytes();
    for n in 0..b.len() {
        let _ = run(&b[..n]);
    }
}

#[test]
fn every_single_byte_corruption_is_handled() {
    let b = SAMPLE.as_bytes();
    for i in (0..b.len()).step_by(3) {
        for c in [
            b'(', b')', b'<', b'>', b'"', b'%', b'#', b'\\', b'0', b'x', 0xFF,
        ] {
            let mut v = b.to_vec();
            v[i] = c;
            let _ = run(&v);
        }
    }
}

/// A deterministic pseudo-random byte stream (xorshift).
fn noise(seed: u64, len: usize, alphabet: &[u8]) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if alphabet.is_empty() {
                s as u8
            } else {
                alphabet[(s % alphabet.len() as u64) as usize]
            }
        })
        .collect()
}

#[test]
fn binary_garbage() {
    for seed in 0..200 {
        let _ = run(&noise(seed, 300, &[]));
    }
}

#[test]
fn token_soup() {
    let alphabet = b"%^@#!\"(){}[]<>:,=-> \n0123456789abcxfi.loc";
    for seed in 0..300 {
        let _ = run(&noise(seed, 400, alphabet));
    }
}

#[test]
fn invalid_utf8_points_at_the_first_bad_byte() {
    let mut v = b"\"t.a\"() : () -> ()\n  \"t.b\xC3\x28\"() : () -> ()\n".to_vec();
    assert_eq!(run(&v).unwrap_err(), "r.mlir:2:7: invalid UTF-8");
    v.truncate(3);
    v.push(0xFF);
    assert_eq!(run(&v).unwrap_err(), "r.mlir:1:4: invalid UTF-8");
}

fn nested(open: &str, mid: &str, close: &str, depth: usize) -> String {
    let mut s = String::with_capacity((open.len() + close.len()) * depth + mid.len());
    for _ in 0..depth {
        s.push_str(open);
    }
    s.push_str(mid);
    for _ in 0..depth {
        s.push_str(close);
    }
    s
}

#[test]
fn deep_nesting_is_rejected_not_overflowed() {
    let depth = 200_000;
    let cases = [
        // Regions.
        nested("\"t.r\"() ({\n", "", "}) : () -> ()\n", depth),
        // Types.
        format!(
            "%0 = \"t.a\"() : () -> {}",
            nested("tensor<4x", "f32", ">", depth)
        ),
        // Attributes.
        format!(
            "\"t.a\"() {{a = {}}} : () -> ()",
            nested("[", "1", "]", depth)
        ),
        // Bare parentheses and a mix of everything, unbalanced.
        nested("(", "", "", depth),
        nested("{<[(", "", "", depth),
        // Locations.
        format!(
            "\"t.a\"() : () -> () loc({})",
            nested("\"n\"(", "unknown", ")", depth)
        ),
    ];
    for c in &cases {
        let e = run(c.as_bytes()).unwrap_err();
        assert!(e.contains("nesting too deep"), "{e}");
    }
}

#[test]
fn nesting_up_to_the_limit_is_fine() {
    // Each region level takes two brackets: `(` and `{`.
    let regions = nested(
        "\"t.r\"() ({\n",
        "",
        "}) : () -> ()\n",
        DEFAULT_MAX_NESTING / 2 - 1,
    );
    run(regions.as_bytes()).unwrap();
    let attrs = format!(
        "\"t.a\"() {{a = {}}} : () -> ()",
        nested("[", "1", "]", DEFAULT_MAX_NESTING - 1)
    );
    run(attrs.as_bytes()).unwrap();
    let types = format!(
        "%0 = \"t.a\"() : () -> {}",
        nested("tuple<", "f32", ">", DEFAULT_MAX_NESTING - 2)
    );
    run(types.as_bytes()).unwrap();
    // A custom limit.
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let opts = ParseOptions { max_nesting: 10 };
    let e = parse_source(
        &mut ctx,
        "r.mlir",
        nested("[", "", "]", 11).as_bytes(),
        &opts,
    )
    .unwrap_err();
    let (_, l, c) = file_line_col(&ctx, e.loc).unwrap();
    assert_eq!((l, c), (1, 11));
}

#[test]
fn huge_literals() {
    let big = "9".repeat(100_000);
    let e = run(format!("\"t.a\"() {{a = {big}}} : () -> ()").as_bytes()).unwrap_err();
    assert!(
        e.ends_with("integer constant out of range for attribute"),
        "{e}"
    );
    run(format!("\"t.a\"() {{a = {big} : i1000000}} : () -> ()").as_bytes()).unwrap();
    let e = run(format!("\"t.a\"() {{a = 1 : i{big}}} : () -> ()").as_bytes()).unwrap_err();
    assert!(e.contains("bitwidth"), "{e}");
    let e = run(format!("%0 = \"t.a\"() : () -> tensor<{big}xf32>").as_bytes()).unwrap_err();
    assert!(e.contains("invalid dimension"), "{e}");
    let e = run(format!("%x:{big} = \"t.a\"() : () -> ()").as_bytes()).unwrap_err();
    assert!(e.contains("results"), "{e}");
    let e = run(b"%x:4000000000 = t.a : i32").unwrap_err();
    assert!(e.contains("too many results"), "{e}");
    let e = run(format!("\"t.a\"() : () -> () loc(\"f\":{big}:1)").as_bytes()).unwrap_err();
    assert!(e.contains("invalid line or column"), "{e}");
    run(format!("\"t.a\"() {{a = {big}.5}} : () -> ()").as_bytes()).unwrap();
}

#[test]
fn long_flat_inputs() {
    // Long but flat: a million-element array and 100k ops in one block.
    let items = vec!["1"; 1_000_000].join(", ");
    run(format!("\"t.a\"() {{a = [{items}]}} : () -> ()").as_bytes()).unwrap();
    let mut s = String::new();
    for i in 0..100_000 {
        s.push_str(&format!("%{i} = \"t.a\"() : () -> i32\n"));
    }
    run(s.as_bytes()).unwrap();
    // A long chain of location aliases resolving forward.
    let mut s = String::from("\"t.a\"() : () -> () loc(#l0)\n");
    for i in 0..5_000 {
        s.push_str(&format!("#l{i} = loc(#l{})\n", i + 1));
    }
    s.push_str("#l5000 = loc(unknown)\n");
    let e = run(s.as_bytes()).unwrap_err();
    assert!(e.contains("alias chain too deep"), "{e}");
}

#[test]
fn helpers_are_robust_too() {
    let mut ctx = Context::new();
    assert!(parse_type(&mut ctx, &nested("tensor<", "f32", ">", 100_000)).is_err());
    assert!(parse_attr(&mut ctx, &nested("{a = ", "1", "}", 100_000)).is_err());
    assert!(parse_type(&mut ctx, "").is_err());
    assert!(parse_attr(&mut ctx, "").is_err());
    assert!(parse_type(&mut ctx, "tensor<4xf32> trailing").is_err());
}
