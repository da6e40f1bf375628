// Text for language models (TextSource): character and byte vocabularies, windows
// whose labels are the next tokens, the validation part by position, the loader's
// seeded training windows and ordered evaluation windows, and the errors that name
// the file.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "engine/data/dataset.h"

using namespace netloom;

namespace {

std::string writeText(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
  QFile f(dir.filePath(name));
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(bytes);
  return f.fileName().toStdString();
}

proto::DataDef textDef(const std::string& path, int context, double validation,
                       proto::TextSource::Vocabulary v = proto::TextSource::CHAR) {
  proto::DataDef d;
  d.mutable_text()->set_path(path);
  d.mutable_text()->set_context(context);
  d.mutable_text()->set_vocabulary(v);
  d.set_validation_fraction(validation);
  return d;
}

std::string all(const BatchLoader::Options& o, const Dataset& d, std::vector<Batch>& out) {
  BatchLoader loader(d, Normalizer{}, o);
  Batch b;
  while (loader.next(b)) out.push_back(b);
  return loader.status().ok() ? std::string() : loader.status().message();
}

}  // namespace

class TestText : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

 private slots:
  // A character vocabulary: U+FFFD first (for characters the training part lacks),
  // then the training part's characters by code point; multi-byte characters are
  // one token each.
  void characterVocabulary() {
    const std::string path = writeText(m_dir, "chars.txt", QString("baé€ab\né").toUtf8());
    auto t = readText(path, proto::TextSource::CHAR, {}, 0.0);
    QVERIFY2(t.ok(), t.ok() ? "" : t.error().message.c_str());
    const std::vector<std::string> want = {"\xEF\xBF\xBD", "\n", "a", "b", "é", "€"};
    QCOMPARE(t->vocab, want);
    const std::vector<int32_t> ids = {3, 2, 4, 5, 2, 3, 1, 4};
    QCOMPARE(t->tokens, ids);
    QCOMPARE(decodeTokens(t->tokens, t->vocab), QString("baé€ab\né").toStdString());
    // Built from the training part only: with half held out, "b\né" is unseen… but
    // "b" and "é" are in the first half, and "\n" becomes token 0.
    auto half = readText(path, proto::TextSource::CHAR, {}, 0.5);
    QVERIFY(half.ok());
    QCOMPARE(half->vocab, (std::vector<std::string>{"\xEF\xBF\xBD", "a", "b", "é", "€"}));
    QCOMPARE(half->tokens[6], 0);
    auto prompt = encodeText("ab€x", half->vocab, false);
    QVERIFY(prompt.ok());
    QCOMPARE(*prompt, (std::vector<int32_t>{1, 2, 4, 0}));
  }

  void byteVocabulary() {
    const QByteArray raw("\xff\x00z\xc3", 4);  // not UTF-8, which bytes do not care about
    const std::string path = writeText(m_dir, "bytes.bin", raw);
    auto t = readText(path, proto::TextSource::BYTE, {}, 0.0);
    QVERIFY(t.ok());
    QCOMPARE(int(t->vocab.size()), 256);
    QCOMPARE(t->tokens, (std::vector<int32_t>{255, 0, 122, 195}));
  }

  // Each window's labels are the window one token on; training is the file's start,
  // validation its end, and no window crosses between them.
  void windowsAndSplitByPosition() {
    QByteArray text;
    for (int i = 0; i < 100; ++i) text += char('a' + i % 26);
    const std::string path = writeText(m_dir, "alphabet.txt", text);
    auto s = loadData(textDef(path, 8, 0.2), "", 1);
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    QVERIFY(s->train.isText());
    QCOMPARE(s->train.sampleShape, (Shape{8}));
    QCOMPARE(s->train.classes, 27);         // 26 letters and token 0
    QCOMPARE(s->train.size(), int64_t(9));  // 80 training tokens: starts 0, 8, …, 64 (+9 ≤ 80)
    QCOMPARE(s->val.size(), int64_t(2));    // 20 validation tokens: starts 80, 88
    QCOMPARE(s->test.size(), s->val.size());
    BatchLoader::Options o;
    o.batchSize = 3;
    o.shuffle = false;
    std::vector<Batch> batches;
    QCOMPARE(all(o, s->val, batches), std::string());
    QCOMPARE(int(batches.size()), 1);
    const Batch& b = batches[0];
    QCOMPARE(b.size, int64_t(2));
    QCOMPARE(int(b.ids.size()), 16);
    QCOMPARE(int(b.labels.size()), 16);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 8; ++j) {
        const int pos = 80 + 8 * i + j;
        QCOMPARE(b.ids[size_t(i * 8 + j)], 1 + pos % 26);
        QCOMPARE(b.labels[size_t(i * 8 + j)], 1 + (pos + 1) % 26);
        QCOMPARE(b.x[size_t(i * 8 + j)], float(1 + pos % 26));
      }
  }

  // Training windows come in a seeded order at an offset drawn per epoch, the same
  // for the same seed and epoch, and never read past the training part.
  void trainingWindowsAreSeeded() {
    QByteArray text;
    for (int i = 0; i < 400; ++i) text += char('a' + (i * 7) % 26);
    const std::string path = writeText(m_dir, "seeded.txt", text);
    auto s = loadData(textDef(path, 16, 0.25), "", 1);
    QVERIFY(s.ok());
    const int64_t trainEnd = 300;
    auto epoch = [&](uint64_t seed, int64_t e) {
      BatchLoader::Options o;
      o.batchSize = 4;
      o.seed = seed;
      o.epoch = e;
      std::vector<Batch> batches;
      all(o, s->train, batches);
      std::vector<int32_t> ids;
      for (const Batch& b : batches) ids.insert(ids.end(), b.ids.begin(), b.ids.end());
      return ids;
    };
    QCOMPARE(epoch(3, 0), epoch(3, 0));
    QVERIFY(epoch(3, 0) != epoch(4, 0));
    QVERIFY(epoch(3, 0) != epoch(3, 1));
    // Every window is a stretch of the training tokens: find it there.
    const std::vector<int32_t>& tok = *s->train.tokens;
    const std::vector<int32_t> ids = epoch(3, 1);
    for (size_t w = 0; w < ids.size() / 16; ++w) {
      bool found = false;
      for (int64_t start = 0; !found && start + 17 <= trainEnd; ++start)
        found = std::equal(ids.begin() + long(w * 16), ids.begin() + long(w * 16 + 16),
                           tok.begin() + start);
      QVERIFY2(found, qPrintable(QString("window %1").arg(w)));
    }
  }

  void errorsNameTheFile() {
    auto check = [&](const proto::DataDef& d, const char* file, const char* what) {
      auto r = loadData(d, "", 1);
      QVERIFY2(!r.ok(), what);
      const std::string& m = r.error().message;
      QVERIFY2(m.find(file) != std::string::npos, m.c_str());
      QVERIFY2(m.find(what) != std::string::npos, m.c_str());
    };
    check(textDef(writeText(m_dir, "empty.txt", ""), 4, 0), "empty.txt", "is empty");
    check(textDef(writeText(m_dir, "short.txt", "abcd"), 4, 0), "short.txt",
          "fewer than a window of context 4");
    check(textDef(writeText(m_dir, "latin1.txt", QByteArray("caf\xe9 au lait")), 2, 0),
          "latin1.txt", "is not valid UTF-8 at byte 3");
    // An overlong encoding of '/' is not UTF-8 either.
    check(textDef(writeText(m_dir, "overlong.txt", QByteArray("ab\xc0\xaf")), 1, 0), "overlong.txt",
          "is not valid UTF-8 at byte 2");
    check(textDef(m_dir.filePath("absent.txt").toStdString(), 4, 0), "absent.txt",
          "cannot be read");
    // The same bytes read as bytes are fine.
    QVERIFY(
        loadData(textDef(m_dir.filePath("latin1.txt").toStdString(), 2, 0, proto::TextSource::BYTE),
                 "", 1)
            .ok());
    const std::vector<std::string> problems =
        dataProblems(textDef(m_dir.filePath("absent.txt").toStdString(), 4, 0), "");
    QCOMPARE(int(problems.size()), 1);
    QVERIFY(problems[0].find("data.text.path") != std::string::npos);
    // A folder of text files is a source too.
    QVERIFY(dataProblems(textDef(m_dir.path().toStdString(), 4, 0), "").empty());
  }
};

QTEST_GUILESS_MAIN(TestText)
#include "tst_text.moc"
