// Shared by the ONNX tests: a project's outputs on given samples (the evaluation
// path: running statistics, no dropout), Fashion-MNIST test samples normalised as a
// project says, raw float32 files, weights files, and Debian's Python.
#pragma once

#include <QFile>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/compiler/compile.h"
#include "engine/data/dataset.h"
#include "engine/io/safetensors.h"
#include "python.h"

namespace onnxfixture {

using namespace netloom;

struct Output {
  std::vector<float> values;
  Shape shape;
  std::string error;
};

// The first model output (or what the loss reads) for `n` samples `x`, with the
// weights of `weightsFile` (empty: the project's seeded initialisation).
inline Output forward(const proto::Project& project, const std::string& weightsFile,
                      const std::vector<float>& x, int64_t n) {
  Output r;
  auto fail = [&r](std::string message) {
    r.error = std::move(message);
    return r;
  };
  proto::ModelDef m = project.model();
  std::string out = m.outputs_size() ? m.outputs(0) : std::string();
  for (const auto& node : m.nodes())
    if (out.empty() && node.name() == project.train().loss()) out = node.inputs(0);
  // A program compiles around a loss: one that reads the output keeps the graph
  // to what the output needs, labels and metrics aside.
  proto::NodeDef* probe = m.add_nodes();
  probe->set_name("forward_probe");
  probe->set_op("MSELoss");
  probe->add_inputs(out);
  probe->add_inputs(out);
  CompileOptions o;
  o.batch = n;
  o.training = false;
  o.seed = project.train().seed();
  o.loss = "forward_probe";
  o.metrics = {"forward_probe"};
  o.keep = {out};
  o.blockedLayouts = false;
  ParamStore store;
  auto prog = compile(m, o, store);
  if (!prog) return fail(prog.error().message);
  if (!weightsFile.empty()) {
    auto tensors = readSafetensors(weightsFile);
    if (!tensors) return fail(tensors.error().message);
    std::vector<NamedTensor> wanted;
    for (NamedTensor& t : *tensors)
      if (store.find(t.name)) wanted.push_back(std::move(t));
    if (Status s = store.importParams(wanted, weightsFile); !s) return fail(s.message());
  }
  const TensorRef* in = (*prog)->input("x");
  if (!in || in->numel() != int64_t(x.size()))
    return fail("the input does not take " + std::to_string(x.size()) + " values");
  if (in->dtype == DType::I32) {  // token ids, given as whole floats
    for (size_t k = 0; k < x.size(); ++k) static_cast<int32_t*>(in->data)[k] = int32_t(x[k]);
  } else {
    std::memcpy(in->data, x.data(), x.size() * sizeof(float));
  }
  StepContext ctx;
  ctx.training = false;
  (*prog)->run(ctx);
  ValueId v = (*prog)->graph.findValue(out);
  r.values = (*prog)->read(v);
  r.shape = (*prog)->graph.values[size_t(v)].desc.shape;
  return r;
}

inline double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(double(a[k]) - double(b[k])));
  return d;
}

// The first `n` Fashion-MNIST test images, normalised as `project`'s data says.
inline std::vector<float> fashionSamples(const proto::Project& project, int64_t n) {
  const proto::IdxSource& idx = project.data().idx();
  auto data = readIdx(idx.test_images(), idx.test_labels());
  if (!data || data->size() < n) return {};
  const proto::Normalization& norm = project.data().normalization();
  const double scale = norm.scale() == 0 ? 1.0 : norm.scale();
  const double std = norm.kind() == proto::Normalization::FIXED ? norm.std() : 1.0;
  const double mean = norm.kind() == proto::Normalization::FIXED ? norm.mean() : 0.0;
  const int64_t per = data->featuresPerSample();
  std::vector<float> x(size_t(n * per));
  for (size_t k = 0; k < x.size(); ++k) x[k] = float((data->bytes[k] * scale - mean) / std);
  return x;
}

inline std::vector<float> readFloats(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  QByteArray b = f.readAll();
  std::vector<float> v(size_t(b.size()) / sizeof(float));
  std::memcpy(v.data(), b.constData(), v.size() * sizeof(float));
  return v;
}

inline bool writeFloats(const QString& path, const std::vector<float>& v) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return false;
  return f.write(reinterpret_cast<const char*>(v.data()), qint64(v.size() * sizeof(float))) ==
         qint64(v.size() * sizeof(float));
}

inline std::vector<float> floatsOf(const NamedTensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

inline void setFloats(NamedTensor& t, const std::vector<float>& v) {
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
}

using PyResult = netloom::testing::Outcome;
using netloom::testing::havePython;

inline PyResult python(const QStringList& args) {
  return netloom::testing::runPython(args);
}

}  // namespace onnxfixture
