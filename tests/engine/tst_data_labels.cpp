// A network drawn without a label input: a loss's unconnected label port reads the
// dataset's labels (an Input of field "label" made where the model has none), a
// classifier so drawn is reported with its accuracy, its analysis has no problem,
// and it trains and predicts; the loss and the output it predicts with default to
// what the model implies.
#include <google/protobuf/util/message_differencer.h>

#include <QtTest>

#include "engine/graph/analyze.h"
#include "engine/graph/data_labels.h"
#include "engine/graph/graph.h"
#include "engine/io/project_file.h"
#include "engine/train/heads.h"
#include "engine/train/trainer.h"

using namespace netloom;

namespace {

proto::Project spirals() {
  auto p = loadProject(NETLOOM_SOURCE_DIR "/projects/spirals.nlproj");
  if (!p) qFatal("%s", p.error().message.c_str());
  return *p;
}

// Spirals as a newcomer draws it: no label input, no metric, no outputs, no
// train.loss; the loss has only its scores wired.
proto::Project drawnWithoutLabels() {
  proto::Project p = spirals();
  p.mutable_model()->clear_outputs();
  p.mutable_train()->clear_loss();
  p.mutable_train()->set_epochs(8);
  p.mutable_train()->set_threads(1);
  auto* nodes = p.mutable_model()->mutable_nodes();
  for (int i = nodes->size() - 1; i >= 0; --i)
    if (nodes->Get(i).name() == "label" || nodes->Get(i).name() == "accuracy")
      nodes->DeleteSubrange(i, 1);
  for (auto& n : *nodes)
    if (n.name() == "loss") {
      n.clear_inputs();
      n.add_inputs("logits");
    }
  return p;
}

const proto::NodeDef* node(const proto::ModelDef& m, const std::string& name) {
  for (const proto::NodeDef& n : m.nodes())
    if (n.name() == name) return &n;
  return nullptr;
}

}  // namespace

class TestDataLabels : public QObject {
  Q_OBJECT

 private slots:
  void anOpenLabelPortReadsTheDatasetsLabels() {
    const proto::ModelDef drawn = drawnWithoutLabels().model();
    QVERIFY(readsDataLabels(drawn));
    const proto::ModelDef m = withDataLabels(drawn);
    QVERIFY(!readsDataLabels(m));
    const proto::NodeDef* label = node(m, "label");
    QVERIFY(label);
    QCOMPARE(m.nodes(0).name(), std::string("label"));
    QCOMPARE(label->op(), std::string("Input"));
    QCOMPARE(label->attrs().at("field").s(), std::string("label"));
    QCOMPARE(label->attrs().at("dtype").s(), std::string("int32"));
    QCOMPARE(node(m, "loss")->inputs(1), std::string("label"));
    // A classifier with no metric of its own is reported with its accuracy.
    const proto::NodeDef* accuracy = node(m, "accuracy");
    QVERIFY(accuracy);
    QCOMPARE(accuracy->op(), std::string("Accuracy"));
    QCOMPARE(accuracy->inputs(0), std::string("logits"));
    QCOMPARE(accuracy->inputs(1), std::string("label"));
    QVERIFY(buildGraph(m, 4).ok());
    QVERIFY(buildGraph(drawn, 4).ok());
  }

  void anExistingLabelInputAndMetricsAreKept() {
    // Wired by hand: nothing changes.
    const proto::ModelDef wired = spirals().model();
    QVERIFY(!readsDataLabels(wired));
    QVERIFY(google::protobuf::util::MessageDifferencer::Equals(withDataLabels(wired), wired));
    // A label input of another name is the one used; a name "label" taken by another
    // node makes the new input "label_2"; a model with a metric gains none.
    proto::ModelDef m = spirals().model();
    for (auto& n : *m.mutable_nodes())
      if (n.name() == "loss") n.mutable_inputs()->RemoveLast();
    for (auto& n : *m.mutable_nodes())
      if (n.name() == "label") n.set_name("targets");
    for (auto& n : *m.mutable_nodes())
      for (auto& in : *n.mutable_inputs())
        if (in == "label") in = "targets";
    proto::ModelDef out = withDataLabels(m);
    QCOMPARE(node(out, "loss")->inputs(1), std::string("targets"));
    QCOMPARE(out.nodes_size(), m.nodes_size());  // "accuracy" was there already
    proto::ModelDef taken = drawnWithoutLabels().model();
    for (auto& n : *taken.mutable_nodes())
      if (n.name() == "act1") n.set_name("label");
    for (auto& n : *taken.mutable_nodes())
      for (auto& in : *n.mutable_inputs())
        if (in == "act1") in = "label";
    out = withDataLabels(taken);
    QCOMPARE(node(out, "loss")->inputs(1), std::string("label_2"));
    QVERIFY(buildGraph(out, 4).ok());
  }

  // The analysis an editor shows: no problem on the open port, the loss a scalar.
  void theAnalysisAcceptsTheOpenPort() {
    const ModelAnalysis a = analyzeModel(drawnWithoutLabels().model(), 8);
    QVERIFY2(a.ok(), a.ok() ? "" : a.problems.front().message.c_str());
    QCOMPARE(a.nodes.at("loss").outputs[0].shape, Shape{});
    // Another port left open is still a problem.
    proto::ModelDef m = drawnWithoutLabels().model();
    for (auto& n : *m.mutable_nodes())
      if (n.name() == "loss") n.clear_inputs();
    const ModelAnalysis open = analyzeModel(m, 8);
    QCOMPARE(open.problems.size(), size_t(1));
    QVERIFY(QString::fromStdString(open.problems[0].message).contains("'logits' is not connected"));
  }

  void itTrainsReportsAccuracyAndPredicts() {
    proto::Project p = drawnWithoutLabels();
    QCOMPARE(*lossNode(p), std::string("loss"));
    QCOMPARE(*predictionOutput(p), std::string("logits"));
    p.mutable_train()->set_loss("loss");  // a run names what it minimises
    std::vector<proto::TrainEvent> events;
    TrainOptions opts;
    opts.projectDir = NETLOOM_SOURCE_DIR "/projects";
    QTemporaryDir dir;
    opts.saveWeights = dir.filePath("w.safetensors").toStdString();
    auto r = runTraining(p, opts, [&](const proto::TrainEvent& e) { events.push_back(e); });
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    double accuracy = -1;
    for (const proto::TrainEvent& e : events)
      if (e.has_epoch() && e.epoch().test_metrics().count("accuracy"))
        accuracy = e.epoch().test_metrics().at("accuracy");
    QVERIFY2(accuracy > 0.8, qPrintable(QString::number(accuracy)));
    auto predicted = predict(p, opts, opts.saveWeights);
    QVERIFY2(predicted.ok(), predicted.ok() ? "" : predicted.error().message.c_str());
    QCOMPARE(predicted->output, std::string("logits"));
    QCOMPARE(predicted->samples.size(), int64_t(600));
  }

  // Without a loss to follow, both defaults say what is missing, naming train.loss.
  void theDefaultsSayWhatIsMissing() {
    proto::Project p = drawnWithoutLabels();
    auto* nodes = p.mutable_model()->mutable_nodes();
    nodes->RemoveLast();  // the loss
    QVERIFY(!lossNode(p).ok());
    QVERIFY(QString::fromStdString(lossNode(p).error().message).startsWith("train.loss"));
    QVERIFY(QString::fromStdString(predictionOutput(p).error().message).contains("model.outputs"));
  }
};

QTEST_MAIN(TestDataLabels)
#include "tst_data_labels.moc"
