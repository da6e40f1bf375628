// forestImportance (search.h): regression trees grown to a depth of 8 on bootstrap
// samples, a random third of the parameters (at least two) tried at each split, each split's
// reduction of the squared error credited to its parameter.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/sweep/search.h"

namespace netloom::sweep {
namespace {

constexpr int kMaxDepth = 8;
constexpr size_t kMinLeaf = 2;

struct Grower {
  const std::vector<std::vector<double>>& x;  // [observation][parameter]
  const std::vector<double>& y;
  Rng& rng;
  int tried;  // parameters tried at each split
  std::vector<double>& credit;

  static double sse(const std::vector<size_t>& rows, const std::vector<double>& y) {
    double mean = 0;
    for (size_t r : rows) mean += y[r] / double(rows.size());
    double s = 0;
    for (size_t r : rows) s += (y[r] - mean) * (y[r] - mean);
    return s;
  }

  void grow(std::vector<size_t> rows, int depth) {
    if (depth >= kMaxDepth || rows.size() < 2 * kMinLeaf) return;
    const double before = sse(rows, y);
    if (before <= 0) return;
    const int features = int(x[0].size());
    std::vector<int> order(static_cast<size_t>(features));
    std::iota(order.begin(), order.end(), 0);
    for (int i = features - 1; i > 0; --i)
      std::swap(order[size_t(i)], order[rng.below(uint64_t(i + 1))]);
    double bestGain = 0, bestCut = 0;
    int bestFeature = -1;
    for (int f = 0; f < tried; ++f) {
      const int k = order[size_t(f)];
      std::vector<size_t> sorted = rows;
      std::sort(sorted.begin(), sorted.end(),
                [&](size_t a, size_t b) { return x[a][size_t(k)] < x[b][size_t(k)]; });
      // Running sums: the error of each cut between two distinct values, in one pass.
      double leftSum = 0, leftSq = 0, total = 0, totalSq = 0;
      for (size_t r : sorted) total += y[r], totalSq += y[r] * y[r];
      for (size_t i = 0; i + 1 < sorted.size(); ++i) {
        leftSum += y[sorted[i]];
        leftSq += y[sorted[i]] * y[sorted[i]];
        const double a = x[sorted[i]][size_t(k)], b = x[sorted[i + 1]][size_t(k)];
        const size_t nl = i + 1, nr = sorted.size() - nl;
        if (a == b || nl < kMinLeaf || nr < kMinLeaf) continue;
        const double rightSum = total - leftSum, rightSq = totalSq - leftSq;
        const double after = (leftSq - leftSum * leftSum / double(nl)) +
                             (rightSq - rightSum * rightSum / double(nr));
        if (before - after > bestGain)
          bestGain = before - after, bestCut = (a + b) / 2, bestFeature = k;
      }
    }
    if (bestFeature < 0) return;
    credit[size_t(bestFeature)] += bestGain;
    std::vector<size_t> left, right;
    for (size_t r : rows) (x[r][size_t(bestFeature)] < bestCut ? left : right).push_back(r);
    grow(std::move(left), depth + 1);
    grow(std::move(right), depth + 1);
  }
};

}  // namespace

std::vector<double> forestImportance(const Space& space, const std::vector<Observation>& done,
                                     uint64_t seed, int trees) {
  const size_t n = done.size(), d = space.params().size();
  std::vector<double> credit(d, 0.0);
  if (n < 4 || d == 0) return credit;
  std::vector<std::vector<double>> x(n, std::vector<double>(d));
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) {
    y[i] = done[i].objective;
    for (size_t k = 0; k < d; ++k) {
      const double v = done[i].at[k];
      x[i][k] = space.params()[k].kind == Param::Kind::LogUniform ? std::log(v) : v;
    }
  }
  Rng rng(seed);
  Grower g{x, y, rng, std::min(int(d), std::max(2, int(d + 2) / 3)), credit};
  for (int t = 0; t < trees; ++t) {
    std::vector<size_t> rows(n);
    for (size_t& r : rows) r = size_t(rng.below(n));
    g.grow(std::move(rows), 0);
  }
  const double total = std::accumulate(credit.begin(), credit.end(), 0.0);
  if (total > 0)
    for (double& c : credit) c /= total;
  return credit;
}

}  // namespace netloom::sweep
