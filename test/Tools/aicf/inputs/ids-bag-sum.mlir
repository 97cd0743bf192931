hl.param @emb.weight : tensor<10x4xf32> owner "emb" init <normal>
hl.param @fc.weight : tensor<2x4xf32> owner "fc" init <xavier_uniform>
func.func @forward(%t: tensor<4x3xi32>) -> tensor<4x2xf32> {
  %e = hl.get_param @emb.weight : tensor<10x4xf32>
  %g = hl.gather %e[%t] axis = 0 : tensor<10x4xf32>, tensor<4x3xi32>
  %m = hl.reduce_mean %g axes = [1] : tensor<4x3x4xf32>
  %w = hl.get_param @fc.weight : tensor<2x4xf32>
  %y = hl.linear %m, %w : tensor<4x4xf32>, tensor<2x4xf32>
  return %y : tensor<4x2xf32>
}
func.func @loss(%t: tensor<4x3xi32>, %l: tensor<4xi32>) -> tensor<f32> {
  %y = call @forward(%t) : (tensor<4x3xi32>) -> tensor<4x2xf32>
  %c = hl.cross_entropy %y, %l reduction = sum : tensor<4x2xf32>, tensor<4xi32>
  return %c : tensor<f32>
}
