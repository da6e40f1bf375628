// A sweep's search (engine/sweep/search.h): TPE against random search on a known
// function, the same seed drawing the same trials, a grid's combinations, ASHA's
// promotions by the paper's rule, and bad parameters refused by name.
#include <QtTest>
#include <cmath>

#include "engine/sweep/search.h"

using namespace netloom;
using namespace netloom::sweep;

namespace {

Space space() {
  auto s = Space::make({Param::logUniform("lr", 1e-5, 1), Param::integer("width", 8, 512),
                        Param::uniform("dropout", 0, 0.9),
                        Param::choice("optimizer", {"sgd", "adam", "rmsprop"})});
  if (!s) qFatal("%s", s.error().message.c_str());
  return *s;
}

// A shifted, log-scaled quadratic in the four parameters: its least, 0, at lr 10^-2.5,
// width 128, dropout 0.3 and Adam.
double objective(const Point& p) {
  const double lr = std::log10(p[0]) + 2.5, width = (std::log2(p[1]) - 7) / 2;
  const double drop = (p[2] - 0.3) / 0.3;
  return lr * lr + width * width + drop * drop + (p[3] == 1 ? 0 : 1);
}

double bestAfter(Strategy& s, int trials) {
  std::vector<Observation> done;
  double best = INFINITY;
  for (int t = 0; t < trials; ++t) {
    auto p = s.next(done);
    if (!p) break;
    done.push_back({*p, objective(*p)});
    best = std::min(best, done.back().objective);
  }
  return best;
}

}  // namespace

class TestSweep : public QObject {
  Q_OBJECT

 private slots:
  // Averaged over 20 seeds at 40 trials each, TPE ends nearer the least than random.
  void tpeBeatsRandomSearch() {
    double tpe = 0, random = 0;
    const int seeds = 20;
    for (int seed = 1; seed <= seeds; ++seed) {
      tpe += bestAfter(*tpeSearch(space(), uint64_t(seed)), 40) / seeds;
      random += bestAfter(*randomSearch(space(), uint64_t(seed)), 40) / seeds;
    }
    qInfo("best objective after 40 trials, mean of %d seeds: TPE %.4f, random %.4f", seeds, tpe,
          random);
    QVERIFY2(tpe < random, qPrintable(QString("TPE %1, random %2").arg(tpe).arg(random)));
  }

  // The same seed and the same results: the same trials, in the same order; another
  // seed, others. Every draw lies in its parameter's range.
  void theSeedMakesItReproducible() {
    auto draws = [](uint64_t seed) {
      auto s = tpeSearch(space(), seed);
      std::vector<Observation> done;
      std::vector<Point> out;
      for (int t = 0; t < 25; ++t) {
        Point p = *s->next(done);
        out.push_back(p);
        done.push_back({p, objective(p)});
      }
      return out;
    };
    const auto a = draws(7), b = draws(7), c = draws(8);
    QCOMPARE(a, b);
    QVERIFY(a != c);
    const Space sp = space();
    for (const Point& p : a)
      for (size_t k = 0; k < p.size(); ++k) {
        QVERIFY(p[k] >= sp.params()[k].lo && p[k] <= sp.params()[k].hi);
        if (k == 1 || k == 3) QCOMPARE(p[k], std::round(p[k]));
      }
    QCOMPARE(sp.text(a[0], 3).empty(), false);
  }

  // Every combination once, the last parameter fastest; an integer range's steps
  // rounded and not repeated; then nothing more.
  void aGridTriesEveryCombination() {
    auto s = Space::make({Param::choice("opt", {"sgd", "adam"}), Param::integer("layers", 1, 3),
                          Param::logUniform("lr", 1e-3, 1e-1)});
    QVERIFY(s.ok());
    auto grid = gridSearch(*s, 3);
    std::vector<Point> got;
    while (auto p = grid->next({})) got.push_back(*p);
    QCOMPARE(got.size(), size_t(2 * 3 * 3));
    QCOMPARE(got[0], (Point{0, 1, 1e-3}));
    QVERIFY(std::fabs(got[1][2] - 1e-2) < 1e-12);
    QCOMPARE(got[3][1], 2.0);
    QCOMPARE(got.back()[0], 1.0);
  }

  // Li et al.'s rule, eta 3, rungs at 1, 3 and 9 epochs: a trial is promoted when it
  // is among the best ⌊n/3⌋ of the n at its rung, from the highest rung first.
  void ashaPromotesByThePapersRule() {
    Asha a(1, 9, 3);
    QCOMPARE(a.rungs(), 3);
    QCOMPARE(a.resource(2), 9);
    auto isNew = [](Asha::Job j) { return !j.promote; };
    auto promotes = [](Asha::Job j, int trial, int rung) {
      return j.promote && j.trial == trial && j.rung == rung;
    };
    a.record(0, 0, 5);
    QVERIFY(a.continues(0, 0));  // alone at its rung
    QVERIFY(isNew(a.next()));
    a.record(1, 0, 3);
    QVERIFY(!a.continues(0, 0));
    QVERIFY(isNew(a.next()));
    a.record(2, 0, 4);
    QVERIFY(promotes(a.next(), 1, 1));  // 3 at the rung: the best one
    a.record(3, 0, 1);
    QVERIFY(promotes(a.next(), 3, 1));  // 4: still one, now trial 3
    a.record(4, 0, 6);
    QVERIFY(isNew(a.next()));  // 5: one, and it went already
    a.record(5, 0, 2);
    QVERIFY(promotes(a.next(), 5, 1));  // 6: two, trials 3 and 5
    a.record(1, 1, 2.5);
    QVERIFY(isNew(a.next()));
    a.record(3, 1, 0.5);
    a.record(5, 1, 1.5);
    QVERIFY(promotes(a.next(), 3, 2));  // the higher rung first
    QVERIFY(isNew(a.next()));
    QVERIFY(!a.continues(3, 2));  // the last rung ends the trial
  }

  // Each bad parameter refused with a message that names it.
  void badParametersAreRefused() {
    struct Bad {
      Param p;
      const char* says;
    };
    for (const Bad& b : {Bad{Param::uniform("lr", 0.1, 0.1), "empty range"},
                         Bad{Param::uniform("lr", 0.5, 0.1), "empty range"},
                         Bad{Param::logUniform("lr", 0, 1), "above 0"},
                         Bad{Param::logUniform("lr", -1, 1), "above 0"},
                         Bad{Param::choice("opt", {}), "nothing"},
                         Bad{Param::uniform("p", 0, INFINITY), "finite"}}) {
      auto s = Space::make({b.p});
      QVERIFY(!s.ok());
      QVERIFY2(s.error().message.find("'" + b.p.name + "'") != std::string::npos,
               s.error().message.c_str());
      QVERIFY2(s.error().message.find(b.says) != std::string::npos, s.error().message.c_str());
    }
    auto twice = Space::make({Param::uniform("lr", 0, 1), Param::uniform("lr", 0, 2)});
    QVERIFY(!twice.ok() && twice.error().message.find("twice") != std::string::npos);
    QVERIFY(!Space::make({}).ok());
  }
};

QTEST_GUILESS_MAIN(TestSweep)
#include "tst_sweep.moc"
