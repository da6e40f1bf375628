// The tailable event stream: every record read back, from an offset, past a torn
// record once its writer resumes, while a writer is live, and corrupt streams refused.
#include <QTemporaryDir>
#include <QtTest>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/io/event_stream.h"
#include "output_fixture.h"

using namespace netloom;
using outputfixture::fileSize;
using outputfixture::readAll;
using outputfixture::writeRaw;

namespace {

proto::TrainEvent stepEvent(int64_t step) {
  proto::TrainEvent e;
  e.set_time(1.7e9 + double(step));
  auto* s = e.mutable_step();
  s->set_step(step);
  s->set_epoch(int32_t(step / 10 + 1));
  s->set_loss(1.0 / double(step));
  (*s->mutable_metrics())["accuracy"] = double(step) / 100.0;
  return e;
}

std::vector<int64_t> stepsOf(const std::vector<proto::TrainEvent>& events) {
  std::vector<int64_t> out;
  for (const auto& e : events) out.push_back(e.has_step() ? e.step().step() : -1);
  return out;
}

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t i = first; i <= last; ++i) out.push_back(i);
  return out;
}

}  // namespace

class TestEventStream : public QObject {
  Q_OBJECT

 private slots:
  void eventsReadAll();
  void eventsFromOffset();
  void eventsTornRecordThenResume();
  void eventsTailLiveWriter();
  void eventsCorrupt();
};

void TestEventStream::eventsReadAll() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("events.pb").toStdString();
  EventWriter w;
  QVERIFY(w.open(path).ok());
  for (int i = 1; i <= 99; ++i) QVERIFY(w.write(stepEvent(i)).ok());
  proto::TrainEvent log;
  log.mutable_log()->set_level(proto::Log::WARNING);
  log.mutable_log()->set_text(std::string(300, 'x'));  // a two-byte length prefix
  QVERIFY(w.write(log).ok());
  // Flushed per event: readable before close.
  Result<EventReadResult> r = readEvents(path);
  QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
  QCOMPARE(r->events.size(), size_t(100));
  QCOMPARE(r->nextOffset, fileSize(path));
  for (int i = 0; i < 99; ++i) {
    const proto::TrainEvent& e = r->events[size_t(i)];
    QVERIFY(e.has_step());
    QCOMPARE(e.step().step(), int64_t(i + 1));
    QCOMPARE(e.step().loss(), 1.0 / double(i + 1));
    QCOMPARE(e.step().metrics().at("accuracy"), double(i + 1) / 100.0);
  }
  QCOMPARE(r->events[99].log().text(), log.log().text());
  w.close();

  // Reopening truncates.
  QVERIFY(w.open(path).ok());
  QCOMPARE(fileSize(path), int64_t(0));
  r = readEvents(path);
  QVERIFY(r.ok() && r->events.empty() && r->nextOffset == 0);
}

void TestEventStream::eventsFromOffset() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("events.pb").toStdString();
  EventWriter w;
  QVERIFY(w.open(path).ok());
  for (int i = 1; i <= 40; ++i) QVERIFY(w.write(stepEvent(i)).ok());
  const int64_t mid = fileSize(path);
  for (int i = 41; i <= 100; ++i) QVERIFY(w.write(stepEvent(i)).ok());
  w.close();

  Result<EventReadResult> rest = readEvents(path, mid);
  QVERIFY(rest.ok());
  QCOMPARE(stepsOf(rest->events), range(41, 100));
  QCOMPARE(rest->nextOffset, fileSize(path));

  Result<EventReadResult> atEnd = readEvents(path, fileSize(path));
  QVERIFY(atEnd.ok() && atEnd->events.empty() && atEnd->nextOffset == fileSize(path));
  Result<EventReadResult> past = readEvents(path, fileSize(path) + 1);
  QVERIFY(!past.ok());
  QVERIFY(QString::fromStdString(past.error().message).contains(QString::fromStdString(path)));
  QVERIFY(!readEvents(dir.filePath("none.pb").toStdString()).ok());
}

void TestEventStream::eventsTornRecordThenResume() {
  QTemporaryDir dir;
  const std::string full = dir.filePath("full.pb").toStdString();
  EventWriter w;
  QVERIFY(w.open(full).ok());
  for (int i = 1; i <= 40; ++i) QVERIFY(w.write(stepEvent(i)).ok());
  const int64_t mid = fileSize(full);
  for (int i = 41; i <= 100; ++i) QVERIFY(w.write(stepEvent(i)).ok());
  w.close();
  const std::string bytes = readAll(full);

  // Cut inside record 41's body, and inside its length prefix (zero bytes of body).
  for (int64_t cut : {mid + 5, mid + 1, mid}) {
    const std::string torn = dir.filePath("torn.pb").toStdString();
    writeRaw(torn, bytes.substr(0, size_t(cut)));
    Result<EventReadResult> first = readEvents(torn);
    QVERIFY2(first.ok(), first.ok() ? "" : first.error().message.c_str());
    QCOMPARE(stepsOf(first->events), range(1, 40));
    QCOMPARE(first->nextOffset, mid);

    // The writer finishes: continuing from nextOffset loses and repeats nothing.
    writeRaw(torn, bytes.substr(size_t(cut)), /*append=*/true);
    Result<EventReadResult> second = readEvents(torn, first->nextOffset);
    QVERIFY(second.ok());
    QCOMPARE(stepsOf(second->events), range(41, 100));
    QCOMPARE(second->nextOffset, int64_t(bytes.size()));
  }

  // A torn two-byte length prefix.
  const std::string longPath = dir.filePath("long.pb").toStdString();
  proto::TrainEvent log;
  log.mutable_log()->set_text(std::string(500, 'y'));
  QVERIFY(w.open(longPath).ok());
  QVERIFY(w.write(stepEvent(1)).ok());
  const int64_t before = fileSize(longPath);
  QVERIFY(w.write(log).ok());
  w.close();
  const std::string longBytes = readAll(longPath);
  writeRaw(longPath, longBytes.substr(0, size_t(before) + 1));
  Result<EventReadResult> r = readEvents(longPath);
  QVERIFY(r.ok());
  QCOMPARE(r->events.size(), size_t(1));
  QCOMPARE(r->nextOffset, before);
}

void TestEventStream::eventsTailLiveWriter() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("live.pb").toStdString();
  EventWriter w;
  QVERIFY(w.open(path).ok());
  int64_t offset = 0;
  std::vector<int64_t> seen;
  int next = 1;
  for (int batch : {3, 0, 10, 1, 25}) {
    for (int i = 0; i < batch; ++i) QVERIFY(w.write(stepEvent(next++)).ok());
    Result<EventReadResult> r = readEvents(path, offset);
    QVERIFY(r.ok());
    QCOMPARE(r->events.size(), size_t(batch));
    for (int64_t s : stepsOf(r->events)) seen.push_back(s);
    offset = r->nextOffset;
  }
  QCOMPARE(seen, range(1, next - 1));
}

void TestEventStream::eventsCorrupt() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("bad.pb").toStdString();
  EventWriter w;
  QVERIFY(w.open(path).ok());
  for (int i = 1; i <= 3; ++i) QVERIFY(w.write(stepEvent(i)).ok());
  w.close();
  const std::string good = readAll(path);
  const QString at = QString("byte %1").arg(good.size());

  // A complete record whose body is not a TrainEvent (field 0 is never valid).
  writeRaw(path, good + std::string("\x03\x00\x00\x00", 4));
  Result<EventReadResult> r = readEvents(path);
  QVERIFY(!r.ok());
  QString msg = QString::fromStdString(r.error().message);
  QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains(at), qPrintable(msg));

  // A length prefix longer than any varint.
  writeRaw(path, good + std::string(11, '\x80'));
  r = readEvents(path);
  QVERIFY(!r.ok());
  msg = QString::fromStdString(r.error().message);
  QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains(at), qPrintable(msg));

  // An absurd length is corruption, not a record still being written.
  writeRaw(path, good + std::string("\xff\xff\xff\xff\x0f", 5));
  r = readEvents(path);
  QVERIFY(!r.ok());
  QVERIFY(QString::fromStdString(r.error().message).contains(at));

  // The writer refuses when closed.
  QVERIFY(!w.write(stepEvent(1)).ok());
}

QTEST_APPLESS_MAIN(TestEventStream)
#include "tst_event_stream.moc"
