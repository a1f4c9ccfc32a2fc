//! Structured transformer programs as PyTorch traces them (collectives waited right before
//! their first use, the order the scheduling passes start from): tensor-parallel (Megatron
//! MLP and attention blocks with all-reduces), FSDP (weights all-gathered per layer,
//! gradients reduce-scattered), and both at once on a 2-D mesh.
//!
//! Arguments that are the same on every rank of `@tp` (the input activations and the norm
//! weights, which tensor parallelism replicates) carry `coll.replicated = @tp`: that is what
//! lets `coll-sequence-parallel` cut them to a rank's rows, and what makes `commlir-run`
//! generate them identically on the ranks of the group.

use std::fmt::Write as _;

/// Which parallelism the program uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallelism {
    /// Tensor parallel over `@tp` (2 ranks).
    Tp,
    /// Fully sharded data parallel over `@dp` (2 ranks), forward and backward.
    Fsdp,
    /// Both, on 4 ranks: `@tp` = {0,1},{2,3} and `@dp` = {0,2},{1,3}.
    Mixed,
}

/// Shape of the generated model.
#[derive(Clone, Debug)]
pub struct TransformerConfig {
    pub parallelism: Parallelism,
    pub layers: usize,
    /// Tokens per step (rows of the activations).
    pub tokens: i64,
    pub hidden: i64,
    pub ffn: i64,
    pub elem: &'static str,
    /// Give `@tp` symmetric memory.
    pub symm_mem: bool,
    /// An RMSNorm before each block (pre-norm, as in Megatron and Llama), built from row-local
    /// compute ops; its weight is a replicated argument.
    pub norm: bool,
}

impl TransformerConfig {
    /// A small model that the sim backend runs in well under a second.
    pub fn small(parallelism: Parallelism, layers: usize) -> Self {
        TransformerConfig {
            parallelism,
            layers,
            tokens: 8,
            hidden: 32,
            ffn: 64,
            elem: "bf16",
            symm_mem: true,
            norm: false,
        }
    }
    /// A realistically sized model (for the cost model, not for the sim backend).
    pub fn large(parallelism: Parallelism, layers: usize) -> Self {
        TransformerConfig {
            parallelism,
            layers,
            tokens: 4096,
            hidden: 4096,
            ffn: 16384,
            elem: "bf16",
            symm_mem: true,
            norm: false,
        }
    }
    /// Number of ranks the program needs.
    pub fn ranks(&self) -> usize {
        if self.parallelism == Parallelism::Mixed {
            4
        } else {
            2
        }
    }
}

struct W {
    body: String,
    n: usize,
    params: Vec<String>,
}

impl W {
    fn v(&mut self) -> String {
        self.n += 1;
        format!("%t{}", self.n)
    }
    fn t(&self, r: i64, c: i64, e: &str) -> String {
        format!("tensor<{r}x{c}x{e}>")
    }
    fn param(&mut self, name: String, ty: String) -> String {
        self.params.push(format!("%{name}: {ty}"));
        format!("%{name}")
    }
    /// An argument identical on every rank of `group` (`None`: no group to mark it on).
    fn replicated_param(&mut self, name: String, ty: String, group: Option<&str>) -> String {
        match group {
            Some(g) => self
                .params
                .push(format!("%{name}: {ty} {{coll.replicated = @{g}}}")),
            None => self.params.push(format!("%{name}: {ty}")),
        }
        format!("%{name}")
    }
    fn line(&mut self, s: String) {
        let _ = writeln!(self.body, "    {s}");
    }
}

/// Generates the program; same config, same text.
pub fn transformer_program(cfg: &TransformerConfig) -> String {
    let e = cfg.elem;
    let (tp, dp) = match cfg.parallelism {
        Parallelism::Tp => (2, 1),
        Parallelism::Fsdp => (1, 2),
        Parallelism::Mixed => (2, 2),
    };
    let (m, h, f) = (cfg.tokens, cfg.hidden, cfg.ffn);
    let mut w = W {
        body: String::new(),
        n: 0,
        params: Vec::new(),
    };
    let xt = w.t(m, h, e);
    // Tensor parallelism hands every rank of `@tp` the same activations.
    let tp_group = (tp > 1).then_some("tp");
    let mut x = w.replicated_param("x".into(), xt.clone(), tp_group);
    let mut results: Vec<(String, String)> = Vec::new();
    // (layer, weight value, full type) to reduce-scatter in the backward pass.
    let mut fsdp_weights: Vec<(String, i64, i64)> = Vec::new();

    // A weight of `rows x cols` (already divided by tp), sharded over dp along dim 0 when FSDP.
    let weight = |w: &mut W,
                  name: String,
                  rows: i64,
                  cols: i64,
                  fsdp: &mut Vec<(String, i64, i64)>|
     -> String {
        if dp == 1 {
            let ty = w.t(rows, cols, e);
            return w.param(name, ty);
        }
        let shard_ty = w.t(rows / dp, cols, e);
        let shard = w.param(format!("{name}_shard"), shard_ty.clone());
        let full = w.t(rows, cols, e);
        let g = w.v();
        w.line(format!(
            "{g} = coll.all_gather_into_tensor {shard} {{group = @dp}} : ({shard_ty}) -> {full}"
        ));
        let full_v = w.v();
        w.line(format!("{full_v} = coll.wait_tensor {g} : {full}"));
        fsdp.push((full_v.clone(), rows, cols));
        full_v
    };
    let all_reduce = |w: &mut W, v: &str, ty: &str| -> String {
        if tp == 1 {
            return v.to_string();
        }
        let r = w.v();
        w.line(format!(
            "{r} = coll.all_reduce {v} {{group = @tp, reduce_op = \"sum\"}} : {ty}"
        ));
        let y = w.v();
        w.line(format!("{y} = coll.wait_tensor {r} : {ty}"));
        y
    };

    // RMSNorm without broadcasting ops: the per-row factor and the weight are spread over the
    // hidden dim by rank-1 matmuls with ones (`x · rsqrt(mean(x²)) · γ`).
    let norm = |w: &mut W, x: &str, name: String| -> String {
        if !cfg.norm {
            return x.to_string();
        }
        let (tx, tm, tm1, t1h) = (
            w.t(m, h, e),
            format!("tensor<{m}x{e}>"),
            w.t(m, 1, e),
            w.t(1, h, e),
        );
        let gamma = w.replicated_param(name, t1h.clone(), tp_group);
        let sq = w.v();
        w.line(format!("{sq} = compute.mul {x}, {x} : {tx}"));
        let ss = w.v();
        w.line(format!(
            "{ss} = compute.reduce_sum {sq} {{dim = 1 : i64}} : ({tx}) -> {tm}"
        ));
        let ss2 = w.v();
        w.line(format!("{ss2} = compute.reshape {ss} : ({tm}) -> {tm1}"));
        let ms = w.v();
        w.line(format!(
            "{ms} = compute.scale {ss2} {{factor = {:e} : f64}} : {tm1}",
            1.0 / h as f64
        ));
        let inv = w.v();
        w.line(format!("{inv} = compute.rsqrt {ms} : {tm1}"));
        let ones_h = w.v();
        w.line(format!(
            "{ones_h} = compute.fill {{value = 1.0 : f64}} : {t1h}"
        ));
        let bc = w.v();
        w.line(format!(
            "{bc} = compute.matmul {inv}, {ones_h} : ({tm1}, {t1h}) -> {tx}"
        ));
        let xn = w.v();
        w.line(format!("{xn} = compute.mul {x}, {bc} : {tx}"));
        let ones_m = w.v();
        w.line(format!(
            "{ones_m} = compute.fill {{value = 1.0 : f64}} : {tm1}"
        ));
        let gb = w.v();
        w.line(format!(
            "{gb} = compute.matmul {ones_m}, {gamma} : ({tm1}, {t1h}) -> {tx}"
        ));
        let y = w.v();
        w.line(format!("{y} = compute.mul {xn}, {gb} : {tx}"));
        y
    };

    for l in 0..cfg.layers {
        // Attention-like block: x·Wq (column parallel) → softmax → ·Wo (row parallel).
        let xa = norm(&mut w, &x, format!("norm_a{l}"));
        let wq = weight(&mut w, format!("wq{l}"), h, h / tp, &mut fsdp_weights);
        let wo = weight(&mut w, format!("wo{l}"), h / tp, h, &mut fsdp_weights);
        let q = w.v();
        let (tq, tx) = (w.t(m, h / tp, e), w.t(m, h, e));
        let (wq_ty, wo_ty) = (w.t(h, h / tp, e), w.t(h / tp, h, e));
        w.line(format!(
            "{q} = compute.matmul {xa}, {wq} : ({tx}, {wq_ty}) -> {tq}"
        ));
        let s = w.v();
        w.line(format!(
            "{s} = compute.softmax {q} {{dim = 1 : i64}} : {tq}"
        ));
        let o = w.v();
        w.line(format!(
            "{o} = compute.matmul {s}, {wo} : ({tq}, {wo_ty}) -> {tx}"
        ));
        let o = all_reduce(&mut w, &o, &tx);
        let x1 = w.v();
        w.line(format!("{x1} = compute.add {x}, {o} : {tx}"));
        // MLP block: x·W1 (column parallel) → gelu → ·W2 (row parallel).
        let xm = norm(&mut w, &x1, format!("norm_m{l}"));
        let w1 = weight(&mut w, format!("w1_{l}"), h, f / tp, &mut fsdp_weights);
        let w2 = weight(&mut w, format!("w2_{l}"), f / tp, h, &mut fsdp_weights);
        let (tf, w1_ty, w2_ty) = (w.t(m, f / tp, e), w.t(h, f / tp, e), w.t(f / tp, h, e));
        let a = w.v();
        w.line(format!(
            "{a} = compute.matmul {xm}, {w1} : ({tx}, {w1_ty}) -> {tf}"
        ));
        let g = w.v();
        w.line(format!("{g} = compute.gelu {a} : {tf}"));
        let y = w.v();
        w.line(format!(
            "{y} = compute.matmul {g}, {w2} : ({tf}, {w2_ty}) -> {tx}"
        ));
        let y = all_reduce(&mut w, &y, &tx);
        let x2 = w.v();
        w.line(format!("{x2} = compute.add {x1}, {y} : {tx}"));
        x = x2;
    }
    results.push((x.clone(), xt.clone()));

    if dp > 1 {
        // Backward (weight gradients only): dW = Wᵀ-free stand-in `x_finalᵀ · x_final`-shaped
        // products, reduce-scattered right after they are computed, waited at the end.
        let mut pending = Vec::new();
        let xtt = w.t(h, m, e);
        let xt_v = w.v();
        w.line(format!("{xt_v} = compute.transpose {x} : ({xt}) -> {xtt}"));
        for (wv, rows, cols) in fsdp_weights.iter().rev() {
            let full = w.t(*rows, *cols, e);
            let shard = w.t(rows / dp, *cols, e);
            // dW = W · (scaled) — keeps shapes exact and the data dependent on the forward pass.
            let dw = w.v();
            w.line(format!(
                "{dw} = compute.scale {wv} {{factor = 0.5 : f64}} : {full}"
            ));
            let rs = w.v();
            w.line(format!("{rs} = coll.reduce_scatter_tensor {dw} {{group = @dp, reduce_op = \"avg\"}} : ({full}) -> {shard}"));
            pending.push((rs, shard));
        }
        for (rs, shard) in pending {
            let g = w.v();
            w.line(format!("{g} = coll.wait_tensor {rs} : {shard}"));
            results.push((g, shard));
        }
        let _ = xt_v;
    }

    let mut out = String::from("module {\n");
    match cfg.parallelism {
        Parallelism::Tp => {
            let _ = writeln!(
                out,
                "  coll.group @tp {{size = 2 : i64{}}}",
                if cfg.symm_mem { ", symm_mem" } else { "" }
            );
        }
        Parallelism::Fsdp => out.push_str("  coll.group @dp {size = 2 : i64}\n"),
        Parallelism::Mixed => {
            let _ = writeln!(
                out,
                "  coll.group @tp {{size = 2 : i64{}}}",
                if cfg.symm_mem { ", symm_mem" } else { "" }
            );
            out.push_str(
                "  coll.group @dp {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}\n",
            );
        }
    }
    let rtys: Vec<&str> = results.iter().map(|(_, t)| t.as_str()).collect();
    let rvals: Vec<&str> = results.iter().map(|(v, _)| v.as_str()).collect();
    let _ = writeln!(
        out,
        "  func.func @step({}) -> ({}) {{",
        w.params.join(", "),
        rtys.join(", ")
    );
    out.push_str(&w.body);
    let _ = writeln!(out, "    return {} : {}", rvals.join(", "), rtys.join(", "));
    out.push_str("  }\n}\n");
    out
}
