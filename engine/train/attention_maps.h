// Attention maps: what each attention node of a trained model weighs, per head, for
// one input — a language model's prompt, or a sample of the data (an image's
// patches). The fused kernels never hold the weights; they are recomputed from the
// node's queries, keys and log-sum-exps, which the inspection keeps: softmax(q·kᵀ ·
// scale + mask) row by row, as the kernels define it.
#pragma once

#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/train/trainer.h"

namespace netloom {

struct AttentionMap {
  std::string node;  // the attention node, as the inlined model names it ("h0/attn")
  int64_t heads = 0, queries = 0, keys = 0;
  std::vector<float> weights;  // heads × queries × keys; each visible row sums to 1
  float at(int64_t head, int64_t query, int64_t key) const {
    return weights[size_t((head * queries + query) * keys + key)];
  }
};

// What to look at: a prompt (language models), else sample `sample` of the test
// split (or of the training split where there is no test split).
struct AttentionQuery {
  std::string prompt;
  int64_t sample = 0;
};

struct AttentionMaps {
  std::vector<AttentionMap> layers;  // in execution order
  // A prompt's tokens as the vocabulary spells them: the queries and keys. A
  // prompt longer than the model's context keeps its last tokens.
  std::vector<std::string> tokens;
  Dataset sample;  // the sample looked at (other data), for showing it
};

// Whether the model (its blocks inlined) has an attention node to look at.
bool hasAttention(const proto::ModelDef& model);

Result<AttentionMaps> attentionMaps(const proto::Project& project, const TrainOptions& opts,
                                    const std::string& weightsPath, const AttentionQuery& query);

}  // namespace netloom
