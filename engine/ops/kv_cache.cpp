// The ops of generation with a KV cache, which the "kv-cache" pass puts in place of
// attention and positions when a program decodes one token at a time
// (CompileOptions::kvCache): each step reads the token's position from the
// "position" input. CachedAttention writes the step's keys and values into its
// caches at that position and attends to every position up to it, so a step costs
// O(positions so far), not a whole sequence's attention again.
#include "engine/ops/op_helpers.h"

namespace netloom {

namespace {

bool requirePosition(InferCtx& c, int port) {
  if (c.in[size_t(port)].dtype != DType::I32 || numel(c.in[size_t(port)].shape) != 1)
    return c.fail("expects the position as one int32", port);
  return true;
}

}  // namespace

void registerKvCache(OpRegistry& r) {
  OpDef a;
  a.name = "CachedAttention";
  a.category = "Internal";
  a.role = OpRole::Internal;
  a.doc = "attention of one new token over the cached keys and values up to its position";
  a.inputs = {{"q", "batch × heads × 1 × head size"},
              {"k", "batch × heads × 1 × head size"},
              {"v", "batch × heads × 1 × value size"},
              {"position", "int32, the token's position"},
              {"k_cache", "batch × heads × positions × head size (written at position)"},
              {"v_cache", "batch × heads × positions × value size (written at position)"}};
  a.outputs = {{"y", "batch × heads × 1 × value size"},
               {"lse", "log-sum-exp of the token's scores", false, true}};
  a.attrs = {floatAttr("scale", 0.0, 0.0, 1e6, "score scale; 0: 1/sqrt(head size)")};
  a.mutates = {4, 5};
  a.infer = [](InferCtx& c) {
    const Shape &q = c.in[0].shape, &v = c.in[2].shape, &kc = c.in[4].shape;
    if (q.size() != 4 || q[2] != 1)
      return c.fail("decodes one token at a time, got queries " + shapeToString(q), 0);
    if (!requirePosition(c, 3)) return false;
    if (kc.size() != 4 || kc[0] != q[0] || kc[1] != q[1] || kc[3] != q[3])
      return c.fail("a key cache of " + shapeToString(kc) + " for queries " + shapeToString(q), 4);
    c.out[0] = TensorDesc{{q[0], q[1], 1, v[3]}, DType::F32, {}};
    c.out[1] = TensorDesc{{q[0], q[1], 1}, DType::F32, {}};
    return true;
  };
  r.add(std::move(a));

  OpDef p;
  p.name = "PositionEmbeddingAt";
  p.category = "Internal";
  p.role = OpRole::Internal;
  p.doc = "PositionEmbedding of tokens that start at a position given at run time";
  p.inputs = {{"x", "batch × tokens × channels"},
              {"position", "int32, the first token's position"}};
  p.outputs = {{"y", "x plus each position's vector"}};
  // Attributes, parameters and their initialisation are PositionEmbedding's own, so
  // a program without trained weights is the same model.
  const OpDef& whole = *r.find("PositionEmbedding");
  p.attrs = whole.attrs;
  p.params = whole.params;
  p.init = whole.init;
  p.infer = [](InferCtx& c) {
    if (!requirePosition(c, 1)) return false;
    if (!c.params.empty())
      c.params[0] = TensorDesc{{c.attrs.i("max_len"), c.in[0].shape[2]}, DType::F32, {}};
    c.out[0] = c.in[0];
    return true;
  };
  r.add(std::move(p));

  OpDef t;
  t.name = "RotaryEmbeddingAt";
  t.category = "Internal";
  t.role = OpRole::Internal;
  t.doc = "RotaryEmbedding of tokens that start at a position given at run time";
  t.inputs = {{"x", "batch × heads × tokens × head size"},
              {"position", "int32, the first token's position"}};
  t.outputs = {{"y", "same shape"}};
  t.attrs = r.find("RotaryEmbedding")->attrs;
  t.infer = [](InferCtx& c) {
    if (!requirePosition(c, 1)) return false;
    c.out[0] = c.in[0];
    return true;
  };
  r.add(std::move(t));
}

}  // namespace netloom
