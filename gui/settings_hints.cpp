#include "gui/settings_hints.h"

#include <google/protobuf/descriptor.h>

#include <QCoreApplication>
#include <map>

#include "engine/proto/project.pb.h"

namespace netloom::gui {

namespace {

using proto::LrSchedule;
using proto::Optimizer;

const std::vector<FieldHint>& trainHints() {
  static const std::vector<FieldHint> hints = {
      {"loss", "Loss node", "empty: the model's only loss node"},
      {"metrics", "Metrics", "empty: every metric node"},
      {"optimizer.kind", "Optimizer"},
      {"optimizer.lr", "Learning rate"},
      {"optimizer.momentum",
       "Momentum",
       nullptr,
       0,
       nullptr,
       0,
       {},
       "optimizer.kind",
       {Optimizer::SGD}},
      {"optimizer.nesterov",
       "Nesterov momentum",
       nullptr,
       -1e9,
       nullptr,
       0,
       {},
       "optimizer.kind",
       {Optimizer::SGD}},
      {"optimizer.beta1",
       "Beta 1",
       nullptr,
       0,
       nullptr,
       0,
       {},
       "optimizer.kind",
       {Optimizer::KIND_UNSPECIFIED, Optimizer::ADAM, Optimizer::ADAMW}},
      {"optimizer.beta2",
       "Beta 2",
       nullptr,
       0,
       nullptr,
       0,
       {},
       "optimizer.kind",
       {Optimizer::KIND_UNSPECIFIED, Optimizer::ADAM, Optimizer::ADAMW}},
      {"optimizer.eps",
       "Epsilon",
       nullptr,
       0,
       nullptr,
       0,
       {},
       "optimizer.kind",
       {Optimizer::KIND_UNSPECIFIED, Optimizer::ADAM, Optimizer::ADAMW}},
      {"optimizer.weight_decay", "Weight decay", "L2 for SGD and Adam; decoupled for AdamW", 0},
      {"schedule.kind", "Schedule"},
      {"schedule.step_epochs",
       "Every (epochs)",
       "Epochs between decays",
       0,
       "1 (default)",
       0,
       {},
       "schedule.kind",
       {LrSchedule::STEP}},
      {"schedule.gamma",
       "Decay factor",
       "The rate is multiplied by this at each decay",
       0,
       "0.1 (default)",
       0,
       {},
       "schedule.kind",
       {LrSchedule::STEP}},
      {"schedule.min_lr",
       "Final rate",
       "Where the cosine ends",
       0,
       nullptr,
       0,
       {},
       "schedule.kind",
       {LrSchedule::COSINE}},
      {"schedule.warmup_steps", "Warm-up steps", "Linear warm-up from 0", 0, "None"},
      {"batch_size", "Batch size", "Samples per step", 1, nullptr, 32},
      {"epochs", "Epochs", "Passes over the training set", 0, "1 (default)"},
      {"seed", "Seed", "Initial weights, shuffling and dropout follow it", 0},
      {"device",
       "Device",
       "Where a run on this computer trains",
       -1e9,
       nullptr,
       0,
       {"|This computer's CPU", "cpu|CPU", "cuda:0|GPU 0", "cuda:all|Every GPU"}},
      {"threads", "CPU threads", nullptr, 0, "All cores"},
      {"precision",
       "Precision",
       "Matrix ops in 16 bits accumulate in float; weights stay float",
       -1e9,
       nullptr,
       0,
       {"|Float32", "bf16|BFloat16 (matrix ops)", "fp16|Float16 (matrix ops, loss scaling)"}},
      {"checkpoint.every_steps", "Checkpoint every (steps)", nullptr, 0, "Never"},
      {"checkpoint.every_epochs", "Checkpoint every (epochs)", nullptr, 0, "Never"},
      {"checkpoint.keep_last", "Keep the newest", nullptr, 0, "All"},
      {"checkpoint.keep_best", "Also keep the best by", "e.g. val_loss, val_accuracy"},
      {"checkpoint.mode", "Better is"},
      {"early_stopping.metric", "Stop early on", "e.g. val_loss; empty: never stop early"},
      {"early_stopping.patience", "Patience (epochs)", nullptr, 0, "5 (default)"},
      {"early_stopping.min_delta", "Least improvement", nullptr, 0},
      {"early_stopping.mode", "Better is"},
      {"check_finite_every", "Check for NaN every (steps)", nullptr, -1, "Never"},
      {"distributed.ranks", "Data-parallel ranks", nullptr, 0, "One"},
      {"distributed.first_bucket_mb", "First gradient bucket (MiB)", nullptr, 0, "1 (default)"},
      {"distributed.bucket_mb", "Gradient buckets (MiB)", nullptr, 0, "25 (default)"},
      {"distributed.timeout_s", "Rank timeout (s)", nullptr, 0, "60 (default)"},
      {"distributed.threads", "Ranks as threads"},
      {"init_weights", "Start from weights", "A safetensors file; empty: seeded initialisation"},
  };
  return hints;
}

const std::vector<FieldHint>& groupHints() {
  static const std::vector<FieldHint> hints = {
      {"optimizer", "Optimizer"},
      {"schedule", "Learning-rate schedule"},
      {"checkpoint", "Checkpoints"},
      {"early_stopping", "Early stopping"},
      {"distributed", "Data parallelism"},
      {"normalization", "Normalization"},
      {"augmentation", "Augmentation"},
      {"idx", "IDX files"},
      {"csv", "CSV file"},
      {"synthetic", "Synthetic data"},
      {"image_folder", "Image folder"},
      {"image_list", "Image list"},
  };
  return hints;
}

const std::vector<FieldHint>& dataHints() {
  static const std::vector<FieldHint> hints = {
      {"validation_fraction", "Validation share", "Held out of the training set", 0, "None"},
      {"train_limit", "Training samples", nullptr, 0, "All"},
      {"test_limit", "Test samples", nullptr, 0, "All"},
      {"prefetch_batches", "Batches prepared ahead", nullptr, 0, "2 (default)"},
      {"normalization.scale", "Scale first by", nullptr, -1e9, nullptr},
      {"normalization.kind", "Normalization"},
      {"synthetic.classes", "Classes", nullptr, 2, nullptr, 2},
      {"synthetic.train_samples", "Training samples", nullptr, 0, "1000 (default)"},
      {"synthetic.test_samples", "Test samples", nullptr, 0, "500 (default)"},
      {"synthetic.features", "Features", nullptr, 0, "2 (default)"},
      {"csv.delimiter",
       "Delimiter",
       nullptr,
       -1e9,
       nullptr,
       0,
       {"|Comma", ";|Semicolon", "\t|Tab"}},
      {"csv.label_column", "Label column", "Its header name; empty: the last column"},
      {"csv.test_fraction", "Test share", nullptr, 0, "0.2 (default)"},
  };
  return hints;
}

}  // namespace

const FieldHint* fieldHint(bool train, const std::string& path) {
  for (const FieldHint& h : train ? trainHints() : dataHints())
    if (path == h.path) return &h;
  for (const FieldHint& h : groupHints())
    if (path == h.path) return &h;
  return nullptr;
}

QString fieldLabel(const std::string& name) {
  QString s = QString::fromStdString(name);
  s.replace('_', ' ');
  if (!s.isEmpty()) s[0] = s[0].toUpper();
  return s;
}

QString enumText(const google::protobuf::EnumValueDescriptor* value) {
  // What a run does with an unset kind, by the enum it belongs to.
  static const std::map<std::string, const char*> unset = {
      {"netloom.proto.Optimizer.Kind", QT_TRANSLATE_NOOP("Settings", "Adam (default)")},
      {"netloom.proto.LrSchedule.Kind", QT_TRANSLATE_NOOP("Settings", "Constant (default)")},
      {"netloom.proto.Normalization.Kind", QT_TRANSLATE_NOOP("Settings", "None")},
      {"netloom.proto.SyntheticSource.Kind", QT_TRANSLATE_NOOP("Settings", "Spirals (default)")},
      {"netloom.proto.MetricMode", QT_TRANSLATE_NOOP("Settings", "Automatic (smaller for losses)")},
  };
  static const std::map<std::string, const char*> named = {
      {"SGD", "SGD"},
      {"ADAM", "Adam"},
      {"ADAMW", "AdamW"},
      {"CENTER_CROP", "Centre crop"},
      {"STANDARDIZE", "Standardize (from the training split)"},
      {"FIXED", "Fixed mean and std"},
      {"MIN", "Smaller"},
      {"MAX", "Larger"}};
  const std::string& name = value->name();
  if (value->number() == 0 && name.find("UNSPECIFIED") != std::string::npos) {
    auto it = unset.find(value->type()->full_name());
    return QCoreApplication::translate("Settings", it != unset.end() ? it->second : "Default");
  }
  if (auto it = named.find(name); it != named.end()) return QString(it->second);
  // "CONSTANT" reads "Constant": the value's name in sentence case.
  std::string text = name;
  for (char& c : text) c = c == '_' ? ' ' : char(std::tolower(c));
  QString out = QString::fromStdString(text);
  if (!out.isEmpty()) out[0] = out[0].toUpper();
  return out;
}

}  // namespace netloom::gui
