// The table of the training charts (charts.cpp draws them): each chart's axes and
// where its curves come from in the event stream. Adding a chart is one entry in
// chartTable(). Not exported.
#pragma once

#include <QColor>
#include <string>
#include <vector>

#include "engine/proto/events.pb.h"

namespace netloom::gui {

inline const QColor kRaw(0x9a, 0xb4, 0xd6, 90), kSmooth(0x1f, 0x5f, 0xbf), kVal(0xd0, 0x7a, 0x1f),
    kTest(0x2a, 0x9d, 0x5c), kAccuracy(0x8e, 0x44, 0xad);

// The accuracy-like metric of an evaluation: "accuracy" when there is one.
bool accuracyOf(const google::protobuf::Map<std::string, double>& m, double& v);

// How a chart's curve reads its values off the event stream.
using StepReader = bool (*)(const proto::Step& s, int ranks, double& y);
using EpochReader = bool (*)(const proto::Epoch& e, double& y);
using Family = const google::protobuf::Map<std::string, double>& (proto::Step::*)() const;
using Distributions =
    const google::protobuf::Map<std::string, proto::Histogram>& (proto::Step::*)() const;

struct CurveDesc {
  const char* name;
  QColor color;
  StepReader step = nullptr;    // one point per step...
  EpochReader epoch = nullptr;  // ... or per epoch, drawn with markers
  bool right = false;           // on the right axis
};

// Every chart, in the order of the grid (two to a row): adding a chart is one entry.
struct ChartDesc {
  const char* title = nullptr;
  const char* y = nullptr;
  const char* y2 = nullptr;  // the right axis, shown once one of its curves has data
  double y2Max = 0;          // a fixed right axis 0..y2Max (0: scaled to the data)
  std::vector<CurveDesc> curves;
  bool smooth = false;      // plus the first curve, smoothed
  Family family = nullptr;  // instead: one curve per parameter, from this map
  bool legend = false;      // always; otherwise once a curve needs naming
  // Instead: the distribution of one parameter's values over time (TensorBoard's
  // distributions), chosen among those this map names.
  Distributions distributions = nullptr;
};

// The charts the window reads or draws more on, by their place in the table.
enum {
  kLossChart,
  kEvaluationChart,
  kRateChart,
  kThroughputChart,
  kGradChart,
  kWeightChart,
  kGradDistChart,
  kWeightDistChart
};

// Every chart, in the order of the grid.
const std::vector<ChartDesc>& chartTable();

}  // namespace netloom::gui
