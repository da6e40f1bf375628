// The incremental analysis: after any sequence of edits (attributes, wires, names,
// ops, nodes added, removed and reordered, cycles, duplicate and empty names) it
// equals an analysis from scratch, reports every node whose analysis changed, and
// infers only what an edit reaches.
#include <QtTest>
#include <list>
#include <map>
#include <random>

#include "engine/graph/analyze.h"

using namespace netloom;

namespace {

// A model as an editor holds it: definitions that stay put, keyed by id.
struct Model {
  std::map<int, proto::NodeDef> defs;
  std::vector<int> order;
  int next = 0;

  std::vector<ModelAnalyzer::NodeRef> refs() const {
    std::vector<ModelAnalyzer::NodeRef> out;
    for (int key : order) out.push_back({key, &defs.at(key)});
    return out;
  }
  int add(const std::string& name, const std::string& op, std::vector<std::string> inputs,
          int at = -1) {
    int key = next++;
    proto::NodeDef& d = defs[key];
    d.set_name(name);
    d.set_op(op);
    for (const std::string& in : inputs) d.add_inputs(in);
    order.insert(at < 0 ? order.end() : order.begin() + at, key);
    return key;
  }
  void setInt(int key, const std::string& attr, int64_t v) {
    (*defs[key].mutable_attrs())[attr].set_i(v);
  }
  void setInts(int key, const std::string& attr, std::vector<int64_t> v) {
    auto* ints = (*defs[key].mutable_attrs())[attr].mutable_ints();
    ints->Clear();
    for (int64_t x : v) ints->add_values(x);
  }
};

std::string describe(const ModelAnalysis& a) {
  std::string s;
  for (const auto& [name, n] : a.nodes) {
    s += name + (n.known ? "" : " unknown") + ":";
    for (const TensorDesc& d : n.outputs) s += " " + shapeToString(d.shape);
    s += " p" + std::to_string(n.params) + " f" + std::to_string(n.flops) + " b" +
         std::to_string(n.activationBytes) + "\n";
  }
  for (const ModelProblem& p : a.problems)
    s += "! " + p.node + " " + std::to_string(p.port) + " " + p.message + "\n";
  return s;
}

std::string describeNode(const ModelAnalysis& a, const std::string& name) {
  std::string s;
  if (auto it = a.nodes.find(name); it != a.nodes.end()) {
    ModelAnalysis one;
    one.nodes[name] = it->second;
    s = describe(one);
  }
  for (const ModelProblem& p : a.problems)
    if (p.node == name) s += "! " + std::to_string(p.port) + " " + p.message + "\n";
  return s;
}

// A chain: x -> fc0 -> relu0 -> fc1 -> relu1 -> ... with `n` Linear layers.
Model chain(int n) {
  Model m;
  int x = m.add("x", "Input", {});
  m.setInts(x, "shape", {16});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    std::string fc = "fc" + std::to_string(i), relu = "relu" + std::to_string(i);
    m.setInt(m.add(fc, "Linear", {prev}), "out_features", 16);
    m.add(relu, "ReLU", {fc});
    prev = relu;
  }
  return m;
}

}  // namespace

class TestAnalyzer : public QObject {
  Q_OBJECT

 private slots:
  void anEditThatKeepsShapesInfersOneNode() {
    Model m = chain(500);
    ModelAnalyzer a;
    a.reset(m.refs(), 4);
    QVERIFY2(a.analysis().ok(), describe(a.analysis()).c_str());
    QCOMPARE(a.inferred(), 1001);
    // fc250 keeps its output shape when bias goes: it alone is inferred again.
    int fc250 = m.order[1 + 2 * 250];
    (*m.defs[fc250].mutable_attrs())["bias"].set_b(false);
    a.update(m.refs(), {fc250});
    QCOMPARE(a.inferred(), 1);
    QCOMPARE(a.analysis().nodes.at("fc250").params, 16 * 16);
    QCOMPARE(a.changed(), std::vector<int>{fc250});
    // A width that changes is followed until the shapes agree again: fc250, relu250, fc251.
    m.setInt(fc250, "out_features", 32);
    a.update(m.refs(), {fc250});
    QCOMPARE(a.inferred(), 3);
    QCOMPARE(a.analysis().nodes.at("fc251").params, 32 * 16 + 16);
    QCOMPARE(shapeToString(a.analysis().nodes.at("relu250").outputs[0].shape),
             shapeToString({4, 32}));
  }

  void aBrokenWireLeavesEverythingBelowUnknownAndComesBack() {
    Model m = chain(50);
    ModelAnalyzer a;
    a.reset(m.refs(), 2);
    int fc10 = m.order[1 + 2 * 10];
    m.defs[fc10].set_inputs(0, "nowhere");
    a.update(m.refs(), {fc10});
    QCOMPARE(int(a.analysis().problems.size()), 1);
    QVERIFY(a.analysis().problems[0].message.find("dangling") != std::string::npos);
    QVERIFY(a.analysis().nodes.at("relu49").outputs.empty());
    QVERIFY(!a.analysis().nodes.at("relu9").outputs.empty());
    m.defs[fc10].set_inputs(0, "relu9");
    a.update(m.refs(), {fc10});
    QVERIFY(a.analysis().ok());
    QCOMPARE(a.analysis().nodes.at("relu49").outputs[0].shape, (Shape{2, 16}));
    // Below the fix, every input came back as it was: each node takes its last
    // result again, and only the edited node is inferred.
    QCOMPARE(a.inferred(), 1);
    QCOMPARE(int(a.changed().size()), 80);
  }

  // What an edit would do, asked of one node, leaves the analysis as it is.
  void aWireIsTriedOnOneNode() {
    Model m;
    m.setInts(m.add("x", "Input", {}), "shape", {16});
    m.setInt(m.add("fc", "Linear", {"x"}), "out_features", 8);
    int sum = m.add("sum", "Add", {"fc", "fc"});
    ModelAnalyzer a;
    a.reset(m.refs(), 2);
    QVERIFY(a.analysis().ok());
    const std::string before = describe(a.analysis());
    proto::NodeDef tried = m.defs.at(sum);
    tried.set_inputs(1, "x");  // [2, 8] + [2, 16]
    std::vector<ModelProblem> problems = a.problemsIf(sum, tried);
    QCOMPARE(int(problems.size()), 1);
    QCOMPARE(problems[0].node, std::string("sum"));
    QVERIFY2(problems[0].message.find("'x'") != std::string::npos, problems[0].message.c_str());
    tried.set_inputs(1, "nowhere");
    problems = a.problemsIf(sum, tried);
    QCOMPARE(int(problems.size()), 1);
    QVERIFY(problems[0].message.find("dangling") != std::string::npos);
    QVERIFY(a.problemsIf(sum, m.defs.at(sum)).empty());  // its own name is no clash
    QCOMPARE(describe(a.analysis()), before);
  }

  // Random edits of a random graph; after each, the incremental analysis equals one
  // from scratch, and every node whose analysis changed is reported.
  void randomEditsMatchAnAnalysisFromScratch() {
    const char* ops[] = {"Linear", "ReLU", "Add", "Concat", "Flatten", "Bogus", "Sigmoid"};
    for (int seed = 1; seed <= 40; ++seed) {
      std::mt19937 rng(seed);
      auto pick = [&](int n) { return int(rng() % unsigned(n)); };
      Model m;
      int inputs = 1 + pick(2);
      for (int i = 0; i < inputs; ++i)
        m.setInts(m.add("x" + std::to_string(i), "Input", {}), "shape", {8});
      auto randomName = [&] {
        if (m.order.empty() || pick(12) == 0) return std::string("ghost");
        return m.defs.at(m.order[pick(int(m.order.size()))]).name();
      };
      auto addRandom = [&](int at) {
        std::string op = ops[pick(7)];
        int arity = op == "Add" ? 2 : op == "Concat" ? 1 + pick(3) : 1;
        std::vector<std::string> in;
        for (int k = 0; k < arity; ++k) in.push_back(randomName());
        int key = m.add("n" + std::to_string(m.next), op, in, at);
        if (op == "Linear") m.setInt(key, "out_features", 8 << pick(2));
        return key;
      };
      for (int i = 0; i < 25; ++i) addRandom(-1);
      ModelAnalyzer inc;
      inc.reset(m.refs(), 3);
      for (int step = 0; step < 60; ++step) {
        ModelAnalyzer fresh;
        fresh.reset(m.refs(), 3);
        ModelAnalysis before = fresh.analysis();
        std::map<int, std::string> namesBefore;
        for (int key : m.order) namesBefore[key] = m.defs.at(key).name();
        std::vector<int> dirty;
        int key = m.order[pick(int(m.order.size()))];
        proto::NodeDef& d = m.defs.at(key);
        switch (pick(8)) {
          case 0:  // an attribute
            if (d.op() == "Linear") m.setInt(key, "out_features", 8 << pick(2));
            if (d.op() == "Input" && pick(2)) m.setInts(key, "shape", {8 + 8 * pick(2)});
            if (d.op() == "Input") (*d.mutable_attrs())["field"].set_s(pick(2) ? "image" : "extra");
            break;
          case 1:  // a wire, maybe into a cycle, to nowhere or off the end
            if (d.inputs_size()) d.set_inputs(pick(d.inputs_size()), randomName());
            if (pick(6) == 0) d.add_inputs(randomName());
            break;
          case 2:  // a name: new, taken, or none
            d.set_name(pick(5) == 0   ? randomName()
                       : pick(9) == 0 ? ""
                                      : "r" + std::to_string(step));
            break;
          case 3: d.set_op(ops[pick(7)]); break;
          case 4: key = addRandom(pick(int(m.order.size()) + 1)); break;
          case 5:
            if (m.order.size() > 3) {
              m.order.erase(std::find(m.order.begin(), m.order.end(), key));
              m.defs.erase(key);
            }
            break;
          case 6: {  // a move in file order
            auto it = std::find(m.order.begin(), m.order.end(), key);
            std::iter_swap(it, m.order.begin() + pick(int(m.order.size())));
            key = -1;
            break;
          }
          default: break;  // nothing: an update with no change
        }
        if (key >= 0) dirty.push_back(key);
        inc.update(m.refs(), dirty);
        fresh.reset(m.refs(), 3);
        std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
        QVERIFY2(describe(inc.analysis()) == describe(fresh.analysis()),
                 (where + "\nincremental:\n" + describe(inc.analysis()) + "from scratch:\n" +
                  describe(fresh.analysis()))
                     .c_str());
        // Nodes not reported kept their name, analysis and problems.
        // (A name two nodes share mixes their problems: those are left out.)
        std::vector<int> changed = inc.changed();
        std::map<std::string, int> uses;
        for (const auto& [k, name] : namesBefore) ++uses[name];
        for (int k : m.order) ++uses[m.defs.at(k).name()];
        for (int k : m.order) {
          if (std::count(changed.begin(), changed.end(), k) || !namesBefore.count(k)) continue;
          const std::string& name = m.defs.at(k).name();
          if (uses[name] > 2) continue;
          QVERIFY2(name == namesBefore[k], where.c_str());
          QVERIFY2(describeNode(before, name) == describeNode(fresh.analysis(), name),
                   (where + " node " + name + " changed unreported").c_str());
        }
      }
    }
  }

  void aNewBatchSizeIsAFreshAnalysis() {
    Model m = chain(3);
    ModelAnalyzer a;
    a.reset(m.refs(), 2);
    QCOMPARE(a.analysis().nodes.at("fc2").outputs[0].shape, (Shape{2, 16}));
    a.reset(m.refs(), 5);
    QCOMPARE(a.analysis().nodes.at("fc2").outputs[0].shape, (Shape{5, 16}));
    QCOMPARE(int(a.changed().size()), 7);
  }
};

QTEST_APPLESS_MAIN(TestAnalyzer)
#include "tst_analyzer.moc"
