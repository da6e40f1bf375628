// What the remote job tests share, around the loopback sshd of sshd_fixture.h: a
// session that takes the host's key, a trainer that holds at a step, the spirals
// project, one-thread submit options, a follower to the job's end, the job's events
// as written on the host, and netloom-job run as a person would.
#pragma once

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QtGlobal>
#include <memory>
#include <string>
#include <vector>

#include "../common/wait.h"
#include "engine/io/project_file.h"
#include "remote/follow.h"
#include "remote/hosts.h"

namespace netloom::testing {

// A session with `h`, its key taken as it is (the loopback server's own), without
// the user's SSH configuration.
inline std::unique_ptr<remote::SshSession> testSession(const remotepb::Host& h) {
  remote::HostSpec spec = remote::hostSpec(h);
  spec.readSshConfig = false;
  auto s = remote::openSession(spec, [](const remote::HostKey&) { return true; });
  return s ? std::move(*s) : nullptr;
}

// A trainer that holds every run at `step` until a line is written to the FIFO
// `hold` in the job's folder.
inline Status writeHeldTrainer(const QString& path, int step = 60) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return makeError("cannot write " + path.toStdString());
  f.write("#!/bin/sh\nNETLOOM_HOLD_AT_STEP=" + QByteArray::number(step) +
          " NETLOOM_HOLD_FIFO=hold exec '" NETLOOM_TRAIN_EXE "' \"$@\"\n");
  f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
  return {};
}

inline proto::Project spirals(int epochs) {
  auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
  p->mutable_train()->set_epochs(epochs);
  return *p;
}

// netloom-train on one thread, with `more` arguments.
inline remote::SubmitOptions options(std::vector<std::string> more = {}) {
  remote::SubmitOptions o;
  o.args = {"--threads", "1"};
  o.args.insert(o.args.end(), more.begin(), more.end());
  return o;
}

// Follows a job to its end: every byte received, in order (a gap or an overlap is
// warned of).
inline std::string followToEnd(const remotepb::JobRecord& job, remote::FollowEnd* endOut) {
  std::string bytes;
  remote::FollowHooks hooks;
  hooks.onEvents = [&](int64_t at, const std::string& b, const std::vector<proto::TrainEvent>&) {
    if (at != int64_t(bytes.size())) qWarning("gap or overlap at %lld", (long long)at);
    bytes += b;
  };
  QElapsedTimer t;
  t.start();
  hooks.cancelled = [&] { return t.elapsed() > kHangMs; };
  auto end = remote::followJob(job, 0, nullptr, hooks);
  if (end && endOut) *endOut = *end;
  if (!end) qWarning("%s", end.error().message.c_str());
  return bytes;
}

// The job's events.pb as the host wrote it (the host is this machine).
inline QByteArray remoteEvents(const remotepb::JobRecord& job) {
  QFile f(QString::fromStdString(job.dir() + "/events.pb"));
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// netloom-job's environment in a test: its saved hosts under `config`, its job registry
// under `data`, and no SSH agent.
inline QProcessEnvironment jobCliEnvironment(const QString& config, const QString& data) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("XDG_CONFIG_HOME", config);
  env.insert("XDG_DATA_HOME", data);
  env.remove("SSH_AUTH_SOCK");
  return env;
}

// netloom-job with `args` in `env`, `input` typed on its standard input, run to its end
// (or `boundMs`); owned by `parent`.
inline QProcess* runJobCli(QObject* parent, const QProcessEnvironment& env, const QStringList& args,
                           const QByteArray& input = {}, int boundMs = kHangMs) {
  auto* p = new QProcess(parent);
  p->setProcessEnvironment(env);
  p->start(NETLOOM_JOB_EXE, args);
  p->write(input);
  p->closeWriteChannel();
  p->waitForFinished(boundMs);
  return p;
}

}  // namespace netloom::testing
