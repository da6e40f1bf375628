// Resource limits and size arithmetic: inputs that ask for more than a machine has,
// or more than a 64-bit size can count, get an error naming the field, node or file
// and the bytes, and nothing large is allocated on the way. This process, and every
// netloom-train it starts, runs with its address space bounded (RLIMIT_AS), so an
// allocation the checks missed ends the test with bad_alloc instead of filling memory.
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "data_fixture.h"
#include "engine/data/dataset.h"
#include "engine/graph/analyze.h"
#include "engine/graph/graph.h"
#include "engine/io/event_stream.h"
#include "engine/train/summary.h"
#include "kernels/core/checked.h"
#include "model_text.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NETLOOM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define NETLOOM_SANITIZED 1
#endif
#endif

namespace {

using namespace netloom;

constexpr int64_t kGiB = int64_t(1) << 30;
// What a process under test may map beyond what it has mapped at the start: enough
// for every small run here, far below what any of the refused inputs asks for.
constexpr int64_t kAddressSpaceHeadroom = 4 * kGiB;

// Sanitizers reserve terabytes of shadow address space, so they run unbounded.
bool canBoundAddressSpace() {
#ifdef NETLOOM_SANITIZED
  return false;
#else
  return true;
#endif
}

int64_t virtualSize() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0;
  in >> pages;
  return pages * sysconf(_SC_PAGESIZE);
}

bool boundAddressSpace(int64_t bytes) {
  rlimit r{rlim_t(bytes), rlim_t(bytes)};
  return setrlimit(RLIMIT_AS, &r) == 0;
}

bool contains(const std::string& text, const QString& part) {
  return text.find(part.toStdString()) != std::string::npos;
}

#define EXPECT_MENTIONS(text, parts) \
  for (const QString& part : parts)  \
    QVERIFY2(contains(text, part),   \
             qPrintable("'" + part + "' missing from: " + QString::fromStdString(text)));

std::string fashion(const char* file) {
  return std::string(NETLOOM_FASHION_DIR) + "/" + file;
}

bool haveFashion() {
  return std::filesystem::exists(fashion("t10k-images-idx3-ubyte.gz"));
}

// A whole gzip file, decompressed.
std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  if (!f) return out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  gzclose(f);
  return out;
}

void setBe32(std::string& bytes, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[offset + i] = char((v >> (24 - 8 * i)) & 0xff);
}

std::string projectText(const char* name) {
  std::ifstream in(std::string(NETLOOM_SOURCE_DIR) + "/projects/" + name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  if (at == std::string::npos) return {};
  return text.replace(at, from.size(), to);
}

struct Outcome {
  int code = -1;  // -1: the process did not exit normally (a crash)
  QString err;
};

// netloom-train with its address space bounded as this test's own.
Outcome runTrain(const QStringList& args) {
  QProcess p;
  // Measured here: between fork and exec the child may only make async-signal-safe calls.
  const int64_t bound = virtualSize() + kAddressSpaceHeadroom;
  if (canBoundAddressSpace()) p.setChildProcessModifier([bound] { boundAddressSpace(bound); });
  p.start(NETLOOM_TRAIN_EXE, args);
  p.waitForFinished(300000);
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardError())};
}

proto::ModelDef mlp(int64_t inFeatures, int64_t outFeatures) {
  using namespace testutil;
  return model(input("x", std::to_string(inFeatures)) + labels() +
               node("fc1", "Linear", "x", intAttr("out_features", outFeatures)) +
               node("loss", "SoftmaxCrossEntropy", "fc1,label"));
}

}  // namespace

class TestLimits : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    if (canBoundAddressSpace()) QVERIFY(boundAddressSpace(virtualSize() + kAddressSpaceHeadroom));
  }

  void checkedArithmeticReportsOverflow() {
    const int64_t big = int64_t(1) << 62;
    QVERIFY(!checkedMul(big, 2));
    QCOMPARE(*checkedMul(big, 1), big);
    QVERIFY(!checkedAdd(INT64_MAX, 1));
    QCOMPARE(saturatingMul(big, 4), INT64_MAX);
    QCOMPARE(saturatingMul(-big, 4), INT64_MIN);
    QCOMPARE(saturatingAdd(INT64_MAX, 1), INT64_MAX);
    // Dims of 2^32 - 1 multiply past 2^64: a wrapped product would look small.
    QVERIFY(!checkedNumel({4294967295, 4294967295, 4294967295}));
    QVERIFY(!checkedNumel({3, -1}));
    QCOMPARE(*checkedBytes({1 << 20, 1 << 20}, DType::F32), int64_t(1) << 42);
    QVERIFY(!checkedBytes({int64_t(1) << 62}, DType::F32));
  }

  void byteSizesParseAndPrint() {
    QCOMPARE(*parseByteSize("512M", "--memory-limit"), int64_t(512) << 20);
    QCOMPARE(*parseByteSize("4G", "--memory-limit"), 4 * kGiB);
    QCOMPARE(*parseByteSize("1.5GiB", "--memory-limit"), 3 * kGiB / 2);
    QCOMPARE(*parseByteSize("2t", "--memory-limit"), int64_t(2) << 40);
    QCOMPARE(*parseByteSize("4096", "--memory-limit"), int64_t(4096));
    QCOMPARE(*parseByteSize("100B", "--memory-limit"), int64_t(100));
    for (const char* bad : {"", "G", "-1", "4X", "1e3", "0", "99999999999T", "4 G"}) {
      auto r = parseByteSize(bad, "--memory-limit");
      QVERIFY2(!r.ok(), bad);
      QVERIFY(contains(r.error().message, "--memory-limit"));
    }
    QCOMPARE(formatBytes(512), std::string("512 B"));
    QCOMPARE(formatBytes(1536), std::string("1.5 KiB"));
    QCOMPARE(formatBytes(int64_t(6) << 40), std::string("6.0 TiB"));
  }

  void budgetRefusesNamingWhatAndBytes() {
    MemoryBudget b(1 << 20, "the limit is 1.0 MiB");
    QVERIFY(b.reserve("the dataset", 512 << 10).ok());
    Status s = b.reserve("train.batch_size 99", 1 << 20);
    QVERIFY(!s.ok());
    EXPECT_MENTIONS(s.message(), (QStringList{"train.batch_size 99 needs 1.0 MiB", "512.0 KiB",
                                              "1.5 MiB", "the limit is 1.0 MiB"}));
    QVERIFY(s.error().kind == ErrorKind::Refused);
    QCOMPARE(b.planned(), int64_t(512) << 10);  // a refusal plans nothing
    QVERIFY(!b.check("a copy", 600 << 10).ok());
    QVERIFY(b.check("a copy", 500 << 10).ok());
    QCOMPARE(b.planned(), int64_t(512) << 10);
    // The machine's budget is positive and below what 64 bits count.
    auto here = MemoryBudget::forThisProcess();
    QVERIFY(here->limit() > 0 && here->limit() < INT64_MAX);
    QCOMPARE(MemoryBudget::forThisProcess(4096, "--memory-limit")->limit(), int64_t(4096));
  }

  // Shapes past what sizes can count are refused by shape inference, naming the node
  // and tensor, in the compiler's graph and in the editor's analysis alike.
  void shapeOverflowNamesNodeAndTensor_data() {
    using namespace testutil;
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("node");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("Input shape 1e9 × 1e9 × 1e9")
        << QString::fromStdString(input("x", "1000000000, 1000000000, 1000000000")) << "x"
        << QStringList{"node 'x' (Input)", "output 'y'", "64-bit"};
    QTest::newRow("Linear out_features at its maximum over 1e9 features")
        << QString::fromStdString(input("x", "1000000000") +
                                  node("fc1", "Linear", "x", intAttr("out_features", 1 << 24)))
        << "fc1" << QStringList{"node 'fc1' (Linear)", "parameter 'weight'", "16777216×1000000000"};
    QTest::newRow("Reshape to 1e9 × 1e9 × 1e9")
        << QString::fromStdString(
               input("x", "8") +
               node("r", "Reshape", "x",
                    "attrs { key: 'shape' value { ints { values: [1000000000, 1000000000, "
                    "1000000000, 1000000000] } } }"))
        << "r" << QStringList{"node 'r'", "cannot reshape"};
    QTest::newRow("Conv2d out_channels 2^20 on 4096×4096 images")
        << QString::fromStdString(input("x", "1024, 4096, 4096") +
                                  node("conv", "Conv2d", "x",
                                       intAttr("out_channels", 1 << 20) +
                                           " attrs { key: 'kernel_size' value { ints { values: "
                                           "[3] } } } attrs { key: 'padding' value { ints { "
                                           "values: [1] } } }"))
        << "conv" << QStringList{"node 'conv' (Conv2d)", "output 'y'", "1048576×4096×4096"};
  }
  void shapeOverflowNamesNodeAndTensor() {
    QFETCH(QString, body);
    QFETCH(QString, node);
    QFETCH(QStringList, mentions);
    auto m = testutil::model(body.toStdString());
    auto g = buildGraph(m, 32);
    QVERIFY(!g.ok());
    EXPECT_MENTIONS(g.error().message, mentions);
    ModelAnalysis a = analyzeModel(m, 32);
    QVERIFY(!a.ok());
    QCOMPARE(QString::fromStdString(a.problems.front().node), node);
    EXPECT_MENTIONS(a.problems.front().message, mentions);
  }

  // A model that is countable but enormous: the editor's analysis shows its shapes and
  // costs (FLOPs saturate rather than wrap), and allocates nothing for them.
  void analysisOfHugeModelsAllocatesNothing() {
    ModelAnalysis a = analyzeModel(mlp(784, 1 << 24), 1);
    QVERIFY(a.ok());
    const NodeAnalysis& fc1 = a.nodes.at("fc1");
    QCOMPARE(fc1.outputs.front().shape, (Shape{1, 1 << 24}));
    QCOMPARE(fc1.params, int64_t(784 + 1) << 24);
    QCOMPARE(fc1.flops, int64_t(2 * 784) << 24);
    // At batch 2^31 - 1 the output passes the largest tensor there may be.
    ModelAnalysis huge = analyzeModel(mlp(784, 1 << 24), 2147483647);
    QVERIFY(!huge.ok());
    QCOMPARE(huge.problems.front().node, std::string("fc1"));
    EXPECT_MENTIONS(huge.problems.front().message,
                    (QStringList{"2147483647×16777216", "more than any tensor may hold"}));
    // Ten thousand tensors of nearly 1 PiB: the total saturates instead of wrapping.
    using namespace testutil;
    std::string body = input("x", "1000000000, 1000");
    for (int i = 0; i < 10000; ++i)
      body += node("t" + std::to_string(i), "Tanh", i ? "t" + std::to_string(i - 1) : "x");
    auto s = summarizeModel(model(body), 256);
    QVERIFY(s.ok());
    QCOMPARE(s->activationBytes, INT64_MAX);
    QVERIFY(s->flops > 0);
  }

  void compileRefusesWhatTheBudgetCannotHold_data() {
    QTest::addColumn<int64_t>("batch");
    QTest::addColumn<int64_t>("outFeatures");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("batch_size 2^31 - 1")
        << int64_t(2147483647) << int64_t(10)
        << QStringList{"train.batch_size 2147483647", "activations (arena", "'x' 2147483647×784",
                       "TiB", "but the limit is 64.0 MiB"};
    QTest::newRow("Linear out_features at its maximum")
        << int64_t(32) << int64_t(1 << 24)
        << QStringList{"parameters and optimizer state", "'fc1.weight' 16777216×784", "49.0 GiB",
                       "but the limit is 64.0 MiB"};
  }
  void compileRefusesWhatTheBudgetCannotHold() {
    QFETCH(int64_t, batch);
    QFETCH(int64_t, outFeatures);
    QFETCH(QStringList, mentions);
    ParamStore store;
    CompileOptions o;
    o.batch = batch;
    o.batchField = "train.batch_size " + std::to_string(batch);
    o.budget = std::make_shared<MemoryBudget>(64 << 20, "the limit is 64.0 MiB");
    auto p = compile(mlp(784, outFeatures), o, store);
    QVERIFY(!p.ok());
    EXPECT_MENTIONS(p.error().message, mentions);
    QVERIFY(p.error().kind == ErrorKind::Refused);
    QVERIFY(store.entries().empty());  // refused before a parameter was created
    QCOMPARE(o.budget->planned(), int64_t(0));
    // Without a budget of its own, compile asks this (bounded) process what it can have.
    if (!canBoundAddressSpace()) return;
    o.budget = nullptr;
    auto q = compile(mlp(784, outFeatures), o, store);
    QVERIFY(!q.ok());
    QVERIFY(q.error().kind == ErrorKind::Refused);
    QVERIFY(contains(q.error().message, "RLIMIT_AS"));
  }

  // An integer attribute written as a float past int64 is out of range, not converted.
  void hugeFloatsForIntegerAttributesAreOutOfRange() {
    using namespace testutil;
    const std::pair<const char*, const char*> cases[] = {{"1e300", "is 10000000000000000"},
                                                         {"9.3e18", "is 9300000000000000000"},
                                                         {"-1e19", "is -10000000000000000000"}};
    for (const auto& [value, shown] : cases) {
      auto m = model(input("x", "4") +
                     node("fc1", "Linear", "x",
                          std::string("attrs { key: 'out_features' value { f: ") + value + " } }"));
      auto g = buildGraph(m, 1);
      QVERIFY2(!g.ok(), value);
      // A wrapped conversion would show -9223372036854775808 here.
      EXPECT_MENTIONS(g.error().message,
                      (QStringList{"node 'fc1'", "attribute 'out_features'", shown}));
    }
  }

  void portNumbersAreBounded() {
    auto huge = parseInputRef("act", 0, "flatten:99999999999999999999");
    QVERIFY(!huge.ok());
    EXPECT_MENTIONS(huge.error().message, (QStringList{"node 'act'", "out of range"}));
    QVERIFY(!parseInputRef("act", 0, "flatten:2147483648").ok());
    QVERIFY(!parseInputRef("act", 0, "flatten:1024").ok());
    QCOMPARE(parseInputRef("act", 0, "flatten:1023")->port, 1023);
    // The lenient form the editor reads references with: no port, all name.
    for (const char* ref : {"flatten:99999999999999999999", "flatten:2147483647", "flatten:1024"})
      QCOMPARE(splitInputRef(ref), std::make_pair(std::string(ref), 0));
    QCOMPARE(splitInputRef("flatten:2"), std::make_pair(std::string("flatten"), 2));
    using namespace testutil;
    auto m = model(input("x", "4") + node("t", "Tanh", "x:99999999999999999999"));
    QVERIFY(!buildGraph(m, 1).ok());
    ModelAnalysis a = analyzeModel(m, 1);
    QVERIFY(!a.ok());
    QCOMPARE(a.problems.front().node, std::string("t"));
  }

  // Headers of the real Fashion-MNIST test images, claiming what the file cannot hold.
  void idxHeadersAreCheckedAgainstTheFile_data() {
    QTest::addColumn<bool>("gzip");
    QTest::addColumn<uint32_t>("count");
    QTest::addColumn<uint32_t>("side");
    QTest::addColumn<QStringList>("mentions");
    for (bool gz : {false, true}) {
      QString kind = gz ? " (gzip)" : " (plain)";
      QTest::newRow(qPrintable("1e9 images" + kind))
          << gz << uint32_t(1000000000) << uint32_t(28)
          << QStringList{"claims 1000000000×28×28", gz ? "more than the gzip file" : "truncated"};
      QTest::newRow(qPrintable("rows and columns 2^32 - 1" + kind))
          << gz << uint32_t(10000) << uint32_t(4294967295)
          << QStringList{"implausible IDX dimensions 10000×4294967295×4294967295"};
      QTest::newRow(qPrintable("no images of 2^32 - 1 squared" + kind))
          << gz << uint32_t(0) << uint32_t(4294967295)
          << QStringList{"implausible IDX dimensions 0×4294967295×4294967295"};
    }
  }
  void idxHeadersAreCheckedAgainstTheFile() {
    if (!haveFashion()) QSKIP("Fashion-MNIST is not installed");
    QFETCH(bool, gzip);
    QFETCH(uint32_t, count);
    QFETCH(uint32_t, side);
    QFETCH(QStringList, mentions);
    std::string images = gunzip(fashion("t10k-images-idx3-ubyte.gz"));
    QCOMPARE(images.size(), size_t(16 + 10000 * 784));
    setBe32(images, 4, count);
    setBe32(images, 8, side);
    setBe32(images, 12, side);
    QTemporaryDir dir;
    QString path = dir.filePath("images");
    datafixture::writeFile(path, images, gzip);
    auto r = readIdx(path.toStdString(), fashion("t10k-labels-idx1-ubyte.gz"));
    QVERIFY(!r.ok());
    mentions << path;
    EXPECT_MENTIONS(r.error().message, mentions);
  }

  // A file that holds what its header claims, but more than the budget allows.
  void idxBeyondTheBudgetIsRefusedBeforeReading() {
    if (!haveFashion()) QSKIP("Fashion-MNIST is not installed");
    std::string labels = gunzip(fashion("t10k-labels-idx1-ubyte.gz"));
    QCOMPARE(labels.size(), size_t(8 + 10000));
    QTemporaryDir dir;
    QString path = dir.filePath("labels.gz");
    labels.resize(8 + 100000000, '\0');  // 100 MB of zeros: 100 KB compressed
    setBe32(labels, 4, 100000000);
    datafixture::writeFile(path, labels, true);
    labels = {};
    auto budget = std::make_shared<MemoryBudget>(64 << 20, "the limit is 64.0 MiB");
    auto r = readIdx(fashion("t10k-images-idx3-ubyte.gz"), path.toStdString(), budget);
    QVERIFY(!r.ok());
    EXPECT_MENTIONS(r.error().message,
                    (QStringList{"IDX labels", path, "(100000000)", "needs 476.8 MiB"}));
    QVERIFY(r.error().kind == ErrorKind::Refused);
  }

  void syntheticSizesAreBudgeted_data() {
    QTest::addColumn<QString>("source");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("train_samples 2e9")
        << "synthetic { kind: SPIRALS train_samples: 2000000000 }"
        << QStringList{"data.synthetic", "train_samples 2000000000", "needs 22.4 GiB"};
    QTest::newRow("blob features 1e8")
        << "synthetic { kind: BLOBS features: 100000000 }"
        << QStringList{"data.synthetic", "features 100000000", "TiB"};
    QTest::newRow("train and test samples at the int32 maximum")
        << "synthetic { kind: BLOBS train_samples: 2147483647 test_samples: 2147483647 }"
        << QStringList{"train_samples 2147483647", "test_samples 2147483647"};
  }
  void syntheticSizesAreBudgeted() {
    QFETCH(QString, source);
    QFETCH(QStringList, mentions);
    auto p = parseProject("data { " + source.toStdString() + " }", "test");
    QVERIFY(p.ok());
    auto budget = std::make_shared<MemoryBudget>(kGiB, "the limit is 1.0 GiB");
    auto d = loadData(p->data(), ".", 1, budget);
    QVERIFY(!d.ok());
    EXPECT_MENTIONS(d.error().message, mentions);
    QVERIFY(d.error().kind == ErrorKind::Refused);
    QCOMPARE(budget->planned(), int64_t(0));
    // And with the budget of this (bounded) process.
    if (canBoundAddressSpace()) QVERIFY(!loadData(p->data(), ".", 1).ok());
  }

  void loadedDataStaysPlanned() {
    auto p = parseProject(
        "data { synthetic { kind: BLOBS features: 8 train_samples: 1000 test_samples: 200 } "
        "validation_fraction: 0.1 }",
        "test");
    QVERIFY(p.ok());
    auto budget = std::make_shared<MemoryBudget>(kGiB, "the limit is 1.0 GiB");
    auto d = loadData(p->data(), ".", 1, budget);
    QVERIFY(d.ok());
    // Every split's features and labels, nothing more.
    QCOMPARE(budget->planned(), int64_t(1200 * (8 + 1) * 4));
  }

  void csvReadsAreBounded() {
    auto budget = std::make_shared<MemoryBudget>(1 << 20, "the limit is 1.0 MiB");
    auto dev = readCsv("/dev/zero", "", false, ',', budget);
    QVERIFY(!dev.ok());
    EXPECT_MENTIONS(dev.error().message, (QStringList{"/dev/zero", "is a device"}));

    QTemporaryDir dir;
    QString oneLine = dir.filePath("one-line.csv");
    datafixture::writeFile(oneLine, std::string(2 << 20, '1'), false);
    auto line = readCsv(oneLine.toStdString(), "", false, ',', budget);
    QVERIFY(!line.ok());
    EXPECT_MENTIONS(line.error().message, (QStringList{oneLine, "line 1 is longer than"}));
    QVERIFY(line.error().kind == ErrorKind::Refused);

    std::string rows;
    for (int i = 0; i < 200000; ++i) rows += "0.5,1.5,2.5," + std::to_string(i % 3) + "\n";
    QString many = dir.filePath("rows.csv");
    datafixture::writeFile(many, rows, false);
    auto r = readCsv(many.toStdString(), "", false, ',', budget);
    QVERIFY(!r.ok());
    EXPECT_MENTIONS(r.error().message, (QStringList{many, "rows up to line", "but the limit"}));
    auto fits = readCsv(many.toStdString(), "", false, ',',
                        std::make_shared<MemoryBudget>(64 << 20, "the limit is 64 MiB"));
    QVERIFY(fits.ok());
    QCOMPARE(fits->size(), int64_t(200000));
  }

  // The examples as a user meets them: netloom-train exits 2 with the field and the
  // bytes, under an address-space bound that a missed allocation would hit.
  void netloomTrainRefusesWithExitTwo_data() {
    QTest::addColumn<QString>("project");
    QTest::addColumn<QStringList>("extra");
    QTest::addColumn<int>("code");
    QTest::addColumn<QStringList>("mentions");
    const std::string spirals = projectText("spirals.nlproj");
    const QStringList twoGiB{"--memory-limit", "2G"};
    auto row = [&](const char* name, const std::string& from, const std::string& to,
                   const QStringList& extra, int code, const QStringList& mentions) {
      QTest::newRow(name) << QString::fromStdString(replaced(spirals, from, to)) << extra << code
                          << mentions;
    };
    row("batch_size 2^31 - 1", "batch_size: 32", "batch_size: 2147483647",
        {"--memory-limit", "200K"}, 2,
        {"train.batch_size 2147483647, batches of 1500", "activations (arena",
         "--memory-limit is 200.0 KiB"});
    row("--batch-size 2^31 - 1, Input shape 1e6", "values: [2]", "values: [1000000]",
        QStringList{"--batch-size", "2147483647"} + twoGiB, 2,
        {"--batch-size 2147483647, batches of 1500", "'point' 1500×1000000", "5.6 GiB"});
    row("Input shape 1e9", "values: [2]", "values: [1000000000]", {}, 2,
        {"'fc1.weight' 64×1000000000", "715.3 GiB"});
    row("Linear out_features at its maximum", "out_features\" value { i: 3 }",
        "out_features\" value { i: 16777216 }", twoGiB, 2,
        {"'logits.weight' 16777216×64", "--memory-limit is 2.0 GiB"});
    row("synthetic train_samples 2e9", "train_samples: 1500", "train_samples: 2000000000", twoGiB,
        2, {"data.synthetic", "train_samples 2000000000", "needs 22.4 GiB"});
    row("blob features 1e8", "kind: SPIRALS", "kind: BLOBS features: 100000000", twoGiB, 2,
        {"data.synthetic", "features 100000000", "TiB"});
    row("port 99999999999999999999", "inputs: \"fc1\"", "inputs: \"fc1:99999999999999999999\"", {},
        1, {"node 'act1'", "port 99999999999999999999 is out of range"});
    row("--memory-limit that is not a size", "", "", {"--memory-limit", "4X"}, 2,
        {"--memory-limit '4X' is not a size"});
    if (haveFashion())
      QTest::newRow("Fashion-MNIST MLP, fc1 out_features 2^24")
          << QString::fromStdString(replaced(projectText("fashion-mlp.nlproj"),
                                             "out_features\" value { i: 256 }",
                                             "out_features\" value { i: 16777216 }"))
          << twoGiB << 2 << QStringList{"'fc1.weight' 16777216×784", "49.0 GiB"};
  }
  void netloomTrainRefusesWithExitTwo() {
    QFETCH(QString, project);
    QFETCH(QStringList, extra);
    QFETCH(int, code);
    QFETCH(QStringList, mentions);
    QVERIFY2(!project.isEmpty(), "the base project changed: the replacement found nothing");
    QTemporaryDir dir;
    QString path = dir.filePath("p.nlproj"), events = dir.filePath("events.pb");
    datafixture::writeFile(path, project.toStdString(), false);
    Outcome o = runTrain(QStringList{path, "--epochs", "1", "--events", events} + extra);
    QVERIFY2(o.code == code, qPrintable(QString::number(o.code) + ": " + o.err));
    EXPECT_MENTIONS(o.err.toStdString(), mentions);
    // A run refused after its stream opened ends the stream with the reason.
    if (QFile::exists(events)) {
      auto read = readEvents(events.toStdString());
      QVERIFY(read.ok());
      QVERIFY(!read->events.empty() && read->events.back().has_failed());
    }
  }

  // IDX files whose headers lie, named in a project as the user would.
  void netloomTrainNamesAnIdxFileThatLies() {
    if (!haveFashion()) QSKIP("Fashion-MNIST is not installed");
    QTemporaryDir dir;
    std::string images = gunzip(fashion("t10k-images-idx3-ubyte.gz"));
    setBe32(images, 4, 1000000000);
    QString path = dir.filePath("lying-images.gz");
    datafixture::writeFile(path, images, true);
    std::string text =
        replaced(projectText("fashion-mlp.nlproj"),
                 "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", path.toStdString());
    QVERIFY(!text.empty());
    QString project = dir.filePath("p.nlproj");
    datafixture::writeFile(project, text, false);
    Outcome o = runTrain({project, "--epochs", "1"});
    QVERIFY2(o.code == 1, qPrintable(QString::number(o.code) + ": " + o.err));
    EXPECT_MENTIONS(o.err.toStdString(), (QStringList{path, "claims 1000000000×28×28"}));
  }
};

QTEST_GUILESS_MAIN(TestLimits)
#include "tst_limits.moc"
