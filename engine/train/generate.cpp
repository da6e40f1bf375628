#include "engine/train/generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "engine/compiler/compile.h"
#include "engine/data/dataset.h"
#include "engine/graph/blocks.h"
#include "engine/train/checkpoint.h"
#include "engine/train/heads.h"
#include "kernels/core/rng.h"

namespace netloom {

struct Decoder::Impl {
  ParamStore store;
  std::unique_ptr<Program> prog;
  ValueId logits = kNoValue;
  int64_t position = 0, capacity = 0;
  std::vector<std::string> vocab;
  bool bytes = false;
};

namespace {

// The vocabulary the project's text gives its tokens: its own list, or the one its
// training text builds (as training built it).
Result<std::vector<std::string>> vocabularyOf(const proto::Project& p, const std::string& dir) {
  const proto::TextSource& src = p.data().text();
  if (src.vocabulary() != proto::TextSource::BYTE && src.vocab_size() > 0)
    return std::vector<std::string>(src.vocab().begin(), src.vocab().end());
  std::filesystem::path path(src.path());
  if (path.is_relative() && !dir.empty()) path = std::filesystem::path(dir) / path;
  auto t = readText(path.string(), src.vocabulary(), {}, p.data().validation_fraction());
  if (!t) return t.error();
  return std::move(t->vocab);
}

// The model as one step of generation: its token Input one token long, its losses,
// metrics and labels left out, and a probe that keeps the scores. Returns the number
// of positions the model was drawn for (the token Input's length).
Result<int64_t> decodeModel(const proto::Project& p, proto::ModelDef& m, std::string& logits) {
  auto flat = inlineBlocks(p.model());
  if (!flat) return flat.error();
  auto out = predictionOutput(p);
  if (!out) return out.error();
  logits = *out;
  proto::ModelDef kept = *flat;
  kept.clear_nodes();
  int64_t context = 0;
  const OpRegistry& reg = OpRegistry::instance();
  for (const proto::NodeDef& n : flat->nodes()) {
    const OpDef* op = reg.find(n.op());
    if (op && (op->role == OpRole::Loss || op->role == OpRole::Metric)) continue;
    const auto field = n.attrs().find("field");
    const bool isInput = n.op() == "Input",
               labels = field != n.attrs().end() && field->second.s() == "label";
    if (isInput && labels) continue;
    proto::NodeDef* k = kept.add_nodes();
    *k = n;
    const auto dtype = n.attrs().find("dtype");
    if (isInput && dtype != n.attrs().end() && dtype->second.s() == "int32") {
      const auto& dims = n.attrs().at("shape").ints().values();
      if (dims.size() != 1)
        return makeError("node '" + n.name() + "': token Input must be one sequence");
      context = dims[0];
      (*k->mutable_attrs())["shape"].mutable_ints()->set_values(0, 1);
    }
  }
  if (context == 0)
    return makeError("the model has no int32 token Input: generation reads token ids");
  proto::NodeDef* probe = kept.add_nodes();
  probe->set_name("decode_probe");
  probe->set_op("MSELoss");
  probe->add_inputs(logits);
  probe->add_inputs(logits);
  m = std::move(kept);
  return context;
}

}  // namespace

Decoder::Decoder(std::unique_ptr<Impl> impl) : m(std::move(impl)) {}
Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

Result<Decoder> Decoder::make(const proto::Project& project, const GenerateOptions& opts) {
  if (!project.data().has_text())
    return makeError(
        "generation needs a language model's project: its data is not text (data.text)");
  auto impl = std::make_unique<Impl>();
  proto::ModelDef model;
  std::string logits;
  auto context = decodeModel(project, model, logits);
  if (!context) return context.error();
  impl->capacity = *context;
  CompileOptions o;
  o.batch = 1;
  o.training = false;
  o.evaluation = true;
  o.loss = "decode_probe";
  o.metrics = {"decode_probe"};
  o.keep = {logits};
  o.seed = project.train().seed();
  o.kvCache = *context;
  auto prog = compile(model, o, impl->store);
  if (!prog) return prog.error();
  impl->prog = std::move(*prog);
  impl->logits = impl->prog->graph.findValue(logits);
  std::map<std::string, std::string> metadata;
  if (!opts.weights.empty())
    if (Status st = loadModelWeights(impl->store, opts.weights, &metadata); !st) return st.error();
  // The vocabulary the weights were trained with, where they record it; else the
  // project's (weights from before vocabularies were recorded, or none).
  auto recorded = vocabFromMetadata(metadata, opts.weights);
  if (!recorded) return recorded.error();
  if (*recorded) {
    impl->vocab = std::move((*recorded)->tokens);
    impl->bytes = (*recorded)->bytes;
  } else {
    auto vocab = vocabularyOf(project, opts.projectDir);
    if (!vocab) return vocab.error();
    impl->vocab = std::move(*vocab);
    impl->bytes = project.data().text().vocabulary() == proto::TextSource::BYTE;
  }
  return Decoder(std::move(impl));
}

Result<std::vector<float>> Decoder::step(int32_t token) {
  if (m->position >= m->capacity)
    return makeError("the model reads " + std::to_string(m->capacity) +
                     " positions, and all of them are taken");
  Program& p = *m->prog;
  const TensorRef* x = p.input("x");
  const TensorRef* pos = p.input("position");
  if (!x || !pos) return makeError("the decoding program has no token or position input");
  const int32_t at = int32_t(m->position);
  p.device->copyToDevice(x->data, &token, sizeof token);
  p.device->copyToDevice(pos->data, &at, sizeof at);
  StepContext ctx;
  ctx.training = false;
  try {
    p.run(ctx);
  } catch (const std::exception& e) {
    return makeError(e.what());
  }
  ++m->position;
  return p.read(m->logits);
}

int64_t Decoder::position() const {
  return m->position;
}
int64_t Decoder::capacity() const {
  return m->capacity;
}
const std::vector<std::string>& Decoder::vocab() const {
  return m->vocab;
}
bool Decoder::bytes() const {
  return m->bytes;
}

int32_t sampleToken(const std::vector<float>& scores, double temperature, int topK, double draw) {
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  if (temperature <= 0 || order.size() == 1) return order[0];
  const size_t k = topK > 0 ? std::min(order.size(), size_t(topK)) : order.size();
  std::vector<double> w(k);
  double total = 0;
  for (size_t i = 0; i < k; ++i)
    total += w[i] = std::exp((double(scores[order[i]]) - scores[order[0]]) / temperature);
  double at = draw * total;
  for (size_t i = 0; i < k; ++i) {
    if (at < w[i]) return order[i];
    at -= w[i];
  }
  return order[k - 1];
}

Result<std::string> generateText(const proto::Project& project, const GenerateOptions& opts,
                                 const std::function<void(const std::string&)>& onText) {
  auto d = Decoder::make(project, opts);
  if (!d) return d.error();
  auto prompt = encodeText(opts.prompt, d->vocab(), d->bytes());
  if (!prompt) return prompt.error();
  if (prompt->empty()) prompt->push_back(0);  // no prompt: start from token 0
  std::string text = opts.prompt;
  if (onText) onText(text);
  std::vector<float> scores;
  for (int32_t t : *prompt) {
    auto s = d->step(t);
    if (!s) return s.error();
    scores = std::move(*s);
  }
  Rng rng(opts.seed);
  for (int64_t n = 0; n < opts.maxTokens && !(opts.stop && opts.stop->load()); ++n) {
    const int32_t next = sampleToken(scores, opts.temperature, opts.topK, rng.uniform());
    const std::string piece = decodeTokens({next}, d->vocab());
    text += piece;
    if (onText) onText(piece);
    if (d->position() >= d->capacity()) break;
    auto s = d->step(next);
    if (!s) return s.error();
    scores = std::move(*s);
  }
  return text;
}

}  // namespace netloom
