// A parameter whose name needs quoting (a quote, a backslash, a space, a
// newline) trains: every pass that builds a symbol, a slot or a binding
// from it escapes the name (the optimizer built `"fc.a"b.exp_avg"`, which
// did not parse).
// RUN: aicf-opt %s "--aicf-train-pipeline=optimizer=adam" | FileCheck %s
// RUN: aicf-opt %s "--aicf-train-pipeline=optimizer=adam" | aicf-opt | FileCheck %s
// Compiled to kernels and trained (the manifest binds each buffer by name).
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; random.seed(1); rows=[[random.random() for _ in range(8)] for _ in range(64)]; open('%t/d.csv','w').write(''.join(','.join('%%.4f' %% v for v in r) + ',%%d\n' %% max(range(8), key=lambda k: r[k]) for r in rows))"
// RUN: aicf train %s --data %t/d.csv --epochs 2 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ckpt | FileCheck %s --check-prefix=TRAIN
// RUN: aicf eval %s --data %t/d.csv --checkpoint %t/ckpt/last.safetensors --out %t/eval | FileCheck %s --check-prefix=EVAL
// TRAIN: final held-out accuracy {{[0-9.]+}}% after 2 epochs
// EVAL: accuracy {{[0-9.]+}}% on 13 held-out rows

// CHECK: func.func @train_step
// CHECK-SAME: {ll.bind = "param @fc.a\22b"}
// CHECK-SAME: {ll.bind = "param @fc.c\\d e\0A"}
// CHECK-SAME: {ll.bind = "state @fc.a\22b.exp_avg"}
// CHECK-SAME: {ll.bind = "state @fc.c\\d e\0A.exp_avg_sq"}

hl.param @"fc.a\22b" : tensor<8x8xf32> owner "fc" init <uniform, low = -0.1, high = 0.1>
hl.param @"fc.c\5Cd e\0A" : tensor<8xf32> owner "fc" init <zeros>
func.func @loss(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %w = hl.get_param @"fc.a\22b" : tensor<8x8xf32>
  %b = hl.get_param @"fc.c\5Cd e\0A" : tensor<8xf32>
  %h = hl.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %o = hl.add %h, %b : tensor<4x8xf32>, tensor<8xf32>
  %l = hl.cross_entropy %o, %y : tensor<4x8xf32>, tensor<4xi32>
  return %l : tensor<f32>
}
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = hl.get_param @"fc.a\22b" : tensor<8x8xf32>
  %b = hl.get_param @"fc.c\5Cd e\0A" : tensor<8xf32>
  %h = hl.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %o = hl.add %h, %b : tensor<4x8xf32>, tensor<8xf32>
  return %o : tensor<4x8xf32>
}
