// The benchmark transformer block of ../shared/bench/common_spec.txt: a
// pre-LN block (d = 256, 4 heads, causal self-attention, a tanh-GELU MLP of
// 1024) on `x: [8, 128, 256]`, then a linear head to 256 classes and the
// mean cross-entropy over all 1024 positions.
//
// Its 256 input features and 256 classes make it a byte-level language
// model when each position's input is the one-hot vector of a byte:
//
//   aicf train examples/transformer/transformer_block.mlir --data data/tinyshakespeare.txt
//
// (the block has no position embedding, so it sees the preceding bytes as a
// causally masked set). The Rust layer API builds exactly this module
// (examples/transformer/model.rs; `cargo run -p aicf-compiler --example
// models -- transformer`), which a test checks.

module {
  hl.param @block.ln1.weight : tensor<256xf32> owner "block.ln1" init <ones>
  hl.param @block.ln1.bias : tensor<256xf32> owner "block.ln1" init <zeros>
  hl.param @block.attn.q_proj.weight : tensor<256x256xf32> owner "block.attn.q_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @block.attn.q_proj.bias : tensor<256xf32> owner "block.attn.q_proj" init <uniform, low = -6.250000e-02, high = 6.250000e-02>
  hl.param @block.attn.k_proj.weight : tensor<256x256xf32> owner "block.attn.k_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @block.attn.k_proj.bias : tensor<256xf32> owner "block.attn.k_proj" init <uniform, low = -6.250000e-02, high = 6.250000e-02>
  hl.param @block.attn.v_proj.weight : tensor<256x256xf32> owner "block.attn.v_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @block.attn.v_proj.bias : tensor<256xf32> owner "block.attn.v_proj" init <uniform, low = -6.250000e-02, high = 6.250000e-02>
  hl.param @block.attn.out_proj.weight : tensor<256x256xf32> owner "block.attn.out_proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @block.attn.out_proj.bias : tensor<256xf32> owner "block.attn.out_proj" init <uniform, low = -6.250000e-02, high = 6.250000e-02>
  hl.param @block.ln2.weight : tensor<256xf32> owner "block.ln2" init <ones>
  hl.param @block.ln2.bias : tensor<256xf32> owner "block.ln2" init <zeros>
  hl.param @block.mlp.fc.weight : tensor<1024x256xf32> owner "block.mlp.fc" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @block.mlp.fc.bias : tensor<1024xf32> owner "block.mlp.fc" init <uniform, low = -6.250000e-02, high = 6.250000e-02>
  hl.param @block.mlp.proj.weight : tensor<256x1024xf32> owner "block.mlp.proj" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @block.mlp.proj.bias : tensor<256xf32> owner "block.mlp.proj" init <uniform, low = -3.125000e-02, high = 3.125000e-02>
  hl.param @head.weight : tensor<256x256xf32> owner "head" init <kaiming_uniform, gain = 0.57735026918962573>
  hl.param @head.bias : tensor<256xf32> owner "head" init <uniform, low = -6.250000e-02, high = 6.250000e-02>
  func.func @forward(%arg0: tensor<8x128x256xf32>) -> tensor<8x128x256xf32> {
    %0 = hl.get_param @block.ln1.weight : tensor<256xf32>
    %1 = hl.get_param @block.ln1.bias : tensor<256xf32>
    %2 = hl.layer_norm %arg0 weight %0 bias %1 dims = 1 eps = 1.000000e-05 : tensor<8x128x256xf32>, tensor<256xf32>, tensor<256xf32>
    %3 = hl.get_param @block.attn.q_proj.weight : tensor<256x256xf32>
    %4 = hl.get_param @block.attn.q_proj.bias : tensor<256xf32>
    %5 = hl.linear %2, %3, %4 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %6 = hl.reshape %5 : tensor<8x128x256xf32> to tensor<8x128x4x64xf32>
    %7 = hl.transpose %6 permutation = [0, 2, 1, 3] : tensor<8x128x4x64xf32>
    %8 = hl.get_param @block.attn.k_proj.weight : tensor<256x256xf32>
    %9 = hl.get_param @block.attn.k_proj.bias : tensor<256xf32>
    %10 = hl.linear %2, %8, %9 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %11 = hl.reshape %10 : tensor<8x128x256xf32> to tensor<8x128x4x64xf32>
    %12 = hl.transpose %11 permutation = [0, 2, 1, 3] : tensor<8x128x4x64xf32>
    %13 = hl.get_param @block.attn.v_proj.weight : tensor<256x256xf32>
    %14 = hl.get_param @block.attn.v_proj.bias : tensor<256xf32>
    %15 = hl.linear %2, %13, %14 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %16 = hl.reshape %15 : tensor<8x128x256xf32> to tensor<8x128x4x64xf32>
    %17 = hl.transpose %16 permutation = [0, 2, 1, 3] : tensor<8x128x4x64xf32>
    %18 = hl.attention %7, %12, %17 causal : tensor<8x4x128x64xf32>, tensor<8x4x128x64xf32>, tensor<8x4x128x64xf32>
    %19 = hl.transpose %18 permutation = [0, 2, 1, 3] : tensor<8x4x128x64xf32>
    %20 = hl.reshape %19 : tensor<8x128x4x64xf32> to tensor<8x128x256xf32>
    %21 = hl.get_param @block.attn.out_proj.weight : tensor<256x256xf32>
    %22 = hl.get_param @block.attn.out_proj.bias : tensor<256xf32>
    %23 = hl.linear %20, %21, %22 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %24 = hl.add %arg0, %23 : tensor<8x128x256xf32>, tensor<8x128x256xf32>
    %25 = hl.get_param @block.ln2.weight : tensor<256xf32>
    %26 = hl.get_param @block.ln2.bias : tensor<256xf32>
    %27 = hl.layer_norm %24 weight %25 bias %26 dims = 1 eps = 1.000000e-05 : tensor<8x128x256xf32>, tensor<256xf32>, tensor<256xf32>
    %28 = hl.get_param @block.mlp.fc.weight : tensor<1024x256xf32>
    %29 = hl.get_param @block.mlp.fc.bias : tensor<1024xf32>
    %30 = hl.linear %27, %28, %29 : tensor<8x128x256xf32>, tensor<1024x256xf32>, tensor<1024xf32>
    %31 = hl.gelu %30 approximate = tanh : tensor<8x128x1024xf32>
    %32 = hl.get_param @block.mlp.proj.weight : tensor<256x1024xf32>
    %33 = hl.get_param @block.mlp.proj.bias : tensor<256xf32>
    %34 = hl.linear %31, %32, %33 : tensor<8x128x1024xf32>, tensor<256x1024xf32>, tensor<256xf32>
    %35 = hl.add %24, %34 : tensor<8x128x256xf32>, tensor<8x128x256xf32>
    %36 = hl.get_param @head.weight : tensor<256x256xf32>
    %37 = hl.get_param @head.bias : tensor<256xf32>
    %38 = hl.linear %35, %36, %37 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    return %38 : tensor<8x128x256xf32>
  }
  func.func @loss(%arg0: tensor<8x128x256xf32>, %arg1: tensor<8x128xi32>) -> tensor<f32> {
    %0 = hl.get_param @block.ln1.weight : tensor<256xf32>
    %1 = hl.get_param @block.ln1.bias : tensor<256xf32>
    %2 = hl.layer_norm %arg0 weight %0 bias %1 dims = 1 eps = 1.000000e-05 : tensor<8x128x256xf32>, tensor<256xf32>, tensor<256xf32>
    %3 = hl.get_param @block.attn.q_proj.weight : tensor<256x256xf32>
    %4 = hl.get_param @block.attn.q_proj.bias : tensor<256xf32>
    %5 = hl.linear %2, %3, %4 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %6 = hl.reshape %5 : tensor<8x128x256xf32> to tensor<8x128x4x64xf32>
    %7 = hl.transpose %6 permutation = [0, 2, 1, 3] : tensor<8x128x4x64xf32>
    %8 = hl.get_param @block.attn.k_proj.weight : tensor<256x256xf32>
    %9 = hl.get_param @block.attn.k_proj.bias : tensor<256xf32>
    %10 = hl.linear %2, %8, %9 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %11 = hl.reshape %10 : tensor<8x128x256xf32> to tensor<8x128x4x64xf32>
    %12 = hl.transpose %11 permutation = [0, 2, 1, 3] : tensor<8x128x4x64xf32>
    %13 = hl.get_param @block.attn.v_proj.weight : tensor<256x256xf32>
    %14 = hl.get_param @block.attn.v_proj.bias : tensor<256xf32>
    %15 = hl.linear %2, %13, %14 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %16 = hl.reshape %15 : tensor<8x128x256xf32> to tensor<8x128x4x64xf32>
    %17 = hl.transpose %16 permutation = [0, 2, 1, 3] : tensor<8x128x4x64xf32>
    %18 = hl.attention %7, %12, %17 causal : tensor<8x4x128x64xf32>, tensor<8x4x128x64xf32>, tensor<8x4x128x64xf32>
    %19 = hl.transpose %18 permutation = [0, 2, 1, 3] : tensor<8x4x128x64xf32>
    %20 = hl.reshape %19 : tensor<8x128x4x64xf32> to tensor<8x128x256xf32>
    %21 = hl.get_param @block.attn.out_proj.weight : tensor<256x256xf32>
    %22 = hl.get_param @block.attn.out_proj.bias : tensor<256xf32>
    %23 = hl.linear %20, %21, %22 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %24 = hl.add %arg0, %23 : tensor<8x128x256xf32>, tensor<8x128x256xf32>
    %25 = hl.get_param @block.ln2.weight : tensor<256xf32>
    %26 = hl.get_param @block.ln2.bias : tensor<256xf32>
    %27 = hl.layer_norm %24 weight %25 bias %26 dims = 1 eps = 1.000000e-05 : tensor<8x128x256xf32>, tensor<256xf32>, tensor<256xf32>
    %28 = hl.get_param @block.mlp.fc.weight : tensor<1024x256xf32>
    %29 = hl.get_param @block.mlp.fc.bias : tensor<1024xf32>
    %30 = hl.linear %27, %28, %29 : tensor<8x128x256xf32>, tensor<1024x256xf32>, tensor<1024xf32>
    %31 = hl.gelu %30 approximate = tanh : tensor<8x128x1024xf32>
    %32 = hl.get_param @block.mlp.proj.weight : tensor<256x1024xf32>
    %33 = hl.get_param @block.mlp.proj.bias : tensor<256xf32>
    %34 = hl.linear %31, %32, %33 : tensor<8x128x1024xf32>, tensor<256x1024xf32>, tensor<256xf32>
    %35 = hl.add %24, %34 : tensor<8x128x256xf32>, tensor<8x128x256xf32>
    %36 = hl.get_param @head.weight : tensor<256x256xf32>
    %37 = hl.get_param @head.bias : tensor<256xf32>
    %38 = hl.linear %35, %36, %37 : tensor<8x128x256xf32>, tensor<256x256xf32>, tensor<256xf32>
    %39 = hl.cross_entropy %38, %arg1 : tensor<8x128x256xf32>, tensor<8x128xi32>
    return %39 : tensor<f32>
  }
}
