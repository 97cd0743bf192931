// The NVPTX path AICF's GPU kernels take, end to end inside aicf-opt with
// no GPU: a gpu.func lowered through NVVM to PTX for sm_90 and sm_80.
// `math` must be lowered to LLVM intrinsics before convert-gpu-to-nvvm:
// otherwise math.fma becomes a call to libdevice's __nv_fmaf, which the PTX
// then declares .extern and no driver can load without libdevice.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90 features=+ptx80 O=3},gpu.module(convert-scf-to-cf,convert-math-to-llvm,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})' \
// RUN:   | FileCheck %s --check-prefix=SM90
// SM90: gpu.binary @kernels
// SM90-SAME: .target sm_90
// SM90-SAME: .entry scale_add
// RUN: aicf-opt %s --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_80 features=+ptx70 O=3},gpu.module(convert-scf-to-cf,convert-math-to-llvm,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})' \
// RUN:   | FileCheck %s --check-prefix=SM80
// SM80: .target sm_80
// SM80-NOT: __nv_fmaf
// SM80-SAME: fma.rn.f32
// SM80-NOT: __nv_fmaf

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale_add(%a: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>, %s: f32, %n: index) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %in_bounds = arith.cmpi ult, %i, %n : index
      scf.if %in_bounds {
        %x = memref.load %a[%i] : memref<?xf32>
        %y = memref.load %b[%i] : memref<?xf32>
        %r = math.fma %x, %s, %y : f32
        memref.store %r, %out[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
}
