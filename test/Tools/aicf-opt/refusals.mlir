// aicf-opt refuses, with exit code 1 and a located diagnostic, what it
// used to pass through, crash on, or misread: misspelt autocast
// overrides, a NaN loss scale, a head count whose width overflows, the
// train pipeline nested where it cannot run, input nested past the
// parser's recursion. Float options print as valid literals (8.0e0), and
// casts between f16 and bf16 compile (through f32).
// RUN: rm -rf %t && mkdir -p %t
// RUN: not aicf-opt %S/../../../examples/transformer/transformer_block.mlir --hl-autocast="dtype=bf16 fp32-ops=geluu" 2>&1 | FileCheck %s --check-prefix=OPNAME
// RUN: not aicf-opt %S/../../../examples/transformer/transformer_block.mlir --hl-autocast="dtype=bf16 fp32-layers=bloks" 2>&1 | FileCheck %s --check-prefix=LAYER
// OPNAME: error: hl-autocast: 'hl.geluu' is not an hl op
// LAYER: error: hl-autocast: fp32-layers names 'bloks', which no parameter or state of the module is in
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--hl-optimizer=kind=adam loss-scale=nan" 2>&1 | FileCheck %s --check-prefix=SCALENAN
// SCALENAN: error: hl-optimizer: loss-scale=NaN
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--hl-optimizer=kind=adam loss-scale=1e300" 2>&1 | FileCheck %s --check-prefix=SCALEBIG
// SCALEBIG: error: hl-optimizer: loss-scale=1e300 scale-growth-interval=2000: a scale of 0 (off) or between f32's smallest normal, 1.2e-38, and its largest, 3.4e38
// A scale that is 0 in f32 kept scaling on, every step skipped.
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--hl-optimizer=kind=adam loss-scale=1e-50" 2>&1 | FileCheck %s --check-prefix=SCALETINY
// SCALETINY: error: hl-optimizer: loss-scale=1e-50 scale-growth-interval=2000: a scale of 0 (off) or between
// Another optimizer's options were ignored (kind=sgd beta1=0.5 trained
// plain SGD).
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--hl-optimizer=kind=sgd beta1=0.5" 2>&1 | FileCheck %s --check-prefix=SGDBETA
// SGDBETA: error: hl-optimizer: beta1=0.5 beta2=0.999 eps=1e-8 are Adam's options: kind=sgd takes momentum, nesterov and weight-decay
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--hl-optimizer=kind=adamw momentum=0.9" 2>&1 | FileCheck %s --check-prefix=ADAMMOM
// ADAMMOM: error: hl-optimizer: momentum=0.9 nesterov=false are SGD's options: kind=adamw takes beta1, beta2, eps and weight-decay
// RUN: aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--hl-optimizer=kind=adam loss-scale=8" | FileCheck %s --check-prefix=SCALE
// SCALE: hl.state @loss_scale : tensor<f32> slot "loss_scale" init <uniform, low = 8.000000e+00, high = 8.000000e+00>
// RUN: not aicf-opt %S/../../../examples/char_lm/char_lm.mlir --hl-add-heads="attention=blocks.0.attn heads=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=HEADS
// HEADS: error: hl-add-heads: 9223372036854775807 heads of {{[0-9]+}} overflow a width
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir "--pass-pipeline=builtin.module(func.func(aicf-train-pipeline))" -o %t/out.mlir 2>&1 | FileCheck %s --check-prefix=NESTED
// NESTED: error: aicf-train-pipeline: its passes cannot run nested on 'func.func'
// RUN: python3 -c "n=5000;open('%t/deep.mlir','w').write('module {'*n+'}'*n)"
// RUN: not aicf-opt %t/deep.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not aicf compile %t/deep.mlir -o %t/deep 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: deep.mlir:1: error: brackets nest 1001 deep here
// Angle brackets nest too (types, attributes), and an affine expression's
// terms recurse per term: both overflowed the parser's stack (a signal).
// RUN: python3 -c "n=20000;open('%t/angles.mlir','w').write('func.func private @f() -> ' + 'tuple<'*n + 'f32' + '>'*n)"
// RUN: not aicf-opt %t/angles.mlir 2>&1 | FileCheck %s --check-prefix=ANGLES
// RUN: not aicf compile %t/angles.mlir -o %t/angles 2>&1 | FileCheck %s --check-prefix=ANGLES
// RUN: not aicf-opt < %t/angles.mlir 2>&1 | FileCheck %s --check-prefix=ANGLESIN
// ANGLES: angles.mlir:1: error: brackets nest 1001 deep here
// ANGLESIN: <stdin>:1: error: brackets nest 1001 deep here
// Reading standard input first is skipped where nothing is read: --version
// and --help return at once (they would wait on a terminal).
// RUN: timeout 60 aicf-opt --version < /dev/zero | FileCheck %s --check-prefix=VERSION
// RUN: timeout 60 aicf-opt --help < /dev/zero > %t/help.txt
// RUN: FileCheck %s --check-prefix=HELP < %t/help.txt
// VERSION: LLVM version
// HELP: OVERVIEW: AICF optimizer driver
// RUN: python3 -c "n=80000;open('%t/chain.mlir','w').write('#m = affine_map<(d0) -> (' + 'd0 + '*n + 'd0)>\nfunc.func private @f() attributes {m = #m}\n')"
// RUN: not aicf-opt %t/chain.mlir 2>&1 | FileCheck %s --check-prefix=CHAIN
// CHAIN: chain.mlir:1: error: an expression here chains more than 10000 operators
// A long but bounded chain, arrows, exponents and `>=` read as before.
// RUN: python3 -c "n=5000;open('%t/long.mlir','w').write('#m = affine_map<(d0) -> (' + 'd0 + '*n + 'd0)>\n#s = affine_set<(d0) : (d0 - 1 >= 0)>\nfunc.func private @f(tensor<2xf32>) -> tensor<2xf32> attributes {m = #m, s = #s, x = 1.5e-3 : f32}\n')"
// RUN: aicf-opt %t/long.mlir | FileCheck %s --check-prefix=LONG
// LONG: func.func private @f(tensor<2xf32>) -> tensor<2xf32>
// RUN: sed 's/%loss = hl.cross_entropy %logits, %labels/%c16 = hl.cast %logits : tensor<32x10xf32> to tensor<32x10xf16>\n  %cb = hl.cast %c16 : tensor<32x10xf16> to tensor<32x10xbf16>\n  %c32 = hl.cast %cb : tensor<32x10xbf16> to tensor<32x10xf32>\n  %loss = hl.cross_entropy %c32, %labels/' %S/../../../examples/mlp/digits_mlp.mlir > %t/casts.mlir
// RUN: aicf compile %t/casts.mlir -o %t/casts | FileCheck %s --check-prefix=CASTS
// CASTS: compiled {{.*}}casts.mlir
// An artifact goes to a new or empty directory (or over an earlier artifact).
// RUN: mkdir -p %t/busy && touch %t/busy/notes.txt
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir -o %t/busy 2>&1 | FileCheck %s --check-prefix=BUSY
// RUN: test ! -e %t/busy/manifest.json
// BUSY: aicf: error: {{.*}}busy: a directory holding other files, not an artifact; give a new or empty one
// hl-set-batch from a batch no argument has changes nothing: refused.
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir --hl-set-batch="size=8 from=7" 2>&1 | FileCheck %s --check-prefix=FROM
// FROM: error: hl-set-batch: from=7: no function argument has a leading dimension of 7
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir --hl-set-batch="size=3 from=-7" 2>&1 | FileCheck %s --check-prefix=FROMNEG
// FROMNEG: error: hl-set-batch: from=-7: give the batch to replace, a positive integer (or 0 to detect it)
// The train pipeline's names are names; autocast comes before autodiff.
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir '--aicf-train-pipeline=optimizer="sgd},hl-widen{layer=fc1 width=500},hl-optimizer{kind=sgd"' 2>&1 | FileCheck %s --check-prefix=SPLICE
// SPLICE: error: aicf-train-pipeline: 'sgd},hl-widen{layer=fc1 width=500},hl-optimizer{kind=sgd' is not a name
// RUN: not aicf-opt %S/../../../examples/mlp/digits_mlp.mlir --hl-autodiff --hl-autocast=dtype=bf16 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: error: hl-autocast: the module is differentiated already (@loss_grad): hl-autocast rewrites a model's forward, before hl-autodiff and hl-optimizer
// Sizes past 64 bits are refused by the verifier, not wrapped.
// RUN: not aicf-opt %S/inputs/huge-reshape.mlir.txt 2>&1 | FileCheck %s --check-prefix=RESHAPE
// RESHAPE: error: 'hl.reshape' op has more than 2^63 elements
// RUN: not aicf-opt %S/inputs/huge-dilation.mlir.txt 2>&1 | FileCheck %s --check-prefix=CONV
// CONV: error: 'hl.conv2d' op the window (dilation 4611686018427387904, kernel 3) or padding (0) is beyond 64-bit sizes
// A second masked widening of a layer uses the mask the first declared: one
// asked with another ramp or delay is refused (it was silently the first
// one's, while the run's log named the one asked for); the same mask, or
// none, grows it.
// RUN: aicf-opt %S/../../../examples/grow/narrow_mlp.mlir "--hl-widen=layer=fc1 width=32 mask=4" -o %t/masked.mlir
// RUN: not aicf-opt %t/masked.mlir "--hl-widen=layer=fc1 width=64 mask=50 mask_delay=30" 2>&1 | FileCheck %s --check-prefix=REMASK
// RUN: aicf-opt %t/masked.mlir "--hl-widen=layer=fc1 width=64 mask=4" | FileCheck %s --check-prefix=SAMEMASK
// REMASK: error: hl-widen: @fc1.mask already ramps its units over 4 steps after a delay of 0; a later masked growth of the layer uses that mask: give mask=4 mask_delay=0, or no mask, not mask=50 mask_delay=30
// SAMEMASK: hl.state @fc1.mask {{.*}}tensor<64xf32>
