// Measured throughput peak of AVX-512 BF16's dot product (vdpbf16ps: per
// f32 lane, two bf16 products added to the lane, 4 FLOP), the instruction
// of the runtime's `bf16-dot` GEMM candidate; the counterpart of
// ../shared/bench/fma_peak512.c for fp32, with the same loop shape.
// Build: gcc -O2 -mavx512f -mavx512bf16 -fopenmp bf16_dot_peak.c -o bf16_dot_peak
// Run: OMP_NUM_THREADS=1 ./bf16_dot_peak ; OMP_NUM_THREADS=2 ./bf16_dot_peak
// (needs a CPU with avx512_bf16: grep avx512_bf16 /proc/cpuinfo)
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#define NACC 12
int main(void) {
  const long iters = 200000000L;
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = omp_get_wtime();
    float sink = 0;
    int nt = 1;
#pragma omp parallel reduction(+ : sink)
    {
      nt = omp_get_num_threads();
      // Tiny products, so the sums stay finite and normal for the whole run.
      __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
      __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
      __m512 a[NACC];
      for (int i = 0; i < NACC; i++) a[i] = _mm512_set1_ps((float)i);
      for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < NACC; i++) a[i] = _mm512_dpbf16_ps(a[i], x, y);
      }
      __m512 s = a[0];
      for (int i = 1; i < NACC; i++) s = _mm512_add_ps(s, a[i]);
      float o[16];
      _mm512_storeu_ps(o, s);
      sink += o[0];
    }
    double t = omp_get_wtime() - t0;
    double gf = (double)nt * iters * NACC * 16 * 4 / t / 1e9;
    if (gf > best) best = gf;
    if (rep == 4)
      printf("{\"system\":\"c_dpbf16_loop\",\"workload\":\"bf16_dot_peak\",\"threads\":%d,\"gflops_best\":%.1f,"
             "\"implied_GHz_per_core\":%.3f,\"sink\":%g}\n",
             nt, best, best / nt / 64.0, sink);
  }
  return 0;
}
