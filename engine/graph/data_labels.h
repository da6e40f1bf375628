// A loss or metric whose label port is left unconnected reads the dataset's class
// labels: the model gains, where it has none, the Input that reads them ("label",
// int32), wired to every such port. The engine builds models through this, so a model
// drawn without a label input trains, evaluates and exports as one that has it.
#pragma once

#include <string>

#include "engine/proto/project.pb.h"

namespace netloom {

inline constexpr const char* kLabelsField = "label";

// Whether some node's dataLabels port (PortDef::dataLabels) is unconnected.
bool readsDataLabels(const proto::ModelDef& model);

// `model` with those ports wired to its Input of field "label", made (named "label",
// or "label_2"... where that name is taken) when there is none; a model so wired to a
// loss over classes, and with no metric node, also gains an Accuracy node ("accuracy")
// over that loss's scores, as a classifier is reported. Blocks are not entered:
// inline them first.
proto::ModelDef withDataLabels(proto::ModelDef model);

}  // namespace netloom
