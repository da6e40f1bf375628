#include "engine/runtime/param_store.h"

#include <cstring>

namespace netloom {

ParamStore::Entry* ParamStore::find(const std::string& name) {
  auto it = m_byName.find(name);
  return it == m_byName.end() ? nullptr : it->second;
}

ParamStore::Entry* ParamStore::create(const std::string& name, const TensorDesc& desc,
                                      ValueKind kind) {
  if (Entry* e = find(name)) return e->desc.shape == desc.shape ? e : nullptr;
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->desc = desc;
  e->kind = kind;
  e->data.assign(numel(desc.shape), 0.f);
  Entry* raw = e.get();
  m_entries.push_back(std::move(e));
  m_byName[name] = raw;
  return raw;
}

int64_t ParamStore::parameterCount() const {
  int64_t n = 0;
  for (const auto& e : m_entries)
    if (e->kind == ValueKind::Param) n += numel(e->desc.shape);
  return n;
}

std::vector<NamedTensor> ParamStore::exportParams() const {
  std::vector<NamedTensor> out;
  for (const auto& e : m_entries) {
    if (e->kind != ValueKind::Param && e->kind != ValueKind::Buffer) continue;
    NamedTensor t;
    t.name = e->name;
    t.dtype = DType::F32;
    t.shape = e->desc.shape;
    t.data.resize(e->data.size() * sizeof(float));
    std::memcpy(t.data.data(), e->data.data(), t.data.size());
    out.push_back(std::move(t));
  }
  return out;
}

Status ParamStore::importParams(const std::vector<NamedTensor>& tensors, const std::string& file) {
  std::map<std::string, const NamedTensor*> byName;
  for (const NamedTensor& t : tensors) {
    Entry* e = find(t.name);
    if (!e || (e->kind != ValueKind::Param && e->kind != ValueKind::Buffer))
      return makeError(file + ": tensor '" + t.name + "' is not a parameter of this model");
    if (t.dtype != DType::F32)
      return makeError(file + ": tensor '" + t.name + "' has dtype " + dtypeName(t.dtype) +
                       ", expected F32");
    if (t.shape != e->desc.shape)
      return makeError(file + ": tensor '" + t.name + "' has shape " + shapeToString(t.shape) +
                       ", the model expects " + shapeToString(e->desc.shape));
    byName[t.name] = &t;
  }
  for (const auto& e : m_entries)
    if ((e->kind == ValueKind::Param || e->kind == ValueKind::Buffer) && !byName.count(e->name))
      return makeError(file + ": parameter '" + e->name + "' is missing");
  for (auto& [name, t] : byName)
    std::memcpy(find(name)->data.data(), t->data.data(), t->data.size());
  return {};
}

}  // namespace netloom
