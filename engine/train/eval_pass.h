// A run's evaluation pass and the sums it (and each epoch of training) keeps: the
// mean loss and metrics over every sample, across ranks. Inside the trainer; not an
// API.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/runtime/program.h"
#include "engine/train/run_setup.h"
#include "kernels/core/communicator.h"

namespace netloom {

// Sums over the samples of a pass (a training epoch or an evaluation), weighted by
// each batch's size, so that a short last batch counts for what it holds.
struct Totals {
  double loss = 0;
  std::map<std::string, double> metrics;
  int64_t samples = 0;

  void add(const Program& p, int64_t n) {
    std::vector<float> values{p.scalar(p.loss)};
    for (const auto& [name, v] : p.metrics) values.push_back(p.scalar(v));
    add(p, n, values.data());
  }
  // With the loss and each of p.metrics already read: `values`.
  void add(const Program& p, int64_t n, const float* values) {
    loss += double(values[0]) * double(n);
    for (size_t m = 0; m < p.metrics.size(); ++m)
      if (p.metrics[m].second != p.loss)
        metrics[p.metrics[m].first] += double(values[1 + m]) * double(n);
    samples += n;
  }
  double meanLoss() const { return samples ? loss / double(samples) : 0; }
  void fill(google::protobuf::Map<std::string, double>* out) const {
    for (const auto& [name, v] : metrics) (*out)[name] = samples ? v / double(samples) : 0;
  }
};

// An evaluation pass: eval mode, no gradients, no optimizer. Across ranks each
// takes its share of every batch and the totals are summed, so every sample counts
// once; `metrics` names the sums in the same order on every rank.
Result<Totals> evaluate(ProgramCache& cache, const Dataset& data, const Normalizer& norm,
                        int64_t batch, uint64_t seed, Communicator* comm,
                        const std::vector<std::string>& metrics);

}  // namespace netloom
