// train.py: the project's data, optimizer, schedule, loss and metrics as settings
// and a few generated functions over the fixed runtime (pytorch_runtime.cpp).
#include <filesystem>

#include "engine/data/dataset.h"
#include "engine/graph/blocks.h"
#include "engine/interop/pytorch_gen.h"
#include "engine/ops/optimizer_settings.h"

namespace netloom::pytorch {

namespace {

constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist/";

std::string path(const std::string& p, const std::string& projectDir, const char* fashion) {
  if (p.empty()) return pyStr(std::string(kFashionDir) + fashion);
  std::filesystem::path f(p);
  if (f.is_absolute() || projectDir.empty()) return pyStr(p);
  return pyStr(std::filesystem::absolute(std::filesystem::path(projectDir) / f).string());
}

std::string entry(const std::string& key, const std::string& value) {
  return "    " + pyStr(key) + ": " + value + ",\n";
}

std::string pyList(const google::protobuf::RepeatedField<double>& v) {
  std::string s = "[";
  for (int i = 0; i < v.size(); ++i) s += (i ? ", " : "") + pyFloat(v[i]);
  return s + "]";
}

// An image folder or list: its files, split, the shape images become (the model's
// Input where the project leaves it unset) and how they are read.
std::string imageSettings(const proto::DataDef& d, const std::string& dir) {
  const bool folder = d.has_image_folder();
  const proto::ImageSource& s = folder ? d.image_folder() : d.image_list();
  auto optional = [&](const std::string& p) { return p.empty() ? "\"\"" : path(p, dir, ""); };
  std::string t = entry("source", folder ? "\"image_folder\"" : "\"image_list\"");
  t += entry("train", optional(s.train()));
  t += entry("test", optional(s.test()));
  t += entry("validation", optional(s.validation()));
  t += entry("test_fraction", pyFloat(s.test_fraction() == 0 ? 0.2 : s.test_fraction()));
  t += entry("channels", pyInt(s.channels()));
  t += entry("height", pyInt(s.height()));
  t += entry("width", pyInt(s.width()));
  t += entry("fit", s.fit() == proto::ImageSource::CENTER_CROP ? "\"center_crop\"" : "\"resize\"");
  t += entry("skip_unreadable", pyBool(s.skip_unreadable()));
  t += entry("has_header", pyBool(s.has_header()));
  t += entry("decode_threads", pyInt(s.decode_threads()));
  return t;
}

Result<std::string> dataSettings(const proto::DataDef& d, const std::string& dir) {
  std::string t = "DATA = {\n";
  switch (d.source_case()) {
    case proto::DataDef::kIdx: {
      const proto::IdxSource& s = d.idx();
      t += entry("source", "\"idx\"");
      t += entry("train_images", path(s.train_images(), dir, "train-images-idx3-ubyte.gz"));
      t += entry("train_labels", path(s.train_labels(), dir, "train-labels-idx1-ubyte.gz"));
      t += entry("test_images", path(s.test_images(), dir, "t10k-images-idx3-ubyte.gz"));
      t += entry("test_labels", path(s.test_labels(), dir, "t10k-labels-idx1-ubyte.gz"));
      break;
    }
    case proto::DataDef::kCsv: {
      const proto::CsvSource& s = d.csv();
      if (s.train_path().empty()) return makeError("data.csv.train_path: no file is named");
      std::string delim = s.delimiter().empty() ? "," : s.delimiter();
      if (delim == "\\t" || delim == "tab") delim = "\t";
      t += entry("source", "\"csv\"");
      t += entry("train_path", path(s.train_path(), dir, ""));
      t += entry("test_path", s.test_path().empty() ? "\"\"" : path(s.test_path(), dir, ""));
      t += entry("label_column", pyStr(s.label_column()));
      t += entry("has_header", pyBool(s.has_header()));
      t += entry("delimiter", pyStr(delim));
      t += entry("test_fraction", pyFloat(s.test_fraction() == 0 ? 0.2 : s.test_fraction()));
      break;
    }
    case proto::DataDef::kSynthetic: {
      const proto::SyntheticSource& s = d.synthetic();
      bool blobs = s.kind() == proto::SyntheticSource::BLOBS;
      t += entry("source", blobs ? "\"blobs\"" : "\"spirals\"");
      t += entry("classes", pyInt(s.classes() > 0 ? s.classes() : 2));
      t += entry("train_samples", pyInt(s.train_samples() > 0 ? s.train_samples() : 1000));
      t += entry("test_samples", pyInt(s.test_samples() > 0 ? s.test_samples() : 500));
      t += entry("noise", pyFloat(s.noise() > 0 ? s.noise() : (blobs ? 1.0 : 0.1)));
      t += entry("features", pyInt(blobs && s.features() > 0 ? s.features() : 2));
      break;
    }
    case proto::DataDef::kImageFolder:
    case proto::DataDef::kImageList: t += imageSettings(d, dir); break;
    case proto::DataDef::kText: {
      const proto::TextSource& s = d.text();
      if (s.path().empty()) return makeError("data.text.path: no file is named");
      std::string vocab = "[";
      for (const std::string& v : s.vocab()) vocab += pyStr(v) + ", ";
      t += entry("source", "\"text\"");
      t += entry("path", path(s.path(), dir, ""));
      t += entry("test_path", s.test_path().empty() ? "\"\"" : path(s.test_path(), dir, ""));
      t += entry("vocabulary", s.vocabulary() == proto::TextSource::BYTE ? "\"byte\"" : "\"char\"");
      t += entry("context", pyInt(s.context()));
      t += entry("vocab", vocab + "]");
      break;
    }
    case proto::DataDef::SOURCE_NOT_SET: return makeError("data: the project has no data source");
    default: {
      // Sources added to the schema later are named in the settings; train.py says
      // it cannot read them.
      const auto* field = d.GetDescriptor()->FindFieldByNumber(int(d.source_case()));
      t += entry("source", pyStr(field ? field->name() : "unknown"));
      break;
    }
  }
  const proto::Normalization& n = d.normalization();
  std::string kind = n.kind() == proto::Normalization::FIXED         ? "\"fixed\""
                     : n.kind() == proto::Normalization::STANDARDIZE ? "\"standardize\""
                                                                     : "\"none\"";
  t += entry("train_limit", pyInt(d.train_limit()));
  t += entry("test_limit", pyInt(d.test_limit()));
  t += entry("validation_fraction", pyFloat(d.validation_fraction()));
  t += entry("no_shuffle", pyBool(d.no_shuffle()));
  t += "    \"normalization\": {\"kind\": " + kind +
       ", \"scale\": " + pyFloat(n.scale() == 0 ? 1.0 : n.scale()) +
       ", \"mean\": " + pyFloat(n.mean()) + ", \"std\": " + pyFloat(n.has_std() ? n.std() : 1.0) +
       ",\n                      \"channel_mean\": " + pyList(n.channel_mean()) +
       ", \"channel_std\": " + pyList(n.channel_std()) + "},\n";
  const proto::Augmentation& a = d.augmentation();
  t += "    \"augmentation\": {\"crop_padding\": " + pyInt(a.crop_padding()) +
       ", \"horizontal_flip\": " + pyBool(a.horizontal_flip()) +
       ", \"max_translation\": " + pyInt(a.max_translation()) + "},\n";
  return t + "}\n";
}

Result<std::string> trainSettings(const proto::TrainDef& t) {
  auto o = optimizerSettings(t.optimizer());
  if (!o) return o.error();
  const char* kind = o->kind == proto::Optimizer::SGD     ? "\"sgd\""
                     : o->kind == proto::Optimizer::ADAMW ? "\"adamw\""
                                                          : "\"adam\"";
  const proto::LrSchedule& s = t.schedule();
  const char* sched = s.kind() == proto::LrSchedule::STEP     ? "\"step\""
                      : s.kind() == proto::LrSchedule::COSINE ? "\"cosine\""
                                                              : "\"constant\"";
  std::string r = "TRAIN = {\n";
  r += entry("epochs", pyInt(t.epochs() > 0 ? t.epochs() : 1));
  r += entry("batch_size", pyInt(t.batch_size() > 0 ? t.batch_size() : 32));
  r += entry("seed", pyInt(int64_t(t.seed())));
  r += entry("threads", pyInt(t.threads()));
  r += "    \"optimizer\": {\"kind\": " + std::string(kind) + ", \"lr\": " + pyFloat(o->lr) +
       ", \"momentum\": " + pyFloat(o->momentum) + ", \"nesterov\": " + pyBool(o->nesterov) +
       ",\n                  \"beta1\": " + pyFloat(o->beta1) +
       ", \"beta2\": " + pyFloat(o->beta2) + ", \"eps\": " + pyFloat(o->eps) +
       ", \"weight_decay\": " + pyFloat(o->weightDecay) + "},\n";
  r += "    \"schedule\": {\"kind\": " + std::string(sched) +
       ", \"warmup_steps\": " + pyInt(s.warmup_steps()) +
       ", \"step_epochs\": " + pyInt(std::max(1, s.step_epochs())) +
       ", \"gamma\": " + pyFloat(s.gamma() > 0 ? s.gamma() : 0.1) +
       ", \"min_lr\": " + pyFloat(s.min_lr()) + "},\n";
  return r + "}\n";
}

double attrF(const proto::NodeDef& nd, const std::string& k, double def) {
  auto it = nd.attrs().find(k);
  if (it == nd.attrs().end()) return def;
  if (it->second.value_case() == proto::AttrValue::kF) return it->second.f();
  if (it->second.value_case() == proto::AttrValue::kI) return double(it->second.i());
  return def;
}

bool attrB(const proto::NodeDef& nd, const std::string& k) {
  auto it = nd.attrs().find(k);
  return it != nd.attrs().end() && it->second.value_case() == proto::AttrValue::kB &&
         it->second.b();
}

// What a loss or metric input is in train.py: x, the labels y, the float targets t,
// or one of forward()'s outputs.
Result<std::string> operand(const proto::ModelDef& m, const ModelText& model,
                            const std::string& ref, const std::string& node) {
  auto [name, port] = splitInputRef(ref);
  for (const proto::NodeDef& nd : m.nodes()) {
    if (nd.name() != name || nd.op() != "Input") continue;
    auto field = nd.attrs().find("field");
    auto dtype = nd.attrs().find("dtype");
    bool label = field != nd.attrs().end() && field->second.s() == "label";
    if (!label) return std::string("x");
    return std::string(dtype != nd.attrs().end() && dtype->second.s() == "float32" ? "t" : "y");
  }
  std::string canon = joinInputRef(name, port);
  for (size_t k = 0; k < model.returns.size(); ++k)
    if (model.returns[k] == canon)
      return model.returns.size() == 1 ? std::string("outputs")
                                       : "outputs[" + std::to_string(k) + "]";
  return makeError("node '" + node + "': reads '" + ref + "', which forward() does not return");
}

Result<std::string> lossAndMetrics(const proto::Project& p, const ModelText& model) {
  const proto::ModelDef& m = p.model();
  const OpRegistry& reg = OpRegistry::instance();
  const proto::NodeDef* loss = nullptr;
  std::vector<const proto::NodeDef*> metrics;
  for (const proto::NodeDef& nd : m.nodes()) {
    const OpDef* op = reg.find(nd.op());
    if (!op) continue;
    if (op->role == OpRole::Loss &&
        (nd.name() == p.train().loss() || (!loss && p.train().loss().empty())))
      loss = &nd;
    bool wanted = p.train().metrics().empty();
    for (const std::string& name : p.train().metrics()) wanted = wanted || name == nd.name();
    if (op->role == OpRole::Metric && wanted) metrics.push_back(&nd);
  }
  if (!loss)
    return makeError("train.loss: '" + p.train().loss() + "' is not a loss node of the model");
  auto operands = [&](const proto::NodeDef& nd) -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    for (const std::string& in : nd.inputs()) {
      auto o = operand(m, model, in, nd.name());
      if (!o) return o.error();
      out.push_back(*o);
    }
    if (out.size() != 2) return makeError("node '" + nd.name() + "' needs two inputs");
    return out;
  };
  auto lo = operands(*loss);
  if (!lo) return lo.error();
  const std::string &a = (*lo)[0], &b = (*lo)[1];
  std::string t = "\n\ndef compute_loss(outputs, x, y, t):\n    \"\"\"NetLoom node " +
                  pyStr(loss->name()) + " (" + loss->op() + ").\"\"\"\n    return ";
  if (loss->op() == "SoftmaxCrossEntropy") {
    double ls = attrF(*loss, "label_smoothing", 0.0);
    const int64_t ignore = int64_t(attrF(*loss, "ignore_index", -100));
    // Classes on the last axis: a sequence's logits are flattened to rows first.
    t += "F.cross_entropy(" + a + ".reshape(-1, " + a + ".shape[-1]), " + b +
         ".reshape(-1).long()" + (ls > 0 ? ", label_smoothing=" + pyFloat(ls) : "") +
         (ignore != -100 ? ", ignore_index=" + pyInt(ignore) : "") + ")\n";
  } else if (loss->op() == "MSELoss") {
    t += "F.mse_loss(" + a + ", " + b + ".reshape(" + a + ".shape).to(" + a + ".dtype))\n";
  } else if (loss->op() == "BCELoss") {
    t += std::string(attrB(*loss, "from_logits") ? "F.binary_cross_entropy_with_logits("
                                                 : "F.binary_cross_entropy(") +
         a + ", " + b + ".reshape(" + a + ".shape).to(" + a + ".dtype))\n";
  } else {
    return makeError("node '" + loss->name() + "': loss op '" + loss->op() +
                     "' has no PyTorch form in the export");
  }
  t += "\n\ndef compute_metrics(outputs, x, y, t):\n    return {";
  bool first = true;
  for (const proto::NodeDef* nd : metrics) {
    auto mo = operands(*nd);
    if (!mo) return mo.error();
    const std::string &s = (*mo)[0], &l = (*mo)[1];
    std::string e;
    if (nd->op() == "Accuracy") {
      e = "(" + s + ".argmax(1) == " + l + ").float().mean()";
    } else if (nd->op() == "TopKAccuracy") {
      e = "(" + s + ".topk(" + pyInt(int64_t(attrF(*nd, "k", 5))) + ", dim=1).indices == " + l +
          ".unsqueeze(1)).any(1).float().mean()";
    } else {
      return makeError("node '" + nd->name() + "': metric op '" + nd->op() +
                       "' has no PyTorch form in the export");
    }
    t += std::string(first ? "" : ",") + "\n        " + pyStr(nd->name()) + ": " + e;
    first = false;
  }
  return t + (first ? "}\n" : ",\n    }\n");
}

std::string notCarried(const proto::TrainDef& t) {
  std::string s;
  if (!t.early_stopping().metric().empty()) s += "early stopping, ";
  if (t.checkpoint().every_steps() > 0 || t.checkpoint().every_epochs() > 0) s += "checkpoints, ";
  if (!t.precision().empty() && t.precision() != "fp32") s += "precision " + t.precision() + ", ";
  if (t.distributed().ranks() > 1) s += "data parallelism, ";
  if (s.empty()) return s;
  return "Not carried over from the project: " + s.substr(0, s.size() - 2) + ".\n";
}

}  // namespace

Result<std::string> generateTrain(const proto::Project& project, const std::string& projectDir,
                                  const ModelText& model) {
  proto::DataDef dataDef = project.data();
  resolveImageShape(dataDef, project.model());
  auto data = dataSettings(dataDef, projectDir);
  if (!data) return data.error();
  auto train = trainSettings(project.train());
  if (!train) return train.error();
  auto fns = lossAndMetrics(project, model);
  if (!fns) return fns.error();
  std::string name = project.name().empty() ? model.className : project.name();
  std::string t =
      "\"\"\"" + name +
      ": training as NetLoom runs it, in plain PyTorch.\n\n"
      "    /usr/bin/python3 train.py [--epochs N] [--max-steps N] [--train-limit N]\n"
      "                              [--test-limit N] [--weights F] [--save F]\n"
      "                              [--dump-first-batch F]\n\n"
      "The same as NetLoom: the data (files, limits, validation split, normalisation),\n"
      "every epoch's sample order and augmentation draws (NetLoom's SplitMix64 streams,\n"
      "reimplemented below; synthetic sets by NetLoom's generators, the same up to the\n"
      "last bits of libm), batch size, the optimizer with its hyper-parameters as NetLoom\n"
      "resolves them, each step's learning rate (warm-up, step, cosine), loss and metrics.\n"
      "Different: initial weights and dropout masks are drawn by PyTorch's generator\n"
      "(seeded with the project's seed); start from a NetLoom run with --weights.\n" +
      (project.data().has_image_folder() || project.data().has_image_list()
           ? "Images are decoded once, at the start, by PIL: a PNG gives the same pixels as\n"
             "in NetLoom; JPEG decoders differ, by a level or two in some pixels.\n"
           : "") +
      notCarried(project.train()) +
      "\"\"\"\n"
      "import argparse\nimport gzip\nimport json\nimport math\nimport os\nimport struct\n"
      "import sys\n"
      "import time\n\nimport torch\nimport torch.nn.functional as F\n\n"
      "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
      "import model as netloom_model  # noqa: E402\n\n"
      "# ---- the project's settings -------------------------------------------------------\n\n";
  t += *data + "\n" + *train + *fns;
  return t + imageRuntime() + trainRuntime();
}

}  // namespace netloom::pytorch
