// What oneDNN's code runs on here, read from the CPU and from ONEDNN_MAX_CPU_ISA, not
// from the kernels under test: a kernel that declines where it should not still fails.
#pragma once

#include <QByteArray>
#include <QtGlobal>

// Whether oneDNN runs its AVX-512 code (avx512_core and above): its kernels in blocked
// layouts (nChw16c), its packed convolution weights and its blocked pooling exist only
// there; without AVX-512 every plan stays plain.
inline bool oneDnnRunsAvx512() {
  __builtin_cpu_init();
  for (bool has :
       {__builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx512bw") != 0,
        __builtin_cpu_supports("avx512vl") != 0, __builtin_cpu_supports("avx512dq") != 0})
    if (!has) return false;
  QByteArray cap = qgetenv("ONEDNN_MAX_CPU_ISA");
  if (cap.isEmpty()) cap = qgetenv("DNNL_MAX_CPU_ISA");
  cap = cap.toUpper();
  return cap.isEmpty() || cap == "ALL" || cap.startsWith("AVX512") || cap.contains("AMX") ||
         cap.startsWith("AVX10");
}

// The reason a test of blocked layouts skips where oneDNN has none.
constexpr const char* kNoBlockedLayouts =
    "oneDNN runs no AVX-512 code on this CPU (or ONEDNN_MAX_CPU_ISA caps it): it has no "
    "blocked-layout kernels, and every plan stays plain";
