#include "engine/train/project_check.h"

#include <google/protobuf/descriptor.h>

#include <cmath>
#include <set>
#include <sstream>

#include "engine/compiler/passes.h"
#include "engine/graph/graph.h"
#include "engine/io/project_file.h"

namespace netloom {

namespace {

std::string num(double v) {
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

// Collects the first error and every warning, so checks read as one list.
class Checker {
 public:
  explicit Checker(std::vector<std::string>* warnings) : m_warnings(warnings) {}

  void fail(const std::string& message) {
    if (m_error.empty()) m_error = message;
  }
  void warn(const std::string& message) {
    if (m_warnings) m_warnings->push_back(message);
  }
  void atLeast(const std::string& field, int64_t v, int64_t lo, const char* why = nullptr) {
    if (v < lo)
      fail(field + " must be at least " + std::to_string(lo) + ", got " + std::to_string(v) +
           (why ? std::string(" (") + why + ")" : ""));
  }
  void atMost(const std::string& field, int64_t v, int64_t hi) {
    if (v > hi)
      fail(field + " must be at most " + std::to_string(hi) + ", got " + std::to_string(v));
  }
  void finite(const std::string& field, double v) {
    if (!std::isfinite(v)) fail(field + " must be a finite number, got " + num(v));
  }
  void nonNegative(const std::string& field, double v) {
    finite(field, v);
    if (v < 0) fail(field + " must not be negative, got " + num(v));
  }
  Status status() const { return m_error.empty() ? Status() : makeError(m_error); }

 private:
  std::vector<std::string>* m_warnings;
  std::string m_error;
};

void checkTrain(const proto::TrainDef& t, Checker& c) {
  if (t.has_batch_size())
    c.atLeast("train.batch_size", t.batch_size(), 1, "unset, it takes the default, 32");
  c.atLeast("train.epochs", t.epochs(), 0, "0 takes the default, 1");
  c.atLeast("train.threads", t.threads(), 0, "0 uses every core");
  c.atMost("train.threads", t.threads(), kMaxThreads);

  const proto::Optimizer& o = t.optimizer();
  const std::string opt = "train.optimizer.";
  if (o.has_lr()) {
    c.nonNegative(opt + "lr", o.lr());
    if (o.lr() == 0) c.warn(opt + "lr is 0: the weights will not change");
  }
  c.nonNegative(opt + "momentum", o.momentum());
  if (o.momentum() >= 1)
    c.warn(opt + "momentum " + num(o.momentum()) +
           " is 1 or more: updates will grow without bound");
  if (o.nesterov() && o.momentum() <= 0) c.fail(opt + "nesterov needs a momentum above 0");
  auto beta = [&](const char* name, bool has, double v) {
    if (!has) return;
    c.finite(opt + name, v);
    if (v < 0 || v >= 1) c.fail(opt + name + " must be in [0, 1), got " + num(v));
  };
  beta("beta1", o.has_beta1(), o.beta1());
  beta("beta2", o.has_beta2(), o.beta2());
  if (o.has_eps()) c.nonNegative(opt + "eps", o.eps());
  if (o.has_weight_decay()) {
    c.nonNegative(opt + "weight_decay", o.weight_decay());
    if (o.weight_decay() > 1)
      c.warn(opt + "weight_decay " + num(o.weight_decay()) +
             " is above 1: it outweighs the gradient");
  }

  const proto::LrSchedule& s = t.schedule();
  c.atLeast("train.schedule.step_epochs", s.step_epochs(), 0);
  c.nonNegative("train.schedule.gamma", s.gamma());
  c.nonNegative("train.schedule.min_lr", s.min_lr());
  c.atLeast("train.schedule.warmup_steps", s.warmup_steps(), 0);

  const proto::CheckpointPolicy& k = t.checkpoint();
  c.atLeast("train.checkpoint.every_steps", k.every_steps(), 0);
  c.atLeast("train.checkpoint.every_epochs", k.every_epochs(), 0);
  c.atLeast("train.checkpoint.keep_last", k.keep_last(), 0);
  c.atLeast("train.early_stopping.patience", t.early_stopping().patience(), 0);
  c.nonNegative("train.early_stopping.min_delta", t.early_stopping().min_delta());
}

void checkData(const proto::DataDef& d, Checker& c) {
  if (d.has_synthetic()) {
    const proto::SyntheticSource& s = d.synthetic();
    if (s.has_classes())
      c.atLeast("data.synthetic.classes", s.classes(), 2, "unset, it takes the default, 2");
    c.atLeast("data.synthetic.train_samples", s.train_samples(), 0);
    c.atLeast("data.synthetic.test_samples", s.test_samples(), 0);
    c.atLeast("data.synthetic.features", s.features(), 0);
    c.nonNegative("data.synthetic.noise", s.noise());
  }
  if (d.has_csv()) {
    double f = d.csv().test_fraction();
    c.finite("data.csv.test_fraction", f);
    if (f < 0 || f >= 1) c.fail("data.csv.test_fraction must be in [0, 1), got " + num(f));
  }
  const proto::Normalization& n = d.normalization();
  c.finite("data.normalization.scale", n.scale());
  c.finite("data.normalization.mean", n.mean());
  c.nonNegative("data.normalization.std", n.std());
  if (n.kind() == proto::Normalization::FIXED) {
    // FIXED divides by its std: one given as 0 (unset means 1) divides by nothing.
    if (n.channel_std_size() == 0 && n.has_std() && !(n.std() > 0))
      c.fail(
          "data.normalization.std must be above 0 for FIXED normalization (samples are "
          "divided by it), got " +
          num(n.std()));
    for (int i = 0; i < n.channel_std_size(); ++i)
      if (!(n.channel_std(i) > 0))
        c.fail("data.normalization.channel_std[" + std::to_string(i) +
               "] must be above 0 (samples are divided by it), got " + num(n.channel_std(i)));
  }
  double v = d.validation_fraction();
  c.finite("data.validation_fraction", v);
  if (v < 0 || v >= 1) c.fail("data.validation_fraction must be in [0, 1), got " + num(v));
  c.atLeast("data.train_limit", d.train_limit(), 0, "0 uses every sample");
  c.atLeast("data.test_limit", d.test_limit(), 0, "0 uses every sample");
  c.atLeast("data.prefetch_batches", d.prefetch_batches(), 0, "0 takes the default, 2");
  c.atMost("data.prefetch_batches", d.prefetch_batches(), 64);
  c.atLeast("data.augmentation.crop_padding", d.augmentation().crop_padding(), 0);
  c.atLeast("data.augmentation.max_translation", d.augmentation().max_translation(), 0);
}

void checkModel(const proto::ModelDef& m, const std::string& where, Checker& c) {
  std::set<std::string> names;
  for (const proto::NodeDef& n : m.nodes()) {
    if (std::string why = nodeNameProblem(n.name()); !why.empty()) c.fail(where + ": " + why);
    names.insert(n.name());
  }
  for (const std::string& out : m.outputs()) {
    auto [node, port] = splitInputRef(out);
    if (!names.count(node)) c.fail(where + ".outputs: no node named '" + node + "'");
  }
  for (const proto::ModelDef& b : m.blocks()) checkModel(b, "block '" + b.name() + "'", c);
}

}  // namespace

Status checkEnums(const google::protobuf::Message& message, const std::string& path) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const FieldDescriptor* f : fields) {
    std::string name = path.empty() ? f->name() : path + "." + f->name();
    if (f->type() == FieldDescriptor::TYPE_ENUM) {
      const int count = f->is_repeated() ? r->FieldSize(message, f) : 1;
      for (int i = 0; i < count; ++i) {
        int v =
            f->is_repeated() ? r->GetRepeatedEnumValue(message, f, i) : r->GetEnumValue(message, f);
        if (f->enum_type()->FindValueByNumber(v)) continue;
        std::string known;
        for (int k = 0; k < f->enum_type()->value_count(); ++k)
          if (f->enum_type()->value(k)->number() != 0)
            known += (known.empty() ? "" : ", ") + f->enum_type()->value(k)->name();
        return makeError(name + ": " + std::to_string(v) + " is not a known value (" + known + ")");
      }
    } else if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      const int count = f->is_repeated() ? r->FieldSize(message, f) : 1;
      for (int i = 0; i < count; ++i) {
        const auto& sub =
            f->is_repeated() ? r->GetRepeatedMessage(message, f, i) : r->GetMessage(message, f);
        if (Status s = checkEnums(sub, name); !s) return s;
      }
    }
  }
  return {};
}

Status checkProject(const proto::Project& project, std::vector<std::string>* warnings) {
  if (Status s = checkFormatVersion(project); !s) return s;
  if (Status s = checkEnums(project); !s) return s;
  Checker c(warnings);
  checkTrain(project.train(), c);
  checkData(project.data(), c);
  checkModel(project.model(), "model", c);
  return c.status();
}

}  // namespace netloom
