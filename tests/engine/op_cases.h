// Every op's harness cases, with their double-precision references: the CPU suite
// (tst_ops) and the GPU suite (tst_gpu) run the same cases.
#pragma once

#include "cases_conv.h"
#include "cases_norm.h"
#include "cases_sequence.h"
#include "op_harness.h"

namespace harness {

using netloom::Attrs;

// Reference helpers ---------------------------------------------------------------

inline Vec unary(const RefArgs& a, double (*f)(double)) {
  Vec y(a.in[0].size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = f(a.in[0][i]);
  return y;
}

inline Vec linear(const RefArgs& a) {
  const Vec &x = a.in[0], &w = a.params[0];
  int64_t out = a.paramShapes[0][0], in = a.paramShapes[0][1], rows = int64_t(x.size()) / in;
  Vec y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = a.params.size() > 1 ? a.params[1][o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

struct Axis {
  int64_t outer = 1, len = 1, inner = 1;
};
inline Axis axisOf(const Shape& s, int64_t axis) {
  if (axis < 0) axis += int64_t(s.size());
  Axis d;
  d.len = s[axis];
  for (int64_t i = 0; i < axis; ++i) d.outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i) d.inner *= s[i];
  return d;
}

inline Vec softmax(const RefArgs& a, int64_t axis) {
  Axis d = axisOf(a.inShapes[0], axis);
  Vec y(a.in[0].size());
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t in = 0; in < d.inner; ++in) {
      auto at = [&](int64_t j) { return o * d.len * d.inner + j * d.inner + in; };
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < d.len; ++j) m = std::max(m, a.in[0][at(j)]);
      for (int64_t j = 0; j < d.len; ++j) s += std::exp(a.in[0][at(j)] - m);
      for (int64_t j = 0; j < d.len; ++j) y[at(j)] = std::exp(a.in[0][at(j)] - m) / s;
    }
  return y;
}

inline Vec crossEntropy(const RefArgs& a, double eps) {
  int64_t b = a.inShapes[0][0], c = a.inShapes[0][1];
  double total = 0;
  for (int64_t i = 0; i < b; ++i) {
    const double* x = &a.in[0][i * c];
    double m = *std::max_element(x, x + c), s = 0, mean = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - m), mean += x[j] / double(c);
    double lse = m + std::log(s);
    total += (1 - eps) * (lse - x[int(a.in[1][i])]) + eps * (lse - mean);
  }
  return {total / double(b)};
}

// Over every position of batch × … × classes scores.
inline Vec topK(const RefArgs& a, int k) {
  int64_t c = a.inShapes[0].back(), b = int64_t(a.in[0].size()) / c;
  double hits = 0;
  for (int64_t i = 0; i < b; ++i) {
    const double* x = &a.in[0][i * c];
    int l = int(a.in[1][i]), better = 0;
    for (int64_t j = 0; j < c; ++j) better += x[j] > x[l];
    hits += better < k;
  }
  return {hits / double(b)};
}

inline Vec concat(const RefArgs& a, int64_t axis) {
  Axis d = axisOf(a.inShapes[0], axis);
  Vec y;
  for (int64_t o = 0; o < d.outer; ++o)
    for (size_t k = 0; k < a.in.size(); ++k) {
      int64_t w = a.inShapes[k][axis < 0 ? axis + a.inShapes[k].size() : axis] * d.inner;
      y.insert(y.end(), a.in[k].begin() + o * w, a.in[k].begin() + (o + 1) * w);
    }
  return y;
}

inline Vec same(const RefArgs& a) {
  return a.in[0];
}

inline double gelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
inline double geluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

inline std::vector<std::pair<std::string, OpCase>> coreCases() {
  std::vector<std::pair<std::string, OpCase>> c;
  auto add = [&](std::string name, OpCase oc) { c.push_back({std::move(name), std::move(oc)}); };
  using I = int64_t;

  add("linear 4x5->3", {"Linear", {{"out_features", I(3)}}, {{{4, 5}}}, linear});
  add("linear no bias", {"Linear", {{"out_features", I(2)}, {"bias", false}}, {{{3, 6}}}, linear});
  add("linear 3d input", {"Linear", {{"out_features", I(4)}}, {{{2, 3, 5}}}, linear});
  add("linear xavier", {"Linear",
                        {{"out_features", I(3)}, {"init", std::string("xavier_normal")}},
                        {{{5, 4}}},
                        linear});
  add("relu", {"ReLU", {}, {{{4, 6}}}, [](const RefArgs& a) {
                 return unary(a, [](double x) { return std::max(x, 0.0); });
               }});
  add("leaky relu", {"LeakyReLU", {{"negative_slope", 0.1}}, {{{3, 7}}}, [](const RefArgs& a) {
                       return unary(a, [](double x) { return x > 0 ? x : 0.1 * x; });
                     }});
  add("gelu", {"GELU", {}, {{{3, 8}}}, [](const RefArgs& a) { return unary(a, gelu); }});
  add("gelu tanh",
      {"GELU", {{"approximate", std::string("tanh")}}, {{{3, 8}}}, [](const RefArgs& a) {
         return unary(a, geluTanh);
       }});
  add("sigmoid", {"Sigmoid", {}, {{{2, 9}}}, [](const RefArgs& a) {
                    return unary(a, [](double x) { return 1 / (1 + std::exp(-x)); });
                  }});
  add("tanh", {"Tanh", {}, {{{2, 2, 5}}}, [](const RefArgs& a) {
                 return unary(a, [](double x) { return std::tanh(x); });
               }});
  add("silu", {"SiLU", {}, {{{3, 8}, Fill::Wide}}, [](const RefArgs& a) {
                 return unary(a, [](double x) { return x / (1 + std::exp(-x)); });
               }});
  add("hardswish", {"HardSwish", {}, {{{4, 8}, Fill::Wide}}, [](const RefArgs& a) {
                      return unary(a, [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; });
                    }});
  add("softplus beta 1.5",
      {"Softplus", {{"beta", 1.5}}, {{{3, 8}, Fill::Wide}}, [](const RefArgs& a) {
         return unary(a, [](double x) { return std::log1p(std::exp(1.5 * x)) / 1.5; });
       }});
  add("mish", {"Mish", {}, {{{3, 8}, Fill::Wide}}, [](const RefArgs& a) {
                 return unary(a, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); });
               }});
  add("softmax last", {"Softmax", {}, {{{4, 6}}}, [](const RefArgs& a) { return softmax(a, -1); }});
  add("softmax axis 1 of 3",
      {"Softmax", {{"axis", I(1)}}, {{{2, 4, 3}}}, [](const RefArgs& a) { return softmax(a, 1); }});
  add("dropout p=0", {"Dropout", {{"p", 0.0}}, {{{3, 5}}}, same});
  add("flatten", {"Flatten", {}, {{{2, 3, 2, 2}}}, same});
  add("flatten start 2", {"Flatten", {{"start_dim", I(2)}}, {{{2, 3, 2, 2}}}, same});
  add("reshape", {"Reshape", {{"shape", Shape{3, -1}}}, {{{2, 12}}}, same});
  add("identity", {"Identity", {}, {{{3, 4}}}, same});
  add("add", {"Add", {}, {{{3, 4}}, {{3, 4}}}, [](const RefArgs& a) {
                Vec y(a.in[0].size());
                for (size_t i = 0; i < y.size(); ++i) y[i] = a.in[0][i] + a.in[1][i];
                return y;
              }});
  add("concat axis 1",
      {"Concat", {}, {{{2, 3}}, {{2, 5}}}, [](const RefArgs& a) { return concat(a, 1); }});
  add("concat three axis -1",
      {"Concat", {{"axis", I(-1)}}, {{{2, 2, 3}}, {{2, 2, 1}}, {{2, 2, 2}}}, [](const RefArgs& a) {
         return concat(a, -1);
       }});
  add("concat axis 1 of 3",
      {"Concat", {{"axis", I(1)}}, {{{2, 1, 3}}, {{2, 2, 3}}}, [](const RefArgs& a) {
         return concat(a, 1);
       }});
  add("softmax cross entropy",
      {"SoftmaxCrossEntropy", {}, {{{5, 4}}, {{5}, Fill::Labels, 4}}, [](const RefArgs& a) {
         return crossEntropy(a, 0.0);
       }});
  add("cross entropy smoothing", {"SoftmaxCrossEntropy",
                                  {{"label_smoothing", 0.1}},
                                  {{{6, 3}}, {{6}, Fill::Labels, 3}},
                                  [](const RefArgs& a) { return crossEntropy(a, 0.1); }});
  add("mse", {"MSELoss", {}, {{{4, 3}}, {{4, 3}}}, [](const RefArgs& a) {
                double s = 0;
                for (size_t i = 0; i < a.in[0].size(); ++i)
                  s += std::pow(a.in[0][i] - a.in[1][i], 2);
                return Vec{s / double(a.in[0].size())};
              }});
  auto bce = [](bool logits) {
    return [logits](const RefArgs& a) {
      double s = 0;
      for (size_t i = 0; i < a.in[0].size(); ++i) {
        double x = a.in[0][i], t = a.in[1][i];
        double p = logits ? 1 / (1 + std::exp(-x)) : x;
        s += -(t * std::log(p) + (1 - t) * std::log(1 - p));
      }
      return Vec{s / double(a.in[0].size())};
    };
  };
  add("bce",
      {"BCELoss", {}, {{{4, 2}, Fill::Probability}, {{4, 2}, Fill::Probability}}, bce(false)});
  add("bce logits",
      {"BCELoss", {{"from_logits", true}}, {{{5, 1}}, {{5, 1}, Fill::Probability}}, bce(true)});
  add("accuracy", {"Accuracy", {}, {{{8, 5}}, {{8}, Fill::Labels, 5}}, [](const RefArgs& a) {
                     return topK(a, 1);
                   }});
  add("accuracy per position",
      {"Accuracy", {}, {{{3, 4, 6}}, {{3, 4}, Fill::Labels, 6}}, [](const RefArgs& a) {
         return topK(a, 1);
       }});
  add("top-3 accuracy",
      {"TopKAccuracy", {{"k", I(3)}}, {{{8, 5}}, {{8}, Fill::Labels, 5}}, [](const RefArgs& a) {
         return topK(a, 3);
       }});
  return c;
}

inline std::vector<std::pair<std::string, OpCase>> allCases() {
  auto all = coreCases();
  for (auto more : {convCases(), normCases(), sequenceCases()})
    all.insert(all.end(), more.begin(), more.end());
  return all;
}

}  // namespace harness
