// Parallel training against one rank, the test that matters: the MLP of the spirals
// project and a small GPT, split over 2 and 4 ranks (tensor parallelism: Megatron's
// column and row pairs, attention by heads, or as the planner chooses), data 2 ×
// tensor 2, ZeRO-1 and ZeRO-2 on 2 and 4 ranks, and pipelines of 2 and 4 stages over
// 8 micro-batches (and 2 stages × data 2), each train 20 steps at the same global
// batch as one rank does and must end with the same losses and weights to 1e-5
// relative. A checkpoint written by 4 ranks (split, sharded or staged) resumes on 1
// and on 2, and one rank's on 4, as if the run had never stopped. Ranks are threads of
// this process talking over Gloo's TCP transport or over shared memory, as
// netloom-train's --ranks and --thread-ranks make them.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <functional>
#include <thread>

#include "../common/tiny_gpt.h"
#include "engine/io/project_file.h"
#include "engine/io/safetensors.h"
#include "engine/parallel/communicator.h"
#include "engine/train/trainer.h"

using namespace netloom;

namespace {

constexpr int kSteps = 20;

struct Outcome {
  std::string error;
  TrainSummary summary;
  std::map<std::string, std::vector<float>> weights;
};

std::map<std::string, std::vector<float>> weightsIn(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  auto tensors = readSafetensors(path);
  if (!tensors) return out;
  for (const NamedTensor& t : *tensors) {
    std::vector<float> v(t.data.size() / sizeof(float));
    std::memcpy(v.data(), t.data.data(), t.data.size());
    out[t.name] = std::move(v);
  }
  return out;
}

struct Split {
  int ranks = 1, tensor = 1;
  bool shared = false;  // threadRanks' shared memory, else Gloo over TCP
  std::vector<std::pair<std::string, std::string>> hints;
  int zero = 0;
  int stages = 1, micro = 0;  // pipeline parallelism
  bool overlap = false;       // boxings on the collective lane (--overlap)
  // The ranks reading a share of each batch: a pipeline reads one as a whole.
  int readers() const { return ranks / stages; }
};

// Where a run starts from and what it leaves: a checkpoint to resume, and a folder
// for its own checkpoints.
struct Resume {
  std::string from, checkpoints;
};

// Trains `project` kSteps steps: alone at batch × ranks, or split as `split` at
// `batch` per rank. Rank 0's summary and weights.
Outcome train(const proto::Project& project, const std::string& dir, int batch, const Split& split,
              int64_t trainLimit = -1, const Resume& resume = {}) {
  TrainOptions base;
  base.projectDir = dir;
  base.threads = 1;
  base.maxSteps = kSteps;
  base.epochs = 20;  // maxSteps ends it
  base.batchSize = batch;
  base.trainLimit = trainLimit;  // whole batches: under tensor parallelism a short one is cut
  base.testLimit = 512;
  base.seed = 5;
  base.checkpointDir = resume.checkpoints.empty() ? dir + "/checkpoints" : resume.checkpoints;
  base.resume = resume.from;
  base.zero = split.zero;
  base.pipelineStages = split.stages;
  base.microBatches = split.micro;
  base.saveWeights = dir + "/weights-" + std::to_string(split.ranks) + "-" +
                     std::to_string(split.tensor) + "-" + std::to_string(split.zero) +
                     ".safetensors";
  base.tensorParallel = split.tensor;
  base.overlap = split.overlap;
  base.sbpHints = split.hints;
  Outcome out;
  if (split.ranks == 1) {
    auto s = runTraining(project, base, [](const proto::TrainEvent&) {});
    if (!s) return Outcome{s.error().message, {}, {}};
    out.summary = *s;
    out.weights = weightsIn(base.saveWeights);
    return out;
  }
  std::vector<std::unique_ptr<Communicator>> shared;
  if (split.shared) shared = threadRanks(split.ranks, 60);
  auto store = memoryRendezvous();
  std::vector<std::string> errors(size_t(split.ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < split.ranks; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      if (split.shared) {
        comm = std::move(shared[size_t(r)]);
      } else {
        RankOptions o;
        o.rank = r;
        o.size = split.ranks;
        o.timeoutSeconds = 60;
        auto joined = connectRanks(o, store);
        if (!joined) {
          errors[size_t(r)] = joined.error().message;
          return;
        }
        comm = std::move(*joined);
      }
      TrainOptions opts = base;
      opts.comm = comm.get();
      TensorGroups groups = tensorGroups(*comm, std::max(split.tensor, split.stages));
      (split.stages > 1 ? opts.stageComm : opts.tensorComm) = groups.tensor.get();
      opts.dataComm = groups.data.get();
      auto s = runTraining(project, opts, [](const proto::TrainEvent&) {});
      if (!s)
        errors[size_t(r)] = s.error().message;
      else if (r == 0)
        out.summary = *s;
    });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) out.error += "rank " + std::to_string(r) + ": " + errors[r] + "\n";
  out.weights = weightsIn(base.saveWeights);
  return out;
}

double relative(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(a), 1e-12);
}

// The worst difference of a tensor from the other's, relative to the tensor's largest
// value, and the tensor it is in.
std::pair<double, std::string> worstWeight(const Outcome& a, const Outcome& b) {
  std::pair<double, std::string> worst{0, ""};
  for (const auto& [name, va] : a.weights) {
    auto it = b.weights.find(name);
    if (it == b.weights.end() || it->second.size() != va.size()) return {1e30, name + " (missing)"};
    double scale = 1e-12, diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      scale = std::max(scale, double(std::fabs(va[i])));
      diff = std::max(diff, double(std::fabs(va[i] - it->second[i])));
    }
    if (diff / scale > worst.first) worst = {diff / scale, name};
  }
  return worst;
}

}  // namespace

class TestParallelTraining : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  proto::Project m_mlp, m_gpt;

  void compare(const proto::Project& project, int batch, const Split& split,
               int64_t trainLimit = -1) {
    const std::string dir = m_dir.path().toStdString();
    Outcome one = train(project, dir, batch * split.readers(), Split{}, trainLimit);
    QVERIFY2(one.error.empty(), one.error.c_str());
    Outcome many = train(project, dir, batch, split, trainLimit);
    QVERIFY2(many.error.empty(), many.error.c_str());
    QCOMPARE(many.summary.steps, int64_t(kSteps));
    QVERIFY(!one.weights.empty());
    QCOMPARE(many.weights.size(), one.weights.size());
    const double train = relative(one.summary.trainLoss, many.summary.trainLoss);
    const double test = relative(one.summary.testLoss, many.summary.testLoss);
    auto [worst, where] = worstWeight(one, many);
    qInfo(
        "%d ranks, tensor %d, ZeRO %d, %s: train loss %.7f vs %.7f, test loss %.7f vs %.7f, "
        "worst weight %.3g (%s)",
        split.ranks, split.tensor, split.zero, split.shared ? "shared memory" : "gloo",
        one.summary.trainLoss, many.summary.trainLoss, one.summary.testLoss, many.summary.testLoss,
        worst, where.c_str());
    QVERIFY2(train < 1e-5 && test < 1e-5, "the losses differ");
    QVERIFY2(worst < 1e-5, where.c_str());
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto mlp = loadProject(QFINDTESTDATA("../../projects/spirals.nlproj").toStdString());
    QVERIFY2(mlp.ok(), mlp.ok() ? "" : mlp.error().message.c_str());
    m_mlp = *mlp;
    testutil::TinyGpt g = testutil::writeTinyGpt(m_dir.path());
    QVERIFY(!g.project.empty());
    auto gpt = loadProject(g.project);
    QVERIFY2(gpt.ok(), gpt.ok() ? "" : gpt.error().message.c_str());
    m_gpt = *gpt;
    // SGD: Adam divides by the gradient's size, so a parameter whose gradient is zero
    // but for rounding (the keys' bias: softmax ignores a shift of all scores) steps
    // by the rounding's sign, which no two summation orders share.
    proto::Optimizer* o = m_gpt.mutable_train()->mutable_optimizer();
    o->set_kind(proto::Optimizer::SGD);
    o->set_lr(0.1);
    o->set_momentum(0.9);
    // Four heads of four, so that four ranks can split them, and a vocabulary of a
    // multiple of four (rows no token reads), so that they split the tied table and
    // output layer by the vocabulary.
    for (auto& n : *m_gpt.mutable_model()->mutable_nodes()) {
      for (const char* rows : {"num_embeddings", "out_features"})
        if ((n.name() == "wte" || n.name() == "logits") && n.attrs().count(rows)) {
          proto::AttrValue& v = (*n.mutable_attrs())[rows];
          v.set_i((v.i() + 3) / 4 * 4);
        }
      if (n.op() == "Reshape" && n.name() != "merged") {
        auto* shape = (*n.mutable_attrs())["shape"].mutable_ints();
        shape->set_values(1, 4);
        shape->set_values(2, 4);
      }
    }
  }

  void mlp_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("tensor");
    QTest::addColumn<bool>("shared");
    QTest::addColumn<bool>("megatron");
    QTest::addColumn<bool>("overlap");
    for (bool shared : {false, true}) {
      const char* t = shared ? "shared memory" : "gloo";
      QTest::addRow("2 ranks, %s, planned", t) << 2 << 2 << shared << false << false;
      QTest::addRow("2 ranks, %s, column and row", t) << 2 << 2 << shared << true << false;
      QTest::addRow("4 ranks, %s, column and row", t) << 4 << 4 << shared << true << false;
      QTest::addRow("data 2 x tensor 2, %s", t) << 4 << 2 << shared << true << false;
      // Boxings on the collective lane, moving while the step computes (--overlap).
      QTest::addRow("2 ranks, %s, overlapped", t) << 2 << 2 << shared << true << true;
      QTest::addRow("data 2 x tensor 2, %s, overlapped", t) << 4 << 2 << shared << true << true;
    }
  }
  // fc1 column-parallel, fc2 row-parallel (Megatron's MLP), or as the planner chooses.
  void mlp() {
    QFETCH(int, ranks);
    QFETCH(int, tensor);
    QFETCH(bool, shared);
    QFETCH(bool, megatron);
    QFETCH(bool, overlap);
    Split s{ranks, tensor, shared, {}};
    s.overlap = overlap;
    if (megatron) s.hints = {{"fc1", "B | S(0), S(0) -> S(1)"}, {"fc2", "S(1) | S(1), P -> P"}};
    compare(m_mlp, 64 / ranks, s);
  }

  void gpt_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("tensor");
    QTest::addColumn<bool>("shared");
    for (bool shared : {false, true}) {
      const char* t = shared ? "shared memory" : "gloo";
      QTest::addRow("2 ranks, %s", t) << 2 << 2 << shared;
      QTest::addRow("data 2, %s", t) << 2 << 1 << shared;
      QTest::addRow("4 ranks, %s", t) << 4 << 4 << shared;
      QTest::addRow("data 2 x tensor 2, %s", t) << 4 << 2 << shared;
    }
  }
  void zero_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("stage");
    QTest::addColumn<bool>("shared");
    QTest::addColumn<bool>("gpt");
    for (bool shared : {false, true})
      for (int stage : {1, 2})
        for (int ranks : {2, 4})
          for (bool gpt : {false, true})
            QTest::addRow("%s, ZeRO-%d, %d ranks, %s", gpt ? "gpt" : "mlp", stage, ranks,
                          shared ? "shared memory" : "gloo")
                << ranks << stage << shared << gpt;
  }
  // The MLP under Adam, the GPT under SGD with momentum: each optimizer's state sharded.
  void zero() {
    QFETCH(int, ranks);
    QFETCH(int, stage);
    QFETCH(bool, shared);
    QFETCH(bool, gpt);
    Split s{ranks, 1, shared, {}, stage};
    if (gpt)
      compare(m_gpt, 16 / ranks, s, 128);
    else
      compare(m_mlp, 64 / ranks, s);
  }

  void pipeline_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("stages");
    QTest::addColumn<bool>("shared");
    QTest::addColumn<bool>("gpt");
    for (bool shared : {false, true})
      for (bool gpt : {false, true}) {
        const char* t = shared ? "shared memory" : "gloo";
        const char* m = gpt ? "gpt" : "mlp";
        QTest::addRow("%s, 2 stages, %s", m, t) << 2 << 2 << shared << gpt;
        QTest::addRow("%s, 4 stages, %s", m, t) << 4 << 4 << shared << gpt;
        QTest::addRow("%s, 2 stages x data 2, %s", m, t) << 4 << 2 << shared << gpt;
        QTest::addRow("%s, 4 stages placed by hand, %s", m, t) << 4 << -4 << shared << gpt;
      }
  }
  // 8 micro-batches a step, in 1F1B order: the stages' gradients summed over them.
  // The GPT's output layer, on the last stage, reads its embedding's weight, on the
  // first: the two copies start alike and their gradients are summed each step.
  void pipeline() {
    QFETCH(int, ranks);
    QFETCH(int, stages);
    QFETCH(bool, shared);
    QFETCH(bool, gpt);
    // Negative: that many stages, the first layer placed in stage 0 and the output layer
    // in the last by hand, the others shared out between them.
    proto::Project mlp = m_mlp, gpt_ = m_gpt;
    if (stages < 0) {
      stages = -stages;
      for (auto [p, first, last] : {std::tuple{&mlp, "fc1", "logits"}, {&gpt_, "wte", "logits"}}) {
        proto::Distributed* d = p->mutable_train()->mutable_distributed();
        proto::StageHint* a = d->add_stages();
        a->set_node(first);
        a->set_stage(0);
        proto::StageHint* b = d->add_stages();
        b->set_node(last);
        b->set_stage(stages - 1);
      }
    }
    Split s{ranks, 1, shared, {}, 0, stages, 8};
    if (gpt)
      compare(gpt_, 16 / s.readers(), s, 128);
    else
      compare(mlp, 64 / s.readers(), s);
  }

  void checkpointsResumeOnOtherRanks_data() {
    QTest::addColumn<int>("before");
    QTest::addColumn<int>("tensor");
    QTest::addColumn<int>("stage");
    QTest::addColumn<int>("after");
    QTest::newRow("tensor 4 to 1") << 4 << 4 << 0 << 1;
    QTest::newRow("ZeRO-2 on 4 to 1") << 4 << 1 << 2 << 1;
    QTest::newRow("ZeRO-1 on 4 to ZeRO-2 on 2") << 4 << 1 << 1 << 2;
    QTest::newRow("1 to tensor 2 x data 2") << 1 << 1 << 0 << 4;
    QTest::newRow("4 stages to 1") << 4 << -4 << 0 << 1;
  }
  // 20 steps with a checkpoint at 10 on `before` ranks, then steps 11..20 again from it
  // on `after` ranks: the weights are those of 20 steps on one rank.
  void checkpointsResumeOnOtherRanks() {
    QFETCH(int, before);
    QFETCH(int, tensor);
    QFETCH(int, stage);
    QFETCH(int, after);
    const std::string dir = m_dir.path().toStdString();
    proto::Project p = m_mlp;
    p.mutable_train()->mutable_checkpoint()->set_every_steps(10);
    const std::string first = dir + "/resume-" + QTest::currentDataTag();
    Outcome one = train(p, dir, 64, Split{}, -1, Resume{"", first + "-one"});
    QVERIFY2(one.error.empty(), one.error.c_str());
    // A negative `tensor`: that many pipeline stages.
    const Split split = tensor < 0 ? Split{before, 1, false, {}, 0, -tensor, 8}
                                   : Split{before, tensor, false, {}, stage};
    Outcome writer = train(p, dir, 64 / split.readers(), split, -1, Resume{"", first});
    QVERIFY2(writer.error.empty(), writer.error.c_str());
    const Split again =
        after == 4 ? Split{4, 2, true, {}, 0} : Split{after, 1, true, {}, after > 1 ? 2 : 0};
    Outcome resumed =
        train(p, dir, 64 / after, again, -1, Resume{first + "/step-000000010", first + "-again"});
    QVERIFY2(resumed.error.empty(), resumed.error.c_str());
    auto [worst, where] = worstWeight(one, resumed);
    qInfo("%s: worst weight %.3g (%s)", QTest::currentDataTag(), worst, where.c_str());
    QVERIFY2(worst < 1e-5, where.c_str());
    QVERIFY(relative(one.summary.testLoss, resumed.summary.testLoss) < 1e-5);
  }

  // q, k and v column-parallel, attention split by heads (Megatron's attention).
  void gpt() {
    QFETCH(int, ranks);
    QFETCH(int, tensor);
    QFETCH(bool, shared);
    const std::string column = "B | S(0), S(0) -> S(2)";
    compare(m_gpt, 16 / ranks,
            Split{ranks, tensor, shared, {{"q", column}, {"k", column}, {"v", column}}}, 128);
  }

  // Conv+BN on Fashion-MNIST split by the channels, as the planner lays it out: the
  // first convolution column-parallel, the second row-parallel, the batch norms and
  // pools by the channels, the hidden layer split. Its dropout is off (each part would
  // draw its own masks), and its ReLUs and max pools are Tanh and average pools: a
  // kink turns a rounding apart into a step apart (one rank at 1 and at 2 threads
  // differs by 5e-2 after 20 steps), and the comparison is of the splitting. SGD, as
  // for the GPT.
  void convolutions_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<bool>("shared");
    QTest::newRow("2 ranks, gloo") << 2 << false;
    QTest::newRow("2 ranks, shared memory") << 2 << true;
    QTest::newRow("4 ranks, shared memory") << 4 << true;
  }
  void convolutions() {
    QFETCH(int, ranks);
    QFETCH(bool, shared);
    auto project = loadProject(QFINDTESTDATA("../../projects/fashion-convbn.nlproj").toStdString());
    QVERIFY2(project.ok(), project.ok() ? "" : project.error().message.c_str());
    if (!QFile::exists(QString::fromStdString(project->data().idx().train_images())))
      QSKIP("no Fashion-MNIST here (Debian's dataset-fashion-mnist)");
    for (auto& n : *project->mutable_model()->mutable_nodes()) {
      if (n.op() == "Dropout") (*n.mutable_attrs())["p"].set_f(0);
      if (n.op() == "ReLU") n.set_op("Tanh");
      if (n.op() == "MaxPool2d") n.set_op("AvgPool2d");
    }
    proto::Optimizer* o = project->mutable_train()->mutable_optimizer();
    o->set_kind(proto::Optimizer::SGD);
    o->set_lr(0.05);
    o->set_momentum(0.9);
    compare(*project, 32 / ranks, Split{ranks, ranks, shared, {}}, 32 * kSteps);
  }
};

QTEST_GUILESS_MAIN(TestParallelTraining)
#include "tst_parallel_training.moc"
