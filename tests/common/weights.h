// Two safetensors files of the same tensors compared, for tests.
#pragma once

#include <QString>
#include <algorithm>
#include <cmath>

#include "engine/io/safetensors.h"

namespace netloom::testing {

// Largest |a - b| over the tensor's largest |a|, per tensor; -1 when they differ in names.
inline double weightsDiffer(const QString& a, const QString& b) {
  auto x = netloom::readSafetensors(a.toStdString());
  auto y = netloom::readSafetensors(b.toStdString());
  if (!x.ok() || !y.ok() || x->size() != y->size()) return -1;
  double worst = 0;
  for (size_t t = 0; t < x->size(); ++t) {
    const auto& p = (*x)[t];
    const auto& q = (*y)[t];
    if (p.name != q.name || p.data.size() != q.data.size()) return -1;
    const float* u = reinterpret_cast<const float*>(p.data.data());
    const float* v = reinterpret_cast<const float*>(q.data.data());
    double diff = 0, scale = 0;
    for (size_t i = 0; i < p.data.size() / 4; ++i) {
      diff = std::max(diff, double(std::fabs(u[i] - v[i])));
      scale = std::max(scale, double(std::fabs(u[i])));
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

}  // namespace netloom::testing
