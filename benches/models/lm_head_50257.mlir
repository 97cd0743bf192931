// A language model head of GPT-2's vocabulary alone: 512 rows of width 128
// through a 50,257-word linear layer into the cross-entropy. In bf16 its
// GEMMs pad to 50,264 outputs and the loss reads the padded logits
// (`aicf bench benches/models/lm_head_50257.mlir --precision bf16 --profile`).
module {
  hl.param @head.weight : tensor<50257x128xf32> owner "head" init <normal>
  func.func @forward(%x: tensor<512x128xf32>) -> tensor<512x50257xf32> {
    %w = hl.get_param @head.weight : tensor<50257x128xf32>
    %y = hl.linear %x, %w : tensor<512x128xf32>, tensor<50257x128xf32>
    return %y : tensor<512x50257xf32>
  }
  func.func @loss(%x: tensor<512x128xf32>, %t: tensor<512xi32>) -> tensor<f32> {
    %w = hl.get_param @head.weight : tensor<50257x128xf32>
    %y = hl.linear %x, %w : tensor<512x128xf32>, tensor<50257x128xf32>
    %l = hl.cross_entropy %y, %t : tensor<512x50257xf32>, tensor<512xi32>
    return %l : tensor<f32>
  }
}
