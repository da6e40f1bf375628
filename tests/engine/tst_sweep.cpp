// A sweep's search (engine/sweep/search.h): TPE against random search on a known
// function, the same seed drawing the same trials, a grid's combinations, ASHA's
// promotions by the paper's rule, and bad parameters refused by name. Then sweeps of
// projects/spirals-sweep.nlproj run for real (engine/sweep/runner.h): bad definitions
// refused naming the field, 12 trials 3 at a time reaching 0.97, a sweep stopped
// half-way that loses no trial when started again, and failed trials recorded with
// their reasons while the sweep goes on.
#include <google/protobuf/text_format.h>

#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/io/project_file.h"
#include "engine/sweep/runner.h"
#include "engine/sweep/search.h"
#include "engine/train/summary.h"

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

proto::Project spiralsSweep() {
  auto p = loadProject(std::string(NETLOOM_SOURCE_DIR) + "/projects/spirals-sweep.nlproj");
  if (!p) qFatal("%s", p.error().message.c_str());
  return *p;
}

sweep::SweepOptions quietly(const std::string& folder) {
  sweep::SweepOptions o;
  o.folder = folder;
  o.cores = 3;
  o.base.projectDir = std::string(NETLOOM_SOURCE_DIR) + "/projects";
  return o;
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
    for (const Bad& b :
         {Bad{Param::uniform("lr", 0.1, 0.1), "empty range"},
          Bad{Param::uniform("lr", 0.5, 0.1), "empty range"},
          Bad{Param::logUniform("lr", 0, 1), "above 0"},
          Bad{Param::logUniform("lr", -1, 1), "above 0"}, Bad{Param::choice("opt", {}), "nothing"},
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

  // Each bad definition refused, the message naming the field at fault.
  void badSweepsAreRefused() {
    struct Bad {
      const char* param;  // the sweep's first parameter, as text
      const char* says;
    };
    const Bad bads[] = {
        {"target: 'train.optimizer.lrr' min: 0.1 max: 1", "has no field 'lrr'"},
        {"target: 'nodes.fc9.out_features' choices: ['8']", "no node 'fc9'"},
        {"target: 'nodes.fc1.width' choices: ['8']", "no attribute 'width'"},
        {"target: 'train.optimizer.lr' min: 0.1 max: 0.1", "empty range"},
        {"target: 'train.optimizer.lr' min: 0 max: 1 log: true", "above 0"},
        {"target: 'train.optimizer.lr' min: -1 max: 1 log: true", "above 0"},
        {"target: 'train.batch_size' choices: ['32', 'big']", "'big' is not a whole number"},
        {"target: 'train.optimizer.lr' choices: ['fast']", "'fast' is not a number"},
        {"target: 'train.optimizer.kind' choices: ['ADAM', 'LION']", "'LION' is not one of"},
        {"target: 'train.batch_size' min: 8 max: 64", "whole numbers"},
        {"target: 'train.optimizer' min: 0 max: 1", "is a section"},
        {"target: 'model.fc1' min: 0 max: 1", "must start with train., nodes. or instances."},
        {"target: 'instances.fc1' choices: ['2']", "not an instance of a block"},
    };
    for (const Bad& b : bads) {
      proto::Project p = spiralsSweep();
      proto::SweepParam* first = p.mutable_sweep()->mutable_params(0);
      first->Clear();
      QVERIFY(google::protobuf::TextFormat::ParseFromString(b.param, first));
      auto plan = sweep::planSweep(p);
      QVERIFY2(!plan.ok(), b.param);
      const std::string& m = plan.error().message;
      QVERIFY2(m.find("sweep.params[0]") != std::string::npos, m.c_str());
      QVERIFY2(m.find(b.says) != std::string::npos, m.c_str());
    }
    proto::Project p = spiralsSweep();
    p.mutable_sweep()->set_objective("test_f1");
    auto plan = sweep::planSweep(p);
    QVERIFY(!plan.ok() && plan.error().message.find("sweep.objective") != std::string::npos);
    p.clear_sweep();
    QVERIFY(!sweep::planSweep(p).ok());
  }

  // The shipped sample, for real: 12 trials of TPE with ASHA, 3 at once, each with its
  // events; the best reaches 0.97 test accuracy; sweep.json holds every trial.
  void aSweepOfSpiralsFindsAGoodNet() {
    QTemporaryDir dir;
    const proto::Project project = spiralsSweep();
    auto plan = sweep::planSweep(project);
    QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
    QCOMPARE(plan->trials, 12);
    QCOMPARE(plan->parallel, 3);
    std::set<int> running;  // onTrial is called one trial at a time
    size_t most = 0;
    sweep::SweepOptions o = quietly(dir.path().toStdString());
    o.onTrial = [&](const sweep::TrialRecord& t) {
      if (t.ended())
        running.erase(t.index);
      else
        running.insert(t.index);
      most = std::max(most, running.size());
    };
    auto r = sweep::runSweep(project, *plan, o);
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QCOMPARE(r->trials.size(), size_t(12));
    QCOMPARE(most, size_t(3));
    int done = 0, pruned = 0;
    for (const sweep::TrialRecord& t : r->trials) {
      QVERIFY2(t.status == "done" || t.status == "pruned", (t.status + " " + t.error).c_str());
      done += t.status == "done";
      pruned += t.status == "pruned";
      QVERIFY(t.hasObjective);
      QVERIFY(QFileInfo(QString::fromStdString(t.folder + "/events.pb")).size() > 0);
      if (t.status == "pruned") QVERIFY(t.epochs < plan->epochs);
    }
    QVERIFY(done >= 1);
    QVERIFY(r->best >= 0);
    const double best = r->trials[size_t(r->best)].objective;
    qInfo("best test accuracy %.4f (trial %d); %d done, %d pruned", best, r->best, done, pruned);
    QVERIFY2(best >= 0.97, qPrintable(QString::number(best)));
    std::ifstream in(dir.filePath("sweep.json").toStdString());
    std::stringstream text;
    text << in.rdbuf();
    auto json = Json::parse(text.str());
    QVERIFY(json.ok());
    QCOMPARE(json->find("trials")->items().size(), size_t(12));
    QCOMPARE(int(json->find("best")->asNumber()), r->best);
  }

  // Stopped once 4 trials have ended, then started again on the same folder: the
  // ended trials are kept as they were, the others run, and the sweep reaches 12.
  void aStoppedSweepGoesOn() {
    QTemporaryDir dir;
    const proto::Project project = spiralsSweep();
    auto plan = sweep::planSweep(project);
    QVERIFY(plan.ok());
    std::atomic<bool> stop{false};
    std::atomic<int> ended{0};
    sweep::SweepOptions o = quietly(dir.path().toStdString());
    o.stop = &stop;
    o.onTrial = [&](const sweep::TrialRecord& t) {
      if (t.ended() && ++ended >= 4) stop = true;
    };
    auto first = sweep::runSweep(project, *plan, o);
    QVERIFY(first.ok());
    std::map<int, sweep::TrialRecord> kept;
    for (const sweep::TrialRecord& t : first->trials)
      if (t.ended()) kept[t.index] = t;
    QVERIFY(kept.size() >= 4);
    QVERIFY(first->trials.size() < 12);
    sweep::SweepOptions again = quietly(dir.path().toStdString());
    auto second = sweep::runSweep(project, *plan, again);
    QVERIFY(second.ok());
    QCOMPARE(second->trials.size(), size_t(12));
    for (const auto& [index, t] : kept) {
      const sweep::TrialRecord& now = second->trials[size_t(index)];
      QCOMPARE(now.status, t.status);
      QCOMPARE(now.objective, t.objective);
      QCOMPARE(now.at, t.at);
    }
    for (const sweep::TrialRecord& t : second->trials) QVERIFY2(t.ended(), t.status.c_str());
  }

  // A block's instance repeated: instances.h3 of the fortunes GPT at 3 chains h3, h3_2
  // and h3_3, what read h3 reads h3_3, and the model has two blocks' weights more.
  void blockInstancesAreAParameter() {
    auto p = loadProject(std::string(NETLOOM_SOURCE_DIR) + "/projects/fortunes-gpt.nlproj");
    QVERIFY(p.ok());
    proto::SweepParam* param = p->mutable_sweep()->add_params();
    param->set_target("instances.h3");
    param->add_choices("1");
    param->add_choices("3");
    p->mutable_sweep()->set_objective("train_loss");
    auto plan = sweep::planSweep(*p);
    QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
    auto one = sweep::trialProject(*p, *plan, {0}), three = sweep::trialProject(*p, *plan, {1});
    QVERIFY(one.ok() && three.ok());
    std::map<std::string, std::string> reads;  // node -> its first input
    for (const auto& n : three->model().nodes())
      reads[n.name()] = n.inputs_size() ? n.inputs(0) : "";
    QCOMPARE(reads["h3_2"], std::string("h3"));
    QCOMPARE(reads["h3_3"], std::string("h3_2"));
    for (const auto& [node, input] : reads) QVERIFY2(input != "h3" || node == "h3_2", node.c_str());
    auto small = summarizeModel(one->model(), 2), big = summarizeModel(three->model(), 2);
    QVERIFY2(small.ok() && big.ok(), big.ok() ? "" : big.error().message.c_str());
    QVERIFY(big->parameters > small->parameters);
    param->clear_choices();
    param->set_min(0);
    param->set_max(3);
    param->set_integer(true);
    auto zero = sweep::planSweep(*p);
    QVERIFY(!zero.ok() && zero.error().message.find("at least 1") != std::string::npos);
  }

  // Importance: where the objective is the XOR of two parameters, neither matters
  // alone (mainEffects sees next to nothing) but the forest ranks both well above the
  // third, which does nothing; where it is mostly the first, the forest ranks them in
  // order.
  void theForestSeesWhatMattersTogether() {
    auto s = Space::make(
        {Param::uniform("a", 0, 1), Param::uniform("b", 0, 1), Param::uniform("c", 0, 1)});
    QVERIFY(s.ok());
    Rng rng(3);
    std::vector<Observation> xor_, first;
    for (int i = 0; i < 80; ++i) {
      Point p = s->draw(rng);
      xor_.push_back({p, (p[0] > 0.5) != (p[1] > 0.5) ? 1.0 : 0.0});
      first.push_back({p, 10 * (p[0] - 0.3) * (p[0] - 0.3) + 3 * p[1]});
    }
    const auto alone = mainEffects(*s, xor_), forest = forestImportance(*s, xor_);
    qInfo("XOR: main effects %.2f %.2f %.2f; forest %.2f %.2f %.2f", alone[0], alone[1], alone[2],
          forest[0], forest[1], forest[2]);
    QVERIFY(alone[0] < 0.15 && alone[1] < 0.15);
    QVERIFY(forest[0] > 0.3 && forest[1] > 0.3);
    QVERIFY(forest[0] > 1.5 * forest[2] && forest[1] > 1.5 * forest[2]);
    const auto ranked = forestImportance(*s, first);
    qInfo("mostly the first: forest %.2f %.2f %.2f", ranked[0], ranked[1], ranked[2]);
    QVERIFY(ranked[0] > ranked[1] && ranked[1] > ranked[2]);
    QCOMPARE(std::round((ranked[0] + ranked[1] + ranked[2]) * 1e9), 1e9);
    QCOMPARE(forestImportance(*s, first), ranked);  // the same seed, the same forest
    QCOMPARE(forestImportance(*s, {first.begin(), first.begin() + 3}),
             (std::vector<double>{0, 0, 0}));
  }

  // The budget: a grid with no trial count runs each combination once; a wall-time
  // budget starts no trial after it, and every trial started ends.
  void theBudgetHolds() {
    proto::Project p = spiralsSweep();
    p.mutable_sweep()->set_strategy(proto::GRID);
    p.mutable_sweep()->set_trials(0);
    p.mutable_sweep()->set_grid_steps(3);
    auto grid = sweep::planSweep(p);
    QVERIFY(grid.ok());
    QCOMPARE(grid->trials, 3 * 4 * 4);  // lr at 3 points, two widths of 4 choices
    proto::Project timed = spiralsSweep();
    timed.mutable_sweep()->set_trials(1000);
    timed.mutable_sweep()->set_max_minutes(0.5 / 60);  // half a second
    timed.mutable_sweep()->set_parallel(1);
    timed.mutable_train()->set_epochs(3);
    auto plan = sweep::planSweep(timed);
    QVERIFY(plan.ok());
    QTemporaryDir dir;
    auto r = sweep::runSweep(timed, *plan, quietly(dir.path().toStdString()));
    QVERIFY(r.ok());
    QVERIFY(!r->trials.empty());
    QVERIFY(r->trials.size() < 1000);
    for (const auto& t : r->trials) QVERIFY2(t.ended(), t.status.c_str());
  }

  // A width the layer refuses fails its trials alone: each is recorded with the
  // reason, and the trials after it run.
  void aFailedTrialIsRecordedAndTheSweepGoesOn() {
    proto::Project p = spiralsSweep();
    p.mutable_sweep()->clear_params();
    proto::SweepParam* width = p.mutable_sweep()->add_params();
    width->set_target("nodes.fc1.out_features");
    for (const char* w : {"0", "16", "0", "32"}) width->add_choices(w);
    p.mutable_sweep()->set_strategy(proto::GRID);
    p.mutable_sweep()->set_parallel(2);
    p.mutable_train()->set_epochs(2);
    auto plan = sweep::planSweep(p);
    QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
    QTemporaryDir dir;
    auto r = sweep::runSweep(p, *plan, quietly(dir.path().toStdString()));
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    QCOMPARE(r->trials.size(), size_t(4));
    for (const sweep::TrialRecord& t : r->trials) {
      const bool zero = t.values.at(0) == "0";
      QCOMPARE(t.status, std::string(zero ? "failed" : "done"));
      QCOMPARE(t.hasObjective, !zero);
      if (zero)
        QVERIFY2(t.error.find("'fc1'") != std::string::npos &&
                     t.error.find("out_features") != std::string::npos,
                 t.error.c_str());
    }
    QVERIFY(r->best >= 0 && r->trials[size_t(r->best)].status == "done");
  }
};

QTEST_GUILESS_MAIN(TestSweep)
#include "tst_sweep.moc"
