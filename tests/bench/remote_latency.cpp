// Remote training over loopback SSH, as the IDE does it: Debian's sshd on
// 127.0.0.1 (the test fixture), the spirals project submitted as a job through a
// RunController, and two figures:
//   - Run to first remote step: from start() to the first Step event in the
//     controller's run (connect, check the key, probe, upload, start, compile,
//     the first step, the stream back).
//   - Event to chart: for every event, the time from its write on the host (the
//     event's own time stamp; one clock, since the host is this machine) to the
//     moment the controller handed it to the charts. p50, p99 and worst.
// With --slurm, the host is a Slurm cluster's login node (the test fixture's cluster
// on 127.0.0.1, which needs root): the run is queued with sbatch and the first
// figure also holds the scheduling.
// Usage: remote_latency [--slurm] [SECONDS] [THREADS]
#include <QApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../remote/slurm_fixture.h"
#include "../remote/sshd_fixture.h"
#include "editor/document.h"
#include "engine/io/project_file.h"
#include "gui/run_controller.h"
#include "remote/hosts.h"

using namespace netloom;

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool slurm = !args.empty() && args[0] == "--slurm";
  if (slurm) args.erase(args.begin());
  const int seconds = args.size() > 0 ? std::atoi(args[0].c_str()) : 20;
  const int threads = args.size() > 1 ? std::atoi(args[1].c_str()) : 1;
  QTemporaryDir dir;
  qputenv("XDG_CONFIG_HOME", dir.filePath("config").toUtf8());
  qputenv("XDG_DATA_HOME", dir.filePath("data").toUtf8());
  SshdFixture sshd;
  if (QString why = sshd.start(dir.path()); !why.isEmpty()) {
    std::fprintf(stderr, "remote_latency: no sshd: %s\n", qPrintable(why));
    return 2;
  }
  remote::HostSpec spec = sshd.host(dir.filePath("known_hosts"));
  if (!remote::openSession(spec, [](const remote::HostKey&) { return true; })) {
    std::fprintf(stderr, "remote_latency: cannot log in to the fixture's sshd\n");
    return 2;
  }
  remotepb::Host host = sshd.savedHost(dir.filePath("known_hosts"), "loopback", NETLOOM_TRAIN_EXE,
                                       dir.filePath("host"));
  SlurmFixture cluster;
  if (slurm) {
    if (QString why = cluster.start(dir.filePath("slurm")); !why.isEmpty()) {
      std::fprintf(stderr, "remote_latency: no Slurm cluster: %s\n", qPrintable(why));
      return 2;
    }
    host.add_env(cluster.env());
    host.mutable_slurm()->set_cpus_per_task(threads);
  }

  auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
  project->mutable_train()->set_epochs(100000);
  project->mutable_train()->set_threads(threads);
  QDir().mkpath(dir.filePath("project"));
  const QString path = dir.filePath("project/spirals.nlproj");
  if (!saveProject(path.toStdString(), *project)) return 2;
  editor::GraphDocument doc;
  if (Status s = doc.load(path); !s) {
    std::fprintf(stderr, "remote_latency: %s\n", s.message().c_str());
    return 2;
  }
  gui::RunController runs(&doc);
  runs.setRemoteHost(host);

  std::vector<double> latencyMs;
  double firstStepMs = -1, firstStepOnHostMs = -1;
  int64_t steps = 0;
  const double pressed = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  QElapsedTimer clock;
  clock.start();
  QObject::connect(&runs, &gui::RunController::eventsAppended, [&](int count) {
    const double now = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
    const auto& events = runs.current()->events;
    for (size_t i = events.size() - size_t(count); i < events.size(); ++i) {
      latencyMs.push_back((now - events[i].time()) * 1000.0);
      if (events[i].has_step()) {
        ++steps;
        if (firstStepMs < 0) {
          firstStepMs = double(clock.nsecsElapsed()) / 1e6;
          firstStepOnHostMs = (events[i].time() - pressed) * 1000.0;
        }
      }
    }
  });
  if (Status s = runs.start(); !s) {
    std::fprintf(stderr, "remote_latency: %s\n", s.message().c_str());
    return 1;
  }
  QTimer::singleShot(seconds * 1000, [&] { runs.stop(); });
  QObject::connect(&runs, &gui::RunController::runEnded, &app, &QApplication::quit);
  QTimer::singleShot((seconds + 120) * 1000, &app, &QApplication::quit);
  app.exec();
  if (latencyMs.empty()) {
    std::fprintf(stderr, "remote_latency: no event arrived\n");
    return 1;
  }
  std::sort(latencyMs.begin(), latencyMs.end());
  auto pct = [&](double p) { return latencyMs[size_t(p * double(latencyMs.size() - 1))]; };
  std::printf("remote run over loopback SSH%s, spirals, %d thread(s), %d s\n",
              slurm ? " through Slurm (sbatch, one CPU rank)" : "", threads, seconds);
  std::printf(
      "  run to first remote step: %.0f ms (the step itself was written on the host at %.0f ms)\n",
      firstStepMs, firstStepOnHostMs);
  std::printf(
      "  event to chart: %zu events (%lld steps), p50 %.1f ms, p99 %.1f ms, max %.1f ms (goal: p99 "
      "< 100 ms)\n",
      latencyMs.size(), (long long)steps, pct(0.5), pct(0.99), latencyMs.back());
  return 0;
}
