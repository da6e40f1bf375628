#include "gui/run_comparison.h"

#include <google/protobuf/text_format.h>

#include <QCoreApplication>
#include <algorithm>
#include <map>
#include <set>

namespace netloom::gui {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

void flatten(const Message& m, const std::string& prefix, std::map<std::string, std::string>& out) {
  const auto* refl = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    std::string key = prefix + f->name();
    int n = f->is_repeated() ? refl->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      std::string k = f->is_repeated() ? key + "[" + std::to_string(i) + "]" : key;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        flatten(f->is_repeated() ? refl->GetRepeatedMessage(m, f, i) : refl->GetMessage(m, f),
                k + ".", out);
      } else {
        std::string v;
        google::protobuf::TextFormat::PrintFieldValueToString(m, f, f->is_repeated() ? i : -1, &v);
        out[k] = v;
      }
    }
  }
}

std::map<std::string, std::string> settingsOf(const proto::Project& p) {
  std::map<std::string, std::string> out;
  flatten(p.train(), "train.", out);
  flatten(p.data(), "data.", out);
  for (const proto::NodeDef& n : p.model().nodes()) {
    std::string k = "model." + n.name();
    out[k + ".op"] = n.op();
    std::string ins;
    for (const std::string& in : n.inputs()) ins += (ins.empty() ? "" : ", ") + in;
    if (!ins.empty()) out[k + ".inputs"] = ins;
    for (const auto& [key, v] : n.attrs()) out[k + "." + key] = attrText(v);
  }
  return out;
}

// How a run ended, as the comparison's first rows.
void resultsOf(const RunRecord& r, std::map<std::string, std::string>& out) {
  auto num = [](double v) { return QString::number(v, 'g', 5).toStdString(); };
  out["result.state"] = r.stateText().section(',', 0, 0).section(':', 0, 0).toStdString();
  out["result.steps"] = std::to_string(r.steps());
  if (const proto::Finished* f = r.finished()) {
    out["result.train_loss"] = num(f->train_loss());
    if (f->test_accuracy() >= 0) out["result.test_accuracy"] = num(f->test_accuracy());
    if (f->test_loss() > 0) out["result.test_loss"] = num(f->test_loss());
  }
}

}  // namespace

std::string attrText(const proto::AttrValue& v) {
  auto list = [](const auto& values) {
    std::string s = "[";
    for (int i = 0; i < values.size(); ++i)
      s += (i ? ", " : "") + QString::number(double(values[i]), 'g', 8).toStdString();
    return s + "]";
  };
  switch (v.value_case()) {
    case proto::AttrValue::kI: return std::to_string(v.i());
    case proto::AttrValue::kF: return QString::number(v.f(), 'g', 8).toStdString();
    case proto::AttrValue::kS: return v.s();
    case proto::AttrValue::kB: return v.b() ? "true" : "false";
    case proto::AttrValue::kInts: return list(v.ints().values());
    case proto::AttrValue::kFloats: return list(v.floats().values());
    case proto::AttrValue::VALUE_NOT_SET: break;
  }
  return {};
}

QString settingLabel(const std::string& key) {
  static const std::map<std::string, const char*> results = {
      {"result.state", QT_TRANSLATE_NOOP("RunComparison", "How it ended")},
      {"result.steps", QT_TRANSLATE_NOOP("RunComparison", "Steps")},
      {"result.train_loss", QT_TRANSLATE_NOOP("RunComparison", "Training loss")},
      {"result.test_loss", QT_TRANSLATE_NOOP("RunComparison", "Test loss")},
      {"result.test_accuracy", QT_TRANSLATE_NOOP("RunComparison", "Test accuracy")}};
  if (auto it = results.find(key); it != results.end())
    return QCoreApplication::translate("RunComparison", it->second);
  QString text = QString::fromStdString(key);
  for (auto [from, to] :
       {std::pair{"train.", "Training."}, {"data.", "Data."}, {"model.", "Model."}})
    if (text.startsWith(from)) text = to + text.mid(QString(from).size());
  return text.replace('.', " › ").replace('_', ' ');
}

SettingsDiff compareSettings(const std::vector<const RunRecord*>& runs) {
  std::vector<std::map<std::string, std::string>> all;
  std::set<std::string> keys;
  for (const RunRecord* r : runs) {
    all.push_back(settingsOf(r->project));
    for (const auto& [k, v] : all.back()) keys.insert(k);
  }
  SettingsDiff d;
  // How each run ended first, whether or not they differ, as HParams shows metrics.
  std::vector<std::map<std::string, std::string>> results(runs.size());
  std::set<std::string> resultKeys;
  for (size_t i = 0; i < runs.size(); ++i) {
    resultsOf(*runs[i], results[i]);
    for (const auto& [k, v] : results[i]) resultKeys.insert(k);
  }
  for (const char* k : {"result.state", "result.steps", "result.train_loss", "result.test_loss",
                        "result.test_accuracy"}) {
    if (!resultKeys.count(k)) continue;
    d.results.push_back(k);
    std::vector<std::string> row;
    for (const auto& r : results) row.push_back(r.count(k) ? r.at(k) : std::string());
    d.resultValues.push_back(std::move(row));
  }
  for (const std::string& k : keys) {
    std::vector<std::string> row;
    for (const auto& s : all) {
      auto it = s.find(k);
      row.push_back(it == s.end() ? std::string() : it->second);
    }
    if (std::adjacent_find(row.begin(), row.end(), std::not_equal_to<>()) == row.end()) continue;
    d.keys.push_back(k);
    d.values.push_back(std::move(row));
  }
  return d;
}

}  // namespace netloom::gui
