// The p-th quantile (0 … 1) of a benchmark's samples, the nearest rank; 0 for none.
#pragma once

#include <algorithm>
#include <vector>

namespace netloom::bench {

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

}  // namespace netloom::bench
