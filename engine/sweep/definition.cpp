#include "engine/sweep/definition.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cmath>
#include <cstdlib>

#include "engine/graph/op.h"

namespace netloom::sweep {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::vector<std::string> splitDots(const std::string& s) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (true) {
    const size_t dot = s.find('.', at);
    parts.push_back(s.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) return parts;
    at = dot + 1;
  }
}

std::string fieldNames(const Descriptor* d) {
  std::string names;
  for (int i = 0; i < d->field_count(); ++i)
    names += (names.empty() ? "" : ", ") + std::string(d->field(i)->name());
  return names;
}

// A TrainDef field by its path below train.
Result<Target> trainTarget(const std::string& path, const std::vector<std::string>& parts) {
  Target t;
  t.path = path;
  const Descriptor* d = proto::TrainDef::descriptor();
  std::string at = "train";
  for (size_t k = 1; k < parts.size(); ++k) {
    const FieldDescriptor* f = d->FindFieldByName(parts[k]);
    if (!f)
      return makeError("'" + path + "': " + at + " has no field '" + parts[k] + "' (it has " +
                       fieldNames(d) + ")");
    if (f->is_repeated() || f->is_map())
      return makeError("'" + path + "': " + at + "." + parts[k] +
                       " is a list; a sweep sets single values");
    t.fields.push_back(parts[k]);
    at += "." + parts[k];
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (k + 1 == parts.size())
        return makeError("'" + path +
                         "' is a section (its fields: " + fieldNames(f->message_type()) + ")");
      d = f->message_type();
      continue;
    }
    if (k + 1 != parts.size()) return makeError("'" + path + "': " + at + " has no fields");
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64: t.kind = Target::Kind::Int; break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: t.kind = Target::Kind::Float; break;
      case FieldDescriptor::CPPTYPE_BOOL: t.kind = Target::Kind::Bool; break;
      case FieldDescriptor::CPPTYPE_ENUM: t.kind = Target::Kind::Enum; break;
      default: t.kind = Target::Kind::Text;
    }
  }
  if (t.fields.empty()) return makeError("'" + path + "' names no field of train");
  return t;
}

// A node's attribute: nodes.<node>.<attr>.
Result<Target> nodeTarget(const proto::Project& project, const std::string& path) {
  const size_t dot = path.rfind('.');
  Target t;
  t.path = path;
  t.node = path.substr(6, dot == std::string::npos || dot < 6 ? std::string::npos : dot - 6);
  t.attr = dot == std::string::npos || dot < 6 ? "" : path.substr(dot + 1);
  if (t.node.empty() || t.attr.empty())
    return makeError("'" + path + "' must be nodes.<node>.<attribute>");
  const proto::NodeDef* node = nullptr;
  for (const proto::NodeDef& n : project.model().nodes())
    if (n.name() == t.node) node = &n;
  if (!node) return makeError("'" + path + "': the model has no node '" + t.node + "'");
  const OpDef* op = OpRegistry::instance().find(node->op());
  const AttrDef* attr = nullptr;
  if (op)
    for (const AttrDef& a : op->attrs)
      if (a.name == t.attr && !a.internal) attr = &a;
  if (!attr)
    return makeError("'" + path + "': " + node->op() + " has no attribute '" + t.attr + "'");
  switch (attr->kind) {
    case AttrKind::Int: t.kind = Target::Kind::Int; break;
    case AttrKind::Float: t.kind = Target::Kind::Float; break;
    case AttrKind::Bool: t.kind = Target::Kind::Bool; break;
    case AttrKind::String: t.kind = Target::Kind::Text; break;
    default: return makeError("'" + path + "': a list attribute; a sweep sets single values");
  }
  return t;
}

// instances.<node>: a block's instance repeated, each copy reading the one before.
Result<Target> instancesTarget(const proto::Project& project, const std::string& path) {
  Target t;
  t.path = path;
  t.kind = Target::Kind::Int;
  t.instance = path.substr(10);
  const proto::NodeDef* node = nullptr;
  for (const proto::NodeDef& n : project.model().nodes())
    if (n.name() == t.instance) node = &n;
  if (!node) return makeError("'" + path + "': the model has no node '" + t.instance + "'");
  const proto::ModelDef* block = nullptr;
  for (const proto::ModelDef& b : project.model().blocks())
    if (b.name() == node->op()) block = &b;
  if (!block)
    return makeError("'" + path + "': '" + t.instance + "' is a " + node->op() +
                     ", not an instance of a block");
  if (block->outputs_size() != 1 || node->inputs_size() < 1)
    return makeError("'" + path + "': block " + block->name() +
                     " must read an input and give one output to be chained");
  return t;
}

// `name` repeated `count` times: copies name_2 … name_count, each reading the one
// before through its first input; what read `name` reads the last copy.
void chainInstances(proto::ModelDef& m, const std::string& name, int count) {
  if (count <= 1) return;
  const std::string last = name + "_" + std::to_string(count);
  auto rewire = [&](std::string& ref) {
    if (ref == name)
      ref = last;
    else if (ref.rfind(name + ":", 0) == 0)
      ref = last + ref.substr(name.size());
  };
  for (proto::NodeDef& n : *m.mutable_nodes())
    for (std::string& in : *n.mutable_inputs()) rewire(in);
  for (std::string& out : *m.mutable_outputs()) rewire(out);
  proto::NodeDef original;
  for (const proto::NodeDef& n : m.nodes())
    if (n.name() == name) original = n;
  for (int k = 2; k <= count; ++k) {
    proto::NodeDef copy = original;
    copy.set_name(name + "_" + std::to_string(k));
    copy.set_inputs(0, k == 2 ? name : name + "_" + std::to_string(k - 1));
    *m.add_nodes() = copy;
  }
}

// Whether `text` is a value the target takes; empty when it is, else why not.
std::string badValue(const Target& t, const std::string& text) {
  char* end = nullptr;
  switch (t.kind) {
    case Target::Kind::Int:
      std::strtoll(text.c_str(), &end, 10);
      return !text.empty() && *end == 0 ? "" : "'" + text + "' is not a whole number";
    case Target::Kind::Float:
      std::strtod(text.c_str(), &end);
      return !text.empty() && *end == 0 ? "" : "'" + text + "' is not a number";
    case Target::Kind::Bool:
      return text == "true" || text == "false" ? "" : "'" + text + "' is not true or false";
    default: return {};
  }
}

Result<Param> paramOf(const proto::SweepParam& p, const Target& t, const std::string& name) {
  if (p.choices_size() > 0) {
    std::vector<std::string> choices(p.choices().begin(), p.choices().end());
    for (const std::string& c : choices)
      if (std::string why = badValue(t, c); !why.empty())
        return makeError(name + ": choice " + why);
    return Param::choice(t.path, choices);
  }
  if (t.kind == Target::Kind::Bool || t.kind == Target::Kind::Text || t.kind == Target::Kind::Enum)
    return makeError(name + ": takes named values; give them as choices");
  Param q = p.integer() ? Param::integer(t.path, 0, 0)
            : p.log()   ? Param::logUniform(t.path, 0, 0)
                        : Param::uniform(t.path, 0, 0);
  q.lo = p.min();
  q.hi = p.max();
  if (t.kind == Target::Kind::Int && !p.integer())
    return makeError(name + ": takes whole numbers; add integer: true, or give choices");
  if (p.integer() && p.log()) q.kind = Param::Kind::LogUniform;  // drawn log-uniformly, rounded
  if (std::string why = q.invalid(); !why.empty())
    return makeError(name + ": " + why.substr(why.find(": ") + 2));
  return q;
}

void setTrainField(Message& m, const std::vector<std::string>& fields, size_t k,
                   const std::string& text, double value) {
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(fields[k]);
  const auto* r = m.GetReflection();
  if (k + 1 < fields.size())
    return setTrainField(*r->MutableMessage(&m, f), fields, k + 1, text, value);
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, f, int32_t(std::llround(value))); break;
    case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&m, f, std::llround(value)); break;
    case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&m, f, uint32_t(std::llround(value))); break;
    case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(&m, f, uint64_t(std::llround(value))); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(&m, f, value); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(&m, f, float(value)); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(&m, f, text == "true"); break;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->SetEnum(&m, f, f->enum_type()->FindValueByName(text));
      break;
    default: r->SetString(&m, f, text);
  }
}

}  // namespace

Point SweepPlan::settle(Point at) const {
  for (size_t k = 0; k < at.size() && k < targets.size(); ++k)
    if (targets[k].kind == Target::Kind::Int && space.params()[k].kind != Param::Kind::Choice)
      at[k] = std::round(at[k]);
  return at;
}

std::unique_ptr<Strategy> SweepPlan::strategyFor() const {
  switch (strategy) {
    case proto::GRID: return gridSearch(space, gridSteps);
    case proto::RANDOM: return randomSearch(space, seed);
    default: return tpeSearch(space, seed);
  }
}

Result<SweepPlan> planSweep(const proto::Project& project) {
  if (!project.has_sweep() || project.sweep().params_size() == 0)
    return makeError("the project has no sweep: add a sweep section with its params");
  const proto::Sweep& s = project.sweep();
  SweepPlan plan;
  std::vector<Param> params;
  for (int k = 0; k < s.params_size(); ++k) {
    const proto::SweepParam& p = s.params(k);
    const std::string name = "sweep.params[" + std::to_string(k) + "] (" + p.target() + ")";
    const std::vector<std::string> parts = splitDots(p.target());
    Result<Target> t =
        parts[0] == "train"   ? trainTarget(p.target(), parts)
        : parts[0] == "nodes" ? nodeTarget(project, p.target())
        : parts[0] == "instances"
            ? instancesTarget(project, p.target())
            : Result<Target>(
                  makeError("'" + p.target() + "' must start with train., nodes. or instances."));
    if (!t) return makeError("sweep.params[" + std::to_string(k) + "]: " + t.error().message);
    if (t->kind == Target::Kind::Enum)
      for (const std::string& c : p.choices()) {
        const FieldDescriptor* f = nullptr;
        const Descriptor* d = proto::TrainDef::descriptor();
        for (const std::string& field : t->fields) {
          f = d->FindFieldByName(field);
          if (f->message_type()) d = f->message_type();
        }
        if (!f->enum_type()->FindValueByName(c))
          return makeError(name + ": choice '" + c + "' is not one of " +
                           std::string(f->enum_type()->name()) + "'s values");
      }
    auto q = paramOf(p, *t, name);
    if (!q) return q.error();
    if (!t->instance.empty())
      for (const std::string& c : p.choices())
        if (std::strtod(c.c_str(), nullptr) < 1) return makeError(name + ": at least 1 instance");
    if (!t->instance.empty() && p.choices_size() == 0 && q->lo < 1)
      return makeError(name + ": at least 1 instance");
    plan.targets.push_back(*t);
    params.push_back(*q);
  }
  auto space = Space::make(params);
  if (!space) return makeError("sweep: " + space.error().message);
  plan.space = *space;
  auto watch = MetricWatch::parse(s.objective().empty() ? "test_accuracy" : s.objective(), s.mode(),
                                  0, "sweep.objective");
  if (!watch) return watch.error();
  plan.objective = *watch;
  plan.maximize = watch->maximizes();
  bool known = watch->name() == "loss";
  for (const proto::NodeDef& n : project.model().nodes())
    known = known || n.name() == watch->name();
  if (!known)
    return makeError("sweep.objective '" + watch->spec() + "': the model has no metric node '" +
                     watch->name() + "'");
  plan.strategy =
      s.strategy() == proto::SWEEP_STRATEGY_UNSPECIFIED ? proto::TPE_ASHA : s.strategy();
  plan.gridSteps = s.grid_steps() > 0 ? s.grid_steps() : 4;
  plan.seed = s.seed();
  plan.parallel = std::max(1, s.parallel());
  plan.maxSeconds = std::max(0.0, s.max_minutes()) * 60;
  plan.eta = s.eta() > 1 ? s.eta() : 3;
  plan.minEpochs = s.min_epochs() > 0 ? s.min_epochs() : 1;
  plan.epochs = std::max(1, project.train().epochs());
  if (s.trials() < 0)
    return makeError("sweep.trials must be at least 1, got " + std::to_string(s.trials()));
  plan.trials = s.trials() > 0 ? s.trials() : 20;
  if (plan.strategy == proto::GRID && s.trials() == 0) {
    auto grid = gridSearch(plan.space, plan.gridSteps);
    int n = 0;
    while (grid->next({})) ++n;
    plan.trials = n;
  }
  return plan;
}

Result<proto::Project> trialProject(const proto::Project& project, const SweepPlan& plan,
                                    const Point& at) {
  proto::Project p = project;
  p.clear_sweep();
  for (size_t k = 0; k < plan.targets.size(); ++k) {
    const Target& t = plan.targets[k];
    const std::string text = plan.space.text(at, k);
    const bool choice = plan.space.params()[k].kind == Param::Kind::Choice;
    const double value = choice ? std::strtod(text.c_str(), nullptr) : at[k];
    if (!t.instance.empty()) {
      chainInstances(*p.mutable_model(), t.instance, int(std::llround(value)));
      continue;
    }
    if (t.node.empty()) {
      setTrainField(*p.mutable_train(), t.fields, 0, text, value);
      continue;
    }
    for (proto::NodeDef& n : *p.mutable_model()->mutable_nodes()) {
      if (n.name() != t.node) continue;
      proto::AttrValue& v = (*n.mutable_attrs())[t.attr];
      switch (t.kind) {
        case Target::Kind::Int: v.set_i(std::llround(value)); break;
        case Target::Kind::Float: v.set_f(value); break;
        case Target::Kind::Bool: v.set_b(text == "true"); break;
        default: v.set_s(text);
      }
    }
  }
  return p;
}

}  // namespace netloom::sweep
