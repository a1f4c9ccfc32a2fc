"""A decode-like tensor-parallel program for bench/gpu/run_symm_kernels.sh: LAYERS layers of
(attention projection pair, MLP), each ending in a row-parallel matmul whose output is
all-reduced over @tp (2 ranks) and added to the residual stream; TOKENS rows, HIDDEN wide,
bf16. The matching PyTorch model is bench/gpu/decode_torch.py.

    python3 bench/gpu/gen_decode.py TOKENS [HIDDEN] [LAYERS] [SYMM]   > decode.mlir

SYMM=1 (default) gives the group `symm_mem`; 0 leaves it out (every all-reduce is NCCL's)."""
import sys

t = int(sys.argv[1])
h = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
layers = int(sys.argv[3]) if len(sys.argv) > 3 else 4
symm = (sys.argv[4] if len(sys.argv) > 4 else "1") == "1"
f = 4 * h          # ffn width
a = h // 2         # attention projection width per rank (2 ranks)
m = f // 2         # ffn width per rank
T = lambda r, c: f"tensor<{r}x{c}xbf16>"
args = [f"%x: {T(t, h)}"]
for l in range(layers):
    args += [f"%wa{l}: {T(h, a)}", f"%wo{l}: {T(a, h)}", f"%w1{l}: {T(h, m)}", f"%w2{l}: {T(m, h)}"]
print("module {")
print(f"  coll.group @tp {{size = 2 : i64{', symm_mem' if symm else ''}}}")
print(f"  func.func @decode({', '.join(args)}) -> {T(t, h)} {{")
cur = "%x"
for l in range(layers):
    def block(name, w_in, w_out, width, act):
        global cur
        print(f"    %{name}h{l} = compute.matmul {cur}, {w_in} : ({T(t, h)}, {T(h, width)}) -> {T(t, width)}")
        src = f"%{name}h{l}"
        if act:
            print(f"    %{name}g{l} = compute.{act} {src} : {T(t, width)}")
            src = f"%{name}g{l}"
        print(f"    %{name}o{l} = compute.matmul {src}, {w_out} : ({T(t, width)}, {T(width, h)}) -> {T(t, h)}")
        print(f"    %{name}r{l} = coll.all_reduce %{name}o{l} {{reduce_op = \"sum\", group = @tp}} : {T(t, h)}")
        print(f"    %{name}w{l} = coll.wait_tensor %{name}r{l} : {T(t, h)}")
        print(f"    %{name}y{l} = compute.add {cur}, %{name}w{l} : {T(t, h)}")
        cur = f"%{name}y{l}"
    block("a", f"%wa{l}", f"%wo{l}", a, None)
    block("m", f"%w1{l}", f"%w2{l}", m, "gelu")
print(f"    return {cur} : {T(t, h)}")
print("  }")
print("}")
