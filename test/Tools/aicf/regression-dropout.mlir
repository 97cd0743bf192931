// A regression model with dropout in its @loss: the held-out loss is its
// @loss with the dropout off (`@__aicf_loss_eval`, as PyTorch validates in eval
// mode). Once nothing was scored and the run stopped on a NaN held-out
// loss; then it was the mean squared error of @forward's output, which is
// another figure where @loss is not a squared error. The targets are
// y = 2 x0 - x1 + 0.5.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; random.seed(3); rows = [(random.uniform(-1, 1), random.uniform(-1, 1)) for _ in range(200)]; open('%t/table.csv', 'w').write('\n'.join(f'{a:.4f},{b:.4f},{2 * a - b + 0.5:.4f}' for a, b in rows) + '\n')"
// RUN: aicf train %s --data %t/table.csv --epochs 30 --lr 0.05 --optimizer adam --no-runs-db --out %t/run --checkpoint-dir %t/ck --no-progress | FileCheck %s
// CHECK: epoch  30/30  train loss {{[0-9.]+}}  val loss 0.0{{[0-9]+}}
// CHECK: final held-out loss [[LOSS:0.0[0-9]+]]
// `aicf eval` scores a regression (it refused anything but a classifier):
// the same figure.
// RUN: aicf train %s --data %t/table.csv --epochs 30 --lr 0.05 --optimizer adam --no-runs-db --out %t/run2 --checkpoint-dir %t/ck2 --no-progress > %t/train.txt
// RUN: aicf eval %s --data %t/table.csv --checkpoint %t/ck2/last.safetensors --out %t/eval > %t/eval.txt
// RUN: cat %t/train.txt %t/eval.txt | FileCheck %s --check-prefix=EVAL
// EVAL: final held-out loss [[HELD:0.0[0-9]+]]
// EVAL: loss [[HELD]] (the model's @loss) on 40 held-out rows of {{.*}}table.csv (checkpoint {{.*}}, epoch 30)
module {
  hl.param @fc.weight : tensor<1x2xf32> owner "fc" init <kaiming_uniform>
  hl.param @fc.bias : tensor<1xf32> owner "fc" init <zeros>
  func.func @forward(%x: tensor<16x2xf32>) -> tensor<16x1xf32> {
    %w = hl.get_param @fc.weight : tensor<1x2xf32>
    %b = hl.get_param @fc.bias : tensor<1xf32>
    %y = hl.linear %x, %w, %b : tensor<16x2xf32>, tensor<1x2xf32>, tensor<1xf32>
    return %y : tensor<16x1xf32>
  }
  func.func @loss(%x: tensor<16x2xf32>, %t: tensor<16xf32>, %s: tensor<i64>, %o: tensor<i64>) -> tensor<f32> {
    %d = hl.dropout %x, %s, %o p = 1.000000e-01 stream = 0 : tensor<16x2xf32>
    %w = hl.get_param @fc.weight : tensor<1x2xf32>
    %b = hl.get_param @fc.bias : tensor<1xf32>
    %y = hl.linear %d, %w, %b : tensor<16x2xf32>, tensor<1x2xf32>, tensor<1xf32>
    %r = hl.reshape %y : tensor<16x1xf32> to tensor<16xf32>
    %l = hl.mse_loss %r, %t : tensor<16xf32>, tensor<16xf32>
    return %l : tensor<f32>
  }
}
