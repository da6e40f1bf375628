// The engine's gradients of a whole model against the float64 model of
// reference_model.h: every parameter element, as the engine computes it in float32,
// against central differences of the same loss in float64.
#pragma once

#include <QtTest>
#include <map>
#include <string>

#include "model_text.h"
#include "reference_model.h"

namespace harness::model_grad {

using namespace netloom;
using testutil::model;

// The same inputs for the engine's plan `p` and the float64 values of graph `g`:
// labels in [0, 3), features in [-1, 1).
inline void feedInputs(const Graph& g, const Program& p, std::map<ValueId, Vec>& values) {
  Rng rng(3);
  for (const auto& [field, id] : g.inputsByField) {
    const TensorRef* in = p.input(field);
    QVERIFY2(in, field.c_str());
    Vec& v = values[id];
    for (int64_t i = 0; i < in->numel(); ++i) {
      if (in->dtype == DType::I32)
        v.push_back(in->i32()[i] = int32_t(rng.below(3)));
      else
        v.push_back(in->f32()[i] = float(rng.uniform(-1, 1)));
    }
  }
}

// Central differences, step h, of the float64 loss in every element of value `id`.
inline Vec centralDifferences(const Graph& g, ValueId loss, std::map<ValueId, Vec>& values,
                              ValueId id, double h) {
  Vec& w = values.at(id);
  Vec d(w.size());
  std::string error;
  for (size_t i = 0; i < w.size(); ++i) {
    const double saved = w[i];
    w[i] = saved + h;
    const double up = referenceLoss(g, loss, values, error);
    w[i] = saved - h;
    const double down = referenceLoss(g, loss, values, error);
    w[i] = saved;
    d[i] = (up - down) / (2 * h);
  }
  return d;
}

// One parameter's gradient: the engine's, and the float64 differences.
struct Compared {
  QString name;
  std::vector<float> engine;
  Vec numeric;
};

// Fails at the first element out of tolerance (see checkModelGradients); prints the
// worst errors seen.
inline void compare(const std::vector<Compared>& all) {
  double scale = 0;  // the largest |numeric| of the model
  for (const Compared& c : all)
    for (double d : c.numeric) scale = std::max(scale, std::fabs(d));
  double worstRelative = 0, worstAbsolute = 0;
  QString at;
  for (const Compared& c : all)
    for (size_t i = 0; i < c.numeric.size(); ++i) {
      const double err = std::fabs(c.engine[i] - c.numeric[i]);
      worstAbsolute = std::max(worstAbsolute, err / scale);
      if (std::fabs(c.numeric[i]) >= 1e-3 * scale && err / std::fabs(c.numeric[i]) > worstRelative)
        worstRelative = err / std::fabs(c.numeric[i]), at = QString("%1[%2]").arg(c.name).arg(i);
      QVERIFY2(err <= 1e-4 * std::fabs(c.numeric[i]) + 1e-6 * scale,
               qPrintable(QString("%1[%2]: engine %3, float64 finite difference %4")
                              .arg(c.name)
                              .arg(i)
                              .arg(c.engine[i], 0, 'g', 9)
                              .arg(c.numeric[i], 0, 'g', 9)));
    }
  qInfo("worst |engine - numeric| / |numeric|: %.3g (%s); / max |numeric|: %.3g", worstRelative,
        qPrintable(at), worstAbsolute);
}

// Every element of every parameter's gradient, as the engine computes it in float32,
// against central differences (h = 1e-6) of the same model's loss in float64, from
// the op harness's references (reference_model.h) at the same parameters and inputs.
// Only the engine's float32 rounding separates the two: each element must lie within
// 1e-4 of |numeric| plus 1e-6 of the model's largest |numeric| (the worst seen: 1.4e-5
// of |numeric|, where that is at least 1e-3 of the largest, and 1.7e-7 of the largest).
inline void checkModelGradients(const std::string& body) {
  const int64_t batch = 5;
  ParamStore store;
  CompileOptions o;
  o.batch = batch;
  o.updateParams = false;
  o.fuse = true;
  auto grads = compile(model(body), o, store);
  QVERIFY2(grads.ok(), grads.ok() ? "" : grads.error().message.c_str());
  const Program& p = **grads;
  auto graph = buildGraph(model(body), batch);
  QVERIFY2(graph.ok(), graph.ok() ? "" : graph.error().message.c_str());
  const Node* lossNode = graph->findNode(p.graph.nodes[p.graph.values[p.loss].producer].name);
  QVERIFY(lossNode);
  const ValueId loss = lossNode->outputs[0];

  std::map<ValueId, Vec> values;
  feedInputs(*graph, p, values);
  if (QTest::currentTestFailed()) return;
  StepContext ctx;
  ctx.step = 1;
  p.run(ctx);
  std::vector<std::pair<const ParamStore::Entry*, ValueId>> params;
  for (const auto& e : store.entries()) {
    if (e->kind != ValueKind::Param) continue;
    const std::vector<float> w = ParamStore::read(*e);
    params.push_back({e.get(), graph->findValue(e->name)});
    QVERIFY2(params.back().second != kNoValue, e->name.c_str());
    values[params.back().second] = Vec(w.begin(), w.end());
  }
  std::string error;
  const double loss64 = referenceLoss(*graph, loss, values, error);
  QVERIFY2(error.empty(), error.c_str());
  QVERIFY2(std::fabs(loss64 - p.scalar(p.loss)) <= 1e-5 * std::fabs(loss64),
           qPrintable(QString("loss: engine %1, float64 %2").arg(p.scalar(p.loss)).arg(loss64)));

  // The engine's gradients, and the float64 differences of every element.
  std::vector<Compared> all;
  for (const auto& [entry, id] : params) {
    auto it = p.gradients.find(entry->name);
    QVERIFY2(it != p.gradients.end(), entry->name.c_str());
    QVERIFY2(p.graph.values[it->second].desc.layout == Layout::Plain, entry->name.c_str());
    all.push_back({entry->name.c_str(), p.read(it->second),
                   centralDifferences(*graph, loss, values, id, 1e-6)});
  }
  compare(all);
}

}  // namespace harness::model_grad

namespace harness {
using model_grad::checkModelGradients;
}  // namespace harness
