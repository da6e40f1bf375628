#include "engine/train/attention_maps.h"

#include <cmath>

#include "engine/graph/blocks.h"
#include "engine/runtime/feeder.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_setup.h"
#include "kernels/core/attention_plan.h"

namespace netloom {

namespace {

constexpr const char* kAttentionOp = "ScaledDotProductAttention";

// The attention nodes of the model as compiled (blocks inlined), and the values the
// maps are computed from: queries, keys, the optional mask, and the log-sum-exps.
Result<std::vector<std::string>> attentionValues(const proto::ModelDef& model,
                                                 std::vector<std::string>& keep) {
  auto flat = inlineBlocks(model);
  if (!flat) return flat.error();
  std::vector<std::string> nodes;
  for (const proto::NodeDef& n : flat->nodes()) {
    if (n.op() != kAttentionOp) continue;
    nodes.push_back(n.name());
    for (int k = 0; k < n.inputs_size(); ++k)
      if (k != 2) keep.push_back(n.inputs(k));
    keep.push_back(n.name() + ":1");
  }
  if (nodes.empty()) return makeError("the model has no ScaledDotProductAttention node");
  return nodes;
}

// One sample to run: the prompt's tokens (the last `context` of them, padded), or a
// sample of the data.
Result<Dataset> inputOf(const Setup& s, const AttentionQuery& q, std::vector<std::string>& tokens) {
  const Dataset& train = s.data.train;
  if (!train.isText()) {
    const Dataset& from = s.data.test.size() > 0 ? s.data.test : train;
    if (q.sample < 0 || q.sample >= from.size())
      return makeError("sample " + std::to_string(q.sample) + " is past the " +
                       std::to_string(from.size()) + " samples of the " +
                       (s.data.test.size() > 0 ? "test" : "training") + " split");
    return from.subset({q.sample});
  }
  auto ids = encodeText(q.prompt, train.vocab, train.byteVocab);
  if (!ids) return ids.error();
  if (ids->empty()) return makeError("the prompt is empty: type the text to look at");
  const int64_t context = train.context;
  if (int64_t(ids->size()) > context) ids->erase(ids->begin(), ids->end() - context);
  for (int32_t id : *ids) tokens.push_back(decodeTokens({id}, train.vocab));
  std::vector<int32_t> padded = *ids;
  padded.resize(size_t(context + 1), 0);
  Dataset one = train;
  one.tokens = std::make_shared<const std::vector<int32_t>>(std::move(padded));
  one.starts = {0};
  one.textEnd = context + 1;
  return one;
}

// softmax(q·kᵀ·scale + mask) of every (head, query), from q, k and the log-sum-exps,
// over the first `queries` × `keys` of the (single-sample) node.
Result<AttentionMap> mapOf(const Program& p, const Node& n, int64_t queries, int64_t keys) {
  const Graph& g = p.graph;
  KernelSig sig;
  sig.attrs = &n.attrs;
  for (int k = 0; k < n.numDataInputs(); ++k) sig.in.push_back(g.values[n.inputs[k]].desc);
  const AttentionPlan plan = AttentionPlan::of(sig, 0);
  const std::vector<float> q = p.read(n.inputs[0]), k = p.read(n.inputs[1]);
  const std::vector<float> lse = p.read(n.outputs[1]);
  std::vector<uint8_t> maskBytes;
  if (plan.hasMask) {
    const TensorRef& m = p.refs[n.inputs[3]];
    maskBytes.resize(size_t(m.numel() * int64_t(dtypeSize(m.dtype))));
    p.device->copyToHost(maskBytes.data(), m.data, int64_t(maskBytes.size()));
  }
  const fn::AttentionMaskView mask = plan.maskView(maskBytes.data());
  const fn::AttentionMask am = plan.settings(0, 0, false);
  AttentionMap out;
  out.node = n.name;
  out.heads = plan.h;
  out.queries = std::min(queries, plan.t);
  out.keys = std::min(keys, plan.s);
  out.weights.resize(size_t(out.heads * out.queries * out.keys));
  for (int64_t h = 0; h < plan.h; ++h)
    for (int64_t i = 0; i < out.queries; ++i) {
      const float* qi = q.data() + (h * plan.t + i) * plan.d;
      const float l = lse[size_t(h * plan.t + i)];
      for (int64_t j = 0; j < out.keys; ++j) {
        const float* kj = k.data() + (h * plan.s + j) * plan.d;
        const float m = mask.at(0, h, i, j);
        float w = 0.f;
        if (!am.hidden(i, j) && m != -INFINITY) {
          double dot = 0;
          for (int64_t c = 0; c < plan.d; ++c) dot += double(qi[c]) * kj[c];
          w = float(std::exp(dot * plan.scale + m - l));
        }
        out.weights[size_t((h * out.queries + i) * out.keys + j)] = w;
      }
    }
  return out;
}

}  // namespace

bool hasAttention(const proto::ModelDef& model) {
  std::vector<std::string> keep;
  return attentionValues(model, keep).ok();
}

Result<AttentionMaps> attentionMaps(const proto::Project& project, const TrainOptions& opts,
                                    const std::string& weightsPath, const AttentionQuery& query) {
  auto setup = prepare(project, opts);
  if (!setup) return setup.error();
  Setup& s = *setup;
  CompileOptions eo = s.evalOpts;
  auto nodes = attentionValues(s.project.model(), eo.keep);
  if (!nodes) return nodes.error();
  AttentionMaps out;
  auto sample = inputOf(s, query, out.tokens);
  if (!sample) return sample.error();
  out.sample = std::move(*sample);
  ParamStore store(*s.device);
  ProgramCache cache(s.project, eo, store);
  auto prog = cache.get(1);
  if (!prog) return prog.error();
  if (Status st = loadModelWeights(store, weightsPath); !st) return st.error();
  if (Status st = checkDataFits(**prog, out.sample, "inspected"); !st) return st.error();
  BatchLoader::Options lo;
  lo.batchSize = 1;
  lo.shuffle = false;
  BatchLoader loader(out.sample, s.data.norm, lo);
  Batch b;
  if (!loader.next(b))
    return loader.status() ? makeError("no sample to run") : loader.status().error();
  feed(**prog, b);
  StepContext ctx;
  ctx.training = false;
  ctx.seed = s.seed;
  try {
    (*prog)->run(ctx);
  } catch (const std::exception& e) {
    return makeError(e.what());
  }
  const int64_t shown = out.tokens.empty() ? INT64_MAX : int64_t(out.tokens.size());
  for (const std::string& name : *nodes) {
    const Node* n = nullptr;
    for (const Node& candidate : (*prog)->graph.nodes)
      if (candidate.name == name && !candidate.backward) n = &candidate;
    if (!n) return makeError("node '" + name + "': not in the compiled model");
    auto map = mapOf(**prog, *n, shown, shown);
    if (!map) return map.error();
    out.layers.push_back(std::move(*map));
  }
  return out;
}

}  // namespace netloom
