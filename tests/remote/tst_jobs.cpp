// Remote jobs against a real sshd on 127.0.0.1: submit the spirals project, follow
// its events to Finished and compare what arrived with the job's events.pb byte
// for byte, also while every SSH connection is cut three times mid-run and across
// a client restart; cancel (the follower records the kill); two jobs at once;
// datasets uploaded once and reused by checksum; test connection; fetch and
// delete; hostile names create no file; a missing or other-version netloom-train
// says which. Hosts as users set them up are tst_job_hosts's.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <map>

#include "../common/wait.h"
#include "engine/io/project_file.h"
#include "job_helpers.h"
#include "kernels/core/device.h"
#include "loopback_host.h"
#include "remote/follow.h"
#include "remote/hosts.h"
#include "remote/sha256.h"

using namespace netloom;
using namespace netloom::remote;
using namespace netloom::testing;

namespace {

// A size × size grayscale PNG of one value: IHDR, one zlib-compressed IDAT, IEND.
QByteArray grayPng(int size, uint8_t value) {
  auto chunk = [](const char* kind, const QByteArray& body) {
    QByteArray c;
    const auto n = uint32_t(body.size());
    for (int s = 24; s >= 0; s -= 8) c.append(char((n >> s) & 0xff));
    QByteArray typed = QByteArray(kind, 4) + body;
    const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(typed.data()), uInt(typed.size()));
    c += typed;
    for (int s = 24; s >= 0; s -= 8) c.append(char((crc >> s) & 0xff));
    return c;
  };
  QByteArray header;
  for (int s = 24; s >= 0; s -= 8) header.append(char((size >> s) & 0xff));
  header += header;
  header += QByteArray("\x08\x00\x00\x00\x00", 5);  // 8 bits, grayscale, no interlace
  QByteArray rows;
  for (int y = 0; y < size; ++y) rows += char(0) + QByteArray(size, char(value));
  QByteArray packed(int(compressBound(uLong(rows.size()))), 0);
  uLongf length = uLongf(packed.size());
  compress(reinterpret_cast<Bytef*>(packed.data()), &length,
           reinterpret_cast<const Bytef*>(rows.data()), uLong(rows.size()));
  packed.resize(int(length));
  return QByteArray("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", header) + chunk("IDAT", packed) +
         chunk("IEND", {});
}

}  // namespace

class TestJobs : public QObject, LoopbackHost {
  Q_OBJECT

 private:
  // The same host, whose trainer holds every job at step 60 until a line is written
  // to the FIFO `hold` in the job's folder.
  remotepb::Host heldHost() const {
    remotepb::Host h = host();
    h.set_trainer(m_dir.filePath("held-train").toStdString());
    return h;
  }
  // Follows a job to its end; `cuts` times, once events flow, every SSH connection
  // is cut. Returns every byte received, in order.
  std::string follow(const remotepb::JobRecord& job, int cuts, FollowEnd* endOut = nullptr,
                     int64_t offset = 0, int stopAfterEvents = 0) {
    std::string bytes;
    int seen = 0;
    FollowHooks hooks;
    hooks.onEvents = [&](int64_t at, const std::string& b,
                         const std::vector<proto::TrainEvent>& ev) {
      if (at != offset + int64_t(bytes.size())) qWarning("gap or overlap at %lld", (long long)at);
      bytes += b;
      seen += int(ev.size());
      if (cuts > 0) m_sshd.dropConnections(), --cuts;
    };
    QElapsedTimer t;
    t.start();
    hooks.cancelled = [&] {
      return t.elapsed() > testing::kHangMs || (stopAfterEvents > 0 && seen >= stopAfterEvents);
    };
    auto end = followJob(job, offset, nullptr, hooks);
    if (end && endOut) *endOut = *end;
    if (!end) qWarning("%s", end.error().message.c_str());
    return bytes;
  }

 private slots:
  void initTestCase() {
    m_skip = m_sshd.start(m_dir.path());
    QVERIFY(writeHeldTrainer(m_dir.filePath("held-train")).ok());
  }

  void bundlePathsStayInsideTheJob() {
    QVERIFY(bundlePath("/w/jobs/j1", "project.nlproj").ok());
    QCOMPARE(*bundlePath("/w/jobs/j1", "a/b.txt"), std::string("/w/jobs/j1/a/b.txt"));
    for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "./x", "a/.."})
      QVERIFY2(!bundlePath("/w/jobs/j1", bad).ok(), bad);
    QVERIFY(isJobId(newJobId()));
    // FIPS 180-4's examples.
    auto sha = [](const std::string& bytes) {
      auto h = sha256Hex(bytes);
      return h ? *h : "error: " + h.error().message;
    };
    QCOMPARE(sha(""),
             std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    QCOMPARE(sha("abc"),
             std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    QCOMPARE(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
             std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    QCOMPARE(sha(std::string(1000000, 'a')),
             std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    // A file is read in 1 MiB pieces: one just past a piece gives the same digest.
    QTemporaryDir dir;
    const std::string bytes((1 << 20) + 3, 'a');
    QFile file(dir.filePath("data.bin"));
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write(bytes.data(), qint64(bytes.size())));
    file.close();
    auto fromFile = sha256File(file.fileName().toStdString());
    QVERIFY(fromFile.ok());
    QCOMPARE(*fromFile, sha(bytes));
    QVERIFY(!sha256File(dir.filePath("none").toStdString()).ok());
    QVERIFY(!isJobId("j1; rm -rf /"));
  }

  void testConnectionReportsTheHost() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    auto info = probeHost(*s, host());
    QVERIFY2(info.ok(), info.ok() ? "" : info.error().message.c_str());
    QCOMPARE(info->trainerVersion, trainerVersionLine());
    QVERIFY(info->problem.empty());
    QVERIFY(info->cpus > 0);
    QVERIFY(info->memoryBytes > (64u << 20));
    QVERIFY(info->diskFreeBytes > 0);
    QVERIFY(QString::fromStdString(info->summary()).contains("CPUs"));
    // The devices the host's netloom-train can train on, as it lists them.
    QVERIFY(!info->devices.empty());
    QVERIFY2(info->devices[0].rfind("cpu: ", 0) == 0, info->devices[0].c_str());
    QVERIFY(QString::fromStdString(info->summary()).contains("netloom-train trains on:"));
    // No netloom-train: the report says what to run.
    remotepb::Host none = host();
    none.set_trainer(m_dir.filePath("nowhere/netloom-train").toStdString());
    auto missing = probeHost(*s, none);
    QVERIFY(missing.ok() && missing->trainerVersion.empty());
    QVERIFY(QString::fromStdString(missing->problem).contains("scripts/setup.sh node"));
    // Another version: named, and submit refuses it.
    QFile fake(m_dir.filePath("old-netloom-train"));
    QVERIFY(fake.open(QIODevice::WriteOnly));
    fake.write("#!/bin/sh\necho netloom-train 0.0.1\n");
    fake.close();
    fake.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    remotepb::Host old = host();
    old.set_trainer(fake.fileName().toStdString());
    auto job = submitJob(*s, old, spirals(1), options());
    QVERIFY(!job.ok());
    QVERIFY2(job.error().message.find("\"netloom-train 0.0.1\"") != std::string::npos,
             job.error().message.c_str());
  }

  // A job's device reaches the host's netloom-train as --devices: it trains there, or
  // (with no GPU there) fails saying why.
  void devicesReachTheHost() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    std::string why;
    const bool gpu = openDevice(DeviceId{DeviceKind::Cuda, 0}, why) != nullptr;
    auto job = submitJob(*s, host(), spirals(1), options({"--devices", "cuda:0"}));
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    QVERIFY(std::find(job->args().begin(), job->args().end(), "cuda:0") != job->args().end());
    FollowEnd end;
    follow(*job, 0, &end);
    if (gpu) {
      QCOMPARE(int(end.how), int(FollowEnd::How::Finished));
      return;
    }
    QCOMPARE(int(end.how), int(FollowEnd::How::Failed));
    QFile log(QString::fromStdString(job->dir() + "/train.log"));
    QVERIFY(log.open(QIODevice::ReadOnly));
    QByteArray text = log.readAll();
    QVERIFY2(text.contains(QByteArray::fromStdString("--devices cuda:0 is not available: ")),
             text.constData());
  }

  void followsToFinishedByteForByte() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    proto::Project p = spirals(6);
    p.mutable_train()->mutable_checkpoint()->set_every_epochs(2);
    auto job = submitJob(*s, host(), p, options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    QVERIFY(isJobId(job->id()));
    QVERIFY(job->pid() > 0);
    FollowEnd end;
    std::string got = follow(*job, 0, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Finished));
    QVERIFY(got == remoteEvents(*job).toStdString());
    auto all = parseEvents(got, 0);
    QVERIFY(all.ok() && all->events.back().has_finished());
    for (const char* f : {"pid", "started", "exit", "project.nlproj", "job.txtpb"})
      QVERIFY2(QFile::exists(QString::fromStdString(job->dir() + "/") + f), f);
    auto st = jobStatus(*s, *job);
    QVERIFY(st.ok());
    QCOMPARE(st->state, std::string("finished"));
    // Fetch what it made, then delete the job's folder on the host.
    QString local = m_dir.filePath("fetched");
    QVERIFY2(fetchJob(*s, *job, local.toStdString()).ok(), "fetch");
    QVERIFY(QFile::exists(local + "/weights.safetensors"));
    QVERIFY(QFile::exists(local + "/events.pb"));
    QVERIFY(!QDir(local + "/checkpoints").entryList({"step-*"}, QDir::Dirs).isEmpty());
    QVERIFY(deleteJob(*s, *job).ok());
    QVERIFY(!QDir(QString::fromStdString(job->dir())).exists());
    remotepb::JobRecord outside = *job;
    outside.set_dir(m_dir.path().toStdString());
    QVERIFY(!deleteJob(*s, outside).ok());  // not a job folder: nothing removed
    QVERIFY(QDir(m_dir.path()).exists());
  }

  void connectionCutThreeTimesAndARestartLoseNothing() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    auto job = submitJob(*s, heldHost(), spirals(300), options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    s.reset();
    // A client that stops after some events (the IDE closed), then a new one that
    // resumes from the bytes the first one held. The job holds at step 60 until the
    // first client is gone, so the second one starts mid-run.
    std::string first = follow(*job, 3, nullptr, 0, 40);
    QVERIFY(!first.empty());
    auto firstEvents = parseEvents(first, 0);
    QVERIFY(firstEvents.ok() && !firstEvents->events.back().has_finished());
    const int hold = testing::waitForHold(QString::fromStdString(job->dir()) + "/hold");
    QVERIFY(hold >= 0);
    QCOMPARE(::write(hold, "\n", 1), ssize_t(1));
    ::close(hold);
    FollowEnd end;
    std::string rest = follow(*job, 0, &end, int64_t(first.size()));
    QCOMPARE(int(end.how), int(FollowEnd::How::Finished));
    QByteArray remote = remoteEvents(*job);
    QCOMPARE(first.size() + rest.size(), size_t(remote.size()));
    QVERIFY(first + rest == remote.toStdString());  // no gap, nothing twice
  }

  void cancelAndTwoJobsAtOnce() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    auto a = submitJob(*s, host(), spirals(testing::kEndlessEpochs), options());
    auto b = submitJob(*s, host(), spirals(testing::kEndlessEpochs), options());
    QVERIFY(a.ok() && b.ok());
    QVERIFY(a->id() != b->id() && a->dir() != b->dir());
    QVERIFY(waitUntil([&] { return remoteEvents(*a).size() > 2000; }));
    QVERIFY(waitUntil([&] { return remoteEvents(*b).size() > 2000; }));
    auto listed = listJobs(*s, host());
    QVERIFY(listed.ok());
    int running = 0;
    for (const auto& j : *listed) running += j.state == "running";
    QVERIFY(running >= 2);
    // Pause: the job's processes stop; then on again.
    QCOMPARE(QString::fromStdString(errorOf(signalJob(*s, *b, "STOP"))), QString());
    QVERIFY(waitUntil([&] { return jobStatus(*s, *b)->state == "paused"; }));
    QCOMPARE(QString::fromStdString(errorOf(signalJob(*s, *b, "CONT"))), QString());
    QVERIFY(waitUntil([&] { return jobStatus(*s, *b)->state == "running"; }));
    // Cancel while following: the follower records the kill in the stream.
    QCOMPARE(QString::fromStdString(errorOf(signalJob(*s, *a, "KILL"))), QString());
    FollowEnd end;
    std::string got = follow(*a, 0, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Failed));
    QVERIFY2(end.message.find("killed") != std::string::npos, end.message.c_str());
    QVERIFY(got == remoteEvents(*a).toStdString());
    auto events = parseEvents(got, 0);
    QVERIFY(events.ok() && events->events.size() > 5 && events->events.back().has_failed());
    QCOMPARE(jobStatus(*s, *a)->state, std::string("killed"));
    QVERIFY(!deleteJob(*s, *b).ok());                            // still running: refused
    QCOMPARE(jobStatus(*s, *b)->state, std::string("running"));  // the other job went on
    // Stop: it ends after the step, cleanly.
    QCOMPARE(QString::fromStdString(errorOf(signalJob(*s, *b, "TERM"))), QString());
    FollowEnd endB;
    auto stream = parseEvents(follow(*b, 0, &endB), 0);
    QCOMPARE(int(endB.how), int(FollowEnd::How::Finished));
    // The host says so too: TERM reached the job's shell as well, which still
    // recorded how the trainer ended.
    QVERIFY(stream.ok() && stream->events.back().has_finished());
    const proto::Finished& finished = stream->events.back().finished();
    QVERIFY(finished.stopped());
    auto stopped = jobStatus(*s, *b);
    QVERIFY(stopped.ok());
    QCOMPARE(stopped->state, std::string("stopped"));
    QCOMPARE(stopped->exitCode, 0);
    QCOMPARE(stopped->stoppedAtStep, finished.steps());
    QCOMPARE(stopped->describe(), "stopped at step " + std::to_string(finished.steps()));
    listed = listJobs(*s, host());
    QVERIFY(listed.ok());
    std::map<std::string, std::string> states;
    for (const auto& j : *listed) states[j.id] = j.describe();
    QCOMPARE(states[a->id()], std::string("killed"));
    QCOMPARE(states[b->id()], stopped->describe());
    QVERIFY(!signalJob(*s, *a, "HUP; rm -rf /").ok());  // only known signals
  }

  void datasetsAreUploadedOnceAndReused() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-mlp.nlproj");
    QVERIFY(project.ok());
    if (!QFile::exists(QString::fromStdString(project->data().idx().train_images())))
      QSKIP("no Fashion-MNIST here (dataset-fashion-mnist)");
    auto s = session();
    QVERIFY(s);
    auto first =
        submitJob(*s, host(), *project, options({"--max-steps", "3", "--test-limit", "50"}));
    QVERIFY2(first.ok(), first.ok() ? "" : first.error().message.c_str());
    QCOMPARE(first->data_size(), 4);
    for (const auto& d : first->data()) {
      QVERIFY(d.uploaded());
      QCOMPARE(d.sha256().size(), size_t(64));
      QVERIFY(QString::fromStdString(d.remote_path()).startsWith(m_dir.filePath("work/data/")));
      QCOMPARE(QFileInfo(QString::fromStdString(d.remote_path())).size(), d.bytes());
    }
    auto second =
        submitJob(*s, host(), *project, options({"--max-steps", "3", "--test-limit", "50"}));
    QVERIFY(second.ok());
    for (int i = 0; i < 4; ++i) {
      QVERIFY(!second->data(i).uploaded());  // reused by checksum
      QCOMPARE(second->data(i).remote_path(), first->data(i).remote_path());
    }
    // The remote project names the uploaded copies.
    auto remoteProject = loadProject(second->dir() + "/project.nlproj");
    QVERIFY(remoteProject.ok());
    QCOMPARE(remoteProject->data().idx().train_images(), second->data(0).remote_path());
    FollowEnd end;
    follow(*second, 0, &end);
    QVERIFY2(end.how == FollowEnd::How::Finished, end.message.c_str());
    // The host's own copy, when asked to prefer it.
    remotepb::Host own = host();
    own.set_prefer_host_data(true);
    auto third = submitJob(*s, own, *project, options({"--max-steps", "1", "--test-limit", "10"}));
    QVERIFY(third.ok());
    QCOMPARE(third->data(0).remote_path(), project->data().idx().train_images());
    QVERIFY(third->data(0).sha256().empty());
    follow(*first, 0);
    follow(*third, 0);
  }

  // Images are not uploaded: a folder the host lacks is refused naming it; one the
  // host holds is read there, at its absolute path.
  void imagesAreReadWhereTheHostHasThem() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    const QString pics = m_dir.filePath("pics");
    // Two classes of 8 × 8 grayscale PNGs (stored, unfiltered rows: a valid PNG).
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 6; ++i) {
        QDir().mkpath(pics + QString("/c%1").arg(c));
        QFile f(pics + QString("/c%1/%2.png").arg(c).arg(i));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(grayPng(8, uint8_t(c ? 200 : 30)));
      }
    auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
    QVERIFY(p.ok());
    // The spirals MLP reads the images through a Flatten that takes its input's name.
    proto::ModelDef& m = *p->mutable_model();
    for (auto& n : *m.mutable_nodes())
      if (n.op() == "Input" && n.attrs().count("shape")) {
        auto* dims = (*n.mutable_attrs())["shape"].mutable_ints();
        dims->clear_values();
        for (int d : {1, 8, 8}) dims->add_values(d);
        proto::NodeDef* flat = m.add_nodes();
        flat->set_name(n.name());
        flat->set_op("Flatten");
        n.set_name("pixels");
        flat->add_inputs("pixels");
        break;
      }
    proto::Project project = *p;
    project.mutable_data()->clear_synthetic();
    project.mutable_data()->mutable_image_folder()->set_train("pics");
    auto s = session();
    QVERIFY(s);
    remote::SubmitOptions o = options({"--max-steps", "1"});
    o.projectDir = m_dir.filePath("elsewhere").toStdString();
    auto refused = submitJob(*s, host(), project, o);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().message.find("data.image_folder.train: " + o.projectDir + "/pics") !=
                     std::string::npos &&
                 refused.error().message.find("not uploaded") != std::string::npos,
             refused.error().message.c_str());
    o.projectDir = m_dir.path().toStdString();
    auto job = submitJob(*s, host(), project, o);
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    auto remoteProject = loadProject(job->dir() + "/project.nlproj");
    QVERIFY(remoteProject.ok());
    QCOMPARE(remoteProject->data().image_folder().train(), pics.toStdString());
    FollowEnd end;
    follow(*job, 0, &end);
    QVERIFY2(end.how == FollowEnd::How::Finished, end.message.c_str());
  }

  // A work directory on a 1 MiB file system: a dataset that does not fit is refused
  // before it is sent, and a run that fills the disk ends failed, saying why, with
  // the events it wrote.
  void fullDiskSaysSo() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    const QString mnt = m_dir.filePath("tiny");
    QDir().mkpath(mnt);
    if (QProcess::execute("mount", {"-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt}) != 0)
      QSKIP("cannot mount a small tmpfs here (needs root): the full-disk checks are skipped");
    struct Unmount {
      QString at;
      ~Unmount() { QProcess::execute("umount", {"-l", at}); }
    } unmount{mnt};
    auto s = session();
    QVERIFY(s);
    remotepb::Host h = host();
    h.set_work_dir(mnt.toStdString());
    auto project = loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-mlp.nlproj");
    if (QFile::exists(QString::fromStdString(project->data().idx().train_images()))) {
      auto refused = submitJob(*s, h, *project, options());
      QVERIFY(!refused.ok());
      QVERIFY2(refused.error().message.find("disk is full") != std::string::npos,
               refused.error().message.c_str());
    }
    auto job = submitJob(*s, h, spirals(100000), options());
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    FollowEnd end;
    std::string got = follow(*job, 0, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Failed));
    QVERIFY2(end.message.find("No space left") != std::string::npos ||
                 end.message.find("disk is full") != std::string::npos,
             end.message.c_str());
    auto events = parseEvents(got, 0);
    QVERIFY(events.ok() && events->events.size() > 100);  // what fitted is kept
  }

  void hostileNamesCreateNoFile() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable("no sshd here: " + m_skip));
    auto s = session();
    QVERIFY(s);
    proto::Project p = spirals(1);
    p.set_name("x'; touch PWNED; '$(touch PWNED2)");
    remotepb::Host h = host();
    h.set_work_dir(m_dir.filePath("work'; touch PWNED3; '$(touch PWNED4)").toStdString());
    auto job = submitJob(*s, h, p, options({"--devices", "cpu"}));
    QVERIFY2(job.ok(), job.ok() ? "" : job.error().message.c_str());
    FollowEnd end;
    follow(*job, 0, &end);
    QCOMPARE(int(end.how), int(FollowEnd::How::Finished));
    for (const char* f : {"PWNED", "PWNED2", "PWNED3", "PWNED4"}) {
      QVERIFY(!QFile::exists(m_dir.filePath(f)));
      QVERIFY(!QFile::exists(QDir::home().filePath(f)));
    }
  }
};

QTEST_GUILESS_MAIN(TestJobs)
#include "tst_jobs.moc"
