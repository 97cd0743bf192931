// A parameter added into the stream as it is (a positional table the
// dynamo exporter folded out of its lookup) is a producer: its channels
// grow with the stream's (it was refused: "'hl.get_param' writes the
// residual stream").
// RUN: aicf-opt %s --hl-widen-residual="width=16" | FileCheck %s --check-prefix=POSTABLE
// POSTABLE-LABEL: hl.param @pos : tensor<3x16xf32>
// POSTABLE: func.func @forward
// POSTABLE: hl.add %{{.*}}, %{{.*}} : tensor<2x3x16xf32>, tensor<3x16xf32>
hl.param @emb.weight : tensor<5x8xf32> owner "emb" init <normal>
hl.param @pos : tensor<3x8xf32> owner "" init <normal>
hl.param @ln.weight : tensor<8xf32> owner "ln" init <ones>
hl.param @head.weight : tensor<5x8xf32> owner "head" init <normal>
func.func @forward(%t: tensor<2x3xi32>) -> tensor<2x3x5xf32> {
  %e = hl.get_param @emb.weight : tensor<5x8xf32>
  %x = hl.gather %e[%t] axis = 0 : tensor<5x8xf32>, tensor<2x3xi32>
  %p = hl.get_param @pos : tensor<3x8xf32>
  %s = hl.add %x, %p : tensor<2x3x8xf32>, tensor<3x8xf32>
  %w = hl.get_param @ln.weight : tensor<8xf32>
  %n = hl.layer_norm %s weight %w dims = 1 eps = 1.0e-05 : tensor<2x3x8xf32>, tensor<8xf32>
  %h = hl.get_param @head.weight : tensor<5x8xf32>
  %y = hl.linear %n, %h : tensor<2x3x8xf32>, tensor<5x8xf32>
  return %y : tensor<2x3x5xf32>
}
