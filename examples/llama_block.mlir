// One Llama decoder block on one rank, as the PyTorch exporter writes it: RMSNorm, rotary
// position embedding, causal multi-head attention, SwiGLU MLP, both residual adds, and the
// log-sum-exp of the output rows (the normalizer of a cross-entropy loss). No collectives:
// every rank runs the block on its own inputs, so it runs on any number of ranks, e.g.
//
//   commlir-run examples/llama_block.mlir --ranks 2 --print full
//   commlir-run examples/llama_block.mlir --backend cuda --ranks 1 --check
//
// Shapes: 8 tokens, model width 32, 4 heads of 8, MLP width 64.
//   x: 8x32 activations; g_attn, g_mlp: 32 RMSNorm weights; wq, wk, wv, wo: 32x32;
//   w_gate, w_up: 32x64; w_down: 64x32.
// Results: the block's output (8x32), the attention probabilities (4x8x8: row i of every
// head is zero after column i), the output rows' log-sum-exp (8).
module {
  func.func @llama_block(%x: tensor<8x32xf32>, %g_attn: tensor<32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<32x32xf32>, %wv: tensor<32x32xf32>, %wo: tensor<32x32xf32>, %g_mlp: tensor<32xf32>, %w_gate: tensor<32x64xf32>, %w_up: tensor<32x64xf32>, %w_down: tensor<64x32xf32>) -> (tensor<8x32xf32>, tensor<4x8x8xf32>, tensor<8xf32>) {
    // RMSNorm: x · rsqrt(mean(x²) + eps) · g, the per-row factor and g broadcast to 8x32.
    %x2 = compute.mul %x, %x : tensor<8x32xf32>
    %ss = compute.reduce_sum %x2 {dim = 1 : i64} : (tensor<8x32xf32>) -> tensor<8xf32>
    %ms = compute.scale %ss {factor = 3.125000e-02 : f64} : tensor<8xf32>
    %eps = compute.fill {value = 9.9999999999999995e-07 : f64} : tensor<8xf32>
    %mse = compute.add %ms, %eps : tensor<8xf32>
    %rinv = compute.rsqrt %mse : tensor<8xf32>
    %rcol = compute.reshape %rinv : (tensor<8xf32>) -> tensor<8x1xf32>
    %rb = compute.broadcast %rcol : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %xr = compute.mul %x, %rb : tensor<8x32xf32>
    %gab = compute.broadcast %g_attn : (tensor<32xf32>) -> tensor<8x32xf32>
    %h = compute.mul %xr, %gab : tensor<8x32xf32>

    // Projections, then heads first: 8x32 → 8x4x8 → 4x8x8 (head, token, feature).
    %q0 = compute.matmul %h, %wq : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %k0 = compute.matmul %h, %wk : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %v0 = compute.matmul %h, %wv : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %q1 = compute.reshape %q0 : (tensor<8x32xf32>) -> tensor<8x4x8xf32>
    %k1 = compute.reshape %k0 : (tensor<8x32xf32>) -> tensor<8x4x8xf32>
    %v1 = compute.reshape %v0 : (tensor<8x32xf32>) -> tensor<8x4x8xf32>
    %q = compute.permute %q1 {perm = array<i64: 1, 0, 2>} : (tensor<8x4x8xf32>) -> tensor<4x8x8xf32>
    %k = compute.permute %k1 {perm = array<i64: 1, 0, 2>} : (tensor<8x4x8xf32>) -> tensor<4x8x8xf32>
    %v = compute.permute %v1 {perm = array<i64: 1, 0, 2>} : (tensor<8x4x8xf32>) -> tensor<4x8x8xf32>

    // Rotary embedding: θ[t, i] = t · 10000^(-2i/8) for i < 4; cos/sin repeated over both
    // halves of a head; rotate_half(u) = concat(-u[4:8], u[0:4]); u·cos + rotate_half(u)·sin.
    %pos = compute.iota {dim = 0 : i64} : tensor<8x4xf32>
    %fi = compute.iota {dim = 1 : i64} : tensor<8x4xf32>
    %fe = compute.scale %fi {factor = -2.3025850929940459 : f64} : tensor<8x4xf32>
    %inv = compute.exp %fe : tensor<8x4xf32>
    %theta = compute.mul %pos, %inv : tensor<8x4xf32>
    %c4 = compute.cos %theta : tensor<8x4xf32>
    %s4 = compute.sin %theta : tensor<8x4xf32>
    %c8 = compute.concat %c4, %c4 {dim = 1 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
    %s8 = compute.concat %s4, %s4 {dim = 1 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
    %cb = compute.broadcast %c8 : (tensor<8x8xf32>) -> tensor<4x8x8xf32>
    %sb = compute.broadcast %s8 : (tensor<8x8xf32>) -> tensor<4x8x8xf32>
    %qa = compute.slice %q {dim = 2 : i64, start = 0 : i64, size = 4 : i64} : (tensor<4x8x8xf32>) -> tensor<4x8x4xf32>
    %qb = compute.slice %q {dim = 2 : i64, start = 4 : i64, size = 4 : i64} : (tensor<4x8x8xf32>) -> tensor<4x8x4xf32>
    %qbn = compute.neg %qb : tensor<4x8x4xf32>
    %qh = compute.concat %qbn, %qa {dim = 2 : i64} : (tensor<4x8x4xf32>, tensor<4x8x4xf32>) -> tensor<4x8x8xf32>
    %qc = compute.mul %q, %cb : tensor<4x8x8xf32>
    %qs = compute.mul %qh, %sb : tensor<4x8x8xf32>
    %qr = compute.add %qc, %qs : tensor<4x8x8xf32>
    %ka = compute.slice %k {dim = 2 : i64, start = 0 : i64, size = 4 : i64} : (tensor<4x8x8xf32>) -> tensor<4x8x4xf32>
    %kb = compute.slice %k {dim = 2 : i64, start = 4 : i64, size = 4 : i64} : (tensor<4x8x8xf32>) -> tensor<4x8x4xf32>
    %kbn = compute.neg %kb : tensor<4x8x4xf32>
    %kh = compute.concat %kbn, %ka {dim = 2 : i64} : (tensor<4x8x4xf32>, tensor<4x8x4xf32>) -> tensor<4x8x8xf32>
    %kc = compute.mul %k, %cb : tensor<4x8x8xf32>
    %ks = compute.mul %kh, %sb : tensor<4x8x8xf32>
    %kr = compute.add %kc, %ks : tensor<4x8x8xf32>

    // Causal attention: scores = q·kᵀ/√8, masked where key > query, softmax over keys.
    %kt = compute.permute %kr {perm = array<i64: 0, 2, 1>} : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %sc0 = compute.matmul %qr, %kt : (tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %sc = compute.scale %sc0 {factor = 0.35355339059327379 : f64} : tensor<4x8x8xf32>
    %qi = compute.iota {dim = 0 : i64} : tensor<8x8xi64>
    %ki = compute.iota {dim = 1 : i64} : tensor<8x8xi64>
    %causal = compute.compare %ki, %qi {predicate = "le"} : (tensor<8x8xi64>, tensor<8x8xi64>) -> tensor<8x8xi1>
    %mask = compute.broadcast %causal : (tensor<8x8xi1>) -> tensor<4x8x8xi1>
    %ninf = compute.fill {value = -1.000000e+30 : f64} : tensor<4x8x8xf32>
    %scm = compute.select %mask, %sc, %ninf : (tensor<4x8x8xi1>, tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %p = compute.softmax %scm {dim = 2 : i64} : tensor<4x8x8xf32>
    %o = compute.matmul %p, %v : (tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
    %ot = compute.permute %o {perm = array<i64: 1, 0, 2>} : (tensor<4x8x8xf32>) -> tensor<8x4x8xf32>
    %oc = compute.reshape %ot : (tensor<8x4x8xf32>) -> tensor<8x32xf32>
    %attn = compute.matmul %oc, %wo : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %h1 = compute.add %x, %attn : tensor<8x32xf32>

    // SwiGLU MLP on RMSNorm(h1): (silu(hn·W_gate) ⊙ hn·W_up)·W_down, silu(u) = u·sigmoid(u).
    %y2 = compute.mul %h1, %h1 : tensor<8x32xf32>
    %yss = compute.reduce_sum %y2 {dim = 1 : i64} : (tensor<8x32xf32>) -> tensor<8xf32>
    %yms = compute.scale %yss {factor = 3.125000e-02 : f64} : tensor<8xf32>
    %ymse = compute.add %yms, %eps : tensor<8xf32>
    %yrinv = compute.rsqrt %ymse : tensor<8xf32>
    %yrcol = compute.reshape %yrinv : (tensor<8xf32>) -> tensor<8x1xf32>
    %yrb = compute.broadcast %yrcol : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %yr = compute.mul %h1, %yrb : tensor<8x32xf32>
    %gmb = compute.broadcast %g_mlp : (tensor<32xf32>) -> tensor<8x32xf32>
    %hn = compute.mul %yr, %gmb : tensor<8x32xf32>
    %gate = compute.matmul %hn, %w_gate : (tensor<8x32xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
    %up = compute.matmul %hn, %w_up : (tensor<8x32xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
    %sig = compute.sigmoid %gate : tensor<8x64xf32>
    %act = compute.mul %gate, %sig : tensor<8x64xf32>
    %a = compute.mul %act, %up : tensor<8x64xf32>
    %down = compute.matmul %a, %w_down : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
    %out = compute.add %h1, %down : tensor<8x32xf32>

    // Log-sum-exp of each output row, max-shifted: m + log(Σ exp(out − m)).
    %m = compute.reduce_max %out {dim = 1 : i64} : (tensor<8x32xf32>) -> tensor<8xf32>
    %mcol = compute.reshape %m : (tensor<8xf32>) -> tensor<8x1xf32>
    %mb = compute.broadcast %mcol : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %d = compute.sub %out, %mb : tensor<8x32xf32>
    %e = compute.exp %d : tensor<8x32xf32>
    %se = compute.reduce_sum %e {dim = 1 : i64} : (tensor<8x32xf32>) -> tensor<8xf32>
    %lse0 = compute.log %se : tensor<8xf32>
    %lse = compute.add %lse0, %m : tensor<8xf32>
    return %out, %p, %lse : tensor<8x32xf32>, tensor<4x8x8xf32>, tensor<8xf32>
  }
}
