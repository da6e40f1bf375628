// The CPU's measured matrix-product peak: what the profile and the benchmarks set each
// kernel's and each model's speed against.
#pragma once

#include <cstdint>
#include <string>

namespace netloom::cpu {

struct GemmPeak {
  int64_t n = 0;      // the product was n × n × n
  int threads = 0;    // OpenMP threads it ran on
  double gflops = 0;  // the best of the timed repetitions
  std::string probe;  // "oneDNN sgemm 2048×2048×2048"
};

// Times oneDNN's sgemm on n × n × n float matrices (one warm-up, then the best of
// `reps`) on the calling thread's OpenMP thread count. 2048³ takes about 0.1 s per
// repetition at 200 GFLOP/s.
GemmPeak measureGemmPeak(int64_t n = 2048, int reps = 3);

}  // namespace netloom::cpu
