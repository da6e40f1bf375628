#include "engine/sweep/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace netloom::sweep {

Param Param::choice(std::string name, std::vector<std::string> choices) {
  Param p;
  p.name = std::move(name);
  p.kind = Kind::Choice;
  p.choices = std::move(choices);
  p.lo = 0;
  p.hi = double(p.choices.size()) - 1;
  return p;
}
Param Param::uniform(std::string name, double lo, double hi) {
  Param p;
  p.name = std::move(name);
  p.lo = lo;
  p.hi = hi;
  return p;
}
Param Param::logUniform(std::string name, double lo, double hi) {
  Param p = uniform(std::move(name), lo, hi);
  p.kind = Kind::LogUniform;
  return p;
}
Param Param::integer(std::string name, int64_t lo, int64_t hi) {
  Param p = uniform(std::move(name), double(lo), double(hi));
  p.kind = Kind::Int;
  return p;
}

std::string Param::invalid() const {
  const std::string at = "parameter '" + name + "': ";
  if (name.empty()) return "a parameter has no name";
  if (kind == Kind::Choice) {
    if (choices.empty()) return at + "a choice of nothing";
    return {};
  }
  if (!std::isfinite(lo) || !std::isfinite(hi)) return at + "its range must be finite";
  if (!(lo < hi) && !(kind == Kind::Int && lo == hi))
    return at + "an empty range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")";
  if (kind == Kind::LogUniform && lo <= 0)
    return at + "a log range must lie above 0 (it starts at " + std::to_string(lo) + ")";
  if (kind == Kind::Int && (lo != std::floor(lo) || hi != std::floor(hi)))
    return at + "an integer range needs whole bounds";
  return {};
}

Result<Space> Space::make(std::vector<Param> params) {
  if (params.empty()) return makeError("a sweep needs at least one parameter");
  std::set<std::string> names;
  for (const Param& p : params) {
    if (std::string why = p.invalid(); !why.empty()) return makeError(why);
    if (!names.insert(p.name).second) return makeError("parameter '" + p.name + "' given twice");
  }
  Space s;
  s.m_params = std::move(params);
  return s;
}

std::string Space::text(const Point& p, size_t k) const {
  const Param& q = m_params[k];
  if (q.kind == Param::Kind::Choice) return q.choices[size_t(p[k])];
  if (q.kind == Param::Kind::Int) return std::to_string(int64_t(p[k]));
  char s[32];
  std::snprintf(s, sizeof s, "%.4g", p[k]);
  return s;
}

namespace {

// A parameter's values in the coordinates the strategies work in: a log range as its
// logarithm, an integer range widened by half a step each side (each integer then
// owns a unit of it), a choice as its index.
struct Axis {
  double a = 0, b = 1;
  explicit Axis(const Param& p) {
    switch (p.kind) {
      case Param::Kind::LogUniform: a = std::log(p.lo), b = std::log(p.hi); break;
      case Param::Kind::Int: a = p.lo - 0.5, b = p.hi + 0.5; break;
      default: a = p.lo, b = p.hi;
    }
  }
};
double toAxis(const Param& p, double v) {
  return p.kind == Param::Kind::LogUniform ? std::log(v) : v;
}
double fromAxis(const Param& p, double u) {
  switch (p.kind) {
    case Param::Kind::LogUniform: return std::clamp(std::exp(u), p.lo, p.hi);
    case Param::Kind::Int: return std::clamp(std::round(u), p.lo, p.hi);
    default: return std::clamp(u, p.lo, p.hi);
  }
}

double drawOne(const Param& p, Rng& rng) {
  if (p.kind == Param::Kind::Choice) return double(rng.below(p.choices.size()));
  const Axis x(p);
  return fromAxis(p, rng.uniform(x.a, x.b));
}

class RandomSearch : public Strategy {
 public:
  RandomSearch(const Space& space, uint64_t seed) : m_space(space), m_rng(seed) {}
  std::optional<Point> next(const std::vector<Observation>&) override {
    return m_space.draw(m_rng);
  }
  std::string name() const override { return "random"; }

 private:
  Space m_space;
  Rng m_rng;
};

class GridSearch : public Strategy {
 public:
  GridSearch(const Space& space, int steps) {
    for (const Param& p : space.params()) m_values.push_back(valuesOf(p, std::max(steps, 2)));
    m_at.assign(m_values.size(), 0);
  }
  std::optional<Point> next(const std::vector<Observation>&) override {
    if (m_done) return std::nullopt;
    Point p(m_values.size());
    for (size_t k = 0; k < p.size(); ++k) p[k] = m_values[k][m_at[k]];
    size_t k = m_at.size();  // the last parameter varies fastest
    while (k-- > 0) {
      if (++m_at[k] < m_values[k].size()) break;
      m_at[k] = 0;
      if (k == 0) m_done = true;
    }
    return p;
  }
  std::string name() const override { return "grid"; }

 private:
  static std::vector<double> valuesOf(const Param& p, int steps) {
    std::vector<double> v;
    if (p.kind == Param::Kind::Choice) {
      for (size_t i = 0; i < p.choices.size(); ++i) v.push_back(double(i));
      return v;
    }
    const double a = toAxis(p, p.lo), b = toAxis(p, p.hi);
    for (int i = 0; i < steps; ++i) {
      const double x = i == 0           ? p.lo  // the ends exactly, not through exp(log)
                       : i == steps - 1 ? p.hi
                                        : fromAxis(p, a + (b - a) * i / (steps - 1));
      if (v.empty() || v.back() != x) v.push_back(x);
    }
    return v;
  }

  std::vector<std::vector<double>> m_values;
  std::vector<size_t> m_at;
  bool m_done = false;
};

constexpr double kPi = 3.14159265358979323846;
double normalCdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// A Parzen estimator over one continuous axis [a, b]: a truncated Gaussian at each
// observed value and one broad one (the prior) at the middle, each bandwidth its
// distance to the farther neighbour, clipped (TPE's "magic clip").
class Parzen {
 public:
  Parzen(std::vector<double> mus, double a, double b, double priorWeight) : m_a(a), m_b(b) {
    const double width = b - a;
    std::vector<double> sorted = mus;
    sorted.push_back(0.5 * (a + b));
    std::sort(sorted.begin(), sorted.end());
    const double lo = width / std::min(100.0, 1.0 + double(sorted.size()));
    for (double mu : mus) {
      auto it = std::lower_bound(sorted.begin(), sorted.end(), mu);
      const double left = it == sorted.begin() ? mu - a : mu - *(it - 1);
      const double right = it + 1 == sorted.end() ? b - mu : *(it + 1) - mu;
      m_parts.push_back({mu, std::clamp(std::max(left, right), lo, width), 1.0});
    }
    m_parts.push_back({0.5 * (a + b), width, priorWeight});
    for (const Part& p : m_parts) m_total += p.weight;
  }

  double draw(Rng& rng) const {
    double pick = rng.uniform() * m_total;
    const Part* part = &m_parts.back();
    for (const Part& p : m_parts)
      if ((pick -= p.weight) <= 0) {
        part = &p;
        break;
      }
    for (int tries = 0; tries < 64; ++tries) {
      const double x = part->mu + part->sigma * rng.normal();
      if (x >= m_a && x <= m_b) return x;
    }
    return std::clamp(part->mu, m_a, m_b);
  }

  double logDensity(double x) const {
    double sum = 0;
    for (const Part& p : m_parts) {
      const double mass = normalCdf((m_b - p.mu) / p.sigma) - normalCdf((m_a - p.mu) / p.sigma);
      const double z = (x - p.mu) / p.sigma;
      sum += p.weight * std::exp(-0.5 * z * z) /
             (p.sigma * std::sqrt(2 * kPi) * std::max(mass, 1e-12));
    }
    return std::log(std::max(sum / m_total, 1e-300));
  }

 private:
  struct Part {
    double mu, sigma, weight;
  };
  double m_a, m_b, m_total = 0;
  std::vector<Part> m_parts;
};

// A choice's estimator: how often each option was observed, plus the prior spread
// evenly.
std::vector<double> choiceWeights(const std::vector<double>& seen, size_t options, double prior) {
  std::vector<double> w(options, prior / double(options));
  for (double s : seen) w[size_t(s)] += 1.0;
  double total = 0;
  for (double x : w) total += x;
  for (double& x : w) x /= total;
  return w;
}

class TpeSearch : public Strategy {
 public:
  TpeSearch(const Space& space, uint64_t seed, TpeOptions o)
      : m_space(space), m_rng(seed), m_o(o) {}
  std::string name() const override { return "TPE"; }

  std::optional<Point> next(const std::vector<Observation>& done) override {
    if (int(done.size()) < std::max(m_o.startupTrials, 2)) return m_space.draw(m_rng);
    std::vector<const Observation*> sorted;
    for (const Observation& o : done) sorted.push_back(&o);
    std::stable_sort(sorted.begin(), sorted.end(), [](const Observation* x, const Observation* y) {
      return x->objective < y->objective;
    });
    const size_t good = std::clamp<size_t>(size_t(std::ceil(m_o.goodShare * double(sorted.size()))),
                                           1, std::min<size_t>(25, sorted.size() - 1));
    Point p(m_space.params().size());
    for (size_t k = 0; k < p.size(); ++k) {
      std::vector<double> below, above;
      for (size_t i = 0; i < sorted.size(); ++i)
        (i < good ? below : above).push_back(toAxis(m_space.params()[k], sorted[i]->at[k]));
      p[k] = pick(m_space.params()[k], below, above);
    }
    return p;
  }

 private:
  // The candidate, drawn from the good trials' density l, with the best l(x)/g(x).
  double pick(const Param& param, const std::vector<double>& below,
              const std::vector<double>& above) {
    if (param.kind == Param::Kind::Choice) {
      const size_t n = param.choices.size();
      const auto l = choiceWeights(below, n, m_o.priorWeight),
                 g = choiceWeights(above, n, m_o.priorWeight);
      double best = -1, bestRatio = -INFINITY;
      for (int c = 0; c < m_o.candidates; ++c) {
        double u = m_rng.uniform();
        size_t x = 0;
        while (x + 1 < n && (u -= l[x]) > 0) ++x;
        const double ratio = std::log(l[x]) - std::log(g[x]);
        if (ratio > bestRatio) best = double(x), bestRatio = ratio;
      }
      return best;
    }
    const Axis axis(param);
    const Parzen l(below, axis.a, axis.b, m_o.priorWeight),
        g(above, axis.a, axis.b, m_o.priorWeight);
    double best = l.draw(m_rng), bestRatio = -INFINITY;
    for (int c = 0; c < m_o.candidates; ++c) {
      const double x = l.draw(m_rng);
      const double ratio = l.logDensity(x) - g.logDensity(x);
      if (ratio > bestRatio) best = x, bestRatio = ratio;
    }
    return fromAxis(param, best);
  }

  Space m_space;
  Rng m_rng;
  TpeOptions m_o;
};

}  // namespace

Point Space::draw(Rng& rng) const {
  Point p;
  for (const Param& q : m_params) p.push_back(drawOne(q, rng));
  return p;
}

std::unique_ptr<Strategy> gridSearch(const Space& space, int steps) {
  return std::make_unique<GridSearch>(space, steps);
}
std::unique_ptr<Strategy> randomSearch(const Space& space, uint64_t seed) {
  return std::make_unique<RandomSearch>(space, seed);
}
std::unique_ptr<Strategy> tpeSearch(const Space& space, uint64_t seed, TpeOptions options) {
  return std::make_unique<TpeSearch>(space, seed, options);
}

std::vector<double> mainEffects(const Space& space, const std::vector<Observation>& done,
                                int bins) {
  const size_t n = done.size();
  std::vector<double> out(space.params().size(), 0.0);
  if (n < 3) return out;
  double mean = 0, total = 0;
  for (const Observation& o : done) mean += o.objective / double(n);
  for (const Observation& o : done) total += (o.objective - mean) * (o.objective - mean);
  if (total <= 0) return out;
  for (size_t k = 0; k < out.size(); ++k) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return done[a].at[k] < done[b].at[k]; });
    std::vector<int> group(n);
    const bool choice = space.params()[k].kind == Param::Kind::Choice;
    for (size_t r = 0; r < n; ++r)
      group[order[r]] = choice ? int(done[order[r]].at[k]) : int(r * size_t(bins) / n);
    std::map<int, std::pair<double, int>> sums;  // group -> (sum, count)
    for (size_t i = 0; i < n; ++i) {
      sums[group[i]].first += done[i].objective;
      sums[group[i]].second += 1;
    }
    double between = 0;
    for (const auto& [g, sc] : sums) {
      const double m = sc.first / sc.second;
      between += sc.second * (m - mean) * (m - mean);
    }
    out[k] = between / total;
  }
  return out;
}

Asha::Asha(int minResource, int maxResource, int eta)
    : m_min(std::max(1, minResource)), m_eta(std::max(2, eta)) {
  int rungs = 1;
  for (int64_t r = int64_t(m_min) * m_eta; r <= maxResource; r *= m_eta) ++rungs;
  m_rungs.resize(size_t(rungs));
}

int Asha::resource(int rung) const {
  int64_t r = m_min;
  for (int k = 0; k < rung; ++k) r *= m_eta;
  return int(r);
}

void Asha::record(int trial, int rung, double objective) {
  if (rung < 0 || rung >= rungs()) return;
  m_rungs[size_t(rung)].push_back({trial, objective, false});
}

namespace {
// The entries of a rung, best first (ties: the earlier recorded).
template <class Entry>
std::vector<Entry*> bestFirst(std::vector<Entry>& rung) {
  std::vector<Entry*> order;
  for (Entry& e : rung) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](Entry* x, Entry* y) { return x->objective < y->objective; });
  return order;
}
}  // namespace

Asha::Job Asha::next() {
  for (int k = rungs() - 2; k >= 0; --k) {
    auto order = bestFirst(m_rungs[size_t(k)]);
    const size_t top = order.size() / size_t(m_eta);
    for (size_t i = 0; i < top; ++i)
      if (!order[i]->promoted) {
        order[i]->promoted = true;
        return Job{true, order[i]->trial, k + 1};
      }
  }
  return Job{};
}

bool Asha::continues(int trial, int rung) const {
  if (rung < 0 || rung >= rungs() - 1) return false;
  std::vector<Entry> copy = m_rungs[size_t(rung)];
  auto order = bestFirst(copy);
  const size_t top = std::max<size_t>(1, order.size() / size_t(m_eta));
  for (size_t i = 0; i < top && i < order.size(); ++i)
    if (order[i]->trial == trial) return true;
  return false;
}

}  // namespace netloom::sweep
