// What a Step event says of the parameters when a run reports norms: each
// gradient's and each weight's L2 norm and histogram (fn::Histogram), the charts'
// per-layer curves and distributions.
#pragma once

#include "engine/proto/events.pb.h"
#include "engine/runtime/param_store.h"
#include "engine/runtime/program.h"

namespace netloom {

// Reads the gradients' squares and histograms `prog`'s last step left (compiled
// with CompileOptions::gradientNorms) and the weights as they are now.
void reportNorms(const Program& prog, const ParamStore& store, proto::Step& step);

// A histogram's floats (fn::Histogram's layout) as the event carries them, its range
// scaled by `scale`.
void setHistogram(const float* h, double scale, proto::Histogram& out);

}  // namespace netloom
