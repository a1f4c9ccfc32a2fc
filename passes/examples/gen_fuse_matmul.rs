//! Writes a program of about N ops (custom form) made of fusable matmul patterns on a
//! `symm_mem` group, for timing `coll-fuse-matmul` at scale:
//! `cargo run --release -p commlir-passes --example gen_fuse_matmul -- N > prog.mlir`.
//!
//! One function, a chain of blocks of 13 ops each: an all-gather → wait → a reshape → two
//! matmuls on the gathered rows (the second one's `b` computed by a pure op placed between
//! them, which the rewrite hoists) and another user of the gathered tensor after them (so the
//! fused op returns it), then a matmul → reshape → reduce-scatter → wait whose result feeds
//! the next block. The three weights are function arguments that every block reads. Shapes
//! are large enough (the cost model's, nothing runs) that every pattern fuses under the
//! default cost check. `bench/fuse_scale.sh` times the pass on these programs.

use std::fmt::Write;

fn main() {
    let ops: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let blocks = (ops / 13).max(1);
    let e = "bf16";
    let shard = format!("tensor<2048x4096x{e}>");
    let full = format!("tensor<4096x4096x{e}>");
    let rows = format!("tensor<8192x2048x{e}>");
    let prod = format!("tensor<8192x4096x{e}>");
    let w = format!("tensor<2048x4096x{e}>");
    let w3 = format!("tensor<4096x2048x{e}>");
    let mut body = String::new();
    let mut x = "%x".to_string();
    for i in 0..blocks {
        let l = |s: &str| format!("%{s}{i}");
        let _ = writeln!(
            body,
            "    {g} = coll.all_gather_into_tensor {x} {{group = @tp}} : ({shard}) -> {full}\n\
             \x20   {y} = coll.wait_tensor {g} : {full}\n\
             \x20   {v} = compute.reshape {y} : ({full}) -> {rows}\n\
             \x20   {m2} = compute.matmul {v}, %w2 : ({rows}, {w}) -> {prod}\n\
             \x20   {b} = compute.neg %w1 : {w}\n\
             \x20   {m1} = compute.matmul {v}, {b} : ({rows}, {w}) -> {prod}\n\
             \x20   {r} = compute.relu {y} : {full}\n\
             \x20   {p} = compute.add {m1}, {m2} : {prod}\n\
             \x20   {q} = compute.matmul {p}, %w3 : ({prod}, {w3}) -> {rows}\n\
             \x20   {u} = compute.reshape {q} : ({rows}) -> {full}\n\
             \x20   {s} = coll.reduce_scatter_tensor {u} {{group = @tp, reduce_op = \"sum\"}} : ({full}) -> {shard}\n\
             \x20   {t} = coll.wait_tensor {s} : {shard}\n\
             \x20   {n} = compute.add {t}, {r0} : {shard}",
            g = l("g"),
            y = l("y"),
            v = l("v"),
            m2 = l("k"),
            b = l("b"),
            m1 = l("m"),
            r = l("r"),
            p = l("p"),
            q = l("q"),
            u = l("u"),
            s = l("s"),
            t = l("t"),
            n = l("n"),
            r0 = x,
        );
        x = l("n");
    }
    print!(
        "module {{\n  coll.group @tp {{size = 2 : i64, symm_mem}}\n  \
         func.func @step(%x: {shard}, %w1: {w}, %w2: {w}, %w3: {w3}) -> {shard} {{\n\
         {body}    return {x} : {shard}\n  }}\n}}\n"
    );
}
