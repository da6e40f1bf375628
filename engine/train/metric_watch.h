// Watching one epoch metric ("val_loss", "test_accuracy", …): whether a value is an
// improvement, for keeping the best checkpoint and for early stopping.
#pragma once

#include <string>

#include "engine/proto/events.pb.h"
#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

class MetricWatch {
 public:
  // `spec` is "<split>_<name>": split train, val or test; name "loss" or a metric node.
  static Result<MetricWatch> parse(const std::string& spec, proto::MetricMode mode, double minDelta,
                                   const std::string& field);

  const std::string& spec() const { return m_spec; }
  // The value in an Epoch event; false when the event does not carry it.
  bool valueIn(const proto::Epoch& e, double& value) const;
  // Whether `value` beats `best` by more than the minimum delta.
  bool improves(double value, double best) const;
  bool needsValidation() const { return m_split == "val"; }
  bool needsTest() const { return m_split == "test"; }
  const std::string& name() const { return m_name; }
  bool maximizes() const { return m_maximize; }

 private:
  std::string m_spec, m_split, m_name;
  bool m_maximize = false;
  double m_minDelta = 0;
};

}  // namespace netloom
