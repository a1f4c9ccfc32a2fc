"""Prints a chain of N functions, @f0 calling @f1 calling ... @f<N-1> (call-depth.mlir)."""
import sys

n = int(sys.argv[1])
t = "tensor<4xf32>"
for i in range(n - 1):
    print(f"func.func @f{i}(%x: {t}) -> {t} {{")
    print(f"  %y = func.call @f{i + 1}(%x) : ({t}) -> {t}")
    print(f"  return %y : {t}")
    print("}")
print(f"func.func private @f{n - 1}(%x: {t}) -> {t} {{")
print(f"  return %x : {t}")
print("}")
