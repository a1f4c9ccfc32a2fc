// The values of compute.attention on the sim backend, from inputs whose softmax is known:
// zero queries weigh every visible key equally, so with v[j] = j row i of the causal result
// is the mean of 0..i (i/2), and without the mask every row is the mean of all keys (1.5);
// the same in bf16; and scores 0 and ln 3 give the weights 1/4 and 3/4 (0·¼ + 4·¾ = 3).
//
// REQUIRES: commlir-run
// RUN: commlir-run %s --ranks 1 --entry uniform --print full | FileCheck %s --check-prefix=UNI
// RUN: commlir-run %s --ranks 1 --entry weights --print full | FileCheck %s --check-prefix=W

// UNI: rank 0 result 0: tensor<1x4x2xf32>
// UNI-NEXT: [0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 1.5, 1.5]
// UNI: rank 0 result 1: tensor<1x4x2xbf16>
// UNI-NEXT: [0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 1.5, 1.5]
// UNI: rank 0 result 2: tensor<1x4x2xf32>
// UNI-NEXT: [1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5]
// W: rank 0 result 0: tensor<1x1xf64>
// W-NEXT: [3.0]
func.func @uniform() -> (tensor<1x4x2xf32>, tensor<1x4x2xbf16>, tensor<1x4x2xf32>) {
  %q = compute.fill {value = 0.0 : f64} : tensor<1x4x3xf32>
  %v = compute.iota {dim = 1 : i64} : tensor<1x4x2xf32>
  %c = compute.attention %q, %q, %v {causal, scale = 0.5 : f64} : (tensor<1x4x3xf32>, tensor<1x4x3xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  %qb = compute.fill {value = 0.0 : f64} : tensor<1x4x3xbf16>
  %vb = compute.iota {dim = 1 : i64} : tensor<1x4x2xbf16>
  %cb = compute.attention %qb, %qb, %vb {causal, scale = 0.5 : f64} : (tensor<1x4x3xbf16>, tensor<1x4x3xbf16>, tensor<1x4x2xbf16>) -> tensor<1x4x2xbf16>
  %n = compute.attention %q, %q, %v {scale = 0.5 : f64} : (tensor<1x4x3xf32>, tensor<1x4x3xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  return %c, %cb, %n : tensor<1x4x2xf32>, tensor<1x4x2xbf16>, tensor<1x4x2xf32>
}

func.func @weights() -> tensor<1x1xf64> {
  %q = compute.fill {value = 1.0 : f64} : tensor<1x1xf64>
  %ln3 = compute.fill {value = 1.0986122886681098 : f64} : tensor<1x1xf64>
  %z = compute.fill {value = 0.0 : f64} : tensor<1x1xf64>
  %k = compute.concat %z, %ln3 {dim = 0 : i64} : (tensor<1x1xf64>, tensor<1x1xf64>) -> tensor<2x1xf64>
  %four = compute.fill {value = 4.0 : f64} : tensor<1x1xf64>
  %v = compute.concat %z, %four {dim = 0 : i64} : (tensor<1x1xf64>, tensor<1x1xf64>) -> tensor<2x1xf64>
  %o = compute.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<1x1xf64>, tensor<2x1xf64>, tensor<2x1xf64>) -> tensor<1x1xf64>
  return %o : tensor<1x1xf64>
}
