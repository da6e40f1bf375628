// Generated datasets for quick experiments and tests. Samples interleave the
// classes (sample i belongs to class i % classes), so every prefix is balanced
// and a train limit never drops a class.
#include <algorithm>
#include <cmath>

#include "engine/data/dataset.h"
#include "kernels/core/rng.h"

namespace netloom {
namespace {

constexpr double kTwoPi = 6.283185307179586;
// How far each arm winds from the centre to its tip, in radians: enough for
// neighbouring arms to interleave without the set becoming unlearnable.
constexpr double kSpiralTurn = 4.0;

Dataset makeEmpty(int classes, int64_t samples, int features) {
  Dataset ds;
  ds.sampleShape = {features};
  ds.classes = std::max(classes, 1);
  ds.labels.resize(std::max<int64_t>(samples, 0));
  ds.floats.resize(ds.labels.size() * std::max(features, 0));
  return ds;
}

}  // namespace

Dataset makeSpirals(int classes, int64_t samples, double noise, uint64_t seed) {
  Dataset ds = makeEmpty(classes, samples, 2);
  const int c = ds.classes;
  const int64_t perClass = (ds.size() + c - 1) / c;  // arm length; the last may be one short
  Rng rng(seed);
  for (int64_t i = 0; i < ds.size(); ++i) {
    const int k = static_cast<int>(i % c);
    const double t = perClass > 1 ? static_cast<double>(i / c) / (perClass - 1) : 0.0;
    const double angle = kTwoPi * k / c + kSpiralTurn * t;
    const double r = t;
    const double nx = noise * rng.normal(), ny = noise * rng.normal();
    ds.floats[2 * i] = static_cast<float>(r * std::cos(angle) + nx);
    ds.floats[2 * i + 1] = static_cast<float>(r * std::sin(angle) + ny);
    ds.labels[i] = k;
  }
  return ds;
}

Dataset makeBlobs(int classes, int64_t samples, int features, double stddev, uint64_t seed) {
  Dataset ds = makeEmpty(classes, samples, std::max(features, 1));
  const int c = ds.classes;
  const int64_t f = ds.featuresPerSample();
  // Centres and points draw from separate streams, so the centres depend only on
  // the seed and the class count, not on how many samples are asked for.
  Rng centreRng(hashCombine(seed, 0xCE17E5));
  std::vector<double> centres(size_t(c) * size_t(f));
  for (double& v : centres) v = centreRng.uniform(-10.0, 10.0);
  Rng rng(hashCombine(seed, 0x9017));
  for (int64_t i = 0; i < ds.size(); ++i) {
    const int k = static_cast<int>(i % c);
    for (int64_t j = 0; j < f; ++j) {
      ds.floats[i * f + j] = static_cast<float>(centres[k * f + j] + stddev * rng.normal());
    }
    ds.labels[i] = k;
  }
  return ds;
}

}  // namespace netloom
