// Generation with a KV cache: decoding one token a step gives, at every position, the
// scores the whole sequence gives in one forward pass (positions, rotary embedding,
// causal attention and all); sampling by temperature and top-k; and netloom-train
// --generate from weights a run saved.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "../common/tiny_gpt.h"
#include "engine/compiler/compile.h"
#include "engine/data/dataset.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/train/checkpoint.h"
#include "engine/train/generate.h"

using namespace netloom;
using testutil::gptProject;
using testutil::kContext;

class TestGenerate : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::string m_text, m_project;
  int m_vocab = 0;

 private slots:
  void initTestCase() {
    auto gpt = testutil::writeTinyGpt(m_dir.path());
    QVERIFY2(!gpt.project.empty(), "cannot write the corpus or the project");
    m_text = gpt.text;
    m_vocab = gpt.vocab;
    m_project = gpt.project;
  }

  // Token by token with the caches, the scores at each position are those of the
  // whole window in one forward pass.
  void cachedStepsMatchTheWholeSequence() {
    auto project = loadProject(m_project);
    QVERIFY2(project.ok(), project.ok() ? "" : project.error().message.c_str());
    const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9 % m_vocab, 2, 6};

    proto::ModelDef m = project->model();
    proto::NodeDef* probe = m.add_nodes();
    probe->set_name("probe");
    probe->set_op("MSELoss");
    probe->add_inputs("logits");
    probe->add_inputs("logits");
    for (int k = m.nodes_size(); k-- > 0;)  // the whole window: no labels, no loss
      if (m.nodes(k).name() == "loss" || m.nodes(k).name() == "next")
        m.mutable_nodes()->DeleteSubrange(k, 1);
    CompileOptions o;
    o.batch = 1;
    o.training = false;
    o.evaluation = true;
    o.loss = "probe";
    o.metrics = {"probe"};
    o.keep = {"logits"};
    o.seed = project->train().seed();
    ParamStore store;
    auto whole = compile(m, o, store);
    QVERIFY2(whole.ok(), whole.ok() ? "" : whole.error().message.c_str());
    std::memcpy((*whole)->input("x")->data, tokens.data(), tokens.size() * sizeof(int32_t));
    StepContext ctx;
    ctx.training = false;
    (*whole)->run(ctx);
    const std::vector<float> want = (*whole)->read((*whole)->graph.findValue("logits"));
    QCOMPARE(int(want.size()), kContext * m_vocab);

    GenerateOptions g;  // no weights: both start from the project's seeded initialisation
    auto d = Decoder::make(*project, g);
    QVERIFY2(d.ok(), d.ok() ? "" : d.error().message.c_str());
    QCOMPARE(d->capacity(), int64_t(kContext));
    double worst = 0;
    for (int t = 0; t < kContext; ++t) {
      auto got = d->step(tokens[size_t(t)]);
      QVERIFY2(got.ok(), got.ok() ? "" : got.error().message.c_str());
      QCOMPARE(int(got->size()), m_vocab);
      for (int c = 0; c < m_vocab; ++c) {
        const double w = want[size_t(t * m_vocab + c)], diff = std::fabs((*got)[size_t(c)] - w);
        worst = std::max(worst, diff);
        QVERIFY2(diff <= 1e-4 * (1 + std::fabs(w)),
                 qPrintable(QString("position %1 class %2: cached %3, whole %4")
                                .arg(t)
                                .arg(c)
                                .arg((*got)[size_t(c)])
                                .arg(w)));
      }
    }
    qInfo("worst |cached - whole| over %d positions: %.3g", kContext, worst);
    auto full = d->step(0);
    QVERIFY(!full.ok());
    QVERIFY(full.error().message.find("8 positions") != std::string::npos);
  }

  void sampling() {
    const std::vector<float> s = {0.5f, 3.f, -1.f, 2.9f};
    QCOMPARE(sampleToken(s, 0, 0, 0.99), 1);    // temperature 0: the likeliest
    QCOMPARE(sampleToken(s, 1.0, 1, 0.99), 1);  // top-1: the likeliest
    for (double u : {0.0, 0.3, 0.6, 0.999})     // top-2: only the two likeliest
      QVERIFY(sampleToken(s, 1.0, 2, u) == 1 || sampleToken(s, 1.0, 2, u) == 3);
    QCOMPARE(sampleToken(s, 1.0, 2, 0.999), 3);
    // The draw splits [0, 1) by the probabilities: e^3 / (e^3 + e^2.9) ≈ 0.525.
    QCOMPARE(sampleToken(s, 1.0, 2, 0.52), 1);
    QCOMPARE(sampleToken(s, 1.0, 2, 0.53), 3);
  }

  // Train a step, save the weights, generate from them; the same seed gives the same
  // text, and the mistakes a user makes are named.
  void commandLine() {
    const QString weights = m_dir.filePath("w.safetensors");
    QProcess train;
    train.start(NETLOOM_TRAIN_EXE, {QString::fromStdString(m_project), "--max-steps", "2",
                                    "--save-weights", weights, "--quiet"});
    QVERIFY(train.waitForFinished(120000));
    QVERIFY2(train.exitCode() == 0, train.readAllStandardError().constData());
    auto run = [&](const QStringList& extra, int& code) {
      QProcess p;
      p.start(NETLOOM_TRAIN_EXE, QStringList{QString::fromStdString(m_project)} + extra);
      p.waitForFinished(120000);
      code = p.exitCode();
      return QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
    };
    int code = 0;
    const QStringList args = {"--generate", "the ",   "--from", weights,   "--max-tokens",
                              "3",          "--seed", "4",      "--top-k", "5"};
    const QString first = run(args, code);
    QCOMPARE(code, 0);
    QVERIFY2(first.startsWith("the ") && first.size() == 8 && first.endsWith("\n"),
             qPrintable(first));
    QCOMPARE(run(args, code), first);

    // The weights carry the vocabulary they were trained with: generation reads it
    // there, so it decodes the same with the corpus gone.
    std::map<std::string, std::string> metadata;
    QVERIFY(readSafetensors(weights.toStdString(), &metadata).ok());
    auto recorded = vocabFromMetadata(metadata, "w");
    QVERIFY(recorded.ok() && recorded->has_value());
    auto built = readText(m_text, proto::TextSource::CHAR, {}, 0.2);
    QVERIFY((*recorded)->tokens == built->vocab && !(*recorded)->bytes);
    const QString aside = QString::fromStdString(m_text) + ".aside";
    QVERIFY(QFile::rename(QString::fromStdString(m_text), aside));
    const QString without = run(args, code);
    QVERIFY(QFile::rename(aside, QString::fromStdString(m_text)));
    QCOMPARE(code, 0);
    QCOMPARE(without, first);

    QVERIFY(run({"--generate", "x"}, code).contains("--from"));
    QCOMPARE(code, 2);
    QVERIFY(run({"--generate", "x", "--from", m_dir.filePath("absent.safetensors")}, code)
                .contains("absent.safetensors"));
    QCOMPARE(code, 1);
  }

  // Checkpoints record the vocabulary too; a damaged record is named, not guessed at.
  void vocabularyInCheckpoints() {
    Dataset train;
    train.tokens = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{0, 1, 2});
    train.vocab = {"\xEF\xBF\xBD", "a", "\xC3\xA9", "\"", "\n"};
    CheckpointWriter writer(m_dir.filePath("ckpt").toStdString(), {}, dataMetadata(train));
    ParamStore empty;
    auto folder = writer.write(empty, RunPosition{}, 1);
    QVERIFY2(folder.ok(), folder.ok() ? "" : folder.error().message.c_str());
    std::map<std::string, std::string> metadata;
    QVERIFY(readSafetensors(*folder + "/state.safetensors", &metadata).ok());
    QCOMPARE(metadata.at("format"), std::string("netloom"));
    auto back = vocabFromMetadata(metadata, "f");
    QVERIFY(back.ok() && back->has_value());
    QVERIFY((*back)->tokens == train.vocab);

    train.byteVocab = true;
    auto bytes = vocabFromMetadata(dataMetadata(train), "f");
    QVERIFY(bytes.ok() && (*bytes)->bytes && (*bytes)->tokens.size() == 256);
    QVERIFY(dataMetadata(Dataset{}).empty());

    auto bad = vocabFromMetadata({{"vocabulary", "char"}, {"vocab", "[1, 2]"}}, "model.st");
    QVERIFY(!bad.ok());
    QVERIFY(bad.error().message.find("model.st") != std::string::npos);
    QVERIFY(!vocabFromMetadata({{"vocabulary", "words"}}, "f").ok());
  }
};

QTEST_GUILESS_MAIN(TestGenerate)
#include "tst_generate.moc"
