// ui64 and integer averages on the GPU against the sim (`commlir-run --backend cuda --ranks 2
// --check`, exact). The sim holds a ui64 as its bit pattern in an i64; these ops must read
// it as unsigned, as the kernels and NCCL do: negative i64 inputs reinterpreted as ui64 give
// values from 2^63 up, which then divide, compare, pass relu and convert to f64 unsigned;
// f64 -> ui64 saturates at 2^64 - 1; the collectives' max/min compare unsigned; and an
// integer average divides the sum as the type holds it (wrapped), as NCCL's does.
module {
  coll.group @w {size = 2 : i64}
  func.func @main(%x: tensor<16x8xi64>, %y: tensor<16x8xi64>, %z: tensor<64xi32>)
      -> (tensor<16x8xui64>, tensor<16x8xui64>, tensor<16x8xui64>, tensor<16x8xui64>,
          tensor<16x8xf64>, tensor<16x8xui64>, tensor<16x8xui64>, tensor<16x8xui64>,
          tensor<16x8xui64>, tensor<64xi32>) {
    // Bit patterns from 2^63 up where the i64 inputs are negative.
    %ux = compute.cast %x : (tensor<16x8xi64>) -> tensor<16x8xui64>
    %uy = compute.cast %y : (tensor<16x8xi64>) -> tensor<16x8xui64>
    %three = compute.fill {value = 3.0 : f64} : tensor<16x8xui64>
    %q = compute.div %ux, %three : tensor<16x8xui64>
    %mx = compute.maximum %ux, %uy : tensor<16x8xui64>
    %mn = compute.minimum %ux, %uy : tensor<16x8xui64>
    %rl = compute.relu %ux : tensor<16x8xui64>
    %fl = compute.cast %ux : (tensor<16x8xui64>) -> tensor<16x8xf64>
    %big = compute.fill {value = 1.0e30 : f64} : tensor<16x8xf64>
    %sum = compute.add %fl, %big : tensor<16x8xf64>
    %sat = compute.cast %sum : (tensor<16x8xf64>) -> tensor<16x8xui64>
    %amax = coll.all_reduce %ux {reduce_op = "max", group = @w} : (tensor<16x8xui64>) -> tensor<16x8xui64>
    %amaxw = coll.wait_tensor %amax : tensor<16x8xui64>
    %amin = coll.all_reduce %ux {reduce_op = "min", group = @w} : (tensor<16x8xui64>) -> tensor<16x8xui64>
    %aminw = coll.wait_tensor %amin : tensor<16x8xui64>
    %aavg = coll.all_reduce %ux {reduce_op = "avg", group = @w} : (tensor<16x8xui64>) -> tensor<16x8xui64>
    %aavgw = coll.wait_tensor %aavg : tensor<16x8xui64>
    // i32 values near 2^31: the two ranks' sum wraps before the average divides it.
    %h = compute.fill {value = 2147483000.0 : f64} : tensor<64xi32>
    %zh = compute.add %z, %h : tensor<64xi32>
    %iavg = coll.all_reduce %zh {reduce_op = "avg", group = @w} : (tensor<64xi32>) -> tensor<64xi32>
    %iavgw = coll.wait_tensor %iavg : tensor<64xi32>
    return %q, %mx, %mn, %rl, %fl, %sat, %amaxw, %aminw, %aavgw, %iavgw
      : tensor<16x8xui64>, tensor<16x8xui64>, tensor<16x8xui64>, tensor<16x8xui64>,
        tensor<16x8xf64>, tensor<16x8xui64>, tensor<16x8xui64>, tensor<16x8xui64>,
        tensor<16x8xui64>, tensor<64xi32>
  }
}
