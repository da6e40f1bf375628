// Attention's sizes and settings as its kernels read them, worked out once from a
// signature on the host: the CPU and CUDA kernels take the same plan.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/kernel.h"
#include "kernels/core/sequence_math.h"

namespace netloom {

struct AttentionPlan {
  int64_t b = 0, h = 0, t = 0, s = 0, d = 0, dv = 0;
  float scale = 1.f;
  bool causal = false, hasMask = false, intMask = false;
  float dropP = 0.f;
  uint64_t salt = 0;
  int64_t maskSb = 0, maskSh = 0, maskSt = 0;  // mask strides, 0 where it broadcasts

  // q, k, v[, mask] at `first` in the signature's inputs (the gradient's come after dy).
  static AttentionPlan of(const KernelSig& sig, size_t first) {
    AttentionPlan p;
    const Shape &q = sig.in[first].shape, &v = sig.in[first + 2].shape;
    p.b = q[0], p.h = q[1], p.t = q[2], p.d = q[3], p.s = v[2], p.dv = v[3];
    const double given = sig.attrs->f("scale", 0.0);
    p.scale = float(given > 0 ? given : 1.0 / std::sqrt(double(p.d)));
    p.causal = sig.attrs->b("causal");
    p.dropP = float(sig.attrs->f("dropout", 0.0));
    p.salt = uint64_t(sig.attrs->i("__salt", 0));
    // The forward op's mask is its input 3; the gradient's, its input 6.
    const size_t maskAt = first + 3 + (first == 0 ? 0 : 2);
    if (sig.in.size() > maskAt) {
      const Shape& m = sig.in[maskAt].shape;
      p.hasMask = true;
      p.intMask = sig.in[maskAt].dtype == DType::I32;
      p.maskSt = m[2] == 1 ? 0 : m[3];
      p.maskSh = m[1] == 1 ? 0 : m[2] * m[3];
      p.maskSb = m[0] == 1 ? 0 : m[1] * m[2] * m[3];
    }
    return p;
  }

  fn::AttentionMaskView maskView(const void* data) const {
    fn::AttentionMaskView m;
    if (!hasMask) return m;
    if (intMask)
      m.i = static_cast<const int32_t*>(data);
    else
      m.f = static_cast<const float*>(data);
    m.sb = maskSb, m.sh = maskSh, m.st = maskSt;
    return m;
  }

  // Dropout as this step draws it (none in evaluation).
  fn::AttentionMask settings(uint64_t seed, int64_t step, bool training) const {
    fn::AttentionMask a;
    a.causal = causal;
    if (training && dropP > 0.f) {
      a.dropP = dropP;
      a.dropScale = 1.f / (1.f - dropP);
      a.dropKey = hashCombine(seed, hashCombine(uint64_t(step), salt));
    }
    return a;
  }
};

}  // namespace netloom
