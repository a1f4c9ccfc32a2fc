"""A program of symm collectives for runtime/examples/symm_selftest.rs (virtual ranks on one
GPU): every collective at odd and power-of-two sizes, bf16/f32/i32/f16, several reduce ops,
on a group of G ranks.

    python3 bench/gpu/gen_symm_selftest.py G > selftest_G.mlir"""
import sys

g = int(sys.argv[1])
cases = []  # (op, n_in, dtype, reduce)
for n in (1000, 2048, 32768, 524288, 8388608):
    cases.append(("one_shot_all_reduce", n, "bf16", "sum"))
    cases.append(("two_shot_all_reduce", n, "bf16", "sum"))
cases += [
    ("one_shot_all_reduce", 4099, "f32", "avg"),
    ("one_shot_all_reduce", 777, "i32", "product"),
    ("two_shot_all_reduce", 4099, "f32", "max"),
    ("two_shot_all_reduce", 12345, "i32", "min"),
    ("two_shot_all_reduce", 3001, "f16", "avg"),
    ("all_gather", 1000, "bf16", None),
    ("all_gather", 262144, "bf16", None),
    ("all_gather", 333, "i32", None),
    ("reduce_scatter", 1000 * g, "bf16", "sum"),
    ("reduce_scatter", 262144 * g, "bf16", "sum"),
    ("reduce_scatter", 129 * g, "f32", "avg"),
]
args, rets, body = [], [], []
for i, (op, n, dt, red) in enumerate(cases):
    t = f"tensor<{n}x{dt}>"
    args.append(f"%x{i}: {t}")
    out = {"all_gather": n * g, "reduce_scatter": n // g}.get(op, n)
    ot = f"tensor<{out}x{dt}>"
    attr = f'reduce_op = "{red}", ' if red else ""
    sig = t if out == n and op != "all_gather" and op != "reduce_scatter" else f"({t}) -> {ot}"
    body.append(f"    %p{i} = compute.neg %x{i} : {t}")
    body.append(f"    %r{i} = symm.{op} %p{i} {{{attr}group = @tp}} : {sig}")
    rets.append((f"%r{i}", ot))
print("module {")
print(f"  coll.group @tp {{size = {g} : i64, symm_mem}}")
print(f"  func.func @main({', '.join(args)}) -> ({', '.join(t for _, t in rets)}) {{")
print("\n".join(body))
print(f"    return {', '.join(v for v, _ in rets)} : {', '.join(t for _, t in rets)}")
print("  }")
print("}")
