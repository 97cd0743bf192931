// A regression trained on an L1 loss with dropout on its hidden layer.
hl.param @l1.weight : tensor<16x2xf32> owner "l1" init <kaiming_uniform>
hl.param @l1.bias : tensor<16xf32> owner "l1" init <zeros>
hl.param @o.weight : tensor<1x16xf32> owner "o" init <xavier_uniform>
func.func @forward(%x: tensor<16x2xf32>) -> tensor<16x1xf32> {
  %w = hl.get_param @l1.weight : tensor<16x2xf32>
  %b = hl.get_param @l1.bias : tensor<16xf32>
  %h = hl.linear %x, %w, %b : tensor<16x2xf32>, tensor<16x2xf32>, tensor<16xf32>
  %a = hl.tanh %h : tensor<16x16xf32>
  %v = hl.get_param @o.weight : tensor<1x16xf32>
  %y = hl.linear %a, %v : tensor<16x16xf32>, tensor<1x16xf32>
  return %y : tensor<16x1xf32>
}
func.func @loss(%x: tensor<16x2xf32>, %t: tensor<16x1xf32>, %s: tensor<i64>, %o: tensor<i64>) -> tensor<f32> {
  %w = hl.get_param @l1.weight : tensor<16x2xf32>
  %b = hl.get_param @l1.bias : tensor<16xf32>
  %h = hl.linear %x, %w, %b : tensor<16x2xf32>, tensor<16x2xf32>, tensor<16xf32>
  %a0 = hl.tanh %h : tensor<16x16xf32>
  %a = hl.dropout %a0, %s, %o p = 0.2 stream = 0 : tensor<16x16xf32>
  %v = hl.get_param @o.weight : tensor<1x16xf32>
  %y = hl.linear %a, %v : tensor<16x16xf32>, tensor<1x16xf32>
  %d = hl.sub %y, %t : tensor<16x1xf32>, tensor<16x1xf32>
  %e = hl.abs %d : tensor<16x1xf32>
  %l = hl.reduce_mean %e axes = [0, 1] : tensor<16x1xf32>
  return %l : tensor<f32>
}
