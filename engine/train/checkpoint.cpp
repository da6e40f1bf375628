#include "engine/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/compiler/passes.h"
#include "engine/io/json.h"
#include "engine/io/output_file.h"
#include "engine/io/safetensors.h"

namespace netloom {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "state.safetensors";
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kLatestFile = "latest";

std::string stepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

Json positionToJson(const RunPosition& p, uint64_t seed) {
  Json o = Json::object();
  o.set("format", Json::string("netloom-checkpoint-1"));
  // Seeds are 64-bit; JSON numbers are doubles, so the seed travels as text.
  o.set("seed", Json::string(std::to_string(seed)));
  o.set("step", Json::number(double(p.step)));
  o.set("epoch", Json::number(p.epoch));
  o.set("batch_in_epoch", Json::number(double(p.batchInEpoch)));
  o.set("loss_sum", Json::number(p.lossSum));
  Json m = Json::object();
  for (const auto& [k, v] : p.metricSums) m.set(k, Json::number(v));
  o.set("metric_sums", m);
  o.set("samples", Json::number(double(p.samples)));
  o.set("train_seconds", Json::number(p.trainSeconds));
  o.set("train_samples", Json::number(double(p.trainSamples)));
  o.set("has_best", Json::boolean(p.hasBest));
  o.set("best", Json::number(p.best));
  o.set("best_epoch", Json::number(p.bestEpoch));
  o.set("epochs_without_improvement", Json::number(p.epochsWithoutImprovement));
  return o;
}

Result<RunPosition> positionFromJson(const Json& o, uint64_t& seed, const std::string& file) {
  auto num = [&](const char* key, double& out) -> bool {
    const Json* v = o.find(key);
    if (!v || !v->isNumber()) return false;
    out = v->asNumber();
    return true;
  };
  const Json* format = o.find("format");
  if (!format || !format->isString() || format->asString() != "netloom-checkpoint-1")
    return makeError(file + ": not a NetLoom checkpoint manifest (missing or unknown 'format')");
  const Json* s = o.find("seed");
  if (!s || !s->isString()) return makeError(file + ": missing 'seed'");
  const std::string& text = s->asString();
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return makeError(file + ": 'seed' \"" + text + "\" is not a 64-bit unsigned integer");
  RunPosition p;
  double step, epoch, batch, samples, tsamples, bestEpoch, bad;
  if (!num("step", step) || !num("epoch", epoch) || !num("batch_in_epoch", batch) ||
      !num("loss_sum", p.lossSum) || !num("samples", samples) ||
      !num("train_seconds", p.trainSeconds) || !num("train_samples", tsamples) ||
      !num("best", p.best) || !num("best_epoch", bestEpoch) ||
      !num("epochs_without_improvement", bad))
    return makeError(file + ": a field of the run position is missing or not a number");
  p.step = int64_t(step);
  p.epoch = int(epoch);
  p.batchInEpoch = int64_t(batch);
  p.samples = int64_t(samples);
  p.trainSamples = int64_t(tsamples);
  p.bestEpoch = int(bestEpoch);
  p.epochsWithoutImprovement = int(bad);
  const Json* hb = o.find("has_best");
  p.hasBest = hb && hb->type() == Json::Type::Bool && hb->asBool();
  if (const Json* m = o.find("metric_sums"); m && m->isObject())
    for (const auto& [k, v] : m->members()) p.metricSums[k] = v.asNumber();
  return p;
}

Result<std::string> readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void removeQuietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

}  // namespace

std::vector<NamedTensor> exportState(const ParamStore& store) {
  std::vector<NamedTensor> out;
  for (const auto& e : store.entries()) out.push_back(ParamStore::toNamed(*e));
  return out;
}

std::map<std::string, std::string> dataMetadata(const Dataset& train) {
  if (!train.isText()) return {};
  // A byte vocabulary is its 256 bytes, which JSON strings cannot all carry.
  const bool bytes = train.byteVocab;
  std::map<std::string, std::string> out{{"vocabulary", bytes ? "byte" : "char"}};
  if (!bytes) {
    Json list = Json::array();
    for (const std::string& token : train.vocab) list.push(Json::string(token));
    out["vocab"] = list.dump();
  }
  return out;
}

Result<std::optional<RecordedVocab>> vocabFromMetadata(
    const std::map<std::string, std::string>& metadata, const std::string& file) {
  const auto kind = metadata.find("vocabulary");
  if (kind == metadata.end()) return std::optional<RecordedVocab>{};
  RecordedVocab vocab;
  if (kind->second == "byte") {
    for (int b = 0; b < 256; ++b) vocab.tokens.push_back(std::string(1, char(b)));
    vocab.bytes = true;
    return std::optional(std::move(vocab));
  }
  const auto list = metadata.find("vocab");
  auto fail = [&](const std::string& what) {
    return makeError(file + ": the recorded vocabulary " + what);
  };
  if (kind->second != "char" || list == metadata.end())
    return fail("is neither \"byte\" nor a \"char\" list");
  auto json = Json::parse(list->second);
  if (!json) return fail("is not JSON: " + json.error().message);
  if (!json->isArray()) return fail("is not a list");
  for (const Json& token : json->items()) {
    if (!token.isString()) return fail("holds a token that is not a string");
    vocab.tokens.push_back(token.asString());
  }
  if (vocab.tokens.empty()) return fail("is empty");
  return std::optional(std::move(vocab));
}

CheckpointWriter::CheckpointWriter(std::string dir, proto::CheckpointPolicy policy,
                                   std::map<std::string, std::string> metadata)
    : m_dir(std::move(dir)), m_policy(std::move(policy)), m_metadata(std::move(metadata)) {
  m_metadata["format"] = "netloom";
}

Result<std::string> CheckpointWriter::write(const ParamStore& store, const RunPosition& pos,
                                            uint64_t seed) {
  std::error_code ec;
  fs::create_directories(m_dir, ec);
  if (ec) return makeError(m_dir + ": cannot create the checkpoint folder: " + ec.message());
  std::string name = stepName(pos.step);
  fs::path final = fs::path(m_dir) / name;
  fs::path tmp = fs::path(m_dir) / (name + ".tmp-" + std::to_string(getpid()));
  removeQuietly(tmp);
  fs::create_directories(tmp, ec);
  if (ec) return makeError(tmp.string() + ": " + ec.message());
  if (Status s = writeSafetensors((tmp / kStateFile).string(), exportState(store), m_metadata);
      !s) {
    removeQuietly(tmp);
    return s.error();
  }
  if (Status s =
          writeFileAtomic((tmp / kManifestFile).string(), positionToJson(pos, seed).dump() + "\n");
      !s) {
    removeQuietly(tmp);
    return s.error();
  }
  removeQuietly(final);  // a checkpoint of the same step from an earlier, interrupted run
  fs::rename(tmp, final, ec);
  if (ec) {
    removeQuietly(tmp);
    return makeError(final.string() + ": cannot move the checkpoint into place: " + ec.message());
  }
  if (Status s = writeFileAtomic((fs::path(m_dir) / kLatestFile).string(), name + "\n"); !s)
    return s.error();

  // Prune: the newest keep_last step folders stay; `best` is separate.
  if (m_policy.keep_last() > 0) {
    std::vector<std::string> steps;
    for (const auto& entry : fs::directory_iterator(m_dir, ec)) {
      std::string n = entry.path().filename().string();
      if (entry.is_directory() && n.rfind("step-", 0) == 0 && n.find(".tmp") == std::string::npos)
        steps.push_back(n);
    }
    std::sort(steps.begin(), steps.end());
    for (size_t i = 0; i + size_t(m_policy.keep_last()) < steps.size(); ++i)
      if (steps[i] != name) removeQuietly(fs::path(m_dir) / steps[i]);
  }
  return final.string();
}

Status CheckpointWriter::markBest(const std::string& checkpoint) {
  fs::path best = fs::path(m_dir) / "best";
  fs::path tmp = fs::path(m_dir) / ("best.tmp-" + std::to_string(getpid()));
  std::error_code ec;
  removeQuietly(tmp);
  fs::copy(checkpoint, tmp, fs::copy_options::recursive, ec);
  if (ec) return makeError(tmp.string() + ": cannot copy the best checkpoint: " + ec.message());
  fs::path old = fs::path(m_dir) / ("best.old-" + std::to_string(getpid()));
  if (fs::exists(best)) fs::rename(best, old, ec);
  fs::rename(tmp, best, ec);
  if (ec) return makeError(best.string() + ": " + ec.message());
  removeQuietly(old);
  return {};
}

Result<LoadedCheckpoint> readCheckpoint(const std::string& dir) {
  fs::path folder = dir;
  if (!fs::exists(folder / kManifestFile)) {
    auto latest = readText((folder / kLatestFile).string());
    if (!latest)
      return makeError(dir + ": no checkpoint here (neither " + kManifestFile + " nor " +
                       kLatestFile + ")");
    std::string name = *latest;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos)
      return makeError((folder / kLatestFile).string() + ": does not name a checkpoint folder");
    folder /= name;
  }
  LoadedCheckpoint c;
  c.path = folder.string();
  std::string manifestPath = (folder / kManifestFile).string();
  auto text = readText(manifestPath);
  if (!text) return text.error();
  auto json = Json::parse(*text);
  if (!json) return makeError(manifestPath + ": " + json.error().message);
  auto pos = positionFromJson(*json, c.seed, manifestPath);
  if (!pos) return pos.error();
  c.position = *pos;
  auto tensors = readSafetensors((folder / kStateFile).string(), &c.metadata);
  if (!tensors) return tensors.error();
  c.tensors = std::move(*tensors);
  return c;
}

Status restoreTensors(ParamStore& store, const LoadedCheckpoint& ckpt, bool stage) {
  std::map<std::string, const NamedTensor*> byName;
  for (const NamedTensor& t : ckpt.tensors) byName[t.name] = &t;
  std::string file = ckpt.path + "/" + kStateFile;
  // fp16's loss scale comes and goes with the precision: a run may resume in another
  // (a new scale starts from its first value).
  auto precisionOnly = [](const std::string& name) { return name == kLossScaleState; };
  std::set<std::string> flatMembers;  // ZeRO's state shards: cut from each parameter's state
  for (const auto& e : store.entries())
    if (e->flat)
      for (const auto& [member, shape] : e->flat->members)
        flatMembers.insert(member + "." + e->flat->suffix);
  for (const auto& e : store.entries()) {
    if (e->flat) continue;
    auto it = byName.find(e->name);
    if (it == byName.end() && precisionOnly(e->name)) continue;
    if (it == byName.end())
      return makeError(file + ": the checkpoint is of another model: it has no tensor '" + e->name +
                       "' (" + shapeToString(e->desc.shape) + ")");
    const NamedTensor& t = *it->second;
    const Shape& shape = ParamStore::wholeShape(*e);
    if (t.dtype != DType::F32 || t.shape != shape)
      return makeError(file + ": the checkpoint is of another model: tensor '" + e->name + "' is " +
                       dtypeName(t.dtype) + " " + shapeToString(t.shape) +
                       ", this model needs F32 " + shapeToString(shape));
  }
  for (const NamedTensor& t : ckpt.tensors)
    if (!stage && !store.find(t.name) && !precisionOnly(t.name) && !flatMembers.count(t.name))
      return makeError(file + ": the checkpoint is of another model: tensor '" + t.name +
                       "' is not part of this model");
  std::map<std::string, std::vector<float>> values;  // the flat shards' sources, as floats
  for (const std::string& name : flatMembers)
    if (auto it = byName.find(name); it != byName.end() && it->second->dtype == DType::F32) {
      const NamedTensor& t = *it->second;
      values[name].resize(t.data.size() / sizeof(float));
      std::memcpy(values[name].data(), t.data.data(), t.data.size());
    }
  for (const auto& e : store.entries()) {
    if (e->flat) {
      Status st = ParamStore::writeFlat(*e, [&](const std::string& name) {
        auto it = values.find(name);
        return it == values.end() ? nullptr : &it->second;
      });
      if (!st) return makeError(file + ": the checkpoint is of another model: " + st.message());
    } else if (auto it = byName.find(e->name); it != byName.end()) {
      ParamStore::writeWhole(*e, reinterpret_cast<const float*>(it->second->data.data()));
    }
  }
  return {};
}

Status loadModelWeights(ParamStore& store, const std::string& path,
                        std::map<std::string, std::string>* metadata) {
  std::vector<NamedTensor> weights;
  std::map<std::string, std::string> found;
  if (fs::is_directory(path)) {
    auto ckpt = readCheckpoint(path);
    if (!ckpt) return ckpt.error();
    for (NamedTensor& t : ckpt->tensors) {
      ParamStore::Entry* e = store.find(t.name);
      if (e && (e->kind == ValueKind::Param || e->kind == ValueKind::Buffer))
        weights.push_back(std::move(t));
    }
    found = std::move(ckpt->metadata);
  } else {
    auto tensors = readSafetensors(path, &found);
    if (!tensors) return tensors.error();
    weights = std::move(*tensors);
  }
  if (metadata) *metadata = std::move(found);
  return store.importParams(weights, path);
}

}  // namespace netloom
