// A regression whose target is one output column, [batch, 1] (as
// nn.Linear(n, 1) with MSELoss has it), trains from a CSV table's last
// column (it was refused: a table fed only a target of [batch]), and eval
// scores it by its loss alone (it printed "accuracy n/a").
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; random.seed(3); rows=[[random.uniform(-1,1) for _ in range(3)] for _ in range(200)]; print('\n'.join(','.join(f'{v:.6f}' for v in r+[2*r[0]-r[1]+0.5*r[2]]) for r in rows))" > %t/table.csv
// RUN: aicf train %s --data %t/table.csv --epochs 20 --lr 0.02 --no-runs-db --out %t/run --checkpoint-dir %t/ck --no-progress | FileCheck %s
// CHECK: data: 200 rows of 3 features and a label
// CHECK: epoch  20/20  train loss {{[0-9.]+}}  val loss
// CHECK: final held-out loss [[HELD:[0-9.]+]] after 20 epochs
// RUN: aicf eval %s --data %t/table.csv --checkpoint %t/ck/last.safetensors --out %t/eval | FileCheck %s --check-prefix=EVAL
// EVAL: loss {{[0-9.]+}} {{.*}}on 40 held-out rows of {{.*}}table.csv (checkpoint {{.*}}, epoch 20)
// EVAL-NOT: accuracy
module {
  hl.param @fc1.weight : tensor<16x3xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
  hl.param @fc1.bias : tensor<16xf32> owner "fc1" init <uniform, low = -0.5, high = 0.5>
  hl.param @fc2.weight : tensor<1x16xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
  hl.param @fc2.bias : tensor<1xf32> owner "fc2" init <uniform, low = -0.25, high = 0.25>
  func.func @forward(%x: tensor<8x3xf32>) -> tensor<8x1xf32> {
    %w1 = hl.get_param @fc1.weight : tensor<16x3xf32>
    %b1 = hl.get_param @fc1.bias : tensor<16xf32>
    %h = hl.linear %x, %w1, %b1 : tensor<8x3xf32>, tensor<16x3xf32>, tensor<16xf32>
    %a = hl.relu %h : tensor<8x16xf32>
    %w2 = hl.get_param @fc2.weight : tensor<1x16xf32>
    %b2 = hl.get_param @fc2.bias : tensor<1xf32>
    %y = hl.linear %a, %w2, %b2 : tensor<8x16xf32>, tensor<1x16xf32>, tensor<1xf32>
    return %y : tensor<8x1xf32>
  }
  func.func @loss(%x: tensor<8x3xf32>, %t: tensor<8x1xf32>) -> tensor<f32> {
    %w1 = hl.get_param @fc1.weight : tensor<16x3xf32>
    %b1 = hl.get_param @fc1.bias : tensor<16xf32>
    %h = hl.linear %x, %w1, %b1 : tensor<8x3xf32>, tensor<16x3xf32>, tensor<16xf32>
    %a = hl.relu %h : tensor<8x16xf32>
    %w2 = hl.get_param @fc2.weight : tensor<1x16xf32>
    %b2 = hl.get_param @fc2.bias : tensor<1xf32>
    %y = hl.linear %a, %w2, %b2 : tensor<8x16xf32>, tensor<1x16xf32>, tensor<1xf32>
    %l = hl.mse_loss %y, %t : tensor<8x1xf32>, tensor<8x1xf32>
    return %l : tensor<f32>
  }
}
