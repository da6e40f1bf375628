#include "kernels/cpu/peak.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace netloom::cpu {

GemmPeak measureGemmPeak(int64_t n, int reps) {
  GemmPeak peak;
  peak.n = n;
  peak.threads = omp_get_max_threads();
  peak.probe =
      "oneDNN sgemm " + std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
  // Values of ordinary size (no zeros, no denormals): some units are faster on zeros.
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = 0.5f + float(i % 97) / 97.f;
    b[i] = 0.25f + float(i % 89) / 89.f;
  }
  double best = 0;
  for (int r = 0; r <= reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0 && s > 0) best = std::max(best, 2.0 * double(n) * double(n) * double(n) / s / 1e9);
  }
  peak.gflops = best;
  return peak;
}

}  // namespace netloom::cpu
