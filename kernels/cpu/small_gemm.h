// Products of small row-major matrices held in cache (attention's blocks: 16 queries
// by 64 keys by a head's 32 or 64 channels), too small for a library call to pay. Rows
// of C are summed in registers, four at a time 64 columns wide or eight at a time 32
// or 16 wide, so each loaded row of B serves several rows of A; columns past a
// multiple of 16 take a plain loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace netloom::cpu {

namespace small_gemm {

using Vec = float __attribute__((vector_size(64)));  // 16 floats: one AVX-512 register
constexpr int kLanes = 16;
// Rows summed together for NV vectors of columns: about 16 accumulators.
constexpr int rowsFor(int nv) {
  return nv >= 4 ? 4 : 8;
}

// Through references, never by value: a vector argument or result changes the ABI
// where the CPU lacks AVX-512, which GCC warns of.
inline void load(Vec& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
inline void store(float* p, const Vec& v) {
  std::memcpy(p, &v, sizeof v);
}

// C[rows × 16·NV] (+)= A[rows × k] · B[k × 16·NV]; rows ≤ rowsFor(NV).
template <int NV>
inline void tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 int rows, int64_t k, bool add) {
  constexpr int kRows = rowsFor(NV);
  Vec acc[kRows][NV];
  const float* ar[kRows];
  for (int r = 0; r < kRows; ++r) {
    ar[r] = a + std::min(r, rows - 1) * lda;  // missing rows repeat the last, unstored
    for (int v = 0; v < NV; ++v)
      if (add && r < rows)
        load(acc[r][v], c + r * ldc + v * kLanes);
      else
        acc[r][v] = Vec{};
  }
  for (int64_t p = 0; p < k; ++p) {
    Vec bv[NV];
    for (int v = 0; v < NV; ++v) load(bv[v], b + p * ldb + v * kLanes);
    for (int r = 0; r < kRows; ++r) {
      const float s = ar[r][p];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < NV; ++v) store(c + r * ldc + v * kLanes, acc[r][v]);
}

}  // namespace small_gemm

// C[m × n] = A[m × k] · B[k × n] (add: C +=), row-major with leading dimensions.
inline void smallGemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int64_t m, int64_t n, int64_t k, bool add) {
  using namespace small_gemm;
  // Column strips of 64, 32 and 16, each down all of C's rows.
  auto strip = [&](auto nv, int64_t j) {
    constexpr int kNv = decltype(nv)::value, kRows = rowsFor(kNv);
    for (int64_t i = 0; i < m; i += kRows)
      tile<kNv>(a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc,
                int(std::min<int64_t>(kRows, m - i)), k, add);
  };
  int64_t j = 0;
  for (; j + 4 * kLanes <= n; j += 4 * kLanes) strip(std::integral_constant<int, 4>{}, j);
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) strip(std::integral_constant<int, 2>{}, j);
  for (; j + kLanes <= n; j += kLanes) strip(std::integral_constant<int, 1>{}, j);
  for (; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      float s = add ? c[i * ldc + j] : 0.f;
      for (int64_t p = 0; p < k; ++p) s += a[i * lda + p] * b[p * ldb + j];
      c[i * ldc + j] = s;
    }
}

// The transpose of a[rows × cols] (leading dimension lda) into t[cols × rows] (ldt).
inline void transposeInto(const float* a, int64_t lda, int64_t rows, int64_t cols, float* t,
                          int64_t ldt) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * ldt + i] = a[i * lda + j];
}

}  // namespace netloom::cpu
