#include "engine/sweep/runner.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "engine/io/event_stream.h"
#include "engine/io/output_file.h"

namespace netloom::sweep {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string trialFolder(const std::string& sweep, int index) {
  char name[32];
  std::snprintf(name, sizeof name, "trial-%03d", index);
  return (fs::path(sweep) / name).string();
}

Json trialJson(const SweepPlan& plan, const TrialRecord& t) {
  Json j = Json::object();
  j.set("index", Json::number(t.index));
  Json params = Json::object();
  for (size_t k = 0; k < t.values.size(); ++k) {
    const bool named = plan.space.params()[k].kind == Param::Kind::Choice;
    char* end = nullptr;
    const double v = std::strtod(t.values[k].c_str(), &end);
    params.set(plan.targets[k].path,
               !named || *end != 0 || t.values[k].empty()
                   ? (named ? Json::string(t.values[k]) : Json::number(t.at[k]))
                   : Json::number(v));
  }
  j.set("params", std::move(params));
  Json point = Json::array();
  for (double x : t.at) point.push(Json::number(x));
  j.set("point", std::move(point));
  j.set("status", Json::string(t.status));
  j.set("objective", t.hasObjective ? Json::number(t.objective) : Json());
  j.set("epochs", Json::number(t.epochs));
  j.set("rung", Json::number(t.rung));
  j.set("seconds", Json::number(std::round(t.seconds * 1000) / 1000));
  if (!t.error.empty()) j.set("error", Json::string(t.error));
  j.set("folder", Json::string(t.folder));
  if (!t.where.empty()) j.set("where", Json::string(t.where));
  if (!t.job.empty()) j.set("job", Json::string(t.job));
  return j;
}

// The trials of an earlier start of the sweep in `folder`, if any.
std::vector<TrialRecord> earlierTrials(const SweepPlan& plan, const std::string& folder) {
  auto read = readSweep(plan, (fs::path(folder) / "sweep.json").string());
  return read ? *read : std::vector<TrialRecord>{};
}

class Scheduler {
 public:
  Scheduler(const proto::Project& project, const SweepPlan& plan, const SweepOptions& o)
      : m_project(project),
        m_plan(plan),
        m_o(o),
        m_own(o.launcher
                  ? nullptr
                  : localTrials(o.parallel > 0 ? o.parallel : plan.parallel, o.cores, o.base)),
        m_launcher(o.launcher ? o.launcher : m_own.get()),
        m_parallel(m_launcher->capacity()),
        m_free(size_t(m_parallel), true),
        m_strategy(plan.strategyFor()),
        m_asha(plan.minEpochs, plan.epochs, plan.eta) {}

  Result<SweepResult> run() {
    std::error_code ec;
    fs::create_directories(m_o.folder, ec);
    if (ec) return makeError(m_o.folder + ": " + ec.message());
    m_started = Clock::now();
    std::unique_lock<std::mutex> lock(m_mutex);
    resume();
    while (true) {
      if (m_o.stop && m_o.stop->load()) break;
      if (m_running < m_parallel && startNext()) continue;
      if (m_running == 0 && !more()) break;
      m_changed.wait_for(lock, std::chrono::milliseconds(m_o.stop ? 100 : 1000));
      takeStopRequests();
    }
    if (m_o.stop && m_o.stop->load()) {
      m_leave = true;  // remote jobs run on; local runs stop
      for (auto& s : m_stops) s->store(true);
    }
    m_changed.wait(lock, [&] { return m_running == 0; });
    lock.unlock();
    for (std::thread& t : m_threads) t.join();
    return result();
  }

 private:
  // Trials of an earlier start: the ended kept, the others queued again with their
  // parameters. The strategy draws them again, so later draws continue its sequence.
  void resume() {
    for (TrialRecord t : earlierTrials(m_plan, m_o.folder)) {
      m_strategy->next(observationsBefore(int(m_trials.size())));
      t.folder = trialFolder(m_o.folder, t.index);
      t.values = valuesOf(t.at);
      if (!t.ended()) {
        t.status = "queued";
        m_again.push_back(t.index);
      } else if (t.rung >= 0 && t.hasObjective) {
        m_asha.record(t.index, t.rung, signedObjective(t.objective));
      }
      add(t);
    }
  }

  bool more() const {
    if (!m_again.empty()) return true;
    if (m_exhausted || int(m_trials.size()) >= m_plan.trials) return false;
    const double seconds = std::chrono::duration<double>(Clock::now() - m_started).count();
    return m_plan.maxSeconds <= 0 || seconds < m_plan.maxSeconds;
  }

  // Starts a trial if one may start now; false when none may (yet).
  bool startNext() {
    if (!m_again.empty()) {
      const int k = m_again.front();
      m_again.erase(m_again.begin());
      launch(k);
      return true;
    }
    if (!more()) return false;
    const int k = int(m_trials.size());
    // Drawn from the trials up to k − parallel, which have all ended: the same draws
    // whenever they end.
    for (int j = 0; j <= k - m_parallel; ++j)
      if (!m_trials[size_t(j)].ended()) return false;
    auto at = m_strategy->next(observationsBefore(k));
    if (!at) {
      m_exhausted = true;
      return false;
    }
    TrialRecord t;
    t.index = k;
    t.at = m_plan.settle(*at);
    t.values = valuesOf(t.at);
    t.folder = trialFolder(m_o.folder, k);
    add(t);
    launch(k);
    return true;
  }

  std::vector<Observation> observationsBefore(int k) const {
    std::vector<Observation> done;
    for (int j = 0; j <= k - m_parallel && j < int(m_trials.size()); ++j) {
      const TrialRecord& t = m_trials[size_t(j)];
      if (t.hasObjective && t.status != "failed")
        done.push_back({t.at, signedObjective(t.objective)});
    }
    return done;
  }

  double signedObjective(double v) const { return m_plan.maximize ? -v : v; }

  std::vector<std::string> valuesOf(const Point& at) const {
    std::vector<std::string> v;
    for (size_t k = 0; k < at.size(); ++k) v.push_back(m_plan.space.text(at, k));
    return v;
  }

  void add(const TrialRecord& t) {
    m_trials.push_back(t);
    m_stops.push_back(std::make_unique<std::atomic<bool>>(false));
  }

  void launch(int k) {
    TrialRecord& t = m_trials[size_t(k)];
    int slot = 0;
    while (!m_free[size_t(slot)]) ++slot;  // one is free: fewer than m_parallel run
    m_free[size_t(slot)] = false;
    m_byHand.erase(k);
    t.status = "running";
    t.where = m_launcher->where(slot);
    t.error.clear();
    t.hasObjective = false;
    t.epochs = 0;
    t.rung = -1;
    m_stops[size_t(k)]->store(false);
    ++m_running;
    changed(t);
    m_threads.emplace_back([this, k, slot] { train(k, slot); });
  }

  void train(int k, int slot) {
    const auto began = Clock::now();
    std::string folder, error;
    proto::Project project;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      folder = m_trials[size_t(k)].folder;
      auto made = trialProject(m_project, m_plan, m_trials[size_t(k)].at);
      if (made)
        project = *made;
      else
        error = made.error().message;
    }
    bool pruned = false;
    if (error.empty()) error = trainOne(k, slot, project, folder, pruned);
    std::lock_guard<std::mutex> lock(m_mutex);
    TrialRecord& t = m_trials[size_t(k)];
    t.seconds = std::chrono::duration<double>(Clock::now() - began).count();
    const bool sweepStopped = m_o.stop && m_o.stop->load() && !pruned;
    t.status = !error.empty()           ? "failed"
               : pruned                 ? "pruned"
               : m_byHand.count(k) != 0 ? "stopped"
               : sweepStopped           ? "queued"
                                        : "done";
    t.error = error;
    m_free[size_t(slot)] = true;
    --m_running;
    changed(t);
    m_changed.notify_all();
  }

  // One trial's run, its events written to its folder as they come; the error, or empty.
  std::string trainOne(int k, int slot, const proto::Project& project, const std::string& folder,
                       bool& pruned) {
    std::error_code ec;
    fs::create_directories(folder, ec);
    EventWriter events;
    if (Status s = events.open((fs::path(folder) / "events.pb").string()); !s) return s.message();
    TrialRun run;
    run.slot = slot;
    run.stop = m_stops[size_t(k)].get();
    run.leave = &m_leave;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      run.job = m_trials[size_t(k)].job;
    }
    run.started = [this, k](const std::string& job) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_trials[size_t(k)].job = job;
      changed(m_trials[size_t(k)]);
    };
    run.onEvent = [&](const proto::TrainEvent& e) {
      events.write(e);
      if (e.has_epoch()) onEpoch(k, e.epoch(), pruned);
    };
    std::string error = m_launcher->run(project, run);
    events.close();
    return error;
  }

  // stop-N files: those trials, if running, stop after their step.
  void takeStopRequests() {
    for (size_t k = 0; k < m_trials.size(); ++k) {
      const fs::path request = fs::path(m_o.folder) / ("stop-" + std::to_string(k));
      std::error_code ec;
      if (!fs::exists(request, ec)) continue;
      fs::remove(request, ec);
      if (m_trials[k].status != "running") continue;
      m_byHand.insert(int(k));
      m_stops[k]->store(true);
    }
  }

  void onEpoch(int k, const proto::Epoch& e, bool& pruned) {
    if (pruned) return;  // judged at its rung: what it reports while stopping is not its result
    double value = 0;
    std::lock_guard<std::mutex> lock(m_mutex);
    TrialRecord& t = m_trials[size_t(k)];
    t.epochs = e.epoch();
    if (!m_plan.objective.valueIn(e, value)) return;
    t.objective = value;
    t.hasObjective = true;
    if (m_plan.prunes()) {
      const int rung = t.rung + 1;
      if (rung < m_asha.rungs() && e.epoch() == m_asha.resource(rung)) {
        t.rung = rung;
        m_asha.record(k, rung, signedObjective(value));
        if (rung + 1 < m_asha.rungs() && !m_asha.continues(k, rung)) {
          pruned = true;
          m_stops[size_t(k)]->store(true);
        }
      }
    }
    changed(t);
  }

  // Said and saved: the sweep's file rewritten whole, atomically.
  void changed(const TrialRecord& t) {
    writeFileAtomic((fs::path(m_o.folder) / "sweep.json").string(),
                    sweepJson(m_plan, result()).dump() + "\n");
    if (m_o.onTrial) m_o.onTrial(t);
  }

  SweepResult result() const {
    SweepResult r;
    r.trials = m_trials;
    for (const TrialRecord& t : m_trials) {
      if (!t.hasObjective || t.status == "failed") continue;
      if (r.best < 0 ||
          signedObjective(t.objective) < signedObjective(r.trials[size_t(r.best)].objective))
        r.best = t.index;
    }
    return r;
  }

  const proto::Project& m_project;
  const SweepPlan& m_plan;
  const SweepOptions& m_o;
  std::unique_ptr<TrialLauncher> m_own;
  TrialLauncher* m_launcher;
  const int m_parallel;
  std::vector<bool> m_free;  // slots
  std::unique_ptr<Strategy> m_strategy;
  Asha m_asha;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::vector<TrialRecord> m_trials;
  std::vector<std::unique_ptr<std::atomic<bool>>> m_stops;
  std::vector<std::thread> m_threads;
  std::vector<int> m_again;
  std::set<int> m_byHand;  // trials stopped by hand
  std::atomic<bool> m_leave{false};
  int m_running = 0;
  bool m_exhausted = false;
  Clock::time_point m_started;
};

class LocalTrials : public TrialLauncher {
 public:
  LocalTrials(int parallel, int cores, const TrainOptions& base, std::vector<std::string> devices)
      : m_parallel(std::max(1, devices.empty() ? parallel : int(devices.size()))),
        m_base(base),
        m_devices(std::move(devices)) {
    m_base.threads = std::max(1, (cores > 0 ? cores : omp_get_num_procs()) / m_parallel);
  }
  int capacity() const override { return m_parallel; }
  std::string where(int slot) const override {
    return m_devices.empty() ? "this computer" : "this computer, " + m_devices[size_t(slot)];
  }
  std::string run(const proto::Project& project, const TrialRun& r) override {
    TrainOptions opts = m_base;
    opts.stop = r.stop;
    proto::Project own = project;
    if (!m_devices.empty()) own.mutable_train()->set_device(m_devices[size_t(r.slot)]);
    auto done = runTraining(own, opts, r.onEvent);
    return done ? std::string() : done.error().message;
  }

 private:
  int m_parallel;
  TrainOptions m_base;
  std::vector<std::string> m_devices;
};

}  // namespace

std::unique_ptr<TrialLauncher> localTrials(int parallel, int cores, const TrainOptions& base,
                                           std::vector<std::string> devices) {
  return std::make_unique<LocalTrials>(parallel, cores, base, std::move(devices));
}

Status stopTrial(const std::string& folder, int index) {
  return writeFileAtomic((fs::path(folder) / ("stop-" + std::to_string(index))).string(), "stop\n");
}

Result<std::vector<TrialRecord>> readSweep(const SweepPlan& plan, const std::string& path) {
  std::vector<TrialRecord> out;
  std::ifstream in(path);
  if (!in) return out;
  std::stringstream text;
  text << in.rdbuf();
  auto json = Json::parse(text.str());
  if (!json) return makeError(path + ": " + json.error().message);
  const Json* trials = json->find("trials");
  if (!trials || !trials->isArray()) return out;
  for (const Json& j : trials->items()) {
    const Json *point = j.find("point"), *status = j.find("status");
    if (!point || !point->isArray() || point->items().size() != plan.space.params().size() ||
        !status)
      break;  // another sweep's file: its trials are not this one's
    TrialRecord t;
    t.index = int(out.size());
    for (const Json& x : point->items()) t.at.push_back(x.asNumber());
    for (size_t k = 0; k < t.at.size(); ++k) t.values.push_back(plan.space.text(t.at, k));
    t.status = status->asString();
    if (const Json* o = j.find("objective"); o && o->isNumber()) {
      t.objective = o->asNumber();
      t.hasObjective = true;
    }
    if (const Json* e = j.find("epochs")) t.epochs = int(e->asNumber());
    if (const Json* r = j.find("rung")) t.rung = int(r->asNumber());
    if (const Json* s = j.find("seconds")) t.seconds = s->asNumber();
    if (const Json* e = j.find("error")) t.error = e->asString();
    if (const Json* d = j.find("folder")) t.folder = d->asString();
    if (const Json* w = j.find("where")) t.where = w->asString();
    if (const Json* job = j.find("job")) t.job = job->asString();
    out.push_back(t);
  }
  return out;
}

Result<SweepResult> runSweep(const proto::Project& project, const SweepPlan& plan,
                             const SweepOptions& options) {
  if (options.folder.empty()) return makeError("a sweep needs a folder for its trials");
  Scheduler s(project, plan, options);
  return s.run();
}

std::string trialRow(const SweepPlan& plan, const TrialRecord& t) {
  char objective[32] = "-";
  if (t.hasObjective) std::snprintf(objective, sizeof objective, "%.4f", t.objective);
  std::string params;
  for (size_t k = 0; k < t.values.size(); ++k)
    params += (k ? " " : "") + plan.targets[k].path + "=" + t.values[k];
  char head[96];
  std::snprintf(head, sizeof head, "%5d  %-7s %9s %5d %7.1f s  ", t.index, t.status.c_str(),
                objective, t.epochs, t.seconds);
  return head + (t.where.empty() ? "" : t.where + "  ") + params +
         (t.error.empty() ? "" : "  (" + t.error + ")");
}

std::string trialHeader() {
  char line[96];
  std::snprintf(line, sizeof line, "%5s  %-7s %9s %5s %9s  %s", "trial", "status", "objective",
                "epoch", "time", "where, parameters");
  return line;
}

Json sweepJson(const SweepPlan& plan, const SweepResult& result) {
  Json j = Json::object();
  j.set("objective", Json::string(plan.objective.spec()));
  j.set("maximize", Json::boolean(plan.maximize));
  Json trials = Json::array();
  for (const TrialRecord& t : result.trials) trials.push(trialJson(plan, t));
  j.set("trials", std::move(trials));
  j.set("best", result.best >= 0 ? Json::number(result.best) : Json());
  return j;
}

}  // namespace netloom::sweep
