// A sweep's search: the space of parameters its trials draw from, the strategies
// that draw them (grid, random, and TPE, the Tree-structured Parzen Estimator of
// Bergstra et al., NeurIPS 2011), and ASHA's rule for which trials go on past each
// rung (Li et al., MLSys 2020). Pure logic, apart from any run: the sweep's scheduler
// asks for the next trial's parameters and reports objectives back. A seed makes a
// search reproducible: the same seed, the same observations, the same draws.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/util/status.h"
#include "kernels/core/rng.h"

namespace netloom::sweep {

// One parameter of the space.
struct Param {
  enum class Kind { Choice, Uniform, LogUniform, Int };
  std::string name;
  Kind kind = Kind::Uniform;
  double lo = 0, hi = 1;             // Uniform, LogUniform, Int (inclusive)
  std::vector<std::string> choices;  // Choice

  static Param choice(std::string name, std::vector<std::string> choices);
  static Param uniform(std::string name, double lo, double hi);
  static Param logUniform(std::string name, double lo, double hi);
  static Param integer(std::string name, int64_t lo, int64_t hi);
  // Empty when the parameter can be drawn from, else why not (naming it).
  std::string invalid() const;
};

// A point of the space: each parameter's value (a choice's index).
using Point = std::vector<double>;

// A trial's result: where it was, and its objective, smaller is better (a maximised
// metric is negated by the caller).
struct Observation {
  Point at;
  double objective = 0;
};

class Space {
 public:
  // Refuses an empty space, a duplicate name or an invalid parameter, naming it.
  static Result<Space> make(std::vector<Param> params);
  const std::vector<Param>& params() const { return m_params; }
  // The value of parameter `k` at `p` as text: "0.0031", "64", "adam".
  std::string text(const Point& p, size_t k) const;
  // A point drawn uniformly (log-uniformly for LogUniform).
  Point draw(Rng& rng) const;

 private:
  std::vector<Param> m_params;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The next point to try, knowing what was observed so far; nothing when the
  // strategy has tried everything it would (a grid's end).
  virtual std::optional<Point> next(const std::vector<Observation>& done) = 0;
  virtual std::string name() const = 0;
};

// Every combination: each choice, each integer (at most `steps` of them, evenly
// spread), `steps` evenly spread values of a continuous range (log-spaced for
// LogUniform), the last parameter varying fastest.
std::unique_ptr<Strategy> gridSearch(const Space& space, int steps = 4);
std::unique_ptr<Strategy> randomSearch(const Space& space, uint64_t seed);

struct TpeOptions {
  int startupTrials = 10;  // drawn at random before the estimators take over
  int candidates = 24;     // drawn from the good trials' density, the best ratio kept
  double goodShare = 0.1;  // γ: the best ⌈γ·n⌉ trials (at most 25) are the good ones
  double priorWeight = 1.0;
};
std::unique_ptr<Strategy> tpeSearch(const Space& space, uint64_t seed, TpeOptions options = {});

// How much each parameter alone explains of the objective's variance (its main
// effect, η² = between-bin variance / total variance): a choice's trials grouped by
// option, a range's split into `bins` equal-count bins along it. 0 for every
// parameter with fewer than 3 observations or an objective that never varies.
std::vector<double> mainEffects(const Space& space, const std::vector<Observation>& done,
                                int bins = 4);

// Each parameter's importance to the objective, as a random forest of regression trees
// fitted to the observations sees it (mean decrease in impurity, Breiman 2001): the
// share of the squared error its splits remove, summed over `trees` trees grown on
// bootstrap samples, each split among a random third of the parameters; the shares sum
// to 1. Unlike mainEffects it sees parameters that matter only together. A range is
// split along its axis (a log range by its logarithm), a choice by its index. All 0
// below 4 observations or for an objective that never varies; `seed` fixes the forest.
std::vector<double> forestImportance(const Space& space, const std::vector<Observation>& done,
                                     uint64_t seed = 1, int trees = 64);

// ASHA: rung k needs minResource·eta^k of the budget (epochs); a trial at rung k is
// promoted to k+1 when it is among the best ⌊n_k/eta⌋ of the n_k trials that reached
// rung k, and was not promoted before. Asynchronous: whenever a worker frees up,
// next() says whether to promote a trial (from the highest rung that has one) or to
// start a new one.
class Asha {
 public:
  Asha(int minResource, int maxResource, int eta = 3);

  int rungs() const { return int(m_rungs.size()); }
  // The budget a trial runs to at rung k.
  int resource(int rung) const;
  // Trial `trial` finished rung `rung` with `objective` (smaller is better).
  void record(int trial, int rung, double objective);

  struct Job {
    bool promote = false;  // else: start a new trial at rung 0
    int trial = -1, rung = 0;
  };
  Job next();
  // For trials that train on through the rungs (one run, not restarts): whether a
  // trial that has just recorded `rung` goes on, by the same rule at this moment:
  // among the best max(1, ⌊n_k/eta⌋) of the n_k that reached the rung.
  bool continues(int trial, int rung) const;

 private:
  struct Entry {
    int trial;
    double objective;
    bool promoted;
  };
  int m_min, m_eta;
  std::vector<std::vector<Entry>> m_rungs;
};

}  // namespace netloom::sweep
