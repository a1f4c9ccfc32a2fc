"""The transformer programs of testgen/src/transformer.rs (what `gen_transformer` prints) for
any tensor-parallel size TP and FSDP size DP on TP x DP ranks: TP only (DP = 1), FSDP only
(TP = 1) and the 2-D program (both > 1). `gen_transformer` fixes the group sizes at 2
(`mixed` = 2 x 2 on 4 ranks); with TP, DP in {1, 2} this script prints the same text
byte for byte.

Rank r sits at (dp index r // TP, tp index r % TP): `@tp` is the family of consecutive
subgroups [0..TP), [TP..2TP), ... (a group without `ranks`), and `@dp` the strided family
ranks = [[0, TP, 2TP, ...], [1, TP+1, ...], ...] (DESIGN 3.1, docs/runtime.md *Groups*).
Per layer: x.Wq (column shard over @tp) -> softmax -> .Wo (row shard) -> all_reduce @tp ->
residual; x.W1 -> gelu -> .W2 -> all_reduce @tp -> residual; with DP > 1 every weight is a
dim-0 shard over @dp, all-gathered right before use, and the backward stand-in
reduce-scatters (avg) 0.5.W over @dp, waited at the end.

    python3 bench/gpu/gen_transformer_nd.py TP DP LAYERS TOKENS HIDDEN FFN [ELEM] [symm] [norm]
"""
import sys


def program(tp, dp, layers, m, h, f, e="bf16", symm=False, norm=False):
    body, params = [], []
    n = [0]

    def v():
        n[0] += 1
        return f"%t{n[0]}"

    def t(r, c):
        return f"tensor<{r}x{c}x{e}>"

    def line(s):
        body.append(f"    {s}\n")

    def param(name, ty):
        params.append(f"%{name}: {ty}")
        return f"%{name}"

    def replicated(name, ty):
        params.append(f"%{name}: {ty} {{coll.replicated = @tp}}" if tp > 1 else f"%{name}: {ty}")
        return f"%{name}"

    xt = t(m, h)
    x = replicated("x", xt)
    results = []
    fsdp = []

    def weight(name, rows, cols):
        if dp == 1:
            return param(name, t(rows, cols))
        shard_ty = t(rows // dp, cols)
        shard = param(f"{name}_shard", shard_ty)
        full = t(rows, cols)
        g = v()
        line(f"{g} = coll.all_gather_into_tensor {shard} {{group = @dp}} : ({shard_ty}) -> {full}")
        fv = v()
        line(f"{fv} = coll.wait_tensor {g} : {full}")
        fsdp.append((fv, rows, cols))
        return fv

    def all_reduce(val, ty):
        if tp == 1:
            return val
        r = v()
        line(f'{r} = coll.all_reduce {val} {{group = @tp, reduce_op = "sum"}} : {ty}')
        y = v()
        line(f"{y} = coll.wait_tensor {r} : {ty}")
        return y

    def rmsnorm(xv, name):
        if not norm:
            return xv
        tx, tm, tm1, t1h = t(m, h), f"tensor<{m}x{e}>", t(m, 1), t(1, h)
        gamma = replicated(name, t1h)
        sq = v(); line(f"{sq} = compute.mul {xv}, {xv} : {tx}")
        ss = v(); line(f"{ss} = compute.reduce_sum {sq} {{dim = 1 : i64}} : ({tx}) -> {tm}")
        ss2 = v(); line(f"{ss2} = compute.reshape {ss} : ({tm}) -> {tm1}")
        ms = v(); line(f"{ms} = compute.scale {ss2} {{factor = {rust_exp(1.0 / h)} : f64}} : {tm1}")
        inv = v(); line(f"{inv} = compute.rsqrt {ms} : {tm1}")
        ones_h = v(); line(f"{ones_h} = compute.fill {{value = 1.0 : f64}} : {t1h}")
        bc = v(); line(f"{bc} = compute.matmul {inv}, {ones_h} : ({tm1}, {t1h}) -> {tx}")
        xn = v(); line(f"{xn} = compute.mul {xv}, {bc} : {tx}")
        ones_m = v(); line(f"{ones_m} = compute.fill {{value = 1.0 : f64}} : {tm1}")
        gb = v(); line(f"{gb} = compute.matmul {ones_m}, {gamma} : ({tm1}, {t1h}) -> {tx}")
        y = v(); line(f"{y} = compute.mul {xn}, {gb} : {tx}")
        return y

    for l in range(layers):
        xa = rmsnorm(x, f"norm_a{l}")
        wq = weight(f"wq{l}", h, h // tp)
        wo = weight(f"wo{l}", h // tp, h)
        q = v()
        tq, tx = t(m, h // tp), t(m, h)
        line(f"{q} = compute.matmul {xa}, {wq} : ({tx}, {t(h, h // tp)}) -> {tq}")
        s = v()
        line(f"{s} = compute.softmax {q} {{dim = 1 : i64}} : {tq}")
        o = v()
        line(f"{o} = compute.matmul {s}, {wo} : ({tq}, {t(h // tp, h)}) -> {tx}")
        o = all_reduce(o, tx)
        x1 = v()
        line(f"{x1} = compute.add {x}, {o} : {tx}")
        xm = rmsnorm(x1, f"norm_m{l}")
        w1 = weight(f"w1_{l}", h, f // tp)
        w2 = weight(f"w2_{l}", f // tp, h)
        tf = t(m, f // tp)
        a = v()
        line(f"{a} = compute.matmul {xm}, {w1} : ({tx}, {t(h, f // tp)}) -> {tf}")
        g = v()
        line(f"{g} = compute.gelu {a} : {tf}")
        y = v()
        line(f"{y} = compute.matmul {g}, {w2} : ({tf}, {t(f // tp, h)}) -> {tx}")
        y = all_reduce(y, tx)
        x2 = v()
        line(f"{x2} = compute.add {x1}, {y} : {tx}")
        x = x2
    results.append((x, xt))

    if dp > 1:
        pending = []
        xtt = t(h, m)
        xtv = v()
        line(f"{xtv} = compute.transpose {x} : ({xt}) -> {xtt}")
        for wv, rows, cols in reversed(fsdp):
            full, shard = t(rows, cols), t(rows // dp, cols)
            dw = v()
            line(f"{dw} = compute.scale {wv} {{factor = 0.5 : f64}} : {full}")
            rs = v()
            line(f'{rs} = coll.reduce_scatter_tensor {dw} {{group = @dp, reduce_op = "avg"}} : ({full}) -> {shard}')
            pending.append((rs, shard))
        for rs, shard in pending:
            g = v()
            line(f"{g} = coll.wait_tensor {rs} : {shard}")
            results.append((g, shard))

    out = "module {\n"
    if tp > 1:
        out += f"  coll.group @tp {{size = {tp} : i64{', symm_mem' if symm else ''}}}\n"
    if dp > 1:
        if tp == 1:
            out += f"  coll.group @dp {{size = {dp} : i64}}\n"
        else:
            fam = ", ".join("array<i64: " + ", ".join(str(d * tp + r) for d in range(dp)) + ">"
                            for r in range(tp))
            out += f"  coll.group @dp {{size = {dp} : i64, ranks = [{fam}]}}\n"
    rtys = ", ".join(ty for _, ty in results)
    rvals = ", ".join(val for val, _ in results)
    out += f"  func.func @step({', '.join(params)}) -> ({rtys}) {{\n"
    out += "".join(body)
    out += f"    return {rvals} : {rtys}\n"
    out += "  }\n}\n"
    return out


def rust_exp(x):
    """Rust's `{:e}` of an f64: the shortest mantissa that round-trips, exponent as `e-3`."""
    for p in range(17):
        cand = f"{x:.{p}e}"
        if float(cand) == x:
            break
    m, _, ex = cand.partition("e")
    if "." in m:
        m = m.rstrip("0").rstrip(".")
    return f"{m}e{int(ex)}"


def main(argv):
    if len(argv) < 6:
        sys.exit("usage: gen_transformer_nd.py TP DP LAYERS TOKENS HIDDEN FFN [ELEM] [symm] [norm]")
    tp, dp, layers, m, h, f = (int(a) for a in argv[:6])
    rest = argv[6:]
    elem = rest[0] if rest and rest[0] in ("bf16", "f16", "f32") else "bf16"
    for name, val in (("TP", tp), ("DP", dp)):
        if val < 1:
            sys.exit(f"{name} must be at least 1")
    for what, dim, by in (("hidden", h, tp * dp), ("ffn", f, tp * dp)):
        if dim % by:
            sys.exit(f"{what} {dim} is not a multiple of TP x DP = {by}")
    sys.stdout.write(program(tp, dp, layers, m, h, f, elem, "symm" in rest, "norm" in rest))


if __name__ == "__main__":
    main(sys.argv[1:])
