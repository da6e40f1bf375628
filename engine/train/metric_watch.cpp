#include "engine/train/metric_watch.h"

namespace netloom {

Result<MetricWatch> MetricWatch::parse(const std::string& spec, proto::MetricMode mode,
                                       double minDelta, const std::string& field) {
  MetricWatch w;
  w.m_spec = spec;
  auto us = spec.find('_');
  if (us == std::string::npos)
    return makeError(field + " '" + spec + "' must be <split>_<metric>, e.g. val_loss");
  w.m_split = spec.substr(0, us);
  w.m_name = spec.substr(us + 1);
  if (w.m_split != "train" && w.m_split != "val" && w.m_split != "test")
    return makeError(field + " '" + spec + "': the split must be train, val or test");
  w.m_maximize =
      mode == proto::MAX || (mode == proto::METRIC_MODE_UNSPECIFIED && w.m_name != "loss");
  w.m_minDelta = minDelta;
  return w;
}

bool MetricWatch::valueIn(const proto::Epoch& e, double& value) const {
  bool isLoss = m_name == "loss";
  const google::protobuf::Map<std::string, double>* metrics = nullptr;
  if (m_split == "train") {
    if (isLoss) return value = e.train_loss(), true;
    metrics = &e.train_metrics();
  } else if (m_split == "val") {
    if (!e.has_val()) return false;
    if (isLoss) return value = e.val_loss(), true;
    metrics = &e.val_metrics();
  } else {
    if (!e.has_test()) return false;
    if (isLoss) return value = e.test_loss(), true;
    metrics = &e.test_metrics();
  }
  auto it = metrics->find(m_name);
  if (it == metrics->end()) return false;
  value = it->second;
  return true;
}

bool MetricWatch::improves(double value, double best) const {
  return m_maximize ? value > best + m_minDelta : value < best - m_minDelta;
}

}  // namespace netloom
