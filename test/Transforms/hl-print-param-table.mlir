// RUN: aicf-opt %s --hl-print-param-table -o /dev/null 2>&1 | FileCheck %s
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-print-param-table{group-by-owner=true})' -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GROUP
// The pass leaves the IR as it was.
// RUN: aicf-opt %s --hl-print-param-table 2>/dev/null | FileCheck %s --check-prefix=IR
// The bundled example model, as a user would inspect it.
// RUN: aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-print-param-table -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIGITS
// A module without parameters is an error only when asked.
// RUN: split-file %s %t
// RUN: aicf-opt %t/empty.mlir --hl-print-param-table -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY
// A name holding a newline or a tab prints escaped (it broke its row).
// RUN: python3 -c "open('%t/control.mlir','w').write(r'hl.param @\"fc\09x.a\0Ab\" : tensor<2x2xf32> owner \"fc\09x\" init <zeros>')"
// RUN: aicf-opt %t/control.mlir --hl-print-param-table -o /dev/null 2>&1 | FileCheck %s --check-prefix=CONTROL
// RUN: not aicf-opt %t/empty.mlir --pass-pipeline='builtin.module(hl-print-param-table{require-params=true})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REQUIRE
// RUN: not aicf-opt %t/empty.mlir --pass-pipeline='builtin.module(hl-print-param-table{require-params=maybe})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADOPT

// CHECK:      parameter       owner  shape   dtype  elements  bytes  init
// CHECK-NEXT: enc.fc1.weight  enc    128x64  f32    8192      32768  kaiming_uniform
// CHECK-NEXT: enc.fc1.bias    enc    128     f32    128       512    zeros
// CHECK-NEXT: head.weight     head   10x128  bf16   1280      2560   normal, std = 2.000000e-02
// CHECK-NEXT: temperature     -      scalar  f64    1         8      ones
// CHECK-NEXT: total: 4 parameters, 9601 elements, 35848 bytes

// GROUP:      enc.fc1.bias    enc    128     f32    128       512    zeros
// GROUP-NEXT:   subtotal enc                         8320      33280
// GROUP-NEXT: head.weight     head   10x128  bf16   1280      2560   normal, std = 2.000000e-02
// GROUP-NEXT:   subtotal head                        1280      2560
// GROUP-NEXT: temperature     -      scalar  f64    1         8      ones
// GROUP-NEXT:   subtotal -                           1         8
// GROUP-NEXT: total: 4 parameters, 9601 elements, 35848 bytes

// IR: hl.param @enc.fc1.weight : tensor<128x64xf32> owner "enc" init <kaiming_uniform>
// IR: hl.param @temperature : tensor<f64> owner "" init <ones>

// DIGITS:      fc1.weight  fc1    128x64  f32    8192      32768  kaiming_uniform, gain = 0.57735026918962573
// DIGITS-NEXT: fc1.bias    fc1    128     f32    128       512    uniform, low = -1.250000e-01, high = 1.250000e-01
// DIGITS-NEXT: fc2.weight  fc2    10x128  f32    1280      5120   kaiming_uniform, gain = 0.57735026918962573
// DIGITS-NEXT: fc2.bias    fc2    10      f32    10        40     uniform, low = -0.088388347648318433, high = 0.088388347648318433
// DIGITS-NEXT: total: 4 parameters, 9610 elements, 38440 bytes

// EMPTY: total: 0 parameters, 0 elements, 0 bytes
// CONTROL: fc\tx.a\nb  fc\tx  2x2    f32    4         16     zeros
// CONTROL-NEXT: total: 1 parameters
// REQUIRE: empty.mlir:0:0: error: hl-print-param-table: the module declares no hl.param (require-params is set)
// BADOPT: for the --require-params option: 'maybe' is invalid value for boolean argument!

hl.param @enc.fc1.weight : tensor<128x64xf32> owner "enc" init <kaiming_uniform>
hl.param @enc.fc1.bias : tensor<128xf32> owner "enc" init <zeros>
hl.param @head.weight : tensor<10x128xbf16> owner "head" init <normal, std = 0.02>
hl.param @temperature : tensor<f64> owner "" init <ones>

//--- empty.mlir
func.func @f() {
  return
}
