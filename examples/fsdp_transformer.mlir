// A two-layer FSDP transformer (forward and backward; 256 tokens, hidden 512, ffn 2048, bf16,
// 2 ranks): written by `target/release/examples/gen_transformer fsdp 2 256 512 2048`.
module {
  coll.group @dp {size = 2 : i64}
  func.func @step(%x: tensor<256x512xbf16>, %wq0_shard: tensor<256x512xbf16>, %wo0_shard: tensor<256x512xbf16>, %w1_0_shard: tensor<256x2048xbf16>, %w2_0_shard: tensor<1024x512xbf16>, %wq1_shard: tensor<256x512xbf16>, %wo1_shard: tensor<256x512xbf16>, %w1_1_shard: tensor<256x2048xbf16>, %w2_1_shard: tensor<1024x512xbf16>) -> (tensor<256x512xbf16>, tensor<1024x512xbf16>, tensor<256x2048xbf16>, tensor<256x512xbf16>, tensor<256x512xbf16>, tensor<1024x512xbf16>, tensor<256x2048xbf16>, tensor<256x512xbf16>, tensor<256x512xbf16>) {
    %t1 = coll.all_gather_into_tensor %wq0_shard {group = @dp} : (tensor<256x512xbf16>) -> tensor<512x512xbf16>
    %t2 = coll.wait_tensor %t1 : tensor<512x512xbf16>
    %t3 = coll.all_gather_into_tensor %wo0_shard {group = @dp} : (tensor<256x512xbf16>) -> tensor<512x512xbf16>
    %t4 = coll.wait_tensor %t3 : tensor<512x512xbf16>
    %t5 = compute.matmul %x, %t2 : (tensor<256x512xbf16>, tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t6 = compute.softmax %t5 {dim = 1 : i64} : tensor<256x512xbf16>
    %t7 = compute.matmul %t6, %t4 : (tensor<256x512xbf16>, tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t8 = compute.add %x, %t7 : tensor<256x512xbf16>
    %t9 = coll.all_gather_into_tensor %w1_0_shard {group = @dp} : (tensor<256x2048xbf16>) -> tensor<512x2048xbf16>
    %t10 = coll.wait_tensor %t9 : tensor<512x2048xbf16>
    %t11 = coll.all_gather_into_tensor %w2_0_shard {group = @dp} : (tensor<1024x512xbf16>) -> tensor<2048x512xbf16>
    %t12 = coll.wait_tensor %t11 : tensor<2048x512xbf16>
    %t13 = compute.matmul %t8, %t10 : (tensor<256x512xbf16>, tensor<512x2048xbf16>) -> tensor<256x2048xbf16>
    %t14 = compute.gelu %t13 : tensor<256x2048xbf16>
    %t15 = compute.matmul %t14, %t12 : (tensor<256x2048xbf16>, tensor<2048x512xbf16>) -> tensor<256x512xbf16>
    %t16 = compute.add %t8, %t15 : tensor<256x512xbf16>
    %t17 = coll.all_gather_into_tensor %wq1_shard {group = @dp} : (tensor<256x512xbf16>) -> tensor<512x512xbf16>
    %t18 = coll.wait_tensor %t17 : tensor<512x512xbf16>
    %t19 = coll.all_gather_into_tensor %wo1_shard {group = @dp} : (tensor<256x512xbf16>) -> tensor<512x512xbf16>
    %t20 = coll.wait_tensor %t19 : tensor<512x512xbf16>
    %t21 = compute.matmul %t16, %t18 : (tensor<256x512xbf16>, tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t22 = compute.softmax %t21 {dim = 1 : i64} : tensor<256x512xbf16>
    %t23 = compute.matmul %t22, %t20 : (tensor<256x512xbf16>, tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t24 = compute.add %t16, %t23 : tensor<256x512xbf16>
    %t25 = coll.all_gather_into_tensor %w1_1_shard {group = @dp} : (tensor<256x2048xbf16>) -> tensor<512x2048xbf16>
    %t26 = coll.wait_tensor %t25 : tensor<512x2048xbf16>
    %t27 = coll.all_gather_into_tensor %w2_1_shard {group = @dp} : (tensor<1024x512xbf16>) -> tensor<2048x512xbf16>
    %t28 = coll.wait_tensor %t27 : tensor<2048x512xbf16>
    %t29 = compute.matmul %t24, %t26 : (tensor<256x512xbf16>, tensor<512x2048xbf16>) -> tensor<256x2048xbf16>
    %t30 = compute.gelu %t29 : tensor<256x2048xbf16>
    %t31 = compute.matmul %t30, %t28 : (tensor<256x2048xbf16>, tensor<2048x512xbf16>) -> tensor<256x512xbf16>
    %t32 = compute.add %t24, %t31 : tensor<256x512xbf16>
    %t33 = compute.transpose %t32 : (tensor<256x512xbf16>) -> tensor<512x256xbf16>
    %t34 = compute.scale %t28 {factor = 0.5 : f64} : tensor<2048x512xbf16>
    %t35 = coll.reduce_scatter_tensor %t34 {group = @dp, reduce_op = "avg"} : (tensor<2048x512xbf16>) -> tensor<1024x512xbf16>
    %t36 = compute.scale %t26 {factor = 0.5 : f64} : tensor<512x2048xbf16>
    %t37 = coll.reduce_scatter_tensor %t36 {group = @dp, reduce_op = "avg"} : (tensor<512x2048xbf16>) -> tensor<256x2048xbf16>
    %t38 = compute.scale %t20 {factor = 0.5 : f64} : tensor<512x512xbf16>
    %t39 = coll.reduce_scatter_tensor %t38 {group = @dp, reduce_op = "avg"} : (tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t40 = compute.scale %t18 {factor = 0.5 : f64} : tensor<512x512xbf16>
    %t41 = coll.reduce_scatter_tensor %t40 {group = @dp, reduce_op = "avg"} : (tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t42 = compute.scale %t12 {factor = 0.5 : f64} : tensor<2048x512xbf16>
    %t43 = coll.reduce_scatter_tensor %t42 {group = @dp, reduce_op = "avg"} : (tensor<2048x512xbf16>) -> tensor<1024x512xbf16>
    %t44 = compute.scale %t10 {factor = 0.5 : f64} : tensor<512x2048xbf16>
    %t45 = coll.reduce_scatter_tensor %t44 {group = @dp, reduce_op = "avg"} : (tensor<512x2048xbf16>) -> tensor<256x2048xbf16>
    %t46 = compute.scale %t4 {factor = 0.5 : f64} : tensor<512x512xbf16>
    %t47 = coll.reduce_scatter_tensor %t46 {group = @dp, reduce_op = "avg"} : (tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t48 = compute.scale %t2 {factor = 0.5 : f64} : tensor<512x512xbf16>
    %t49 = coll.reduce_scatter_tensor %t48 {group = @dp, reduce_op = "avg"} : (tensor<512x512xbf16>) -> tensor<256x512xbf16>
    %t50 = coll.wait_tensor %t35 : tensor<1024x512xbf16>
    %t51 = coll.wait_tensor %t37 : tensor<256x2048xbf16>
    %t52 = coll.wait_tensor %t39 : tensor<256x512xbf16>
    %t53 = coll.wait_tensor %t41 : tensor<256x512xbf16>
    %t54 = coll.wait_tensor %t43 : tensor<1024x512xbf16>
    %t55 = coll.wait_tensor %t45 : tensor<256x2048xbf16>
    %t56 = coll.wait_tensor %t47 : tensor<256x512xbf16>
    %t57 = coll.wait_tensor %t49 : tensor<256x512xbf16>
    return %t32, %t50, %t51, %t52, %t53, %t54, %t55, %t56, %t57 : tensor<256x512xbf16>, tensor<1024x512xbf16>, tensor<256x2048xbf16>, tensor<256x512xbf16>, tensor<256x512xbf16>, tensor<1024x512xbf16>, tensor<256x2048xbf16>, tensor<256x512xbf16>, tensor<256x512xbf16>
  }
}
