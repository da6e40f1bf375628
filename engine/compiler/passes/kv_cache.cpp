// "kv-cache": for a program that generates one token a step (CompileOptions::kvCache
// positions), attention becomes CachedAttention over key and value caches kept
// between steps, and positions and rotary embeddings read the token's position from
// a "position" input. The caches are persistent state of kvCache positions each.
#include "engine/compiler/pass.h"

namespace netloom {
namespace {

const OpDef& op(const char* name) {
  return *OpRegistry::instance().find(name);
}

class KvCache : public Pass {
 public:
  const char* name() const override { return "kv-cache"; }
  bool applies(const PassContext& c) const override { return c.opts.kvCache > 0; }

  Result<std::string> run(PassContext& c) override {
    if (c.opts.training) return makeError("a KV cache is for generation, not training");
    Graph& g = c.g;
    auto position = positionInput(g);
    if (!position) return position.error();
    int caches = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& n = g.nodes[i];
      const std::string& kind = n.op->name;
      if (kind == "ScaledDotProductAttention") {
        if (Status st = cacheAttention(c, NodeId(i), *position); !st) return st.error();
        ++caches;
      } else if (kind == "PositionEmbedding" || kind == "RotaryEmbedding") {
        n.op = &op(kind == "PositionEmbedding" ? "PositionEmbeddingAt" : "RotaryEmbeddingAt");
        n.inputs.insert(n.inputs.begin() + 1, *position);
      }
    }
    return counted(size_t(caches), "attention cache") + " of " + std::to_string(c.opts.kvCache) +
           " positions";
  }

 private:
  // The "position" input: one int32, set before each step.
  static Result<ValueId> positionInput(Graph& g) {
    Node in;
    in.name = "position";
    in.op = &op("Input");
    in.attrs.set("shape", std::vector<int64_t>{});
    in.attrs.set("field", std::string("position"));
    in.attrs.set("dtype", std::string("int32"));
    in.attrs.set("__batch", int64_t(1));
    auto id = g.addNode(std::move(in));
    if (!id) return id.error();
    const ValueId v = g.nodes[size_t(*id)].outputs[0];
    g.values[size_t(v)].kind = ValueKind::Input;
    g.inputsByField["position"] = v;
    return v;
  }

  static Status cacheAttention(PassContext& c, NodeId id, ValueId position) {
    Graph& g = c.g;
    Node& n = g.nodes[size_t(id)];
    if (n.inputs.size() > 3)
      return makeError("node '" + n.name +
                       "' (ScaledDotProductAttention): generation with a KV cache takes "
                       "attention without a mask");
    const Shape k = g.values[size_t(n.inputs[1])].desc.shape,
                v = g.values[size_t(n.inputs[2])].desc.shape;
    auto cache = [&](const char* what, const Shape& per) {
      Value val;
      val.name = n.name + "." + what;
      val.kind = ValueKind::State;
      val.desc = TensorDesc{{per[0], per[1], c.opts.kvCache, per[3]}, DType::F32, {}};
      return g.addValue(std::move(val));
    };
    const ValueId kc = cache("k_cache", k), vc = cache("v_cache", v);
    Node& m = g.nodes[size_t(id)];  // addValue leaves the nodes where they are
    Attrs a;
    a.set("scale", m.attrs.f("scale"));
    m.op = &op("CachedAttention");
    m.attrs = a;
    m.inputs = {m.inputs[0], m.inputs[1], m.inputs[2], position, kc, vc};
    return {};
  }
};

}  // namespace

std::unique_ptr<Pass> kvCachePass() {
  return std::make_unique<KvCache>();
}

}  // namespace netloom
