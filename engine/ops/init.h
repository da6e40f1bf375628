// Seeded parameter initialisers (Kaiming, Xavier, PyTorch's defaults).
#pragma once

#include <string>

#include "engine/graph/op.h"
#include "kernels/core/rng.h"

namespace netloom {

AttrDef initAttr();  // the "init" attribute every weighted op offers

// Fills a weight by `scheme` given its fans.
void initWeight(const std::string& scheme, const TensorRef& w, int64_t fanIn, int64_t fanOut,
                Rng& rng);
void fillUniform(const TensorRef& t, double bound, Rng& rng);  // U(-bound, bound)
void fillNormal(const TensorRef& t, double stddev, Rng& rng);
void fillConstant(const TensorRef& t, float v);

}  // namespace netloom
