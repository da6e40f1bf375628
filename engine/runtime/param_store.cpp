#include "engine/runtime/param_store.h"

#include <cassert>
#include <cstring>
#include <new>

#include "kernels/core/shard.h"

namespace netloom {

ParamStore::Entry* ParamStore::find(const std::string& name) {
  auto it = m_byName.find(name);
  return it == m_byName.end() ? nullptr : it->second;
}

ParamStore::Entry* ParamStore::create(const std::string& name, const TensorDesc& desc,
                                      ValueKind kind) {
  if (Entry* e = find(name))
    return e->desc.shape == desc.shape && e->desc.sameLayout(desc) ? e : nullptr;
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->desc = desc;
  e->kind = kind;
  e->buffer = DeviceBuffer(*m_device, numel(desc.shape) * int64_t(sizeof(float)));
  if (!e->buffer.ok()) throw std::bad_alloc();
  m_device->fill(e->buffer.data(), 0, e->buffer.bytes());
  Entry* raw = e.get();
  m_entries.push_back(std::move(e));
  m_byName[name] = raw;
  return raw;
}

namespace {

// PyTorch's BatchNorm keeps a step counter beside its running statistics, an integer
// scalar that only matters with momentum=None (a cumulative average), which NetLoom
// does not offer: a state dict carries it, and loading it changes nothing.
bool isBatchCounter(const NamedTensor& t, ParamStore& store) {
  const std::string suffix = ".num_batches_tracked";
  if (t.name.size() <= suffix.size() ||
      t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  std::string owner = t.name.substr(0, t.name.size() - suffix.size());
  ParamStore::Entry* mean = store.find(owner + ".running_mean");
  return mean && mean->kind == ValueKind::Buffer && numel(t.shape) == 1 &&
         (t.dtype == DType::I64 || t.dtype == DType::I32);
}

TensorDesc plainOf(const TensorDesc& d) {
  TensorDesc p = d;
  p.layout = Layout::Plain;
  p.format.clear();
  return p;
}

}  // namespace

std::vector<float> ParamStore::stored(const Entry& e) {
  return readFloats(*e.buffer.device(), e.data(), e.numel());
}

void ParamStore::setStored(Entry& e, const std::vector<float>& values) {
  assert(int64_t(values.size()) == e.numel());
  writeFloats(*e.buffer.device(), e.data(), values.data(), e.numel());
}

// A packed tensor converts on the host: in place where the host addresses the
// device's memory, else through a host copy of the stored values.
std::vector<float> ParamStore::read(const Entry& e) {
  if (e.desc.layout == Layout::Plain) return stored(e);
  std::vector<float> out(size_t(e.numel()));
  std::vector<float> copy;
  const float* from = e.data();
  if (!e.buffer.device()->hostAddressable()) from = (copy = stored(e)).data();
  bool ok = convertLayout(e.desc, from, plainOf(e.desc), out.data());
  assert(ok && "the compiler packs only into layouts its Reorder kernel converts");
  (void)ok;
  return out;
}

void ParamStore::write(Entry& e, const float* values) {
  if (e.buffer.device()->hostAddressable()) {
    bool ok = convertLayout(plainOf(e.desc), values, e.desc, e.data());
    assert(ok && "the compiler packs only into layouts its Reorder kernel converts");
    (void)ok;
    return;
  }
  if (e.desc.layout == Layout::Plain) {
    writeFloats(*e.buffer.device(), e.data(), values, e.numel());
    return;
  }
  std::vector<float> packed(size_t(e.numel()));
  bool ok = convertLayout(plainOf(e.desc), values, e.desc, packed.data());
  assert(ok && "the compiler packs only into layouts its Reorder kernel converts");
  (void)ok;
  setStored(e, packed);
}

NamedTensor ParamStore::toNamed(const Entry& e) {
  NamedTensor t;
  t.name = e.name;
  t.dtype = DType::F32;
  t.shape = e.desc.shape;
  std::vector<float> values = read(e);
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
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
    out.push_back(toNamed(*e));
  }
  return out;
}

Status ParamStore::importParams(const std::vector<NamedTensor>& tensors, const std::string& file,
                                bool stage) {
  std::map<std::string, const NamedTensor*> byName;
  for (const NamedTensor& t : tensors) {
    if (isBatchCounter(t, *this)) continue;
    Entry* e = find(t.name);
    if (!e && stage) continue;
    if (!e || (e->kind != ValueKind::Param && e->kind != ValueKind::Buffer))
      return makeError(file + ": tensor '" + t.name + "' is not a parameter of this model");
    if (t.dtype != DType::F32)
      return makeError(file + ": tensor '" + t.name + "' has dtype " + dtypeName(t.dtype) +
                       ", expected F32");
    if (t.shape != wholeShape(*e))
      return makeError(file + ": tensor '" + t.name + "' has shape " + shapeToString(t.shape) +
                       ", the model expects " + shapeToString(wholeShape(*e)));
    byName[t.name] = &t;
  }
  for (const auto& e : m_entries)
    if ((e->kind == ValueKind::Param || e->kind == ValueKind::Buffer) && !byName.count(e->name))
      return makeError(file + ": parameter '" + e->name + "' is missing");
  for (auto& [name, t] : byName)
    writeWhole(*find(name), reinterpret_cast<const float*>(t->data.data()));
  return {};
}

void ParamStore::writeWhole(Entry& e, const float* whole) {
  if (!e.shard.split()) return write(e, whole);
  std::vector<float> part(size_t(e.numel()));
  takePart(whole, e.shard.full, e.shard.sbp.axis, e.shard.index, e.shard.parts, part.data(),
           sizeof(float));
  write(e, part.data());
}

namespace {

// A split entry's parts gathered whole.
std::vector<float> gatherParts(const ParamStore::Entry& e, std::vector<float> part,
                               Communicator& parts) {
  std::vector<float> all(part.size() * size_t(parts.size()));
  parts.allgather(part.data(), all.data(), int64_t(part.size() * sizeof(float)));
  std::vector<float> whole(size_t(numel(e.shard.full)), 0.f);
  for (int k = 0; k < parts.size(); ++k)
    putPart(all.data() + size_t(k) * part.size(), e.shard.full, e.shard.sbp.axis, k, parts.size(),
            whole.data(), sizeof(float));
  return whole;
}

}  // namespace

std::unique_ptr<ParamStore> ParamStore::gatherWhole(Communicator* parts,
                                                    Communicator* shards) const {
  auto out = std::make_unique<ParamStore>(cpuDevice());
  for (const auto& e : m_entries) {
    std::vector<float> values = read(*e);
    if (e->flat && shards) {  // every shard, then each member's state
      std::vector<float> all(values.size() * size_t(shards->size()));
      shards->allgather(values.data(), all.data(), int64_t(values.size() * sizeof(float)));
      int64_t at = 0;
      for (const auto& [member, shape] : e->flat->members) {
        Entry* m = out->create(member + "." + e->flat->suffix, TensorDesc{shape, DType::F32, {}},
                               ValueKind::State);
        write(*m, all.data() + at);
        at += numel(shape);
      }
      continue;
    }
    if (e->shard.split() && parts) values = gatherParts(*e, std::move(values), *parts);
    Entry* whole = out->create(e->name, TensorDesc{wholeShape(*e), DType::F32, {}}, e->kind);
    write(*whole, values.data());
  }
  return out;
}

namespace {

template <typename T>
void put(std::vector<char>& out, const T& v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
template <typename T>
T take(const char*& at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  at += sizeof(T);
  return v;
}

}  // namespace

std::unique_ptr<ParamStore> ParamStore::gatherStages(Communicator& stages) const {
  std::vector<char> mine;
  put(mine, int64_t(m_entries.size()));
  for (const auto& e : m_entries) {
    put(mine, int64_t(e->name.size()));
    mine.insert(mine.end(), e->name.begin(), e->name.end());
    put(mine, int32_t(e->kind));
    put(mine, int64_t(e->desc.shape.size()));
    for (int64_t d : e->desc.shape) put(mine, d);
    const std::vector<float> values = read(*e);
    const char* bytes = reinterpret_cast<const char*>(values.data());
    mine.insert(mine.end(), bytes, bytes + values.size() * sizeof(float));
  }
  std::vector<int64_t> sizes(size_t(stages.size()));
  const int64_t size = int64_t(mine.size());
  stages.allgather(&size, sizes.data(), sizeof(int64_t));
  auto out = std::make_unique<ParamStore>(cpuDevice());
  for (int r = 0; r < stages.size(); ++r) {
    std::vector<char> blob =
        r == stages.rank() ? mine : std::vector<char>(size_t(sizes[size_t(r)]));
    stages.broadcast(blob.data(), int64_t(blob.size()), r);
    const char* at = blob.data();
    for (int64_t n = take<int64_t>(at); n > 0; --n) {
      std::string name(at, size_t(take<int64_t>(at)));
      at += name.size();
      const auto kind = ValueKind(take<int32_t>(at));
      Shape shape(size_t(take<int64_t>(at)));
      for (int64_t& d : shape) d = take<int64_t>(at);
      std::vector<float> values(size_t(numel(shape)));
      std::memcpy(values.data(), at, values.size() * sizeof(float));
      at += values.size() * sizeof(float);
      if (out->find(name)) continue;
      write(*out->create(name, TensorDesc{shape, DType::F32, {}}, kind), values.data());
    }
  }
  return out;
}

Status ParamStore::writeFlat(
    Entry& e, const std::function<const std::vector<float>*(const std::string&)>& find) {
  const FlatShard& f = *e.flat;
  std::vector<float> shard(size_t(e.numel()), 0.f);
  const int64_t per = e.numel(), begin = per * f.index, end = begin + per;
  int64_t at = 0;
  for (const auto& [member, shape] : f.members) {
    const std::string name = member + "." + f.suffix;
    const std::vector<float>* whole = find(name);
    if (!whole || int64_t(whole->size()) != numel(shape))
      return makeError(
          "tensor '" + name + "' " +
          (whole ? "is not of shape " + shapeToString(shape) : std::string("is missing")));
    const int64_t lo = std::max(begin, at), hi = std::min(end, at + numel(shape));
    for (int64_t i = lo; i < hi; ++i) shard[size_t(i - begin)] = (*whole)[size_t(i - at)];
    at += numel(shape);
  }
  write(e, shard.data());
  return {};
}

}  // namespace netloom
