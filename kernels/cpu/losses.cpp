// Softmax, losses and metrics on the CPU. Per-row work runs in parallel into a
// per-row buffer that is then summed serially, so a loss is bit-for-bit the same
// for any thread count.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/core/functors.h"
#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

struct AxisDims {
  int64_t outer, len, inner;
};

AxisDims axisDims(const Shape& s, int64_t axis) {
  int64_t rank = int64_t(s.size());
  if (axis < 0) axis += rank;
  AxisDims d{1, s[axis], 1};
  for (int64_t i = 0; i < axis; ++i) d.outer *= s[i];
  for (int64_t i = axis + 1; i < rank; ++i) d.inner *= s[i];
  return d;
}

// A mean of per-row values computed in parallel and summed in a fixed order.
class RowMean {
 public:
  explicit RowMean(int64_t rows) : m_rows(std::make_shared<std::vector<double>>(rows)) {}
  double* rows() const { return m_rows->data(); }
  double mean(int64_t divisor) const {
    double s = 0;
    for (double v : *m_rows) s += v;
    return s / double(divisor);
  }

 private:
  std::shared_ptr<std::vector<double>> m_rows;
};

// log Σ exp(x) over one row, stable.
inline double logSumExp(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, x[j]);
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(double(x[j] - m));
  return double(m) + std::log(s);
}

KernelFn softmax(const KernelSig& s) {
  AxisDims d = axisDims(s.in[0].shape, s.attrs->i("axis"));
  return [d](const KernelIO& io) {
    const float* x = io.in[0].f32();
    float* y = io.out[0].f32();
    parallelFor(d.outer * d.inner, std::max<int64_t>(1, kParallelGrain / d.len),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    int64_t o = r / d.inner, in = r % d.inner;
                    const float* xr = x + o * d.len * d.inner + in;
                    float* yr = y + o * d.len * d.inner + in;
                    float m = xr[0];
                    for (int64_t j = 1; j < d.len; ++j) m = std::max(m, xr[j * d.inner]);
                    float sum = 0.f;
                    for (int64_t j = 0; j < d.len; ++j) {
                      float e = std::exp(xr[j * d.inner] - m);
                      yr[j * d.inner] = e;
                      sum += e;
                    }
                    float inv = 1.f / sum;
                    for (int64_t j = 0; j < d.len; ++j) yr[j * d.inner] *= inv;
                  }
                });
  };
}

KernelFn softmaxGrad(const KernelSig& s) {
  AxisDims d = axisDims(s.in[0].shape, s.attrs->i("axis"));
  return [d](const KernelIO& io) {
    const float* dy = io.in[0].f32();
    const float* y = io.in[1].f32();
    float* dx = io.out[0].f32();
    parallelFor(d.outer * d.inner, std::max<int64_t>(1, kParallelGrain / d.len),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    int64_t base = (r / d.inner) * d.len * d.inner + r % d.inner;
                    float dot = 0.f;
                    for (int64_t j = 0; j < d.len; ++j)
                      dot += dy[base + j * d.inner] * y[base + j * d.inner];
                    for (int64_t j = 0; j < d.len; ++j) {
                      int64_t k = base + j * d.inner;
                      dx[k] = y[k] * (dy[k] - dot);
                    }
                  }
                });
  };
}

// Rows of logits (classes on the last axis) and the label no row is counted for.
struct XentRows {
  int64_t rows, classes;
  int32_t ignore;
  explicit XentRows(const KernelSig& s, int logits)
      : rows(numel(s.in[size_t(logits)].shape) / s.in[size_t(logits)].shape.back()),
        classes(s.in[size_t(logits)].shape.back()),
        ignore(int32_t(s.attrs->i("ignore_index", -100))) {}
  // The rows whose label counts: PyTorch's divisor for reduction 'mean'.
  int64_t counted(const int32_t* label) const {
    int64_t n = 0;
    for (int64_t i = 0; i < rows; ++i) n += label[i] != ignore;
    return n;
  }
};

KernelFn softmaxCrossEntropy(const KernelSig& s) {
  const XentRows d(s, 0);
  double eps = s.attrs->f("label_smoothing");
  RowMean rows(d.rows);
  return [d, eps, rows](const KernelIO& io) {
    const int64_t c = d.classes;
    const float* x = io.in[0].f32();
    const int32_t* label = io.in[1].i32();
    double* per = rows.rows();
    parallelFor(d.rows, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const float* xr = x + i * c;
        int32_t l = label[i];
        if (l == d.ignore) {
          per[i] = 0;
          continue;
        }
        if (l < 0 || l >= c) {
          per[i] = NAN;  // a label outside the classes poisons the loss visibly
          continue;
        }
        double lse = logSumExp(xr, c);
        double nll = lse - xr[l];
        if (eps > 0) {
          double mean = 0;
          for (int64_t j = 0; j < c; ++j) mean += xr[j];
          nll = (1 - eps) * nll + eps * (lse - mean / double(c));
        }
        per[i] = nll;
      }
    });
    io.out[0].f32()[0] = float(rows.mean(d.counted(label)));
  };
}

KernelFn softmaxCrossEntropyGrad(const KernelSig& s) {
  const XentRows d(s, 1);
  float eps = float(s.attrs->f("label_smoothing"));
  return [d, eps](const KernelIO& io) {
    const int64_t c = d.classes;
    const int32_t* label = io.in[2].i32();
    float scale = io.in[0].f32()[0] / float(d.counted(label));
    const float* x = io.in[1].f32();
    float* dx = io.out[0].f32();
    fn::XentGrad grad = fn::XentGrad::make(eps, c, scale);
    parallelFor(d.rows, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const float* xr = x + i * c;
        float* dr = dx + i * c;
        if (label[i] == d.ignore) {
          std::fill(dr, dr + c, 0.f);
          continue;
        }
        float m = xr[0];
        for (int64_t j = 1; j < c; ++j) m = std::max(m, xr[j]);
        float sum = 0.f;
        for (int64_t j = 0; j < c; ++j) sum += (dr[j] = std::exp(xr[j] - m));
        float inv = 1.f / sum;
        for (int64_t j = 0; j < c; ++j) dr[j] = grad(dr[j], inv, j == label[i]);
      }
    });
  };
}

KernelFn mse(const KernelSig& s) {
  int64_t n = numel(s.in[0].shape), rows = std::max<int64_t>(1, s.in[0].shape[0]);
  int64_t per = n / rows;
  RowMean acc(rows);
  return [n, rows, per, acc](const KernelIO& io) {
    const float* p = io.in[0].f32();
    const float* t = io.in[1].f32();
    double* out = acc.rows();
    parallelFor(rows, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        double sum = 0;
        for (int64_t j = r * per; j < (r + 1) * per; ++j) sum += fn::SquaredError{}(p[j], t[j]);
        out[r] = sum;
      }
    });
    io.out[0].f32()[0] = float(acc.mean(n));
  };
}

KernelFn mseGrad(const KernelSig& s) {
  int64_t n = numel(s.in[1].shape);
  return [n](const KernelIO& io) {
    fn::MseGrad grad{2.f * io.in[0].f32()[0] / float(n)};
    const float* p = io.in[1].f32();
    const float* t = io.in[2].f32();
    float* d = io.out[0].f32();
    parallelFor(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) d[i] = grad(p[i], t[i]);
    });
  };
}

KernelFn bce(const KernelSig& s) {
  int64_t n = numel(s.in[0].shape), rows = std::max<int64_t>(1, s.in[0].shape[0]);
  int64_t per = n / rows;
  bool logits = s.attrs->b("from_logits");
  RowMean acc(rows);
  fn::BceTerm term{logits};
  return [n, rows, per, term, acc](const KernelIO& io) {
    const float* x = io.in[0].f32();
    const float* t = io.in[1].f32();
    double* out = acc.rows();
    parallelFor(rows, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        double sum = 0;
        for (int64_t j = r * per; j < (r + 1) * per; ++j) sum += term(x[j], t[j]);
        out[r] = sum;
      }
    });
    io.out[0].f32()[0] = float(acc.mean(n));
  };
}

KernelFn bceGrad(const KernelSig& s) {
  int64_t n = numel(s.in[1].shape);
  bool logits = s.attrs->b("from_logits"), wrtTarget = s.attrs->b("wrt_target");
  return [n, logits, wrtTarget](const KernelIO& io) {
    fn::BceGrad grad{io.in[0].f32()[0] / float(n), logits, wrtTarget};
    const float* x = io.in[1].f32();
    const float* t = io.in[2].f32();
    float* d = io.out[0].f32();
    parallelFor(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) d[i] = grad(x[i], t[i]);
    });
  };
}

// Fraction of rows whose label ranks among the top k (k = 1: plain accuracy).
KernelFn topK(const KernelSig& s, int64_t k) {
  const int64_t c = s.in[0].shape.back(), b = numel(s.in[0].shape) / std::max<int64_t>(1, c);
  return [b, c, k](const KernelIO& io) {
    const float* x = io.in[0].f32();
    const int32_t* label = io.in[1].i32();
    int64_t hits = 0;
    for (int64_t i = 0; i < b; ++i) {
      int32_t l = label[i];
      if (l < 0 || l >= c) continue;
      const float* xr = x + i * c;
      fn::RanksAbove above{xr[l], l};
      int64_t better = 0;
      for (int64_t j = 0; j < c; ++j) better += above(xr[j], j);
      hits += better < k;
    }
    io.out[0].f32()[0] = float(double(hits) / double(b));
  };
}

}  // namespace

void registerLosses(KernelRegistry& r) {
  auto add = [&](const char* op, std::function<KernelFn(const KernelSig&)> make) {
    r.add(op, DeviceKind::Cpu, kernel(std::string("cpu.") + op, std::move(make)));
  };
  add("Softmax", softmax);
  add("SoftmaxGrad", softmaxGrad);
  add("SoftmaxCrossEntropy", softmaxCrossEntropy);
  add("SoftmaxCrossEntropyGrad", softmaxCrossEntropyGrad);
  add("MSELoss", mse);
  add("MSELossGrad", mseGrad);
  add("BCELoss", bce);
  add("BCELossGrad", bceGrad);
  add("Accuracy", [](const KernelSig& s) { return topK(s, 1); });
  add("TopKAccuracy", [](const KernelSig& s) { return topK(s, s.attrs->i("k")); });
}

}  // namespace netloom::cpu
